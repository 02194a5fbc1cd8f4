"""Tune one method on one dataset with Optuna and log the study to MLflow: ``python -m runners.tune``.

    python -m runners.tune method=agbm dataset=gisette_like tune.n_trials=30
    python -m runners.tune method=gtgbm tune.storage=postgresql://user@db/optuna    # a shared study

``main`` only calls :func:`run`, importable, which returns the refit's metrics.  Optuna is driven
directly (seeded TPE, median pruning on the per-iteration validation metric, RDB storage): a study
is resumable by name and runs only the trials missing to reach ``tune.n_trials`` finished ones,
within ``tune.timeout`` seconds.  ``tune.objective=val_auc_budget`` either penalises the features
over ``tune.feature_budget`` (``tune.budget_mode=penalty``) or makes those trials infeasible
(``constraint``: TPE learns the constraint and the refit only considers trials within the budget);
``tune.budget_mode=hard`` gives every trial ``max_features`` = ``tune.feature_budget`` (``k`` for
GBDT-topK, :mod:`runners.budget`), so each trial is within the budget by construction.
The test split is only looked at by the refit.  A progress bar over the trials shows the best value
so far (``tune.progress``; never in a multirun, where Optuna logs one line per trial instead).

MLflow: one parent run per study (``role=study``), reused when the study is resumed; its params are
the first invocation's config (each later one adds ``config-<k>.yaml``), its tags ``best.<param>``
and its metrics (``best_value``, ``best_val_auc``, trials by state, the refit's test metrics) are
logged at step = the number of finished trials, so the latest are the study's current ones.  Under
it, a nested run per trial (``role=trial``, ``trial_state``; the trial's final metrics logged after
its ``val_auc`` curve, so MLflow's latest ``val_auc`` is the trial's model's) and a nested ``refit``
run per invocation, the study's latest refit being the only one that counts for GBDT-topK's K.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import time
from collections.abc import Mapping
from pathlib import Path

import hydra
import mlflow
import optuna
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf, open_dict
from optuna.trial import FrozenTrial, TrialState
from tqdm.auto import tqdm

from gbfs.callbacks import CallbackEnv
from gbfs.data import Dataset
from runners import budget, experiment, stability, tracking
from runners.run import _in_multirun, _with_topk, format_table, run_tags, ui_hint

log = logging.getLogger(__name__)

#: trial states that count toward ``tune.n_trials``
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
OBJECTIVES = ("val_auc", "val_auc_budget")
BUDGET_MODES = ("penalty", "constraint", budget.HARD)
PARAM_TYPES = ("float", "int", "categorical")
#: the MLflow status of a trial's nested run, by Optuna state
RUN_STATUS = {"COMPLETE": "FINISHED", "PRUNED": "KILLED", "FAIL": "FAILED"}
TRIAL_METRICS = ("val_auc", "val_rmse", "n_selected_features", "fit_seconds")
TEST_METRICS = ("test_auc", "test_rmse", "test_logloss")
# study user attr: trials failed because their process died; they do not count toward n_trials
_INTERRUPTED = "interrupted_trials"
# study user attr: the study's MLflow parent run, reused when the study is resumed
_PARENT = "mlflow_run_id"


def _unknown_type(name: str, kind: object) -> ValueError:
    return ValueError(f"method.search_space.{name}: unknown type {kind!r}; expected one of {PARAM_TYPES}")


def check_search_space(method: DictConfig, sampler: DictConfig | None = None) -> None:
    """Raise ``ValueError`` naming the parameter if the search space (the method's and the row
    sampler's) cannot be sampled."""
    space = experiment.search_space(method, sampler)
    if not space:
        raise ValueError(f"method {method.name!r} has no search_space to tune")
    for name, spec in space.items():
        kind = spec.get("type")
        if kind not in PARAM_TYPES:
            raise _unknown_type(name, kind)
        needed = ("choices",) if kind == "categorical" else ("low", "high")
        missing = [k for k in needed if spec.get(k) is None]
        if missing:
            raise ValueError(f"method.search_space.{name}: {kind} parameters need {missing}")
    # every name must be a method.params (or sampler.params) key
    experiment.method_params(method, dict.fromkeys(space), sampler=sampler)


def suggest(trial: optuna.Trial, search_space: Mapping) -> dict:
    """A trial's values of ``search_space`` (``name -> {type: float | int | categorical, low, high, log,
    choices}``): the overrides of ``method.params``."""
    out = {}
    for name, spec in search_space.items():
        kind = spec["type"]
        if kind == "categorical":
            out[name] = trial.suggest_categorical(name, list(spec["choices"]))
        elif kind in ("float", "int"):
            cast, sample = (float, trial.suggest_float) if kind == "float" else (int, trial.suggest_int)
            out[name] = sample(name, cast(spec["low"]), cast(spec["high"]), log=bool(spec.get("log", False)))
        else:
            raise _unknown_type(name, kind)
    return out


def constrained(tune: DictConfig | Mapping) -> bool:
    """Whether the feature budget is a hard constraint (``objective: val_auc_budget`` with
    ``budget_mode: constraint``) rather than a penalty."""
    mode = tune.get("budget_mode") or "penalty"
    if mode not in BUDGET_MODES:
        raise ValueError(f"tune.budget_mode must be one of {BUDGET_MODES}, got {mode!r}")
    return tune["objective"] == "val_auc_budget" and mode == "constraint"


def objective_value(val_auc: float, n_features: float, tune: DictConfig | Mapping) -> float:
    """The score a trial maximises.

    Parameters
    ----------
    val_auc : float
        Validation AUC.
    n_features : float
        Number of features the model uses.
    tune : mapping
        ``objective`` ("val_auc" or "val_auc_budget"), ``feature_budget``, ``budget_penalty``,
        ``budget_mode`` ("penalty", the default, or "constraint").

    Returns
    -------
    float
        ``val_auc``, less ``budget_penalty`` per feature over ``feature_budget`` with
        ``objective: val_auc_budget`` in ``budget_mode: penalty``; in ``budget_mode: constraint``
        the budget is a constraint (:func:`budget_excess`), not part of the score.
    """
    if tune["objective"] == "val_auc":
        return float(val_auc)
    if tune["objective"] == "val_auc_budget":
        if tune.get("feature_budget") is None:
            raise ValueError("tune.objective=val_auc_budget needs tune.feature_budget (a number of features)")
        if constrained(tune):
            return float(val_auc)
        return float(val_auc) - float(tune["budget_penalty"]) * budget_excess(n_features, tune)
    raise ValueError(f"tune.objective must be one of {OBJECTIVES}, got {tune['objective']!r}")


def budget_excess(n_features: float, tune: DictConfig | Mapping) -> float:
    """Features over ``tune.feature_budget`` (0 within it)."""
    return max(0.0, float(n_features) - float(tune["feature_budget"]))


def feasible(trial: FrozenTrial, tune: DictConfig | Mapping) -> bool:
    """Whether ``trial`` may be the study's best: always, unless the budget is a constraint and the
    trial's model used more than ``tune.feature_budget`` features (judged with the current budget,
    so a resumed study with another budget picks its best by that one; so does a hard budget)."""
    if not (constrained(tune) or budget.is_hard(tune)):
        return True
    n = trial.user_attrs.get("n_selected_features")
    return n is not None and budget_excess(n, tune) == 0


def check_tune(tune: DictConfig) -> None:
    """Raise ``ValueError`` naming the key on a bad ``tune`` setting (objective, budget, pruner,
    ``n_trials``, ``timeout``)."""
    if not isinstance(tune.n_trials, int) or tune.n_trials < 1:
        raise ValueError(f"tune.n_trials must be a positive integer, got {tune.n_trials!r}")
    timeout = tune.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or timeout <= 0):
        raise ValueError(f"tune.timeout must be a positive number of seconds or null, got {timeout!r}")
    objective_value(0.5, 0, tune)   # the objective and the budget's keys
    constrained(tune)
    _pruner(tune)


