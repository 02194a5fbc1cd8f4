"""No MLflow run is left RUNNING: SIGTERM and SIGKILL against real ``python -m runners.run`` and
``runners.tune`` processes on a temporary SQLite store (the study also in an Optuna journal file), the
run life cycle of runners.tracking.runs, and the runs of dead processes marked FAILED at start-up.

The processes take several seconds to import MLflow and numba, more on a loaded machine: every wait
polls the store with a generous bound, and their fits never end by themselves (ENDLESS), so a
signal always lands while the run is open.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import mlflow
import optuna
import pytest
from harness_utils import TINY
from mlflow.tracking import MlflowClient

from runners.tracking import runs as tracking
from runners.tuning.storages import open_storage

REPO = Path(__file__).resolve().parents[2]
#: a fit of ten million trees without early stopping: ended only by the signal (~1 ms per tree)
ENDLESS = ["method.params.n_estimators=10000000", "method.params.early_stopping_rounds=null"]
#: seconds for a process to start and reach a state; only reached when something is wrong
BOUND = 300.0
#: 128 + SIGTERM: what runners.tracking.runs.sigterm_as_interrupt exits with
EXIT_SIGTERM = 143

pytestmark = pytest.mark.usefixtures("restore_mlflow")


class Harness:
    """A ``python -m <module>`` process of the harness on the store of ``root``."""

    def __init__(self, root: Path, module: str, overrides: list[str]):
        self.root, self.uri = root, f"sqlite:///{root}/mlflow.db"
        # the store exists before the process starts (as the multirun callback makes it), so that
        # polling it from here never races the process's schema creation
        self.exp_id = tracking.init_store(self.uri, "gbfs")
        self.client = MlflowClient(tracking_uri=self.uri)
        self.log = root / f"{module}.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", module, *TINY, *overrides, "n_threads=1"],
                                         # a crash prints every thread's Python stack to the log
                                         cwd=REPO, env={**os.environ, "GBFS_ROOT": str(root),
                                                        "PYTHONFAULTHANDLER": "1"},
                                         stdout=out, stderr=subprocess.STDOUT)

    def runs(self, filter_string: str = ""):
        return self.client.search_runs([self.exp_id], filter_string=filter_string,
                                       order_by=["attributes.start_time ASC"])

    def wait_for_run(self, filter_string: str):
        """The first run matching ``filter_string`` once it exists (polled)."""
        deadline = time.monotonic() + BOUND
        while not (found := self.runs(filter_string)):
            if self.proc.poll() is not None:
                pytest.fail(f"the process exited ({self.proc.returncode}) before a run matched "
                            f"{filter_string!r}:\n{self.output()}")
            if time.monotonic() > deadline:
                pytest.fail(f"no run matched {filter_string!r} after {BOUND:.0f} s:\n{self.output()}")
            time.sleep(0.1)   # the poll interval
        return found[0]

    def signal(self, sig: int) -> int:
        """Send ``sig``; return the exit status (a negative number: killed by that signal)."""
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=BOUND)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the process did not end {BOUND:.0f} s after signal {sig}:\n{self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def harness(tmp_path):
    started: list[Harness] = []

    def start(module: str, *overrides: str) -> Harness:
        started.append(Harness(tmp_path, module, list(overrides)))
        return started[-1]
    yield start
    for h in started:
        h.close()


# --------------------------------------------------------------------------- real processes

@pytest.mark.slow
def test_sigterm_ends_the_run_killed_and_exits_143(harness):
    h = harness("runners.run", "method=agbm", *ENDLESS)
    run = h.wait_for_run("attributes.status = 'RUNNING'")
    assert h.signal(signal.SIGTERM) == EXIT_SIGTERM, h.output()
    (ended,) = h.runs()
    assert ended.info.run_id == run.info.run_id and ended.info.status == "KILLED"
    assert "terminated by SIGTERM" in h.output()


@pytest.mark.slow
def test_sigkill_leaves_the_run_running_until_the_next_start_marks_it_failed(harness, caplog):
    h = harness("runners.run", "method=agbm", *ENDLESS)
    run = h.wait_for_run("attributes.status = 'RUNNING'")
    host, pid = socket.gethostname(), h.proc.pid
    assert run.data.tags["worker"].startswith(f"{host}:{pid}:")       # host:pid:start time
    assert h.signal(signal.SIGKILL) == -signal.SIGKILL
    assert h.client.get_run(run.info.run_id).info.status == "RUNNING"  # nothing ran on SIGKILL
    # runs of live processes are left alone: another host's (it may share the store), this one's
    other = h.client.create_run(h.exp_id, tags={"worker": "another-host:1:1"}).info.run_id
    alive = h.client.create_run(h.exp_id, tags={"worker": tracking.worker_id()}).info.run_id
    tracking.configure({"uri": h.uri, "experiment": "gbfs"})           # what the next run does first
    dead = h.client.get_run(run.info.run_id)
    assert dead.info.status == "FAILED" and dead.info.end_time is not None
    assert dead.data.tags["terminated_reason"] == f"process {pid} on {host} died"
    warned = [r.levelname for r in caplog.records if "left RUNNING by dead processes" in r.message]
    assert warned == ["WARNING"]
    assert {h.client.get_run(r).info.status for r in (other, alive)} == {"RUNNING"}


def _trial_states(url: str):
    """The states of the trials of the one study in the storage ``url`` (``tune.storage``)."""
    storage = open_storage(url)
    (summary,) = storage.get_all_studies()
    return [t.state for t in optuna.load_study(study_name=summary.study_name, storage=storage).trials]


@pytest.mark.slow
@pytest.mark.parametrize("storage", ["sqlite:///{root}/optuna.db", "journal:///{root}/optuna.log"],
                         ids=["sqlite", "journal"])
def test_sigterm_during_a_trial_fails_it_and_ends_every_run(harness, tmp_path, storage):
    url = storage.format(root=tmp_path)
    h = harness("runners.tune", "method=agbm", "tune.n_trials=2", f"tune.storage='{url}'", *ENDLESS)
    h.wait_for_run("tags.role = 'trial' and attributes.status = 'RUNNING'")
    code = h.signal(signal.SIGTERM)
    runs = {r.data.tags["role"]: r.info.status for r in h.runs()}
    assert code == EXIT_SIGTERM and set(runs) == {"study", "trial"}, (code, runs, h.output())
    assert {runs["study"], runs["trial"]} <= {"KILLED", "FAILED"}, runs
    assert _trial_states(url) == [optuna.trial.TrialState.FAIL]   # Optuna closed it, not RUNNING


@pytest.mark.slow
def test_sigterm_during_the_refit_ends_every_run(harness, tmp_path):
    # one short trial, then a refit that never ends: only the refit measures the selection's
    # stability, here over a hundred thousand resamples
    h = harness("runners.tune", "method=agbm", "tune.n_trials=1", "stability.enabled=true",
                "stability.n_resamples=100000")
    h.wait_for_run("tags.role = 'refit' and attributes.status = 'RUNNING'")
    code = h.signal(signal.SIGTERM)
    runs = {r.data.tags["role"]: r.info.status for r in h.runs()}
    states = _trial_states(f"sqlite:///{tmp_path}/optuna.db")
    assert code == EXIT_SIGTERM and set(runs) == {"study", "trial", "refit"}, (code, runs, h.output())
    assert runs["trial"] == "FINISHED" and {runs["study"], runs["refit"]} <= {"KILLED", "FAILED"}, runs
    assert states == [optuna.trial.TrialState.COMPLETE], states


# ----------------------------------------------------------------------- in this process

def test_sigterm_raises_terminated_inside_and_exits_143_after():
    before, seen = signal.getsignal(signal.SIGTERM), []
    with pytest.raises(SystemExit) as exit_info:
        with tracking.sigterm_as_interrupt():
            try:
                signal.raise_signal(signal.SIGTERM)   # runs the handler before it returns
                pytest.fail("SIGTERM raised nothing")
            except tracking.Terminated as err:
                seen.append(err)
                signal.raise_signal(signal.SIGTERM)   # a second one while closing runs: ignored
                raise
    assert exit_info.value.code == EXIT_SIGTERM and isinstance(seen[0], KeyboardInterrupt)
    assert signal.getsignal(signal.SIGTERM) is before   # restored
    with tracking.sigterm_as_interrupt():                 # no signal: nothing happens
        pass
    assert signal.getsignal(signal.SIGTERM) is before


class _Finalized:
    def __del__(self):
        signal.raise_signal(signal.SIGTERM)   # the handler raises here, where Python drops exceptions


def test_a_terminated_dropped_by_a_finalizer_is_raised_again():
    """SQLAlchemy's garbage-collector callbacks once swallowed the Terminated and the process ran on."""
    hook = sys.unraisablehook
    with pytest.raises(SystemExit) as exit_info:
        with tracking.sigterm_as_interrupt():
            _Finalized()                         # collected at once: Terminated raised and dropped
            deadline = time.monotonic() + BOUND
            while time.monotonic() < deadline:
                time.sleep(0.01)                 # raised again here, from the main thread
            pytest.fail("the dropped Terminated was not raised again")
    assert exit_info.value.code == EXIT_SIGTERM and isinstance(exit_info.value.__cause__, tracking.Terminated)
    assert sys.unraisablehook is hook


