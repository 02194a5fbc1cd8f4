"""The Optuna side of :mod:`runners.tune`: the storage, the study, and its workers.

Several workers (parallel jobs of a multirun, or the same command run on several machines) may
share one study; they coordinate through the storage only:

* **the budget.**  Only COMPLETE and PRUNED trials count toward ``tune.n_trials`` (:data:`COUNTED`);
  a failed trial never uses up the budget.  A worker claims a trial when it asks for it
  (:func:`run_trials`): it counts the trials created before its own (trial numbers are the order
  of creation, under the storage's lock) that count or are RUNNING in a live worker, and runs its
  trial only if they are fewer than ``n_trials``; else it tells the trial FAIL, marked ``not_run``.
  Of any trials that count, the one claimed last saw all the others RUNNING or counted when it
  checked, so no more than ``n_trials`` ever count (a trial taken from the queue of
  ``enqueue_trial``, whose number predates its claim, counts the claimed trials of any number).
* **the shared records.**  Optuna's own ``set_user_attr`` overwrites; :func:`claim_attr` inserts a
  study attribute only if it is absent (atomically, in each kind of storage of
  :mod:`runners.tuning.storages`), so the first worker wins and the others read its value back: the
  study's MLflow parent run, the invocation numbers, and who refits (:func:`claim_refit`).
* **dead workers.**  A trial records its worker (``host:pid``); one left RUNNING by a process of
  this host that no longer exists is marked FAIL by the next invocation
  (:func:`fail_interrupted_trials`).  Workers of other hosts are assumed alive.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import warnings
from collections.abc import Callable
from datetime import datetime

import optuna
from omegaconf import DictConfig
from optuna.trial import FrozenTrial, TrialState

from runners.tracking import runs, stores
from runners.tuning import objective
from runners.tuning.storages import SharedStorage, open_storage

log = logging.getLogger(__name__)

#: trial states that count toward ``tune.n_trials``: a failed trial does not use up the budget
COUNTED = (TrialState.COMPLETE, TrialState.PRUNED)
#: the finished states, by which the study's trial counts are logged
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
#: trial user attrs: the worker running it (``host:pid``); why a trial asked for was not run; the
#: error of a failed trial (the first one is quoted when no trial completed)
WORKER, NOT_RUN, ERROR = "worker", "not_run", "error"
#: seconds a RUNNING trial that names no worker yet is taken as claimed: runners.tune records its
#: worker right after asking, so an older one was asked outside runners.tune, or its worker died
#: at once (the start is the asking machine's clock, so keep this well above any clock skew)
UNRECORDED_GRACE = 300.0


def pruner(tune: DictConfig) -> optuna.pruners.BasePruner:
    if tune.pruner is None:
        return optuna.pruners.NopPruner()
    if tune.pruner == "median":
        # no pruning before n_startup_trials trials have finished: the median needs a few curves
        return optuna.pruners.MedianPruner(n_startup_trials=int(tune.n_startup_trials),
                                           n_warmup_steps=int(tune.pruner_warmup_steps))
    raise ValueError(f"tune.pruner must be 'median' or null, got {tune.pruner!r}")


def load_study(tune: DictConfig, storage: SharedStorage | None = None,
               invocation: int = 1) -> optuna.Study:
    """Create the study of ``tune.study_name`` in ``tune.storage`` (or ``storage``), or load it.

    TPE is seeded with ``sampler_seed + invocation - 1``: the invocations of a study (reruns, and
    parallel workers, each numbered by :func:`claim_invocation`) never repeat each other's random
    start-up trials, and the first invocation of a fresh study is seeded with ``sampler_seed``.
    """
    storage = storage or open_storage(tune.storage, tune.get("storage_timeout", stores.DEFAULT_TIMEOUT))
    if tune.study_name not in {s.study_name for s in storage.get_all_studies()}:
        created = optuna.create_study(study_name=tune.study_name, storage=storage, direction="maximize",
                                      load_if_exists=True)   # (a parallel worker may create it first)
        # the objective's name, for optuna-dashboard and study.trials_dataframe() (not "Objective 0");
        # experimental in Optuna 4, stable in its API since 3.2
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            created.set_metric_names([str(tune.objective)])
    seed = None if tune.sampler_seed is None else int(tune.sampler_seed) + invocation - 1
    return optuna.load_study(study_name=tune.study_name, storage=storage, sampler=_sampler(tune, seed),
                             pruner=pruner(tune))


def _sampler(tune: DictConfig, seed: int | None) -> optuna.samplers.TPESampler:
    constraints_func = None
    if objective.constrained(tune) and not objective.trials_set_constraints():
        # Optuna 4 learns constraints only through constraints_func (deprecated in Optuna 5, where
        # the trial sets its own constraint, see runners.tuning.trial.record)
        constraints_func = _budget_constraints(tune)
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=int(tune.n_startup_trials),
                                      constraints_func=constraints_func)


def _budget_constraints(tune: DictConfig):
    """``constraints_func`` of Optuna 4's TPE: features over the budget (> 0: infeasible)."""
    def constraints(trial: FrozenTrial) -> tuple[float]:
        n = trial.user_attrs.get("n_selected_features")
        return (0.0 if n is None else float(n) - float(tune.feature_budget),)
    return constraints