class PruningCallback:
    """A gbfs callback reporting the trial's score after every iteration; raises
    ``optuna.TrialPruned`` when the pruner says so (the exception ends ``fit``)."""

    def __init__(self, trial: optuna.Trial, tune: DictConfig):
        self.trial, self.tune = trial, tune
        self.reset()

    def reset(self) -> None:
        self.history: list[dict] = []

    def __call__(self, env: CallbackEnv) -> None:
        self.history = env.history   # kept so a pruned trial still logs its curve
        auc = env.record.get("val_auc")
        if auc is None or not math.isfinite(auc):
            return
        self.trial.report(objective_value(auc, env.record.get("n_features_used", 0), self.tune),
                          step=env.iteration)
        if self.trial.should_prune():
            raise optuna.TrialPruned(f"pruned at iteration {env.iteration}")


# ------------------------------------------------------------------------------------- the study

def _storage(url: str) -> optuna.storages.RDBStorage:
    engine_kwargs = {}
    if url.startswith("sqlite:///"):
        Path(url[len("sqlite:///"):]).expanduser().parent.mkdir(parents=True, exist_ok=True)
        # parallel studies of a multirun share the file: wait for its lock instead of failing
        engine_kwargs = {"connect_args": {"timeout": 60}}
    return optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs)


