"""Run one method on one dataset and log it to MLflow: ``python -m runners.run dataset=... method=...``.

``main`` only calls :func:`run`, which is importable and returns the logged metrics.  One MLflow
run per fitted model with, under the same names for every method: the flattened config as
params and the resolved config as ``config.yaml``; the metrics of
:func:`runners.core.experiment.fit_evaluate`; the curves ``val_auc``, ``val_rmse``, ``root_variance``,
``elapsed_seconds`` by iteration; the selected features (JSON), their correlation heatmap (PNG),
the features' importance (JSON and PNG), a binary model's ROC and precision-recall curves on test
(:mod:`runners.tracking.run_figures`) and the model file; its data splits as MLflow dataset inputs
and the model as the MLflow model ``runs:/<run_id>/<method>-<dataset>``
(:mod:`runners.tracking.mlflow_native`); tags method, dataset, seed, git commit,
and ``budget`` (tag and param) when the method has a hard feature budget (:mod:`runners.core.budget`);
with ``stability.enabled``, the selection stability (:mod:`runners.core.stability`).  Every run is
ended on every exit path and the exception re-raised: FAILED on an error, KILLED on Ctrl-C or
SIGTERM (``main`` turns SIGTERM into an interrupt and exits with status 143), nested runs included
(:func:`runners.tracking.runs.managed_run`); the tag ``worker`` (host, pid, process start) lets a later
run mark FAILED the runs of a SIGKILLed process (:func:`runners.tracking.runs.fail_dead_runs`).  A bad
``dataset`` setting, ``seed`` or ``tracking.uri`` fails before any run is created.  ``tune=optuna``
hands over to :mod:`runners.tune`.

What a run fits is the :data:`KINDS` entry of ``method.estimator``: one model (:func:`fit_one`) by
default, the selection path with a nested run per budget for ``gbfs_path``
(:func:`runners.core.path_run.fit_path`).
"""

from __future__ import annotations

from collections.abc import Callable

import hydra
from omegaconf import DictConfig

from gbfs.data import Dataset
from runners.core import budget, checks, experiment, path_run, stability, summaries
from runners.tracking import mlflow_native
from runners.tracking import runs as tracking
from runners.tracking.run_log import RunLog


def fit_one(cfg: DictConfig, ds: Dataset, tags: dict[str, str]) -> experiment.Logged:
    """Fit ``cfg.method`` once and log it to the active run (the default of :data:`KINDS`)."""
    progress = experiment.fit_progress(f"{cfg.method.name} on {cfg.dataset.name}",
                                       experiment.task_of(cfg.method).score)
    try:
        outcome = experiment.fit_evaluate(cfg, ds, experiment.method_params(cfg.method), callbacks=[progress])
    finally:
        progress.close()
    run_log = RunLog.active()
    experiment.log_outcome(outcome, ds, run_log, cfg=cfg)
    metrics = {**outcome.metrics, **stability.log_stability(cfg, ds, outcome.model, run_log)}
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
        On a bad setting (:func:`runners.core.checks.check_run`: ``dataset.scale``,
        ``dataset.val_fraction``, ``seed``, ``tracking.*``, the method's feature budget, an override
        ``key={}`` that would change nothing) or a ``tracking.parent_run_id`` that is no run of the
        experiment, before any MLflow run is created; on a failing fit (its run FAILED).
    runners.tracking.stores.StoreUnreachable
        When the tracking store does not answer within ``tracking.timeout`` seconds.
    """
    if cfg.tune.enabled:
        from runners import tune

        return tune.run(cfg)
    cfg = experiment.with_task(cfg)   # the data's task (a file's: detected) and the method's estimator of it
    checks.check_run(cfg)   # every setting, naming its key, before any fit or run
    if cfg.dataset.name == "file":
        print(f"dataset {mlflow_native.dataset_label(cfg.dataset)}: task {cfg.dataset.task}")
    exp_id = tracking.configure(cfg.tracking)
    mlflow_native.configure_ui(exp_id)   # the UI opens the runs table with the metrics that matter
    tags = summaries.run_tags(cfg)
    with tracking.managed_run(run_name=cfg.run_name, tags={**tags, **tracking.parent_tag(cfg.tracking)}) \
            as active:
        cfg = budget.with_topk(cfg)
        k_tags = budget.budget_tags(cfg)      # GBDT-topK's K may be known only now
        tags.update(k_tags)
        run_log = RunLog(active.info.run_id)
        run_log.tags(k_tags)
        run_log.config(cfg, extra=k_tags)
        logged = KINDS.get(cfg.method.estimator, fit_one)(cfg, experiment.load_data(cfg), tags)
    if cfg.get("print_summary", True) and not summaries.in_multirun():
        label = mlflow_native.dataset_label(cfg.dataset)   # a file's name rather than "file"
        rows = [{"method": cfg.method.name, "dataset": label, **row} for row in logged.rows]
        print(summaries.format_table(rows))
        print(summaries.ui_hint(cfg.tracking.uri, exp_id))
    return logged.metrics


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> float | None:
    with tracking.sigterm_as_interrupt():   # SIGTERM ends the runs KILLED, then exits with status 143
        return run(cfg).get(experiment.task_of(cfg.method).score)


if __name__ == "__main__":
    main()
