"""Workers of one tuning study (runners.tuning.study): how a trial is claimed, then real processes on one
study (MLflow store in tmp_path) and a worker killed mid-trial, each on the two storages that need no
server: SQLite and a journal file (``storage``).  The study ends with exactly ``tune.n_trials``
counted trials, one parent run and one counted refit."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path

import optuna
import pytest
from harness_utils import (
    four_workers_on_one_study,
    race,
    stored_study,
    study_runs,
    tiny_study_cfg,
    tune_argv,
    wait_for,
)
from mlflow.tracking import MlflowClient
from optuna.trial import TrialState

from runners import tune
from runners.tuning import study as study_module

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.usefixtures("restore_mlflow")

#: the Optuna storage of a test's study, in its tmp_path: SQLite (the default) or a journal file
STORAGES = {"sqlite": "sqlite:///{root}/optuna.db", "journal": "journal:///{root}/optuna.log"}


@pytest.fixture(params=sorted(STORAGES))
def storage(request, tmp_path) -> list[str]:
    """The override of ``tune.storage`` for each storage kind (quoted: a URL may hold an ``=``)."""
    return [f"tune.storage='{STORAGES[request.param].format(root=tmp_path)}'"]


@pytest.mark.slow  # 2-3 s: the default suite stays under 5 minutes (CI runs the slow tests too)
def test_trials_running_in_a_live_worker_are_claimed(tmp_path, storage):
    """A trial RUNNING in another live process holds its slot of the budget: this worker runs only the
    rest, and leaves the refit to the worker still running a trial."""
    cfg = tiny_study_cfg(tmp_path, "tune.n_trials=3", *storage)
    other = study_module.load_study(cfg.tune).ask()
    other.set_user_attr("worker", f"{socket.gethostname()}:{os.getppid()}")   # alive, not this process
    metrics = tune.run(cfg)
    study = stored_study(cfg)
    assert [t.state for t in study.trials] == [TrialState.RUNNING, TrialState.COMPLETE, TrialState.COMPLETE]
    assert "test_auc" not in metrics and metrics["best_value"] == pytest.approx(study.best_value)
    assert "refit" not in study_runs(cfg.tracking.uri)   # the other worker refits once its trial ends
    study.tell(other.number, state=TrialState.FAIL)   # ... but it failed: a rerun runs its slot again
    metrics = tune.run(cfg)
    study = stored_study(cfg)
    assert study_module.n_done(study) == 3 and len(study.trials) == 4 and "test_auc" in metrics
    assert len(study_runs(cfg.tracking.uri)["refit"]) == 1


def test_a_running_trial_naming_no_worker_is_left_alone_for_a_grace_period(tmp_path, monkeypatch, storage):
    """A worker records itself in its trial just after asking for it: meanwhile a worker starting up
    must not take the trial for a dead one's; one asked for outside runners.tune is, once old."""
    study = study_module.load_study(tiny_study_cfg(tmp_path, *storage).tune)
    trial = study.ask()
    assert study_module.fail_interrupted_trials(study) == [] and study_module.claimed(study) == 1
    monkeypatch.setattr(study_module, "UNRECORDED_GRACE", 0.0)
    assert [t.number for t in study_module.fail_interrupted_trials(study)] == [trial.number]
    assert study.trials[0].state == TrialState.FAIL and study_module.claimed(study) == 0


def test_a_queued_trial_counts_every_claimed_trial(tmp_path, storage):
    """A trial of enqueue_trial got its number when queued, before its claim: the trials claimed since,
    of higher numbers, hold their slots against it too; a new trial counts those numbered before it."""
    study = study_module.load_study(tiny_study_cfg(tmp_path, *storage).tune)
    study.enqueue_trial({"mu": 1e-5, "learning_rate": 0.3, "min_node_fraction": 0.005})   # trial 0, WAITING
    alive = {"worker": f"{socket.gethostname()}:{os.getppid()}"}
    study.add_trial(optuna.trial.create_trial(state=TrialState.RUNNING, user_attrs=alive))   # trial 1
    queued = study.ask()
    frozen = {t.number: t for t in study.trials}
    assert queued.number == 0 and queued.params == {} and "fixed_params" in frozen[0].system_attrs
    assert study_module.claimed(study, frozen[0]) == 1   # trial 1, numbered after it
    assert study_module.claimed(study, frozen[1]) == 1   # a new trial: those before it (0, running)
    study.tell(0, state=TrialState.FAIL)
    assert study_module.claimed(study, frozen[1]) == 0 and study_module.claimed(study) == 1


def test_claim_attr_keeps_the_first_value(tmp_path, storage):
    cfg = tiny_study_cfg(tmp_path, *storage)
    opened = study_module.open_storage(cfg.tune.storage)
    study = study_module.load_study(cfg.tune, opened)
    assert study_module.claim_attr(opened, study, "k", "first") == "first"
    assert study_module.claim_attr(opened, study, "k", "second") == "first"
    assert study.user_attrs["k"] == "first"
    assert study_module.claim_attr(opened, study, "k", {"a": 1}, system=True) == {"a": 1}
    assert study_module.claim_invocation(opened, study, first=2) == 2
    assert study_module.claim_invocation(opened, study, first=2) == 3