def _pruner(tune: DictConfig) -> optuna.pruners.BasePruner:
    if tune.pruner is None:
        return optuna.pruners.NopPruner()
    if tune.pruner == "median":
        # no pruning before n_startup_trials trials have finished: the median needs a few curves
        return optuna.pruners.MedianPruner(n_startup_trials=int(tune.n_startup_trials),
                                           n_warmup_steps=int(tune.pruner_warmup_steps))
    raise ValueError(f"tune.pruner must be 'median' or null, got {tune.pruner!r}")


def load_study(tune: DictConfig) -> optuna.Study:
    """Create the study of ``tune.study_name`` in ``tune.storage``, or load it if it exists.

    TPE is seeded with ``sampler_seed`` plus the number of trials already in the study, so that a
    resumed study does not repeat the random start-up trials of its first invocation.
    """
    storage = _storage(tune.storage)
    study = optuna.create_study(study_name=tune.study_name, storage=storage, direction="maximize",
                                load_if_exists=True)
    n_before = len(study.get_trials(deepcopy=False))
    seed = None if tune.sampler_seed is None else int(tune.sampler_seed) + n_before
    return optuna.load_study(study_name=tune.study_name, storage=storage, sampler=_sampler(tune, seed),
                             pruner=_pruner(tune))


def _sampler(tune: DictConfig, seed: int | None) -> optuna.samplers.TPESampler:
    constraints_func = None
    if constrained(tune) and not _trials_set_constraints():
        # Optuna 4 learns constraints only through constraints_func (deprecated in Optuna 5, where
        # the trial sets its own constraint, see _record)
        constraints_func = _budget_constraints(tune)
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=int(tune.n_startup_trials),
                                      constraints_func=constraints_func)


def _trials_set_constraints() -> bool:
    return hasattr(optuna.trial.Trial, "set_constraint")   # Optuna >= 5


def _budget_constraints(tune: DictConfig):
    """``constraints_func`` of Optuna 4's TPE: features over the budget (> 0: infeasible)."""
    def constraints(trial: FrozenTrial) -> tuple[float]:
        n = trial.user_attrs.get("n_selected_features")
        return (0.0 if n is None else float(n) - float(tune.feature_budget),)
    return constraints