def test_a_sigterm_in_numba_code_is_raised_once_out_of_it():
    """Raised inside numba's own Python code (a kernel call's argument typing, run from its C
    dispatcher) the Terminated became a SystemError there; it is held back and raised after."""
    ns = {"__name__": "numba.core.typing.fake", "signal": signal}
    exec("def typing():\n    signal.raise_signal(signal.SIGTERM)\n    return 'typed'", ns)
    returned = []
    with pytest.raises(SystemExit) as exit_info:
        with tracking.sigterm_as_interrupt():
            returned.append(ns["typing"]())     # not raised in there
            deadline = time.monotonic() + BOUND
            while time.monotonic() < deadline:
                time.sleep(0.01)                 # raised here, out of numba's code
            pytest.fail("the held Terminated was not raised")
    assert returned == ["typed"]
    assert exit_info.value.code == EXIT_SIGTERM and isinstance(exit_info.value.__cause__, tracking.Terminated)


def test_sigterm_handler_is_only_installed_in_the_main_thread():
    handlers = []

    def body():
        with tracking.sigterm_as_interrupt():
            handlers.append(signal.getsignal(signal.SIGTERM))
    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert handlers == [signal.getsignal(signal.SIGTERM)]


def test_optuna_fails_the_trial_on_terminated_and_reraises_it():
    study = optuna.create_study()

    def objective(trial):
        raise tracking.Terminated("SIGTERM received")
    with pytest.raises(tracking.Terminated):
        study.optimize(objective, n_trials=3, catch=(Exception,))   # not swallowed as an Exception
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.FAIL]