def n_done(study: optuna.Study) -> int:
    """The trials that count toward ``tune.n_trials``: the COMPLETE and PRUNED ones (never a FAIL)."""
    return len(study.get_trials(deepcopy=False, states=COUNTED))


def counts(study: optuna.Study) -> dict[str, int]:
    """The study's trials by state (``complete``, ``pruned``, ``fail``) and those asked for but
    ``not_run`` because the budget was already claimed (not among the failures)."""
    trials = study.get_trials(deepcopy=False, states=FINISHED)
    skipped = sum(NOT_RUN in t.user_attrs for t in trials)
    out = {s.name.lower(): sum(t.state == s for t in trials) for s in FINISHED}
    out["fail"] -= skipped
    return {**out, "not_run": skipped}


# ------------------------------------------------------------------------------------ workers

def worker() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def maybe_alive(worker: str | None) -> bool:
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


def _running_alive(trial: FrozenTrial, now: datetime) -> bool:
    """Whether a RUNNING trial may still be run by a live worker (not this process)."""
    if trial.state != TrialState.RUNNING:
        return False
    if WORKER not in trial.user_attrs:   # asked a moment ago by a worker about to record itself
        start = trial.datetime_start
        return start is not None and (now - start).total_seconds() < UNRECORDED_GRACE
    return maybe_alive(trial.user_attrs[WORKER])


def running_elsewhere(study: optuna.Study) -> list[FrozenTrial]:
    """The RUNNING trials of live workers other than this process."""
    now = datetime.now()
    return [t for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
            if _running_alive(t, now)]


def fail_interrupted_trials(study: optuna.Study) -> list[FrozenTrial]:
    """Mark FAIL the RUNNING trials whose process died (a killed study); return
    them.  They do not count, as no FAIL does, so the study runs as many new ones."""
    now = datetime.now()
    dead = [t for t in study.get_trials(states=(TrialState.RUNNING,)) if not _running_alive(t, now)]
    for t in dead:
        try:
            study.tell(t.number, state=TrialState.FAIL, skip_if_finished=True)
        except optuna.exceptions.UpdateFinishedTrialError:
            pass   # another worker starting at the same time failed it between the check and the write
    if dead:
        log.warning("study %s: trials %s were left RUNNING by a dead process; marked FAIL, not counted",
                    study.study_name, [t.number for t in dead])
    return dead


# ------------------------------------------------------------------------ claims in the storage

def claim_attr(storage: SharedStorage, study: optuna.Study, key: str, value: object,
               system: bool = False) -> object:
    """Set the study's user (or ``system``) attribute ``key`` to ``value`` only if it is absent;
    return the value it has afterwards: ``value`` if this call set it, else the first setter's.

    The storage's atomic insert-if-absent (:meth:`runners.tuning.storages.SharedStorage.claim`)
    refuses all but the first worker, whatever their timing (``Study.set_user_attr`` overwrites
    instead).
    """
    study_id = storage.get_study_id_from_name(study.study_name)
    storage.claim(study_id, key, value, system)
    attrs = storage.get_study_system_attrs(study_id) if system else storage.get_study_user_attrs(study_id)
    return attrs[key]


def _invocations(attrs: dict) -> list[int]:
    return [int(k.split(":")[1]) for k in attrs if k.startswith("invocation:")]


def claim_invocation(storage: SharedStorage, study: optuna.Study, first: int) -> int:
    """This invocation's number, ``first`` or the next free one above every claimed number: unique
    among the study's invocations, parallel workers' included."""
    study_id = storage.get_study_id_from_name(study.study_name)
    k = max([first - 1, *_invocations(storage.get_study_system_attrs(study_id))]) + 1
    while claim_attr(storage, study, f"invocation:{k}", worker(), system=True) != worker():
        k += 1
    return k


def claim_refit(storage: SharedStorage, study: optuna.Study, state: str,
                invocation: int, sweep: str | None = None) -> str | None:
    """Claim the refit of the study in ``state`` (its counted trials and best trial); return None if
    this worker refits, else the worker that does.

    The refit of a state is left to its claimer while that worker lives, and to it for good by the
    invocations that had begun when it claimed (parallel workers of one study refit once) and by
    the jobs of its multirun, ``sweep`` (the Hydra sweep folder; a SLURM job that waited in the
    queue begins after the others have ended); a later invocation (a rerun) refits anew, as each
    invocation of a single worker does.
    """
    study_id = storage.get_study_id_from_name(study.study_name)
    attrs = storage.get_study_system_attrs(study_id)
    prefix = f"refit:{state}:"
    attempts = sorted(int(k[len(prefix):]) for k in attrs if k.startswith(prefix))
    if attempts:
        last = attrs[f"{prefix}{attempts[-1]}"]
        same_sweep = sweep is not None and last.get("sweep") == sweep
        if last["invocations"] >= invocation or same_sweep or maybe_alive(last["worker"]):
            return last["worker"]
    mine = {"worker": worker(), "invocations": max([invocation, *_invocations(attrs)]), "sweep": sweep}
    won = claim_attr(storage, study, f"{prefix}{attempts[-1] + 1 if attempts else 0}", mine, system=True)
    return None if won == mine else won["worker"]


