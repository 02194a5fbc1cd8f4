"""Run one method on one dataset and log it to MLflow: ``python -m runners.run dataset=... method=...``.

``main`` only calls :func:`run`, which is importable and returns the logged metrics.  One MLflow
run per fitted model with, under the same names for every method: the flattened config as
params and the resolved config as ``config.yaml``; the metrics of
:func:`runners.experiment.fit_evaluate`; the curves ``val_auc``, ``val_rmse``, ``root_variance``,
``elapsed_seconds`` by iteration; the selected features (JSON), their correlation heatmap (PNG)
and the model file; tags method, dataset, seed, git commit.  A failure marks the run FAILED and
re-raises.  ``tune=optuna`` hands over to :mod:`runners.tune`.
"""

from __future__ import annotations

import hydra
import mlflow
from hydra.core.hydra_config import HydraConfig
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf, open_dict

from runners import experiment, tracking


def run_tags(cfg: DictConfig) -> dict[str, str]:
    tags = {"method": cfg.method.name, "dataset": cfg.dataset.name, "seed": str(cfg.seed),
            "sampler": str(cfg.sampler.name) if cfg.get("sampler") else "none",
            "git_commit": tracking.git_commit(),
            "counts_for_topk": str(bool(cfg.method.counts_for_topk)).lower()}
    if HydraConfig.initialized():
        hc = HydraConfig.get()
        if hc.mode is not None and hc.mode.name == "MULTIRUN":
            tags["sweep_dir"] = str(hc.sweep.dir)
    return tags


def _same_data(params: dict, cfg: DictConfig) -> bool:
    """Whether a run's logged params describe the same data as ``cfg.dataset``: the same scale (as a
    number: ``1`` is ``1.0``), validation share and generator arguments (e.g. ``feature_scale``)."""
    def number(value):
        try:
            return float(value)
        except (TypeError, ValueError):
            return value

    wanted = tracking.flatten(OmegaConf.to_container(cfg.dataset.get("kwargs") or {}, resolve=True),
                              "dataset.kwargs.")
    wanted.update({"dataset.scale": str(cfg.dataset.scale),
                   "dataset.val_fraction": str(cfg.dataset.val_fraction)})
    got = {k: v for k, v in params.items() if k.startswith("dataset.kwargs.")}
    if set(got) != {k for k in wanted if k.startswith("dataset.kwargs.")}:
        return False
    return all(number(params.get(k)) == number(v) for k, v in wanted.items())


def resolve_topk_k(cfg: DictConfig) -> int:
    """GBDT-topK's K: the largest ``n_selected_features`` among the FINISHED runs of the methods that
    count for it (gbfs, agbm, gtgbm) on the same data (dataset, scale, validation share, generator
    arguments) in the same MLflow experiment, as the GT-GBM paper does (Section 5.1)."""
    exp = mlflow.get_experiment_by_name(cfg.tracking.experiment)
    query = (f"tags.dataset = '{cfg.dataset.name}' and tags.counts_for_topk = 'true' and "
             f"attributes.status = 'FINISHED'")
    runs = MlflowClient().search_runs([exp.experiment_id], filter_string=query, max_results=5000)
    counts = [r.data.metrics["n_selected_features"] for r in runs
              if "n_selected_features" in r.data.metrics and _same_data(r.data.params, cfg)]
    if not counts:
        raise ValueError(f"gbdt_topk: method.params.k is null and there is no FINISHED gbfs/agbm/gtgbm "
                         f"run on dataset {cfg.dataset.name!r} (scale {cfg.dataset.scale}) in MLflow "
                         f"experiment {cfg.tracking.experiment!r} to take K from; run those first or set "
                         f"method.params.k")
    return max(1, int(max(counts)))


def _with_topk(cfg: DictConfig) -> DictConfig:
    """Fill ``method.params.k`` from sibling runs when it is null (logged as the resolved value)."""
    if cfg.method.estimator == "lightgbm" and cfg.method.params.get("kind") == "topk" \
            and cfg.method.params.get("k") is None:
        cfg = cfg.copy()
        with open_dict(cfg):
            cfg.method.params.k = resolve_topk_k(cfg)
    return cfg


def run(cfg: DictConfig) -> dict[str, float]:
    """Fit ``cfg.method`` on ``cfg.dataset``, evaluate on validation and test, log everything; return
    the metrics."""
    if cfg.tune.enabled:
        from runners import tune

        return tune.run(cfg)
    tracking.configure(cfg.tracking)
    with mlflow.start_run(run_name=cfg.run_name, tags=run_tags(cfg)) as active:
        run_id = active.info.run_id
        try:
            cfg = _with_topk(cfg)
            tracking.log_config(cfg, run_id)
            ds = experiment.load_data(cfg)
            progress = experiment.FitProgress(f"{cfg.method.name} on {cfg.dataset.name}")
            try:
                outcome = experiment.fit_evaluate(cfg, ds, experiment.method_params(cfg.method),
                                                  callbacks=[progress])
            finally:
                progress.close()
            experiment.log_outcome(outcome, ds, run_id)
        except BaseException:
            mlflow.end_run(status="FAILED")
            raise
    if cfg.get("print_summary", True) and not _in_multirun():
        print(format_table([{"method": cfg.method.name, "dataset": cfg.dataset.name, **outcome.metrics}]))
        print(ui_hint(cfg.tracking.uri))
    return outcome.metrics


def _in_multirun() -> bool:
    if not HydraConfig.initialized():
        return False
    mode = HydraConfig.get().mode
    return mode is not None and mode.name == "MULTIRUN"


def _cell(row: dict, key: str, fmt: str) -> str:
    return format(row[key], fmt) if row.get(key) is not None else "-"


def format_table(rows: list[dict]) -> str:
    """A Markdown table: method, dataset, test AUC, test RMSE, selected features, fit seconds."""
    lines = ["| method | dataset | test AUC | test RMSE | selected features | fit s |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['method']} | {r['dataset']} | {_cell(r, 'test_auc', '.4f')} | "
                     f"{_cell(r, 'test_rmse', '.4f')} | {_cell(r, 'n_selected_features', '.0f')} | "
                     f"{_cell(r, 'fit_seconds', '.1f')} |")
    return "\n".join(lines)


def ui_hint(uri: str) -> str:
    """How to look at the runs: the server itself for a remote store, else ``mlflow ui`` on the file."""
    if uri.startswith(("http://", "https://")):
        return f"Compare the runs in the MLflow UI: open {uri}"
    return (f"Compare the runs in the MLflow UI: mlflow ui --backend-store-uri {uri}  "
            f"(then open http://127.0.0.1:5000)")


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> float | None:
    metrics = run(cfg)
    return metrics.get("val_auc")


if __name__ == "__main__":
    main()