def _wrapped_interrupt() -> SystemError:
    """What numba's dispatcher raises when a KeyboardInterrupt (a signal handler's) is raised during
    a compiled call: a SystemError caused by it."""
    try:
        raise tracking.Terminated("SIGTERM received")
    except KeyboardInterrupt as err:
        try:
            raise SystemError("CPUDispatcher(<function f>) returned a result with an exception set") from err
        except SystemError as wrapped:
            return wrapped


def test_an_error_caused_by_an_interrupt_counts_as_the_interrupt():
    wrapped = _wrapped_interrupt()
    assert tracking.interrupted(wrapped) and tracking.run_status(wrapped) == "KILLED"
    try:   # raised while handling one (its context, not its cause)
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise OSError("closing the store")  # noqa: B904 - as library code does
    except OSError as err:
        assert tracking.interrupted(err)
    assert not tracking.interrupted(ValueError("bad")) and tracking.run_status(ValueError("bad")) == "FAILED"


def test_a_wrapped_interrupt_stops_the_study_and_an_error_does_not():
    """A trial interrupted inside a compiled call fails and the worker stops, as on the interrupt
    itself (it ran the next trial, and a cancelled Ray job did not end); an ordinary error fails
    its trial and the study goes on."""
    from runners.tuning import study as study_module

    def objective_raising(error, calls):
        def objective(trial):
            calls.append(trial.number)
            raise error()
        return objective

    for error, ran in ((_wrapped_interrupt, [0]), (lambda: ValueError("bad"), [0, 1, 2])):
        study, calls = optuna.create_study(), []
        objective = objective_raising(error, calls)
        if ran == [0]:
            with pytest.raises(SystemError):
                study_module.run_trials(study, objective, n_trials=3)
        else:
            assert study_module.run_trials(study, objective, n_trials=3) == 3
        assert calls == ran
        assert [t.state for t in study.trials] == [optuna.trial.TrialState.FAIL] * len(ran)


