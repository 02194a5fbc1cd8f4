"""The multitask comparison of the GT-GBM paper's Figures 4-5 (``python -m runners.multitask``): every
variant's config and run, the figures, the table and summary, and the comparison's MLflow run.

:func:`variant_configs` composes one config per variant of ``compare.variants``
(``conf/multitask.yaml``); :func:`compare` runs each of them with the ``fit`` it is given -- the
command ``runners.run``'s ``run``, passed in by :mod:`runners.multitask`, which fits the variant once
or, with ``tune=optuna``, hands it to ``runners.tune`` for a study and its refit -- then draws the
per-task bars (:func:`runners.tracking.multitask_figure.task_bars`), writes ``<stem>.md`` and
``<stem>.json`` to ``compare.out_dir`` and logs the files, each variant's numbers and the run each
variant's numbers come from to one MLflow run (tag ``role=comparison``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import hydra
import mlflow
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig

from runners.core import budget, experiment
from runners.core.multitask_eval import task_names
from runners.tracking import runs as tracking
from runners.tracking.multitask_figure import task_bars
from runners.tracking.run_log import RunLog

#: the figures: (metric key, label)
METRICS = (("auprc", "AUPRC"), ("auc", "AUC"))
#: what a variant's config is given to: ``runners.run.run`` (one fit, or with ``tune.enabled`` the
#: study and its refit of ``runners.tune``), returning the logged metrics
Fit = Callable[[DictConfig], Mapping[str, float]]


def _chooses_method(override: str) -> bool:
    return override.split("=", 1)[0].lstrip("+~") == "method"


def variant_configs(overrides: Sequence[str], variants: Sequence[str] | None = None,
                    config_name: str = "multitask") -> dict[str, DictConfig]:
    """The config of every variant: ``config_name`` composed with ``overrides`` (a ``method=``
    choice among them is dropped) and ``method=<variant>``.  Needs an initialised Hydra (inside
    ``main``, or an ``initialize_config_dir`` block).  ``variants``: default ``compare.variants``."""
    kept = [o for o in overrides if not _chooses_method(o)]
    if variants is None:
        variants = list(hydra.compose(config_name, overrides=kept).compare.variants)
    if not variants:
        raise ValueError("compare.variants is empty: name the conf/method/ options to compare")
    return {v: hydra.compose(config_name, overrides=[*kept, f"method={v}"]) for v in variants}


def _label(cfg: DictConfig) -> str:
    return str(cfg.method.get("label") or cfg.method.name)


def _variant_run(cfg: DictConfig) -> mlflow.entities.Run:
    """The run holding a variant's final numbers: its run, or its study's latest refit."""
    exp = mlflow.get_experiment_by_name(cfg.tracking.experiment)
    query = (f"tags.method = '{cfg.method.name}' and tags.worker = '{tracking.worker_id()}' and "
             f"attributes.status = 'FINISHED'")
    found = MlflowClient().search_runs([exp.experiment_id], filter_string=query, max_results=50,
                                       order_by=["attributes.start_time DESC"])
    return next(r for r in found if r.data.tags.get("role") not in ("trial", "study"))


def _settings(cfg: DictConfig, params: Mapping[str, str]) -> dict[str, str]:
    """The variant's searched parameters as its run used them (a tuned variant's best values)."""
    space = list(cfg.method.get("search_space") or {})
    keys = ["mu", "mu_task", *[k for k in space if k not in ("mu", "mu_task")]]
    return {k: params[f"method.params.{k}"] for k in keys if f"method.params.{k}" in params}


def fit_variants(variants: Mapping[str, DictConfig], fit: Fit) -> dict[str, dict]:
    """Run (or tune) every variant with ``fit``; per variant its label, metrics, run id and settings.

    Raises
    ------
    ValueError
        On a variant's bad dataset setting (:func:`runners.core.experiment.check_dataset`), before
        any variant runs.
    RuntimeError
        When a variant logged no test metrics (as with ``tune.refit=false``).
    """
    for cfg in variants.values():     # every variant's config error before any run is created
        experiment.check_dataset(cfg)
    out = {}
    for name, cfg in variants.items():
        metrics = fit(cfg)
        found = _variant_run(cfg)
        if "test_auc" not in metrics:
            raise RuntimeError(f"variant {name!r} logged no test metrics (tune.refit=false?); the "
                               f"comparison needs them")
        out[name] = {"label": _label(cfg), "metrics": metrics, "run_id": found.info.run_id,
                     "settings": _settings(cfg, found.data.params)}
    return out


def _name(cfg: DictConfig) -> str:
    if cfg.compare.get("name"):
        return str(cfg.compare.name)
    k = budget.budget_of(cfg.method)
    return f"{cfg.dataset.name}{'' if k is None else f'_K{k}'}_{'tuned' if cfg.tune.enabled else 'untuned'}"


def _protocol(cfg: DictConfig) -> str:
    k = budget.budget_of(cfg.method)
    how = (f"each variant tuned by {cfg.tune.n_trials} Optuna trials (TPE, seed {cfg.tune.sampler_seed}) "
           f"on the validation Total AUC, then refitted" if cfg.tune.enabled else
           "untuned: each variant's method config as is (A-GBM defaults of the GT-GBM paper's Table 5)")
    return how + ("" if k is None else f"; at most {k} features over all tasks")


def draw(results: Mapping[str, dict], names: Sequence[str], sizes: Sequence[int], out_dir: Path, stem: str,
         title: str) -> dict[str, dict[str, list[float]]]:
    """The Figure 4/5 bars of every variant for each metric of :data:`METRICS`; returns the numbers."""
    drawn = {}
    for key, label in METRICS:
        scores = {r["label"]: [r["metrics"][f"test_{key}_task{k}"] for k in range(len(names))]
                  for r in results.values()}
        drawn[key] = task_bars(scores, names, sizes, f"test {label}", out_dir / f"{stem}_{key}.png",
                               title=f"{title}: test {label} per task")
    return drawn


def report(results: Mapping[str, dict], baselines: Sequence[str], protocol: str, title: str) -> str:
    """The Markdown summary: one row per variant, then each variant against the best baseline."""
    lines = [f"# {title}", "", protocol, "",
             "| variant | settings | features (Omega_G) | per task | val AUPRC | val AUC | test AUPRC | "
             "test AUC | fit s |", "|" + " --- |" * 9]
    for r in results.values():
        m = r["metrics"]
        per_task = [int(m[k]) for k in sorted((k for k in m if k.startswith("n_features_task")),
                                              key=lambda k: int(k.removeprefix("n_features_task")))]
        settings = ", ".join(f"{k}={float(v):.3g}" for k, v in r["settings"].items())
        lines.append(f"| {r['label']} | {settings} | {int(m['n_selected_features'])} | {per_task} | "
                     f"{m['val_auprc']:.4f} | {m['val_auc']:.4f} | {m['test_auprc']:.4f} | "
                     f"{m['test_auc']:.4f} | {m['fit_seconds']:.1f} |")
    base = {v: results[v] for v in baselines if v in results}
    lines.append("")
    for key, label in METRICS:
        if not base:
            break
        best = max(base.values(), key=lambda r: r["metrics"][f"test_{key}"])
        for v, r in results.items():
            if v not in base:
                a, b = r["metrics"][f"test_{key}"], best["metrics"][f"test_{key}"]
                lines.append(f"* test Total {label}: {r['label']} {a:.4f} {'>=' if a >= b else '<'} the best "
                             f"baseline, {best['label']} {b:.4f} ({a - b:+.4f})")
    return "\n".join(lines) + "\n"


def compare(cfg: DictConfig, variants: Mapping[str, DictConfig], fit: Fit) -> dict:
    """Fit (or tune) ``variants`` with ``fit``, draw and write the comparison, log it as one MLflow run.

    Returns
    -------
    dict
        ``variants`` (per variant: label, metrics, run id, settings), ``figures`` (the plotted
        numbers per metric, Total last) and ``files`` (the paths written).

    Raises
    ------
    ValueError, RuntimeError
        What :func:`fit_variants` raises, before the comparison's files or run exist.
    """
    results = fit_variants(variants, fit)
    ds = experiment.load_data(cfg)
    names = task_names(ds)
    sizes = [int((ds.task_test == t).sum()) for t in sorted(set(ds.task_test.tolist()))]
    out_dir, stem = Path(cfg.compare.out_dir), _name(cfg)
    out_dir.mkdir(parents=True, exist_ok=True)
    k = budget.budget_of(cfg.method)
    title = (f"{cfg.dataset.name}, " + (f"tuned ({cfg.tune.n_trials} trials each)" if cfg.tune.enabled else
                                         "untuned") + ("" if k is None else f", <= {k} features"))
    protocol = _protocol(cfg)
    drawn = draw(results, names, sizes, out_dir, stem, title)
    (out_dir / f"{stem}.md").write_text(report(results, list(cfg.compare.baselines), protocol, title))
    summary = {"dataset": cfg.dataset.name, "protocol": protocol, "tasks": names, "test_sizes": sizes,
               "variants": results, "figures": drawn}
    (out_dir / f"{stem}.json").write_text(json.dumps(summary, indent=1, default=float))
    files = [out_dir / f"{stem}{s}" for s in (".md", ".json")] + \
        [out_dir / f"{stem}_{k}{s}" for k, _ in METRICS for s in (".png", ".csv")]
    _log(cfg, results, files, stem)
    print((out_dir / f"{stem}.md").read_text() + f"\nwrote {', '.join(str(f) for f in files)}")
    return {"variants": results, "figures": drawn, "files": files}


def _log(cfg: DictConfig, results: Mapping[str, dict], files: Sequence[Path], stem: str) -> None:
    """The comparison's MLflow run, and on each variant's run the tag ``comparison_run`` naming it."""
    tracking.configure(cfg.tracking)
    tags = {"role": "comparison", "dataset": cfg.dataset.name, "seed": str(cfg.seed),
            "variants": ",".join(results), "git_commit": tracking.git_commit(),
            "worker": tracking.worker_id(),
            **budget.budget_tags(cfg), **{f"run.{v}": r["run_id"] for v, r in results.items()}}
    with tracking.managed_run(run_name=f"multitask-{stem}", tags=tags) as active:
        run_id = active.info.run_id
        run_log = RunLog(run_id)
        run_log.config(cfg)
        run_log.metrics({f"{v}.{k}": r["metrics"][k] for v, r in results.items()
                         for k in ("test_auprc", "test_auc", "val_auprc", "val_auc", "n_selected_features")})
        for f in files:
            run_log.artifact(f)
    for r in results.values():
        RunLog(r["run_id"]).tags({"comparison_run": run_id})