def test_only_trials_of_dead_local_processes_count_as_interrupted():
    dead = subprocess.Popen(["true"])
    dead.wait()
    host = socket.gethostname()
    assert study_module.maybe_alive("another-host:123")   # a worker of a shared study elsewhere
    assert study_module.maybe_alive(f"{host}:{os.getppid()}")
    assert not study_module.maybe_alive(f"{host}:{dead.pid}")
    assert not study_module.maybe_alive(f"{host}:{os.getpid()}")   # an earlier study of this process
    assert not study_module.maybe_alive(None)   # a trial asked for outside runners.tune


@pytest.mark.slow  # four processes for ~20 s; CI runs it with -m slow
def test_four_workers_on_one_study_run_exactly_n_trials(tmp_path, storage):
    four_workers_on_one_study(tmp_path, storage)


@pytest.mark.slow
@pytest.mark.parametrize("url", ["sqlite:///{root}/race{rep}.db", "journal:///{root}/race{rep}.log"],
                         ids=["sqlite", "journal"])
def test_claims_hold_in_a_race_of_instant_trials(tmp_path, url):
    """Six processes claiming trials that take no time (the harshest race), some failing (their slot
    is run again) and some pruned (they count): exactly n_trials count, on each of four studies."""
    ran = race([(url.format(root=tmp_path, rep=rep), "race") for rep in range(4)], n_trials=12)
    assert sum(any(r) for r in zip(*ran)) >= 2   # several workers took part in a race


@pytest.mark.slow
def test_the_readmes_joblib_multirun_on_one_study(tmp_path, storage):
    """``python -m runners.tune -m hydra/launcher=joblib seed=0,0,0,0``: four jobs of one study."""
    argv = tune_argv(tmp_path, ["hydra/launcher=joblib", "hydra.launcher.n_jobs=4", "seed=0,0,0,0",
                                "tune.n_trials=8", "tune.n_startup_trials=2", "tune.pruner=null",
                                "n_threads=1", *storage])
    argv.insert(argv.index("runners.tune") + 1, "-m")
    res = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    cfg = tiny_study_cfg(tmp_path, *storage)
    study = stored_study(cfg)
    assert study_module.n_done(study) == 8 and not study.get_trials(states=(TrialState.RUNNING,))
    roles = study_runs(cfg.tracking.uri)
    assert len(roles["study"]) == 1 and len(roles["refit"]) == 1
    assert roles["refit"][0].data.tags["counts_for_topk"] == "true"
    assert res.stdout.count("| gisette_like |") == 1           # the comparison table: one refit


@pytest.mark.slow
def test_a_worker_killed_mid_trial_is_failed_closed_and_replaced_on_rerun(tmp_path, storage):
    """SIGKILL during a trial leaves it RUNNING with its MLflow run and the study's; the rerun marks it
    FAIL, closes its run FAILED, does not count it and runs the trials still missing."""
    # trial 0 of the first process runs for minutes (no early stopping): it is killed in the middle
    slow = ["tune.n_trials=3", "method.params.n_estimators=100000",
            "method.params.early_stopping_rounds=null", *storage]
    proc = subprocess.Popen(tune_argv(tmp_path, slow), cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    cfg = tiny_study_cfg(tmp_path, "tune.n_trials=3", *storage)
    worker = f"{socket.gethostname()}:{proc.pid}"

    def running_trial():
        if proc.poll() is not None:
            raise AssertionError(f"the worker ended before it was killed:\n{proc.stderr.read()[-3000:]}")
        try:
            trials = stored_study(cfg).trials
        except KeyError:   # the study does not exist yet
            return None
        return next((t for t in trials if t.state == TrialState.RUNNING
                     and t.user_attrs.get("worker") == worker and "mlflow_run_id" in t.user_attrs), None)
    try:
        killed = wait_for(running_trial, "the first worker to run a trial", timeout=300)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        proc.stderr.close()
    client = MlflowClient(tracking_uri=cfg.tracking.uri)
    assert client.get_run(killed.user_attrs["mlflow_run_id"]).info.status == "RUNNING"
    metrics = tune.run(cfg)
    study = stored_study(cfg)
    assert study.trials[killed.number].state == TrialState.FAIL
    assert study_module.n_done(study) == 3 and len(study.trials) == 4 and metrics["n_trials_fail"] == 1
    dead = client.get_run(killed.user_attrs["mlflow_run_id"])
    assert dead.info.status == "FAILED" and dead.data.tags["trial_state"] == "FAIL"
    roles = study_runs(cfg.tracking.uri)
    (parent,) = roles["study"]   # the killed worker's parent run, resumed and now closed
    assert parent.info.run_id == killed.user_attrs["mlflow_parent_run_id"]
    assert parent.info.status == "FINISHED"
    assert len(roles["trial"]) == 4 and len(roles["refit"]) == 1 and "test_auc" in metrics

