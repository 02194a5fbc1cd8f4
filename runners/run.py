"""Run one method on one dataset and log it to MLflow: ``python -m runners.run dataset=... method=...``.

``main`` only calls :func:`run`, which is importable and returns the logged metrics.  One MLflow
run per fitted model with, under the same names for every method: the flattened config as
params and the resolved config as ``config.yaml``; the metrics of
:func:`runners.experiment.fit_evaluate`; the curves ``val_auc``, ``val_rmse``, ``root_variance``,
``elapsed_seconds`` by iteration; the selected features (JSON), their correlation heatmap (PNG)
and the model file; its data splits as MLflow dataset inputs and the model as the MLflow model
``runs:/<run_id>/model`` (:mod:`runners.mlflow_native`); tags method, dataset, seed, git commit,
and ``budget`` (tag and param) when the method has a hard feature budget (:mod:`runners.budget`);
with ``stability.enabled``, the selection stability (:mod:`runners.stability`).  Every run is
ended on every exit path and the exception re-raised: FAILED on an error, KILLED on Ctrl-C or
SIGTERM (``main`` turns SIGTERM into an interrupt and exits with status 143), nested runs included
(:func:`runners.tracking.managed_run`); the tag ``worker`` (host, pid, process start) lets a later
run mark FAILED the runs of a SIGKILLed process (:func:`runners.tracking.fail_dead_runs`).  A bad
``dataset`` setting, ``seed`` or ``tracking.uri`` fails before any run is created.  ``tune=optuna``
hands over to :mod:`runners.tune`.

What a run fits is the :data:`KINDS` entry of ``method.estimator``: one model (:func:`fit_one`) by
default, the selection path with a nested run per budget for ``gbfs_path``
(:func:`runners.path_run.fit_path`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

import hydra
import mlflow
from hydra.core.hydra_config import HydraConfig
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf, open_dict

from gbfs.data import Dataset
from runners import budget, checks, experiment, mlflow_native, path_run, stability, tracking


def run_tags(cfg: DictConfig) -> dict[str, str]:
    """The tags of every run of ``cfg``: ``tracking.tags``, method, dataset, seed, sampler, git
    commit, whether it counts for GBDT-topK's K, its budget, ``worker`` (this process,
    :func:`runners.tracking.worker_id`) and, in a multirun, ``sweep_dir`` and ``sweep_overrides``
    (the job's overrides, a JSON list)."""
    tags = {**tracking.user_tags(cfg.tracking),
            "method": cfg.method.name, "dataset": cfg.dataset.name, "seed": str(cfg.seed),
            "sampler": str(cfg.sampler.name) if cfg.get("sampler") else "none",
            "git_commit": tracking.git_commit(), "worker": tracking.worker_id(),
            "counts_for_topk": str(bool(cfg.method.counts_for_topk)).lower(), **budget.budget_tags(cfg)}
    if HydraConfig.initialized():
        hc = HydraConfig.get()
        if hc.mode is not None and hc.mode.name == "MULTIRUN":
            tags["sweep_dir"] = str(hc.sweep.dir)
            # this job's choices, for the sweep's table (runners.hydra_callbacks.run_value)
            tags["sweep_overrides"] = json.dumps(list(hc.overrides.task))[:5000]
    return tags


#: the keys of ``dataset=file`` that say which data a run saw
FILE_KEYS = ("path", "target", "test_path", "test_fraction", "categorical")


def _same_data(params: dict, cfg: DictConfig) -> bool:
    """Whether a run's logged params describe the same data as ``cfg.dataset``: the same scale (as a
    number: ``1`` is ``1.0``), validation share, generator arguments (e.g. ``feature_scale``) and,
    for a user's file, the same file, target and test split (as given)."""
    def number(value):
        try:
            return float(value)
        except (TypeError, ValueError):
            return value

    kwargs = cfg.dataset.get("kwargs")
    kwargs = OmegaConf.to_container(kwargs, resolve=True) if kwargs is not None else {}
    wanted = tracking.flatten(kwargs, "dataset.kwargs.")
    wanted.update({"dataset.scale": str(cfg.dataset.scale),
                   "dataset.val_fraction": str(cfg.dataset.val_fraction)})
    wanted.update({f"dataset.{key}": str(cfg.dataset.get(key)) for key in FILE_KEYS if key in cfg.dataset})
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


def fit_one(cfg: DictConfig, ds: Dataset, tags: dict[str, str]) -> experiment.Logged:
    """Fit ``cfg.method`` once and log it to the active run (the default of :data:`KINDS`)."""
    progress = experiment.fit_progress(f"{cfg.method.name} on {cfg.dataset.name}",
                                       experiment.task_of(cfg.method).score)
    try:
        outcome = experiment.fit_evaluate(cfg, ds, experiment.method_params(cfg.method), callbacks=[progress])
    finally:
        progress.close()
    run_id = mlflow.active_run().info.run_id
    experiment.log_outcome(outcome, ds, run_id, cfg=cfg)
    metrics = {**outcome.metrics, **stability.log_stability(cfg, ds, outcome.model, run_id)}
    return experiment.Logged(metrics, [{"budget": budget.budget_of(cfg.method), **metrics}])


#: what a run of ``method.estimator`` fits and logs, when it is not one model (:func:`fit_one`):
#: ``(cfg, dataset, the run's tags) -> Logged``, logging to the active run
KINDS: dict[str, Callable[[DictConfig, Dataset, dict[str, str]], experiment.Logged]] = {
    "gbfs_path": path_run.fit_path,
}


def run(cfg: DictConfig) -> dict[str, float]:
    """Fit ``cfg.method`` on ``cfg.dataset``, evaluate on validation and test, log everything; return
    the metrics (of the run itself: for a selection path, the path's).

    Raises
    ------
    ValueError
        On a bad setting (:func:`runners.checks.check_run`: ``dataset.scale``,
        ``dataset.val_fraction``, ``seed``, ``tracking.*``, the method's feature budget, an override
        ``key={}`` that would change nothing) or a ``tracking.parent_run_id`` that is no run of the
        experiment, before any MLflow run is created; on a failing fit (its run FAILED).
    runners.stores.StoreUnreachable
        When the tracking store does not answer within ``tracking.timeout`` seconds.
    """
    if cfg.tune.enabled:
        from runners import tune

        return tune.run(cfg)
    checks.check_run(cfg)   # every setting, naming its key, before any fit or run
    exp_id = tracking.configure(cfg.tracking)
    mlflow_native.configure_ui(exp_id)   # the UI opens the runs table with the metrics that matter
    tags = run_tags(cfg)
    with tracking.managed_run(run_name=cfg.run_name, tags={**tags, **tracking.parent_tag(cfg.tracking)}) \
            as active:
        cfg = _with_topk(cfg)
        k_tags = budget.budget_tags(cfg)      # GBDT-topK's K may be known only now
        tags.update(k_tags)
        mlflow.set_tags(k_tags)
        tracking.log_config(cfg, active.info.run_id, extra=k_tags)
        logged = KINDS.get(cfg.method.estimator, fit_one)(cfg, experiment.load_data(cfg), tags)
    if cfg.get("print_summary", True) and not _in_multirun():
        label = mlflow_native.dataset_label(cfg.dataset)   # a file's name rather than "file"
        print(format_table([{"method": cfg.method.name, "dataset": label, **row} for row in logged.rows]))
        print(ui_hint(cfg.tracking.uri, exp_id))
    return logged.metrics


def _in_multirun() -> bool:
    if not HydraConfig.initialized():
        return False
    mode = HydraConfig.get().mode
    return mode is not None and mode.name == "MULTIRUN"


def _cell(row: dict, key: str, fmt: str) -> str:
    value = row.get(key)
    if value in (None, "", "None"):     # "None": a param logged from a null config value
        return "-"
    try:
        return format(float(value), fmt) if fmt else str(value)
    except ValueError:     # a tag or param that is not a number
        return str(value)


#: the table's numeric columns: (header, row key, format)
TABLE_METRICS = (("test AUC", "test_auc", ".4f"), ("test RMSE", "test_rmse", ".4f"),
                 ("selected features", "n_selected_features", ".0f"), ("fit s", "fit_seconds", ".1f"))
#: the ranking runs' scores, shown only when a row has them (before the selected features)
RANKING_METRICS = (("test NDCG@10", "test_ndcg_at_10", ".4f"), ("test MRR", "test_mrr", ".4f"))


def format_table(rows: list[dict], columns: Sequence[str] = ()) -> str:
    """A Markdown table: method, dataset, budget (the K a model was held to, "-" if none), the
    ``columns`` (e.g. the parameters a sweep varies), test AUC, test RMSE (with ranking runs, test
    NDCG@10 and MRR; AUC and RMSE only if a row has them), selected features, fit seconds."""
    ranking = [c for c in RANKING_METRICS if any(c[1] in r for r in rows)]
    binary = [c for c in TABLE_METRICS[:2] if not ranking or any(c[1] in r for r in rows)]
    cols = [("method", "method", ""), ("dataset", "dataset", ""), ("budget", "budget", ".0f"),
            *((c, c, "") for c in columns), *binary, *ranking, *TABLE_METRICS[2:]]
    lines = ["| " + " | ".join(h for h, _, _ in cols) + " |", "|" + " --- |" * len(cols)]
    lines += ["| " + " | ".join(_cell(r, key, fmt) for _, key, fmt in cols) + " |" for r in rows]
    return "\n".join(lines)


def ui_hint(uri: str, exp_id: str | None = None) -> str:
    """How to look at the runs: the server itself for a remote store, else ``mlflow ui`` on the file;
    with ``exp_id``, the link to that experiment's runs table in the runners' view (its columns,
    :func:`runners.mlflow_native.runs_view_url`)."""
    page = "" if exp_id is None else "/" + mlflow_native.runs_view_url(exp_id)
    if uri.startswith(("http://", "https://")):
        return f"Compare the runs in the MLflow UI: open {uri.rstrip('/') if page else uri}{page}"
    return (f"Compare the runs in the MLflow UI: mlflow ui --backend-store-uri {uri}  "
            f"(then open http://127.0.0.1:5000{page})")


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> float | None:
    with tracking.sigterm_as_interrupt():   # SIGTERM ends the runs KILLED, then exits with status 143
        return run(cfg).get(experiment.task_of(cfg.method).score)


if __name__ == "__main__":
    main()
