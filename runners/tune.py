"""Tune one method on one dataset with Optuna and log the study to MLflow: ``python -m runners.tune``.

    python -m runners.tune method=agbm dataset=gisette_like tune.n_trials=30
    python -m runners.tune method=gtgbm tune.storage=postgresql://user@db/optuna    # a shared study

``main`` only calls :func:`run`, importable, which returns the refit's metrics.  Optuna is driven
directly (seeded TPE, median pruning on the per-iteration validation metric, RDB storage): a study
is resumable by name and runs trials until ``tune.n_trials`` of them count (COMPLETE or PRUNED: a
failed trial never uses up the budget), within ``tune.timeout`` seconds.  Several workers may share
a study (parallel jobs, or the same command on several machines): together they run exactly
``n_trials`` counted trials, log under one parent run and refit once (:mod:`runners.tuning.study`).
``tune.objective=val_auc_budget`` either penalises the features over ``tune.feature_budget``
(``tune.budget_mode=penalty``) or makes those trials infeasible (``constraint``: TPE learns the
constraint and the refit only considers trials within the budget); ``tune.budget_mode=hard`` gives
every trial ``max_features`` = ``tune.feature_budget`` (``k`` for GBDT-topK, :mod:`runners.core.budget`),
so each trial is within the budget by construction.  The test split is only looked at by the refit.
A progress bar over the counted trials shows the best value so far (``tune.progress``; never in a
multirun, where one line is logged per trial instead).

MLflow: one parent run per study (``role=study``), shared by its workers and reused when the study
is resumed; its params are the config of the invocation that started it (each later one adds
``config-<k>.yaml``), its tags ``best.<param>`` and its metrics (``best_value``, ``best_val_auc``
(``best_val_ndcg_at_10`` for a ranking method, whose objective is validation NDCG@10),
trials by state, the refit's test metrics) are logged at step = the number of counted trials, so the
latest are the study's current ones.  Under it, a nested run per trial (``role=trial``,
``trial_state``; :mod:`runners.tuning.trial`) and a nested ``refit`` run, the study's latest refit being
the only one that counts for GBDT-topK's K.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import hydra
import mlflow
import optuna
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf, open_dict
from optuna.trial import FrozenTrial, TrialState
from tqdm.auto import tqdm

from gbfs.data import Dataset
from runners.core import budget, experiment, stability
from runners.core.summaries import format_table, in_multirun, run_tags, ui_hint
from runners.tracking import mlflow_native, stores
from runners.tracking import runs as tracking
from runners.tuning import checks as tuning_checks
from runners.tuning import study as studies
from runners.tuning.objective import feasible
from runners.tuning.study import ERROR, load_study, n_done, open_storage
from runners.tuning.trial import Objective

log = logging.getLogger(__name__)

# test_auprc: multitask runs; test_ndcg_at_10, test_mrr: ranking runs
TEST_METRICS = ("test_auc", "test_auprc", "test_rmse", "test_logloss", "test_ndcg_at_10", "test_mrr")
# study user attr: the study's MLflow parent run, shared by its workers and reused when resumed
_PARENT = "mlflow_run_id"


class TrialProgress:
    """After each trial: a bar over the study's counted trials with the best value so far (stderr),
    or without a bar one log line; the best is :func:`best_trial`'s, so an infeasible trial is
    never shown as best."""

    def __init__(self, study: optuna.Study, tune: DictConfig, label: str | None):
        self.tune, self.failed = tune, 0
        self.bar = None if label is None else tqdm(total=int(tune.n_trials), initial=n_done(study),
                                                   desc=label, unit="trial")

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.failed += trial.state == TrialState.FAIL
        try:
            best = best_trial(study, self.tune)
            shown = {"best": f"{best.value:.4f}", "best_trial": best.number}
        except RuntimeError:   # nothing completed (or feasible) yet
            best, shown = None, {"best": "-"}
        if self.bar is None:
            log.info("trial %d %s (value %s); best so far: %s", trial.number, trial.state.name, trial.value,
                     "none" if best is None else f"trial {best.number} with {best.value:.4f}")
            return
        self.bar.set_postfix(**shown, **({"failed": self.failed} if self.failed else {}), refresh=False)
        self.bar.update(n_done(study) - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# ---------------------------------------------------------------------------- study and refit

def _failure_help(study: optuna.Study, tune: DictConfig | Mapping) -> str:
    """How to go on from a study in which no trial completed: its first failure, and the rerun."""
    failed = [t for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))
              if studies.NOT_RUN not in t.user_attrs]
    first = next((t for t in failed if ERROR in t.user_attrs), None)
    n_trials = tune.get("n_trials")
    rerun = "" if n_trials is None else (f", which runs {int(n_trials) - n_done(study)} new trials (failed "
                                         f"trials do not count toward tune.n_trials={n_trials})")
    if first is None:
        return f". Run the same command again{rerun}"
    return (f"; the first failure, trial {first.number}: {first.user_attrs[ERROR]}. Fix its cause, then run "
            f"the same command again{rerun}; every failure's error is in the log and in tags.error of the "
            f"FAILED trial runs in MLflow")


def best_trial(study: optuna.Study, tune: DictConfig | Mapping) -> FrozenTrial:
    """The completed trial of highest value among the feasible ones (:func:`feasible`).

    Raises
    ------
    RuntimeError
        If no trial completed (saying the first failure's error and how to go on), or
        (``budget_mode: constraint``) none is within the budget.
    """
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not complete:
        raise RuntimeError(f"study {study.study_name!r}: no trial completed ({studies.counts(study)})"
                           + _failure_help(study, tune))
    candidates = [t for t in complete if feasible(t, tune)]
    if not candidates:
        used = sorted(int(t.user_attrs.get("n_selected_features", -1)) for t in complete)
        raise RuntimeError(f"study {study.study_name!r}: none of the {len(complete)} completed trials is "
                           f"within tune.feature_budget={tune['feature_budget']} features (they used {used}; "
                           f"tune.budget_mode=constraint); raise the budget or run more trials")
    return max(candidates, key=lambda t: t.value)   # the first of equals, as Optuna's best_trial


def refit(cfg: DictConfig, ds: Dataset, best_params: Mapping, tags: dict[str, str]) -> dict[str, float]:
    """Fit ``best_params`` on train (validation as eval set), evaluate once on test; log a nested
    ``refit`` run like a ``runners.run`` run (final metrics after the curves, by
    :func:`runners.core.experiment.log_outcome`); return its metrics."""
    best_cfg = cfg.copy()
    with open_dict(best_cfg):
        best_cfg.method.params.update(dict(best_params))
    parent = mlflow.active_run()
    with mlflow.start_run(nested=True, run_name="refit", tags=tags) as active:
        tracking.log_config(best_cfg, active.info.run_id, extra=budget.budget_tags(best_cfg))
        out = experiment.fit_evaluate(best_cfg, ds, experiment.method_params(best_cfg.method))
        experiment.log_outcome(out, ds, active.info.run_id, cfg=best_cfg)
        metrics = {**out.metrics, **stability.log_stability(best_cfg, ds, out.model, active.info.run_id)}
    if parent is not None:
        _supersede_refits(active.info, parent.info.run_id)
    return metrics


def _supersede_refits(latest: mlflow.entities.RunInfo, parent_id: str) -> None:
    """Earlier refits of a resumed study stop counting for GBDT-topK's K: only its latest refit
    (of the best trial so far) does."""
    client = MlflowClient()
    older = client.search_runs([latest.experiment_id], max_results=1000, filter_string=(
        f"tags.mlflow.parentRunId = '{parent_id}' and tags.role = 'refit' and tags.counts_for_topk = 'true'"))
    for r in older:
        if r.info.run_id != latest.run_id:
            client.set_tag(r.info.run_id, "counts_for_topk", "false")
            client.set_tag(r.info.run_id, "superseded_by", latest.run_id)


def _close_interrupted_runs(trials: list[FrozenTrial], keep: str | None = None) -> None:
    """End the MLflow runs a killed study left RUNNING: its trial runs FAILED (tagged
    ``trial_state=FAIL`` even when :func:`runners.tracking.runs.fail_dead_runs` ended them first) and its
    parent KILLED, unless that is ``keep``, the parent run this invocation resumes."""
    client = MlflowClient()
    for t in trials:
        for key, status in (("mlflow_run_id", "FAILED"), ("mlflow_parent_run_id", "KILLED")):
            run_id = t.user_attrs.get(key)
            if not run_id or run_id == keep:
                continue
            try:
                found = client.get_run(run_id)
                if key == "mlflow_run_id" and "trial_state" not in found.data.tags:
                    client.set_tag(run_id, "trial_state", "FAIL")
                    client.set_tag(run_id, "error", "interrupted: its process died")
                if found.info.status == "RUNNING":
                    client.set_terminated(run_id, status)
            except mlflow.exceptions.MlflowException as err:   # e.g. logged to another tracking store
                log.warning("could not close MLflow run %s of trial %d: %s", run_id, t.number, err)


def _tune(cfg: DictConfig, storage: optuna.storages.RDBStorage, study: optuna.Study, tags: dict[str, str],
          parent_id: str, invocation: int, created: bool) -> dict[str, float]:
    cfg = budget.with_topk(cfg)
    tags = {**tags, **budget.budget_tags(cfg)}    # GBDT-topK's K may be known only now
    mlflow.set_tags(budget.budget_tags(cfg))
    if created:
        tracking.log_config(cfg, parent_id)
    else:   # params cannot change: the parent keeps the config of the invocation that started it
        mlflow.log_text(OmegaConf.to_yaml(cfg, resolve=True), f"config-{invocation}.yaml")
    _close_interrupted_runs(studies.fail_interrupted_trials(study), keep=parent_id)
    ds = experiment.load_data(cfg)
    trial_tags = {**tags, "counts_for_topk": "false", "role": "trial", "study_name": study.study_name}
    show = cfg.tune.get("progress", True) and not in_multirun()   # parallel jobs' bars would garble
    label = f"tune {cfg.method.name} on {cfg.dataset.name}" if show else None
    progress = TrialProgress(study, cfg.tune, label)
    try:
        ran = studies.run_trials(study, Objective(cfg, ds, trial_tags, parent_id), int(cfg.tune.n_trials),
                                 timeout=cfg.tune.timeout, after_trial=progress)
    finally:
        progress.close()
    if not ran:
        log.info("study %s: %d trials count and %d run elsewhere (tune.n_trials=%d): no trial to run",
                 study.study_name, n_done(study), len(studies.running_elsewhere(study)), cfg.tune.n_trials)
    return _conclude(cfg, storage, study, ds, tags, invocation)


def _conclude(cfg: DictConfig, storage: optuna.storages.RDBStorage, study: optuna.Study, ds: Dataset,
              tags: dict[str, str], invocation: int) -> dict[str, float]:
    """Log the study's best and refit it, unless other workers still run trials or refit it."""
    parent_id, name = mlflow.active_run().info.run_id, study.study_name
    summary = {f"n_trials_{k}": v for k, v in studies.counts(study).items()}
    others = sorted({t.user_attrs.get(studies.WORKER, "?") for t in studies.running_elsewhere(study)})
    try:
        best = best_trial(study, cfg.tune)
    except RuntimeError:
        if not others:
            raise
        log.info("study %s: no trial completed yet; workers %s still run trials and will refit", name, others)
        return summary
    score = experiment.task_of(cfg.method).score
    summary.update({"best_value": best.value, f"best_{score}": best.user_attrs.get(score, best.value)})
    # tags, not params: a resumed study's best changes, and MLflow params cannot
    mlflow.set_tags({"best_trial": str(best.number), **{f"best.{k}": str(v) for k, v in best.params.items()}})
    step = n_done(study)   # a resumed study's metrics continue its history
    tracking.log_metrics(parent_id, summary, step=step)
    if not cfg.tune.refit:
        return summary
    holder = (others[0] if others
              else studies.claim_refit(storage, study, f"{step}:{best.number}", invocation))
    if holder is not None:
        log.info("study %s: the refit is left to worker %s (best so far: trial %d, %.4f)", name, holder,
                 best.number, best.value)
        return summary
    metrics = refit(cfg, ds, best.params, {**tags, "role": "refit", "study_name": name})
    tracking.log_metrics(parent_id, {k: metrics[k] for k in TEST_METRICS if k in metrics}, step=step)
    return {**metrics, **summary}


def _is_study_run(client: MlflowClient, run_id: str, exp_id: str, name: str) -> bool:
    try:
        found = client.get_run(run_id)
    except mlflow.exceptions.MlflowException:   # deleted for good, or logged to another store
        return False
    return (found.info.experiment_id == exp_id and found.info.lifecycle_stage == "active"
            and found.data.tags.get("role") == "study" and found.data.tags.get("study_name") == name)


def find_parent_run(study: optuna.Study, exp_id: str) -> str | None:
    """The MLflow run of the earlier invocations of ``study`` in experiment ``exp_id``, or None.

    The run the study recorded when it began; else, for a study that already has trials (begun
    before runs were recorded, or shared with a machine logging to another store), its first run
    tagged ``role=study`` with its name.  A study without trials never reuses a run by name: that
    would be an older study of the same name whose Optuna storage was deleted.
    """
    client, name = MlflowClient(), study.study_name
    recorded = study.user_attrs.get(_PARENT)
    if recorded and _is_study_run(client, recorded, exp_id, name):
        return recorded
    if not study.get_trials(deepcopy=False) or "'" in name:
        return None
    found = client.search_runs([exp_id], filter_string=f"tags.role = 'study' and tags.study_name = '{name}'",
                               order_by=["attributes.start_time ASC"], max_results=1)
    return found[0].info.run_id if found else None


def _new_parent(storage: optuna.storages.RDBStorage, study: optuna.Study, exp_id: str,
                tags: dict[str, str]) -> tuple[str, bool]:
    """Start the study's run and record it in the study, unless a parallel worker recorded its own
    first: return the run to use and whether this worker's run is the study's (invocation 1)."""
    client = MlflowClient()
    mine = client.create_run(exp_id, run_name=f"tune-{study.study_name}", tags=tags).info.run_id
    try:
        stored = studies.claim_attr(storage, study, _PARENT, mine)
    except BaseException:
        client.set_terminated(mine, "FAILED")
        raise
    if stored == mine or not _is_study_run(client, stored, exp_id, study.study_name):
        return mine, stored == mine   # (a run of another tracking store: this store gets its own)
    log.info("study %s: a parallel worker recorded its MLflow run %s first; using it", study.study_name,
             stored)
    client.set_terminated(mine, "KILLED")
    client.delete_run(mine)
    return stored, False


def _start_parent(storage: optuna.storages.RDBStorage, study: optuna.Study, exp_id: str,
                  tags: dict[str, str]) -> tuple[mlflow.ActiveRun, int, bool]:
    """Resume the study's parent run, or start it; return it, this invocation's number and whether
    this invocation started the run (and so logs the config as params)."""
    run_id, created, first = find_parent_run(study, exp_id), False, False
    if run_id is None:
        run_id, first = _new_parent(storage, study, exp_id, {**tags, "n_invocations": "1"})
        created = first or run_id != study.user_attrs.get(_PARENT)
    logged = int(MlflowClient().get_run(run_id).data.tags.get("n_invocations", "1"))
    if first:   # invocation 1 is the study run's starter: the others count from 2
        studies.claim_attr(storage, study, "invocation:1", studies.worker(), system=True)
        invocation = 1
    else:
        invocation = studies.claim_invocation(storage, study, first=max(2, logged + 1))
        log.info("study %s: resuming its MLflow run %s (invocation %d)", study.study_name, run_id, invocation)
    active = mlflow.start_run(run_id=run_id, tags={**tags, "n_invocations": str(max(logged, invocation))})
    return active, invocation, created


def _end_parent(parent_id: str, status: str) -> None:
    """End the active runs down to the parent (a failure may leave a nested run active)."""
    while (active := mlflow.active_run()) is not None:
        mlflow.end_run(status=status)
        if active.info.run_id == parent_id:
            break


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
    tuning_checks.check_tuning(cfg)   # every setting fails now, naming its key, not in every trial
    cfg = budget.with_hard_budget(cfg)
    exp_id = tracking.configure(cfg.tracking)
    mlflow_native.configure_ui(exp_id)
    tags = run_tags(cfg)
    storage = open_storage(cfg.tune.storage, cfg.tune.get("storage_timeout", stores.DEFAULT_TIMEOUT))
    study = load_study(cfg.tune, storage)
    name = study.study_name
    parent, invocation, created = _start_parent(storage, study, exp_id, {
        **tags, "counts_for_topk": "false", "study_name": name, "role": "study",
        **tracking.parent_tag(cfg.tracking)})
    with parent:
        try:
            study = load_study(cfg.tune, storage, invocation)   # TPE seeded for this invocation
            metrics = _tune(cfg, storage, study, tags, parent.info.run_id, invocation, created)
        except BaseException as err:
            _end_parent(parent.info.run_id, "KILLED" if isinstance(err, KeyboardInterrupt) else "FAILED")
            raise
    if cfg.get("print_summary", True) and not in_multirun():
        if any(k in metrics for k in TEST_METRICS):
            row = {"method": cfg.method.name, "dataset": mlflow_native.dataset_label(cfg.dataset)}
            print(format_table([{**row, **budget.budget_tags(cfg), **metrics}]))
        if "best_value" in metrics:
            print(f"study {name}: best {cfg.tune.objective} {metrics['best_value']:.4f}")
        print(ui_hint(cfg.tracking.uri, exp_id))
    return metrics


@hydra.main(version_base="1.3", config_path="../conf", config_name="tune")
def main(cfg: DictConfig) -> float | None:
    with tracking.sigterm_as_interrupt():   # SIGTERM fails the trial, ends the runs KILLED, exits 143
        return run(cfg).get("best_value")


if __name__ == "__main__":
    main()