def n_done(study: optuna.Study) -> int:
    """Finished trials that count toward ``tune.n_trials`` (interrupted ones do not)."""
    interrupted = set(study.user_attrs.get(_INTERRUPTED, []))
    return sum(t.number not in interrupted for t in study.get_trials(deepcopy=False, states=FINISHED))


def _worker() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _maybe_alive(worker: str | None) -> bool:
    """Whether the process that started a trial may still run it: only processes of this host are
    checked, so several machines can share a study."""
    host, _, pid = (worker or "").rpartition(":")
    if not pid.isdigit() or int(pid) == os.getpid():
        return False
    if host != socket.gethostname():
        return True
    try:
        os.kill(int(pid), 0)   # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:
        pass   # it exists, under another user
    return True


def _add_interrupted(study: optuna.Study, numbers: list[int]) -> None:
    study.set_user_attr(_INTERRUPTED, sorted(set(study.user_attrs.get(_INTERRUPTED, [])) | set(numbers)))


def fail_interrupted_trials(study: optuna.Study) -> list[FrozenTrial]:
    """Mark FAIL the RUNNING trials whose process died (a killed study); return them."""
    dead = [t for t in study.get_trials(states=(TrialState.RUNNING,))
            if not _maybe_alive(t.user_attrs.get("worker"))]
    if dead:
        _add_interrupted(study, [t.number for t in dead])
        for t in dead:
            study.tell(t.number, state=TrialState.FAIL, skip_if_finished=True)
        log.warning("study %s: trials %s were left RUNNING by a dead process; marked FAIL, not counted",
                    study.study_name, [t.number for t in dead])
    return dead


def _close_interrupted_runs(trials: list[FrozenTrial], keep: str | None = None) -> None:
    """End the MLflow runs a killed study left RUNNING (its trial runs and its parent, unless that
    is ``keep``, the parent run this invocation resumes)."""
    client = MlflowClient()
    for t in trials:
        for key, status in (("mlflow_run_id", "FAILED"), ("mlflow_parent_run_id", "KILLED")):
            run_id = t.user_attrs.get(key)
            try:
                if run_id and run_id != keep and client.get_run(run_id).info.status == "RUNNING":
                    if key == "mlflow_run_id":
                        client.set_tag(run_id, "trial_state", "FAIL")
                    client.set_terminated(run_id, status)
            except mlflow.exceptions.MlflowException as err:   # e.g. logged to another tracking store
                log.warning("could not close MLflow run %s of trial %d: %s", run_id, t.number, err)


def _stop_at(n: int):
    """A study callback stopping the study once ``n`` trials count as done, whoever ran them."""
    def callback(study: optuna.Study, trial: FrozenTrial) -> None:
        if n_done(study) >= n:
            study.stop()
    return callback


