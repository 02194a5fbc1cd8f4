"""Helpers of the harness tests: compose the Hydra config of the repository with overrides."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir

CONF = Path(__file__).resolve().parents[1] / "conf"
# a tiny, fast setting: 300 + 50 rows of the Gisette stand-in with 100 columns, 15 trees
TINY = ["dataset=gisette_like", "dataset.scale=0.05", "dataset.kwargs.feature_scale=0.02",
        "method.params.n_estimators=15"]


def compose_cfg(root: Path, overrides: list[str], hydra_cfg: bool = False):
    """The composed config with every path under ``root`` (a fresh MLflow store per test)."""
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="config", overrides=[f"paths.root_dir={root}", *overrides],
                       return_hydra_config=hydra_cfg)


def group_options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def open_optuna_storage(url: str, barrier, results) -> None:
    """Process target: wait for the others, then open (and if needed create) an Optuna storage as a
    tuning job does; put "ok" or the error on ``results``."""
    import optuna

    barrier.wait()
    try:
        optuna.storages.RDBStorage(url)
        results.put("ok")
    except Exception as exc:          # noqa: BLE001 -- reported to the test, which names it
        results.put(f"{type(exc).__name__}: {exc}"[:200])
