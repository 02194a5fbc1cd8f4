"""One tuning trial of :mod:`runners.tune`: the score it maximises and its nested MLflow run.

:class:`Objective` samples the parameters (:func:`runners.tuning.search_space.suggest`), fits with
pruning on the per-iteration validation score (:class:`PruningCallback`) and logs a nested run
(``role=trial``, ``trial_state``) whose final metrics follow its ``val_auc`` curve, so MLflow's
latest ``val_auc`` is the trial's model's.  The score is the method's task's
(:func:`runners.core.experiment.task_of`): ``val_auc``, or ``val_ndcg_at_10`` for a ranking method, and
the objectives are named after it (``val_ndcg_at_10``, ``val_ndcg_at_10_budget``).  The test split is
never evaluated here.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping

import mlflow
import optuna
from omegaconf import DictConfig

from gbfs.booster.callbacks import CallbackEnv
from gbfs.data import Dataset
from runners.core import experiment
from runners.core.tasks import named
from runners.tracking import mlflow_native, runs
from runners.tracking.run_log import RunLog
from runners.tuning import objective
from runners.tuning.objective import budget_excess, constrained, objective_value
from runners.tuning.search_space import suggest
from runners.tuning.study import ERROR

#: the MLflow status of a trial's nested run, by Optuna state
RUN_STATUS = {"COMPLETE": "FINISHED", "PRUNED": "KILLED", "FAIL": "FAILED"}
#: what a trial keeps besides its task's validation metrics (``Task.val_metrics``)
TRIAL_METRICS = ("n_selected_features", "fit_seconds")


class PruningCallback:
    """A gbfs callback reporting the trial's score after every iteration; raises
    ``optuna.TrialPruned`` when the pruner says so (the exception ends ``fit``).

    A trial may fit more than once (refit mode: the selection fit, then the unpenalised refit);
    each fit's iterations are reported after the previous fit's, so no step is reported twice
    (Optuna would ignore the second value, with a warning)."""

    def __init__(self, trial: optuna.Trial, tune: DictConfig, score: str = "val_auc"):
        self.trial, self.tune, self.score = trial, tune, score
        self.offset = self.next_step = 0
        self.history: list[dict] = []

    def reset(self) -> None:
        """A new fit begins (called by ``fit``): its steps continue after the last reported one."""
        self.offset, self.history = self.next_step, []

    def __call__(self, env: CallbackEnv) -> None:
        self.history = env.history   # kept so a pruned trial still logs its curve
        value = named(env.record).get(self.score)
        if value is None or not math.isfinite(value):
            return
        step = self.offset + env.iteration
        self.next_step = step + 1
        self.trial.report(objective_value(value, env.record.get("n_features_used", 0), self.tune, self.score),
                          step=step)
        if self.trial.should_prune():
            raise optuna.TrialPruned(f"pruned at iteration {env.iteration}")


class Objective:
    """One trial: sample the parameters, fit with pruning on train (validation as eval set), log a
    nested MLflow run under the study's (its inputs: the train and validation splits); return the
    score.  The test split is never evaluated.

    The trial's run is ended on every exit path (FINISHED, KILLED when pruned, FAILED with the error
    as ``tags.error``); the exception goes on to :func:`runners.tuning.study.run_trials`, which tells Optuna.
    """

    def __init__(self, cfg: DictConfig, ds: Dataset, tags: dict[str, str], parent_id: str):
        self.cfg, self.ds, self.tags, self.parent_id = cfg, ds, tags, parent_id
        self.keys = experiment.task_of(cfg.method).val_metrics   # the first is the score

    def __call__(self, trial: optuna.Trial) -> float:
        active = mlflow.start_run(nested=True, run_name=f"trial-{trial.number}",
                                  tags={**self.tags, "trial_number": str(trial.number)})
        run_id = active.info.run_id
        run_log = RunLog(run_id)
        score = self.keys[0]
        pruning, t0 = PruningCallback(trial, self.cfg.tune, score), time.perf_counter()
        state, metrics, history = "FAIL", {}, []
        try:
            # so that a rerun can close the run if this process dies
            trial.set_user_attr("mlflow_run_id", run_id)
            trial.set_user_attr("mlflow_parent_run_id", self.parent_id)
            run_log.inputs(self.cfg, self.ds, splits=mlflow_native.TRIAL_SPLITS)
            overrides = suggest(trial, experiment.search_space(self.cfg.method, self.cfg.get("sampler")))
            run_log.params({f"method.params.{k}": v for k, v in overrides.items()})
            params = experiment.method_params(self.cfg.method, overrides, sampler=self.cfg.get("sampler"))
            out = experiment.fit_evaluate(self.cfg, self.ds, params, callbacks=[pruning], evaluate_test=False)
            metrics = {k: out.metrics[k] for k in (*self.keys, *TRIAL_METRICS)}
            value = objective_value(metrics[score], metrics["n_selected_features"], self.cfg.tune, score)
            if not math.isfinite(value):   # Optuna would fail the trial: say why, in its run too
                raise ValueError(f"the objective is {value} ({score} {metrics[score]})")
            metrics["objective"] = value
            record(trial, metrics, self.cfg.tune, score)
            state, history = "COMPLETE", out.history
            return value
        except optuna.TrialPruned:
            # a pruned trial counts for TPE too: record how many features it had reached
            metrics = _partial_metrics(pruning.history, time.perf_counter() - t0, self.keys)
            record(trial, metrics, self.cfg.tune, score)
            state, history = "PRUNED", pruning.history
            raise
        except BaseException as err:
            message = f"{type(err).__name__}: {err}"[:5000]
            run_log.tags({"error": message})
            trial.set_user_attr(ERROR, message)
            if isinstance(err, SystemExit) or runs.interrupted(err):
                trial.set_user_attr("interrupted", True)
            raise
        finally:
            if state == "FAIL":
                history = pruning.history
                metrics = _partial_metrics(history, time.perf_counter() - t0, self.keys)
            _end_trial_run(run_log, state, metrics, history, self.cfg.tune, score)


def record(trial: optuna.Trial, metrics: Mapping, tune: DictConfig, score: str = "val_auc") -> None:
    """Keep the trial's validation ``score`` (AUC; NDCG@10 for ranking) and feature count in Optuna;
    in constraint mode also its constraint (features over the budget; > 0 is infeasible), which TPE
    learns from."""
    n = metrics.get("n_selected_features")
    for key in (score, "n_selected_features"):
        if metrics.get(key) is not None:
            trial.set_user_attr(key, metrics[key])
    if constrained(tune) and n is not None and objective.trials_set_constraints():
        trial.set_constraint("feature_budget", float(n) - float(tune.feature_budget))


def _partial_metrics(history: list[dict], seconds: float,
                     keys: tuple[str, ...] = ("val_auc", "val_rmse")) -> dict[str, float]:
    """The metrics of a trial stopped before the end (pruned or failed): its last iteration's
    validation ``keys``."""
    last = named(history[-1]) if history else {}
    return {**{k: last.get(k) for k in keys},
            "n_selected_features": last.get("n_features_used"), "fit_seconds": seconds}


def _end_trial_run(run_log: RunLog, state: str, metrics: dict, history: list[dict], tune: DictConfig,
                   score: str = "val_auc") -> None:
    try:
        run_log.curves([named(r) for r in history], keys=(score,))
        # after the curve (as experiment.log_outcome does), so MLflow's latest score is the
        # trial's model's, not its last iteration's
        run_log.metrics(metrics, step=len(history))
        run_log.tags({"trial_state": state})
        n = metrics.get("n_selected_features")
        if constrained(tune) and n is not None:
            run_log.tags({"feasible": str(budget_excess(n, tune) == 0).lower()})
    finally:   # always end it, or the next trial's run would nest under this one
        mlflow.end_run(status=RUN_STATUS[state])
