"""One invocation of a tuning study (:mod:`runners.tune`) under its MLflow parent run: the trials
with their progress bar, the study's best trial, and its conclusion -- the best logged to the parent
run, then the refit.

:func:`tune_study` runs in the parent run (:mod:`runners.tuning.parent_run`): it logs the config
(params on the invocation that started the run, ``config-<k>.yaml`` on a later one), closes the
runs a killed invocation left RUNNING, runs the trials (:mod:`runners.tuning.study`,
:class:`runners.tuning.trial.Objective`) and concludes (:func:`conclude`).  The study's metrics (the trials
by state, ``best_value``, ``best_<score>``, the refit's test metrics) are logged at step = the
number of counted trials, so the latest are the study's current ones; its best parameters are
tags, ``best.<param>``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import optuna
from omegaconf import DictConfig, OmegaConf
from optuna.trial import FrozenTrial, TrialState
from tqdm.auto import tqdm

from gbfs.data import Dataset
from runners.core import budget, experiment
from runners.core.summaries import in_multirun
from runners.tracking.run_log import RunLog
from runners.tuning import study as studies
from runners.tuning.objective import feasible
from runners.tuning.parent_run import close_interrupted_runs
from runners.tuning.refit import refit
from runners.tuning.storages import SharedStorage
from runners.tuning.study import ERROR, n_done
from runners.tuning.trial import Objective

log = logging.getLogger(__name__)

# test_auprc: multitask runs; test_ndcg_at_10, test_mrr: ranking runs
TEST_METRICS = ("test_auc", "test_auprc", "test_rmse", "test_logloss", "test_ndcg_at_10", "test_mrr")


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


def tune_study(cfg: DictConfig, storage: SharedStorage, study: optuna.Study,
               tags: dict[str, str], parent_id: str, invocation: int, created: bool) -> dict[str, float]:
    """Run this invocation's trials of ``study`` under its parent run ``parent_id`` (the active run),
    then :func:`conclude`; return the study's metrics (and the refit's, if this worker refitted).

    ``created``: this invocation started the parent run, which so takes its config as params;
    ``tags``: the tags every trial and the refit inherit.
    """
    cfg = budget.with_topk(cfg)
    tags = {**tags, **budget.budget_tags(cfg)}    # GBDT-topK's K may be known only now
    parent = RunLog(parent_id)
    parent.tags(budget.budget_tags(cfg))
    if created:
        parent.config(cfg)
    else:   # params cannot change: the parent keeps the config of the invocation that started it
        parent.text(OmegaConf.to_yaml(cfg, resolve=True), f"config-{invocation}.yaml")
    close_interrupted_runs(studies.fail_interrupted_trials(study), keep=parent_id)
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
    return conclude(cfg, storage, study, ds, tags, invocation, parent)


def conclude(cfg: DictConfig, storage: SharedStorage, study: optuna.Study, ds: Dataset,
             tags: dict[str, str], invocation: int, parent: RunLog) -> dict[str, float]:
    """Log the study's best to its ``parent`` run and refit it, unless other workers still run
    trials or refit it; return the study's metrics, with the refit's when this worker refitted.

    Raises
    ------
    RuntimeError
        If no trial completed (or none is feasible) and no other worker still runs trials.
    """
    name = study.study_name
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
    parent.tags({"best_trial": str(best.number), **{f"best.{k}": str(v) for k, v in best.params.items()}})
    step = n_done(study)   # a resumed study's metrics continue its history
    parent.metrics(summary, step=step)
    if not cfg.tune.refit:
        return summary
    holder = (others[0] if others
              else studies.claim_refit(storage, study, f"{step}:{best.number}", invocation,
                                       sweep=tags.get("sweep_dir")))
    if holder is not None:
        log.info("study %s: the refit is left to worker %s (best so far: trial %d, %.4f)", name, holder,
                 best.number, best.value)
        return summary
    metrics = refit(cfg, ds, best.params, {**tags, "role": "refit", "study_name": name})
    parent.metrics({k: metrics[k] for k in TEST_METRICS if k in metrics}, step=step)
    return {**metrics, **summary}