# ------------------------------------------------------------------------------- the trial loop

def claimed(study: optuna.Study, mine: FrozenTrial | None = None) -> int:
    """The trials that count or are RUNNING in a live worker: all of them, or those claimed before
    ``mine`` (created before it, or any if ``mine`` was taken from the queue of ``enqueue_trial``,
    whose number predates its claim)."""
    now = datetime.now()
    everyone = mine is None or "fixed_params" in mine.system_attrs
    return sum(1 for t in study.get_trials(deepcopy=False)
               if (everyone or t.number < mine.number) and (mine is None or t.number != mine.number)
               and (t.state in COUNTED or _running_alive(t, now)))


def _drop(study: optuna.Study, trial: optuna.Trial, mine: FrozenTrial, n_trials: int) -> None:
    """Tell a trial asked for beyond the budget FAIL, marked ``not_run`` (Optuna cannot delete it);
    one taken from the queue goes back to it."""
    trial.set_user_attr(NOT_RUN, f"tune.n_trials={n_trials} were already claimed by other workers")
    study.tell(trial, state=TrialState.FAIL)
    if "fixed_params" in mine.system_attrs:
        study.enqueue_trial(mine.system_attrs["fixed_params"])


def run_trials(study: optuna.Study, objective: Callable[[optuna.Trial], float], n_trials: int,
               timeout: float | None = None,
               after_trial: Callable[[optuna.Study, FrozenTrial], None] | None = None) -> int:
    """Run trials until ``n_trials`` count in the study, whichever workers run them.

    Each trial is claimed when asked for (see the module's docstring); one whose claim fails is
    not run, and the worker stops once the trials counted or running elsewhere fill the budget.  A
    failed trial does not count, so its slot is run again, by its worker (the others may have
    stopped); a worker gives up after ``n_trials`` failed trials of its own, so a study whose every
    trial fails stops.  The trial is told on every exit path: a ``KeyboardInterrupt`` or
    ``SystemExit`` marks it FAIL and propagates.

    Parameters
    ----------
    study : optuna.Study
        The study, in a storage shared with the other workers.
    objective : callable
        ``objective(trial) -> float``; ``optuna.TrialPruned`` prunes the trial, any other
        ``Exception`` fails it (its message kept as the trial's user attr ``error``).
    n_trials : int
        The trials that must count (COMPLETE or PRUNED) in the study.
    timeout : float, optional
        Seconds after which this worker starts no more trials.
    after_trial : callable, optional
        Called as ``after_trial(study, frozen_trial)`` after each trial this worker ran.

    Returns
    -------
    int
        How many trials this worker ran (not counting those it asked for but did not run).
    """
    deadline = None if timeout is None else time.monotonic() + float(timeout)
    failures, ran = 0, 0
    while (failures < n_trials and claimed(study) < n_trials
           and (deadline is None or time.monotonic() < deadline)):
        trial = study.ask()
        try:
            trial.set_user_attr(WORKER, worker())
            mine = next(t for t in study.get_trials(deepcopy=False) if t.number == trial.number)
            if claimed(study, mine) >= n_trials:
                _drop(study, trial, mine, n_trials)
                log.info("study %s: tune.n_trials=%d already claimed by other workers; trial %d not run",
                         study.study_name, n_trials, trial.number)
                continue   # stops above unless a claimed trial failed meanwhile
        except BaseException:   # never leave a trial RUNNING: it would hold a slot of the budget
            study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
            raise
        frozen = _run_one(study, trial, objective)
        ran, failures = ran + 1, failures + (frozen.state == TrialState.FAIL)
        if after_trial is not None:
            after_trial(study, frozen)
    if failures >= n_trials:
        log.warning("study %s: this worker stops after %d failed trials (failed trials do not count "
                    "toward tune.n_trials; rerun to run the missing ones)", study.study_name, failures)
    return ran


def _run_one(study: optuna.Study, trial: optuna.Trial, objective) -> FrozenTrial:
    try:
        value = objective(trial)
    except optuna.TrialPruned as err:
        log.info("trial %d pruned: %s", trial.number, err)
        return study.tell(trial, state=TrialState.PRUNED)
    except Exception as err:   # recorded as FAIL, and the study goes on
        if runs.interrupted(err):   # an interrupt another error stands in for: this worker stops
            study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
            raise
        log.warning("trial %d failed with parameters %s: %r", trial.number, trial.params, err,
                    exc_info=True)
        if ERROR not in trial.user_attrs:
            trial.set_user_attr(ERROR, f"{type(err).__name__}: {err}"[:5000])
        return study.tell(trial, state=TrialState.FAIL)
    except BaseException:   # interrupted: not left RUNNING, which would hold a slot of the budget
        study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
        raise
    return study.tell(trial, value)
