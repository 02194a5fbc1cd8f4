"""Tune one method on one dataset with Optuna and log the study to MLflow: ``python -m runners.tune``.

    python -m runners.tune method=agbm dataset=gisette_like tune.n_trials=30
    python -m runners.tune method=gtgbm tune.storage=postgresql://user@db/optuna    # a shared study
    python -m runners.tune method=gtgbm tune.storage=journal:///shared/optuna.log   # ... without a server

``main`` only calls :func:`run`, importable, which returns the refit's metrics.  Optuna is driven
directly (seeded TPE, median pruning on the per-iteration validation metric, an RDB storage or a
journal file, :mod:`runners.tuning.storages`): a study is resumable by name and runs trials until
``tune.n_trials`` of them count (COMPLETE or PRUNED: a failed trial never uses up the budget),
within ``tune.timeout`` seconds.  Several workers may share a study (parallel jobs, or the same
command on several machines): together they run exactly ``n_trials`` counted trials, log under one
parent run and refit once (:mod:`runners.tuning.study`).
``tune.objective=val_auc_budget`` either penalises the features over ``tune.feature_budget``
(``tune.budget_mode=penalty``) or makes those trials infeasible (``constraint``: TPE learns the
constraint and the refit only considers trials within the budget); ``tune.budget_mode=hard`` gives
every trial ``max_features`` = ``tune.feature_budget`` (``k`` for GBDT-topK, :mod:`runners.core.budget`),
so each trial is within the budget by construction.  The test split is only looked at by the refit.
A progress bar over the counted trials shows the best value so far (``tune.progress``; never in a
multirun, where one line is logged per trial instead).

MLflow: one parent run per study (``role=study``), shared by its workers and reused when the study
is resumed (:mod:`runners.tuning.parent_run`); its params are the config of the invocation that
started it (each later one adds ``config-<k>.yaml``), its tags ``best.<param>`` and its metrics
(``best_value``, ``best_val_auc`` (``best_val_ndcg_at_10`` for a ranking method, whose objective is
validation NDCG@10), trials by state, the refit's test metrics) are logged at step = the number of
counted trials, so the latest are the study's current ones (:mod:`runners.tuning.study_run`).  Under
it, a nested run per trial (``role=trial``, ``trial_state``; :mod:`runners.tuning.trial`) and a nested
``refit`` run, the study's latest refit being the only one that counts for GBDT-topK's K
(:mod:`runners.tuning.refit`).
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from runners.core import budget, experiment
from runners.core.summaries import format_table, in_multirun, run_tags, ui_hint
from runners.tracking import mlflow_native, stores
from runners.tracking import runs as tracking
from runners.tuning import checks as tuning_checks
from runners.tuning import parent_run, study_run
from runners.tuning.study import load_study, open_storage


def run(cfg: DictConfig) -> dict[str, float]:
    """Run (or resume, or join) the study of ``cfg.method`` on ``cfg.dataset`` and refit its best
    parameters.

    Returns
    -------
    dict
        The refit's metrics (``test_auc``, ...) with ``best_value``, ``best_val_auc`` (or the
        ranking methods' ``best_val_ndcg_at_10``) and the
        number of trials by state; only the latter without ``tune.refit``, or when another worker
        of the study refits (then ``best_value`` is the best so far, absent if none completed yet).

    Raises
    ------
    ValueError
        On bad settings (:func:`runners.tuning.checks.check_tuning`: search space, objective, budget,
        hard budget, pruner, ``n_trials``, ``timeout``, study name, storage, tracking, the
        dataset's and the method's task), before any trial or run is created; when
        ``tracking.parent_run_id`` is no run of the experiment.
    runners.tracking.stores.StoreUnreachable
        When the tracking store or the Optuna storage does not answer within its timeout.
    RuntimeError
        If no trial of the study completed (with the first failure's error and how to go on), or
        none within the budget in ``budget_mode: constraint``.
    """
    cfg = experiment.with_task(cfg)   # the data's task (a file's: detected) and the method's estimator of it
    tuning_checks.check_tuning(cfg)   # every setting fails now, naming its key, not in every trial
    cfg = budget.with_hard_budget(cfg)
    exp_id = tracking.configure(cfg.tracking)
    mlflow_native.configure_ui(exp_id)
    tags = run_tags(cfg)
    storage = open_storage(cfg.tune.storage, cfg.tune.get("storage_timeout", stores.DEFAULT_TIMEOUT))
    study = load_study(cfg.tune, storage)
    name = study.study_name
    parent, invocation, created = parent_run.start_parent(storage, study, exp_id, {
        **tags, "counts_for_topk": "false", "study_name": name, "role": "study",
        **tracking.parent_tag(cfg.tracking)})
    with parent:
        try:
            study = load_study(cfg.tune, storage, invocation)   # TPE seeded for this invocation
            metrics = study_run.tune_study(cfg, storage, study, tags, parent.info.run_id, invocation, created)
        except BaseException as err:
            status = "KILLED" if isinstance(err, KeyboardInterrupt) else "FAILED"
            parent_run.end_parent(parent.info.run_id, status)
            raise
    if cfg.get("print_summary", True) and not in_multirun():
        if any(k in metrics for k in study_run.TEST_METRICS):
            row = {"method": cfg.method.name, "dataset": mlflow_native.dataset_label(cfg.dataset)}
            print(format_table([{**row, **budget.budget_tags(cfg), **metrics}]))
        if "best_value" in metrics:
            found = study_run.best_trial(study, cfg.tune)
            params = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                               for k, v in found.params.items())
            print(f"study {name}: best {cfg.tune.objective} {metrics['best_value']:.4f} (trial "
                  f"{found.number}: {params}; the refit run has them as method.params.*)")
        print(ui_hint(cfg.tracking.uri, exp_id))
    return metrics


@hydra.main(version_base="1.3", config_path="../conf", config_name="tune")
def main(cfg: DictConfig) -> float | None:
    with tracking.sigterm_as_interrupt():   # SIGTERM fails the trial, ends the runs KILLED, exits 143
        return run(cfg).get("best_value")


if __name__ == "__main__":
    main()
