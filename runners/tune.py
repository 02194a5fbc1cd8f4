"""Tune one method on one dataset with Optuna and log the study to MLflow: ``python -m runners.tune``.

    python -m runners.tune method=agbm dataset=gisette_like tune.n_trials=30
    python -m runners.tune method=gtgbm tune.storage=postgresql://user@db/optuna    # a shared study

``main`` only calls :func:`run`, importable, which returns the refit's metrics.  Optuna is driven
directly (seeded TPE, median pruning on the per-iteration validation metric, RDB storage): a study
is resumable by name and runs only the trials missing to reach ``tune.n_trials`` finished ones.
The test split is only looked at by the refit.  MLflow: a parent run per invocation
(``role=study``), a nested run per trial (``role=trial``, ``trial_state``) and a nested ``refit``
run, the only one of the study that counts for GBDT-topK's K.
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
from omegaconf import DictConfig, open_dict
from optuna.trial import FrozenTrial, TrialState

from gbfs.callbacks import CallbackEnv
from gbfs.data import Dataset
from runners import experiment, tracking
from runners.run import _in_multirun, _with_topk, format_table, run_tags, ui_hint

log = logging.getLogger(__name__)

#: trial states that count toward ``tune.n_trials``
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
OBJECTIVES = ("val_auc", "val_auc_budget")
PARAM_TYPES = ("float", "int", "categorical")
#: the MLflow status of a trial's nested run, by Optuna state
RUN_STATUS = {"COMPLETE": "FINISHED", "PRUNED": "KILLED", "FAIL": "FAILED"}
TRIAL_METRICS = ("val_auc", "val_rmse", "n_selected_features", "fit_seconds")
TEST_METRICS = ("test_auc", "test_rmse", "test_logloss")
# study user attr: trials failed because their process died; they do not count toward n_trials
_INTERRUPTED = "interrupted_trials"


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


def objective_value(val_auc: float, n_features: float, tune: DictConfig | Mapping) -> float:
    """The score a trial maximises.

    Parameters
    ----------
    val_auc : float
        Validation AUC.
    n_features : float
        Number of features the model uses.
    tune : mapping
        ``objective`` ("val_auc" or "val_auc_budget"), ``feature_budget``, ``budget_penalty``.

    Returns
    -------
    float
        ``val_auc``, less ``budget_penalty`` per feature over ``feature_budget`` with
        ``objective: val_auc_budget``.
    """
    if tune["objective"] == "val_auc":
        return float(val_auc)
    if tune["objective"] == "val_auc_budget":
        if tune.get("feature_budget") is None:
            raise ValueError("tune.objective=val_auc_budget needs tune.feature_budget (a number of features)")
        excess = max(0.0, float(n_features) - float(tune["feature_budget"]))
        return float(val_auc) - float(tune["budget_penalty"]) * excess
    raise ValueError(f"tune.objective must be one of {OBJECTIVES}, got {tune['objective']!r}")


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
    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=int(tune.n_startup_trials))
    return optuna.load_study(study_name=tune.study_name, storage=storage, sampler=sampler,
                             pruner=_pruner(tune))


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


def _close_interrupted_runs(trials: list[FrozenTrial]) -> None:
    """End the MLflow runs a killed study left RUNNING (its trial runs and its parent)."""
    client = MlflowClient()
    for t in trials:
        for key, status in (("mlflow_run_id", "FAILED"), ("mlflow_parent_run_id", "KILLED")):
            run_id = t.user_attrs.get(key)
            try:
                if run_id and client.get_run(run_id).info.status == "RUNNING":
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
            trial.set_user_attr("val_auc", metrics["val_auc"])
            trial.set_user_attr("n_selected_features", metrics["n_selected_features"])
            state, history = "COMPLETE", out.history
            return value
        except optuna.TrialPruned:
            state = "PRUNED"
            raise
        except BaseException as err:   # Optuna logs it and marks the trial FAIL
            mlflow.set_tag("error", f"{type(err).__name__}: {err}"[:5000])
            if isinstance(err, KeyboardInterrupt):
                _add_interrupted(trial.study, [trial.number])
            raise
        finally:
            if state != "COMPLETE":
                history = pruning.history
                metrics = _partial_metrics(history, time.perf_counter() - t0)
            _end_trial_run(run_id, state, metrics, history)


def _partial_metrics(history: list[dict], seconds: float) -> dict[str, float]:
    """The metrics of a trial stopped before the end (pruned or failed): its last iteration."""
    last = history[-1] if history else {}
    return {"val_auc": last.get("val_auc"), "val_rmse": last.get("val_rmse"),
            "n_selected_features": last.get("n_features_used"), "fit_seconds": seconds}


def _end_trial_run(run_id: str, state: str, metrics: dict, history: list[dict]) -> None:
    try:
        tracking.log_metrics(run_id, metrics)
        tracking.log_curves(run_id, history, keys=("val_auc",))
        mlflow.set_tag("trial_state", state)
    finally:   # always end it, or the next trial's run would nest under this one
        mlflow.end_run(status=RUN_STATUS[state])


# ---------------------------------------------------------------------------- study and refit

def _best_trial(study: optuna.Study) -> FrozenTrial:
    if not study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        counts = {s.name: len(study.get_trials(deepcopy=False, states=(s,))) for s in FINISHED}
        raise RuntimeError(f"study {study.study_name!r}: no trial completed ({counts}); the errors are in "
                           f"the log and in the tags.error of the FAILED trial runs in MLflow")
    return study.best_trial


def refit(cfg: DictConfig, ds: Dataset, best_params: Mapping, tags: dict[str, str]) -> dict[str, float]:
    """Fit ``best_params`` on train (validation as eval set), evaluate once on test; log a nested
    ``refit`` run like a ``runners.run`` run; return its metrics."""
    best_cfg = cfg.copy()
    with open_dict(best_cfg):
        best_cfg.method.params.update(dict(best_params))
    with mlflow.start_run(nested=True, run_name="refit", tags=tags) as active:
        tracking.log_config(best_cfg, active.info.run_id)
        out = experiment.fit_evaluate(best_cfg, ds, experiment.method_params(best_cfg.method))
        experiment.log_outcome(out, ds, active.info.run_id)
    return out.metrics


def _tune(cfg: DictConfig, tags: dict[str, str], parent_id: str) -> dict[str, float]:
    cfg = _with_topk(cfg)
    tracking.log_config(cfg, parent_id)
    study = load_study(cfg.tune)
    _close_interrupted_runs(fail_interrupted_trials(study))
    ds = experiment.load_data(cfg)
    n_trials, remaining = int(cfg.tune.n_trials), int(cfg.tune.n_trials) - n_done(study)
    if remaining > 0:
        trial_tags = {**tags, "counts_for_topk": "false", "role": "trial", "study_name": study.study_name}
        study.optimize(Objective(cfg, ds, trial_tags, parent_id), n_trials=remaining,
                       timeout=cfg.tune.timeout, catch=(Exception,), callbacks=[_stop_at(n_trials)])
    else:
        log.info("study %s already has %d finished trials (tune.n_trials=%d)", study.study_name,
                 n_done(study), n_trials)
    best = _best_trial(study)
    summary = {"best_value": best.value, "best_val_auc": best.user_attrs.get("val_auc", best.value)}
    summary.update({f"n_trials_{s.name.lower()}": len(study.get_trials(deepcopy=False, states=(s,)))
                    for s in FINISHED})
    mlflow.log_params({f"best.{k}": v for k, v in best.params.items()})
    tracking.log_metrics(parent_id, summary)
    if not cfg.tune.refit:
        return summary
    metrics = refit(cfg, ds, best.params, {**tags, "role": "refit", "study_name": study.study_name})
    tracking.log_metrics(parent_id, {k: metrics[k] for k in TEST_METRICS if k in metrics})
    return {**metrics, **summary}


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
        On bad settings (search space, objective, pruner), before any run is logged.
    RuntimeError
        If no trial of the study completed.
    """
    if not cfg.tune.get("enabled") or "n_trials" not in cfg.tune:
        raise ValueError("runners.tune needs the Optuna settings: pass tune=optuna (conf/tune/optuna.yaml)")
    if not cfg.tune.storage:
        raise ValueError("tune.storage must be an SQLAlchemy URL (sqlite:///optuna.db, postgresql://...)")
    check_search_space(cfg.method, cfg.get("sampler"))
    objective_value(0.5, 0, cfg.tune)   # bad settings fail now, not in every trial
    _pruner(cfg.tune)
    tracking.configure(cfg.tracking)
    tags = run_tags(cfg)
    name = cfg.tune.study_name
    with mlflow.start_run(run_name=f"tune-{name}", tags={**tags, "counts_for_topk": "false",
                                                          "study_name": name, "role": "study"}) as parent:
        try:
            metrics = _tune(cfg, tags, parent.info.run_id)
        except BaseException as err:
            _end_parent(parent.info.run_id, "KILLED" if isinstance(err, KeyboardInterrupt) else "FAILED")
            raise
    if cfg.get("print_summary", True) and not _in_multirun():
        if cfg.tune.refit:
            print(format_table([{"method": cfg.method.name, "dataset": cfg.dataset.name, **metrics}]))
        print(f"study {name}: best {cfg.tune.objective} {metrics['best_value']:.4f}")
        print(ui_hint(cfg.tracking.uri))
    return metrics


@hydra.main(version_base="1.3", config_path="../conf", config_name="tune")
def main(cfg: DictConfig) -> float | None:
    return run(cfg).get("best_value")


if __name__ == "__main__":
    main()