class TrialProgress:
    """A study callback drawing a bar over this invocation's trials with the best value so far
    (stderr); the best is :func:`best_trial`'s, so an infeasible trial is never shown as best."""

    def __init__(self, total: int, label: str, tune: DictConfig):
        self.tune = tune
        self.bar = tqdm(total=total, desc=label, unit="trial")

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        try:
            best = best_trial(study, self.tune)
            self.bar.set_postfix(best=f"{best.value:.4f}", best_trial=best.number, refresh=False)
        except RuntimeError:   # nothing completed (or feasible) yet
            self.bar.set_postfix(best="-", refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


# ------------------------------------------------------------------------------------ one trial

class Objective:
    """One trial: sample the parameters, fit with pruning on train (validation as eval set), log a
    nested MLflow run; return the score.  The test split is never evaluated."""

    def __init__(self, cfg: DictConfig, ds: Dataset, tags: dict[str, str], parent_id: str):
        self.cfg, self.ds, self.tags, self.parent_id = cfg, ds, tags, parent_id

    def __call__(self, trial: optuna.Trial) -> float:
        trial.set_user_attr("worker", _worker())
        active = mlflow.start_run(nested=True, run_name=f"trial-{trial.number}",
                                  tags={**self.tags, "trial_number": str(trial.number)})
        run_id = active.info.run_id
        trial.set_user_attr("mlflow_run_id", run_id)
        trial.set_user_attr("mlflow_parent_run_id", self.parent_id)
        pruning, t0 = PruningCallback(trial, self.cfg.tune), time.perf_counter()
        state, metrics, history = "FAIL", {}, []
        try:
            overrides = suggest(trial, experiment.search_space(self.cfg.method, self.cfg.get("sampler")))
            mlflow.log_params({f"method.params.{k}": v for k, v in overrides.items()})
            params = experiment.method_params(self.cfg.method, overrides, sampler=self.cfg.get("sampler"))
            out = experiment.fit_evaluate(self.cfg, self.ds, params, callbacks=[pruning], evaluate_test=False)
            metrics = {k: out.metrics[k] for k in TRIAL_METRICS}
            value = objective_value(metrics["val_auc"], metrics["n_selected_features"], self.cfg.tune)
            if not math.isfinite(value):   # Optuna would fail the trial: say why, in its run too
                raise ValueError(f"the objective is {value} (val_auc {metrics['val_auc']})")
            metrics["objective"] = value
            _record(trial, metrics, self.cfg.tune)
            state, history = "COMPLETE", out.history
            return value
        except optuna.TrialPruned:
            # a pruned trial counts for TPE too: record how many features it had reached
            metrics = _partial_metrics(pruning.history, time.perf_counter() - t0)
            _record(trial, metrics, self.cfg.tune)
            state, history = "PRUNED", pruning.history
            raise
        except BaseException as err:   # Optuna logs it and marks the trial FAIL
            mlflow.set_tag("error", f"{type(err).__name__}: {err}"[:5000])
            if isinstance(err, KeyboardInterrupt):
                _add_interrupted(trial.study, [trial.number])
            raise
        finally:
            if state == "FAIL":
                history = pruning.history
                metrics = _partial_metrics(history, time.perf_counter() - t0)
            _end_trial_run(run_id, state, metrics, history, self.cfg.tune)


def _record(trial: optuna.Trial, metrics: Mapping, tune: DictConfig) -> None:
    """Keep the trial's validation AUC and feature count in Optuna; in constraint mode also its
    constraint (features over the budget; > 0 is infeasible), which TPE learns from."""
    n = metrics.get("n_selected_features")
    for key in ("val_auc", "n_selected_features"):
        if metrics.get(key) is not None:
            trial.set_user_attr(key, metrics[key])
    if constrained(tune) and n is not None and _trials_set_constraints():
        trial.set_constraint("feature_budget", float(n) - float(tune.feature_budget))


def _partial_metrics(history: list[dict], seconds: float) -> dict[str, float]:
    """The metrics of a trial stopped before the end (pruned or failed): its last iteration."""
    last = history[-1] if history else {}
    return {"val_auc": last.get("val_auc"), "val_rmse": last.get("val_rmse"),
            "n_selected_features": last.get("n_features_used"), "fit_seconds": seconds}


def _end_trial_run(run_id: str, state: str, metrics: dict, history: list[dict], tune: DictConfig) -> None:
    try:
        tracking.log_curves(run_id, history, keys=("val_auc",))
        # after the curve (as experiment.log_outcome does), so MLflow's latest val_auc is the
        # trial's model's, not its last iteration's
        tracking.log_metrics(run_id, metrics, step=len(history))
        mlflow.set_tag("trial_state", state)
        n = metrics.get("n_selected_features")
        if constrained(tune) and n is not None:
            mlflow.set_tag("feasible", str(budget_excess(n, tune) == 0).lower())
    finally:   # always end it, or the next trial's run would nest under this one
        mlflow.end_run(status=RUN_STATUS[state])


# ---------------------------------------------------------------------------- study and refit

def best_trial(study: optuna.Study, tune: DictConfig | Mapping) -> FrozenTrial:
    """The completed trial of highest value among the feasible ones (:func:`feasible`).

    Raises
    ------
    RuntimeError
        If no trial completed, or (``budget_mode: constraint``) none is within the budget.
    """
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not complete:
        counts = {s.name: len(study.get_trials(deepcopy=False, states=(s,))) for s in FINISHED}
        raise RuntimeError(f"study {study.study_name!r}: no trial completed ({counts}); the errors are in "
                           f"the log and in the tags.error of the FAILED trial runs in MLflow")
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
    :func:`runners.experiment.log_outcome`); return its metrics."""
    best_cfg = cfg.copy()
    with open_dict(best_cfg):
        best_cfg.method.params.update(dict(best_params))
    parent = mlflow.active_run()
    with mlflow.start_run(nested=True, run_name="refit", tags=tags) as active:
        tracking.log_config(best_cfg, active.info.run_id, extra=budget.budget_tags(best_cfg))
        out = experiment.fit_evaluate(best_cfg, ds, experiment.method_params(best_cfg.method))
        experiment.log_outcome(out, ds, active.info.run_id)
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


def _optimize(study: optuna.Study, objective: Objective, remaining: int, cfg: DictConfig) -> None:
    """``study.optimize`` with a progress bar over the trials, unless ``tune.progress`` is off or in
    a multirun (parallel jobs' bars would garble each other; Optuna's per-trial log lines do not)."""
    callbacks = [_stop_at(int(cfg.tune.n_trials))]
    progress, verbosity = None, optuna.logging.get_verbosity()
    if cfg.tune.get("progress", True) and not _in_multirun():
        progress = TrialProgress(remaining, f"tune {cfg.method.name} on {cfg.dataset.name}", cfg.tune)
        callbacks.insert(0, progress)
        # the bar replaces Optuna's "Trial n finished" lines, which would break it
        optuna.logging.set_verbosity(max(verbosity, optuna.logging.WARNING))
    try:
        study.optimize(objective, n_trials=remaining, timeout=cfg.tune.timeout, catch=(Exception,),
                       callbacks=callbacks)
    finally:
        optuna.logging.set_verbosity(verbosity)
        if progress is not None:
            progress.close()


def _tune(cfg: DictConfig, study: optuna.Study, tags: dict[str, str], parent_id: str,
          invocation: int) -> dict[str, float]:
    cfg = _with_topk(cfg)
    tags = {**tags, **budget.budget_tags(cfg)}    # GBDT-topK's K may be known only now
    mlflow.set_tags(budget.budget_tags(cfg))
    if invocation == 1:
        tracking.log_config(cfg, parent_id)
    else:   # params cannot change: a resumed study's parent keeps its first config as params
        mlflow.log_text(OmegaConf.to_yaml(cfg, resolve=True), f"config-{invocation}.yaml")
    _close_interrupted_runs(fail_interrupted_trials(study), keep=parent_id)
    ds = experiment.load_data(cfg)
    n_trials, remaining = int(cfg.tune.n_trials), int(cfg.tune.n_trials) - n_done(study)
    if remaining > 0:
        trial_tags = {**tags, "counts_for_topk": "false", "role": "trial", "study_name": study.study_name}
        _optimize(study, Objective(cfg, ds, trial_tags, parent_id), remaining, cfg)
    else:
        log.info("study %s already has %d finished trials (tune.n_trials=%d)", study.study_name,
                 n_done(study), n_trials)
    best = best_trial(study, cfg.tune)
    summary = {"best_value": best.value, "best_val_auc": best.user_attrs.get("val_auc", best.value)}
    summary.update({f"n_trials_{s.name.lower()}": len(study.get_trials(deepcopy=False, states=(s,)))
                    for s in FINISHED})
    # tags, not params: a resumed study's best changes, and MLflow params cannot
    mlflow.set_tags({"best_trial": str(best.number), **{f"best.{k}": str(v) for k, v in best.params.items()}})
    step = n_done(study)   # a resumed study's metrics continue its history
    tracking.log_metrics(parent_id, summary, step=step)
    if not cfg.tune.refit:
        return summary
    metrics = refit(cfg, ds, best.params, {**tags, "role": "refit", "study_name": study.study_name})
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


def _start_parent(study: optuna.Study, exp_id: str, tags: dict[str, str]) -> tuple[mlflow.ActiveRun, int]:
    """Resume the study's parent run, or start one; return it and this invocation's number."""
    run_id = find_parent_run(study, exp_id)
    if run_id is None:
        active = mlflow.start_run(run_name=f"tune-{study.study_name}", tags={**tags, "n_invocations": "1"})
        if _PARENT not in study.user_attrs:   # a study shared across stores keeps its first store's run
            study.set_user_attr(_PARENT, active.info.run_id)
        return active, 1
    invocation = int(MlflowClient().get_run(run_id).data.tags.get("n_invocations", "1")) + 1
    log.info("study %s: resuming its MLflow run %s (invocation %d)", study.study_name, run_id, invocation)
    return mlflow.start_run(run_id=run_id, tags={**tags, "n_invocations": str(invocation)}), invocation


def _end_parent(parent_id: str, status: str) -> None:
    """End the active runs down to the parent (a failure may leave a nested run active)."""
    while (active := mlflow.active_run()) is not None:
        mlflow.end_run(status=status)
        if active.info.run_id == parent_id:
            break


def run(cfg: DictConfig) -> dict[str, float]:
    """Run (or resume) the study of ``cfg.method`` on ``cfg.dataset`` and refit its best parameters.

    Returns
    -------
    dict
        The refit's metrics (``test_auc``, ...) with ``best_value``, ``best_val_auc`` and the
        number of trials by state; only the latter without ``tune.refit``.

    Raises
    ------
    ValueError
        On bad settings (search space, objective, budget, hard budget, pruner, ``n_trials``,
        ``timeout``), before any run is logged.
    RuntimeError
        If no trial of the study completed, or none within the budget in ``budget_mode: constraint``.
    """
    if not cfg.tune.get("enabled") or "n_trials" not in cfg.tune:
        raise ValueError("runners.tune needs the Optuna settings: pass tune=optuna (conf/tune/optuna.yaml)")
    if not cfg.tune.storage:
        raise ValueError("tune.storage must be an SQLAlchemy URL (sqlite:///optuna.db, postgresql://...)")
    cfg = budget.with_hard_budget(cfg)
    check_search_space(cfg.method, cfg.get("sampler"))
    check_tune(cfg.tune)   # bad settings fail now, not in every trial
    exp_id = tracking.configure(cfg.tracking)
    tags = run_tags(cfg)
    study = load_study(cfg.tune)
    name = study.study_name
    parent, invocation = _start_parent(study, exp_id, {**tags, "counts_for_topk": "false", "study_name": name,
                                                       "role": "study"})
    with parent:
        try:
            metrics = _tune(cfg, study, tags, parent.info.run_id, invocation)
        except BaseException as err:
            _end_parent(parent.info.run_id, "KILLED" if isinstance(err, KeyboardInterrupt) else "FAILED")
            raise
    if cfg.get("print_summary", True) and not _in_multirun():
        if cfg.tune.refit:
            print(format_table([{"method": cfg.method.name, "dataset": cfg.dataset.name,
                                 **budget.budget_tags(cfg), **metrics}]))
        print(f"study {name}: best {cfg.tune.objective} {metrics['best_value']:.4f}")
        print(ui_hint(cfg.tracking.uri))
    return metrics


@hydra.main(version_base="1.3", config_path="../conf", config_name="tune")
def main(cfg: DictConfig) -> float | None:
    return run(cfg).get("best_value")


if __name__ == "__main__":
    main()