@pytest.mark.parametrize("error, status", [(tracking.Terminated("SIGTERM"), "KILLED"),
                                           (KeyboardInterrupt(), "KILLED"), (ValueError("bad"), "FAILED")])
def test_managed_run_ends_nested_runs_down_to_its_own(tmp_path, error, status):
    tracking.configure({"uri": f"sqlite:///{tmp_path}/mlflow.db", "experiment": "gbfs"})
    client = MlflowClient()
    with mlflow.start_run() as caller:                  # an outer run that is not the managed one's
        with pytest.raises(type(error)):
            with tracking.managed_run(nested=True) as parent:
                child = mlflow.start_run(nested=True)   # left active by the failure
                raise error
        assert mlflow.active_run().info.run_id == caller.info.run_id
    statuses = [client.get_run(r.info.run_id).info.status for r in (child, parent, caller)]
    assert statuses == [status, status, "FINISHED"]
    with tracking.managed_run() as ok:
        pass
    assert client.get_run(ok.info.run_id).info.status == "FINISHED" and mlflow.active_run() is None


def test_sigterm_inside_start_run_still_ends_the_new_run(tmp_path, monkeypatch):
    """The signal lands after MLflow created the run but before the run is active (seen under load,
    a SIGTERM sent as soon as the run appeared in the store): the run is ended all the same."""
    tracking.configure({"uri": f"sqlite:///{tmp_path}/mlflow.db", "experiment": "gbfs"})
    create_run, created = MlflowClient.create_run, []

    def create_then_sigterm(self, *args, **kwargs):
        created.append(create_run(self, *args, **kwargs))
        signal.raise_signal(signal.SIGTERM)
        return created[-1]
    monkeypatch.setattr(MlflowClient, "create_run", create_then_sigterm)
    with pytest.raises(SystemExit):
        with tracking.sigterm_as_interrupt(), tracking.managed_run():
            pytest.fail("the block ran after SIGTERM")
    assert MlflowClient().get_run(created[0].info.run_id).info.status == "KILLED"
    assert mlflow.active_run() is None


def test_end_runs_ends_every_active_run_down_to_the_outermost(tmp_path):
    tracking.configure({"uri": f"sqlite:///{tmp_path}/mlflow.db", "experiment": "gbfs"})
    runs = [mlflow.start_run(), mlflow.start_run(nested=True), mlflow.start_run(nested=True)]
    tracking.end_runs("KILLED")
    assert mlflow.active_run() is None
    assert {MlflowClient().get_run(r.info.run_id).info.status for r in runs} == {"KILLED"}


def test_process_alive_only_says_no_for_dead_processes_of_this_host():
    host, me = socket.gethostname(), tracking.worker_id()
    assert tracking.process_alive(me) and me.startswith(f"{host}:{os.getpid()}")
    assert tracking.process_alive(f"{host}:{os.getpid()}")             # runners.tune's host:pid form
    assert tracking.process_alive("another-host:1")                    # cannot tell: left alone
    assert tracking.process_alive("no worker") and tracking.process_alive(None)
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    assert not tracking.process_alive(f"{host}:{done.pid}")           # gone
    if Path("/proc/self/stat").exists():
        start = me.rpartition(":")[2]
        # this pid, started at another time: the dead process whose pid was reused
        assert not tracking.process_alive(f"{host}:{os.getpid()}:{int(start) + 1}")
        zombie = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        zombie.kill()
        deadline = time.monotonic() + BOUND
        while tracking.proc_stat(zombie.pid)[0] != "Z" and time.monotonic() < deadline:
            time.sleep(0.05)   # killed but not reaped yet: a zombie is dead
        assert not tracking.process_alive(f"{host}:{zombie.pid}")
        zombie.wait()
