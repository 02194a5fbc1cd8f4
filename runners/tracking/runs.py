"""MLflow plumbing of the harness: the store, the experiment, flattened configs, and the life cycle
of runs.

The library never imports MLflow; everything MLflow lives in :mod:`runners.tracking`, and what a
run records is written through :class:`runners.tracking.run_log.RunLog`.

No run is left RUNNING: :func:`managed_run` ends a run and the nested runs a failure left active
(FINISHED, KILLED on an interrupt, FAILED on an error); :func:`sigterm_as_interrupt` turns SIGTERM
(``kill``, a SLURM time limit) into the interrupt :class:`Terminated`; and since nothing survives
SIGKILL, :func:`configure` marks FAILED the runs of this host's dead processes (every run carries
its process in the tag ``worker``, :func:`worker_id`).
"""

from __future__ import annotations

import _thread
import contextlib
import logging
import signal
import subprocess
import sys
import threading
import types
from collections.abc import Iterator, Mapping
from pathlib import Path

import mlflow
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig

from runners.tracking import stores

# the URI check lives with the other checks of the stores, the dead-process housekeeping in
# runners.tracking.workers; runners import them from here too
from runners.tracking.stores import ACCEPTED_URIS, DB_SCHEMES, check_uri  # noqa: F401
from runners.tracking.workers import fail_dead_runs, proc_stat, process_alive, worker_id  # noqa: F401

log = logging.getLogger(__name__)

#: runs that are not a fitted model of their own (their ``role`` tag): a tuning study and its trials
#: (the study's refit is one), a selection path's parent (its nested runs, one per budget, are), a
#: sweep's summary
NOT_A_RESULT = {"study", "trial", "path", "sweep_summary"}


def artifact_uri(location: str | None) -> str | None:
    """An absolute file URI for a local folder (MLflow stores it verbatim), else the value as is."""
    if not location or "://" in location:
        return location
    return Path(location).expanduser().resolve().as_uri()


def init_store(uri: str, experiment: str, artifact_location: str | None = None,
               timeout: int | None = None, max_retries: int | None = None) -> str:
    """Create (or migrate) the tracking store and the experiment; return the experiment id.

    A fresh SQLite store creates its schema on first use, and parallel first users race for it
    ("table _alembic_tmp_runs already exists"); so do two jobs creating the same experiment.
    Calling this once before parallel jobs start (the multirun callback does) avoids both.  The
    store is first checked and reached within ``timeout`` seconds, MLflow's HTTP requests being
    bounded by ``timeout`` and ``max_retries`` from then on (:func:`runners.tracking.stores.reach_tracking`).

    Raises
    ------
    ValueError
        If ``uri`` is not a tracking store (:func:`check_uri`), its SQLite file is unusable or its
        database driver is not installed.
    runners.tracking.stores.StoreUnreachable
        If its server does not answer within ``timeout`` seconds.
    """
    stores.reach_tracking(uri, timeout, max_retries, experiment)
    if uri.startswith("sqlite:///"):
        Path(uri[len("sqlite:///"):]).expanduser().parent.mkdir(parents=True, exist_ok=True)
    client = MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(experiment)
    if found is not None:
        return found.experiment_id
    try:
        return client.create_experiment(experiment, artifact_location=artifact_uri(artifact_location))
    except mlflow.exceptions.MlflowException:
        found = client.get_experiment_by_name(experiment)   # created meanwhile by another process
        if found is None:
            raise
        return found.experiment_id


def configure(tracking: DictConfig | Mapping) -> str:
    """Point MLflow at ``tracking.uri`` and select ``tracking.experiment``; return its id.  Checks
    ``tracking.parent_run_id`` and marks FAILED the runs left RUNNING by dead processes of this
    host (:func:`fail_dead_runs`).

    Raises
    ------
    ValueError
        If ``tracking.uri`` is not a tracking store (:func:`check_uri`), before MLflow is touched;
        if ``tracking.parent_run_id`` is no live run of the experiment.
    runners.tracking.stores.StoreUnreachable
        If the store's server does not answer within ``tracking.timeout`` seconds.
    """
    exp_id = init_store(tracking.get("uri"), tracking["experiment"], tracking.get("artifact_location"),
                        tracking.get("timeout"), tracking.get("max_retries"))
    mlflow.set_tracking_uri(tracking["uri"])
    mlflow.set_experiment(experiment_id=exp_id)
    stores.check_parent_run(tracking.get("parent_run_id"), exp_id, MlflowClient(), tracking["uri"])
    fail_dead_runs(exp_id)
    return exp_id


def user_tags(tracking: DictConfig | Mapping) -> dict[str, str]:
    """``tracking.tags``: extra tags of every run of a runner (as strings); ``ValueError`` naming the
    key unless it is a mapping of single values (:func:`runners.tracking.stores.check_tags`)."""
    return stores.check_tags(tracking.get("tags"))


def parent_tag(tracking: DictConfig | Mapping) -> dict[str, str]:
    """The tag nesting a runner's top-level run under ``tracking.parent_run_id`` in the MLflow UI
    (empty when it is null); nested runs get their parent from MLflow itself."""
    parent = tracking.get("parent_run_id")
    return {"mlflow.parentRunId": str(parent)} if parent else {}


# ------------------------------------------------------------------------------- run life cycle

class Terminated(KeyboardInterrupt):
    """SIGTERM received (``kill``, a SLURM time limit).  A ``KeyboardInterrupt`` so that Optuna
    fails the running trial and re-raises it (it catches ``Exception`` and ``KeyboardInterrupt``),
    ``except Exception`` does not swallow it, and runs end KILLED (:func:`run_status`)."""


#: modules in whose code a Terminated is held back (retried every 20 ms): raised there it left a
#: store transaction open, so that closing the runs failed with "database is locked", or a run
#: created but never made active (and so never ended); raised in numba's own Python code (a
#: kernel call's argument typing, called from its C dispatcher) it became a SystemError there
HELD_IN = ("sqlalchemy.", "sqlite3", "alembic.", "psycopg2", "pymysql", "mlflow.store.",
           "mlflow.tracking.fluent", "optuna.storages.", "numba.")


def _in_held_code(frame: types.FrameType | None) -> bool:
    while frame is not None:
        if frame.f_globals.get("__name__", "").startswith(HELD_IN):
            return True
        frame = frame.f_back
    return False


class _SigtermState:
    """One :func:`sigterm_as_interrupt` block: its SIGTERM handler and its unraisable hook."""

    def __init__(self, previous_hook):
        self.previous_hook = previous_hook
        self.received = False    # a SIGTERM arrived
        self.redeliver = False   # the next call retries it: not a second SIGTERM
        self.deferred = 0        # depth of uninterrupted() blocks
        self.pending = False     # a Terminated held back until they end
        self.active = True

    def handler(self, signum: int, frame: types.FrameType | None) -> None:
        if self.received and not self.redeliver:
            log.warning("SIGTERM received again while the runs are being closed: ignored")
            return
        self.received, self.redeliver = True, False
        if self.deferred:
            self.pending = True   # raised when the uninterrupted() block ends
        elif _in_held_code(frame):
            self._retry()
        else:
            raise Terminated("SIGTERM received")

    def unraisable(self, info) -> None:
        if not isinstance(info.exc_value, Terminated):
            self.previous_hook(info)
            return
        # raised in a finalizer or a garbage-collector callback (seen in SQLAlchemy's), whose
        # exceptions Python drops: the process would go on as if no SIGTERM had come
        self._retry()

    def _retry(self) -> None:
        """Run the handler again in the main thread in 20 ms, from a timer thread."""
        self.redeliver = True
        timer = threading.Timer(0.02, lambda: self.active and _thread.interrupt_main(signal.SIGTERM))
        timer.daemon = True
        timer.start()


#: the state of the innermost active sigterm_as_interrupt block (uninterrupted() defers its signal)
_STATE: _SigtermState | None = None


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Raise :class:`Terminated` on SIGTERM inside the block; exit with status 143 afterwards.

    It unwinds the harness like Ctrl-C, every run being ended KILLED on the way; leaving the block
    it becomes ``SystemExit(143)`` (128 + SIGTERM, as for a process the signal killed).  It is held
    back in database code (:data:`HELD_IN`) and raised again if Python dropped it (in a finalizer);
    a second SIGTERM while the runs are closed is ignored (SIGKILL remains, and
    :func:`fail_dead_runs`).  The previous handler and ``sys.unraisablehook`` are restored.  A no-op
    outside the main thread.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    global _STATE
    state, outer = _SigtermState(sys.unraisablehook), _STATE
    previous = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, state.handler)
    sys.unraisablehook, _STATE = state.unraisable, state
    try:
        yield
    except BaseException as err:
        if not state.received:
            raise
        with contextlib.suppress(mlflow.exceptions.MlflowException):
            end_runs("KILLED")   # any run an interrupted step left active
        # also when closing the runs raised another error (its traceback is logged)
        log.warning("terminated by SIGTERM: the open MLflow runs were ended KILLED; exiting with status 143",
                    exc_info=not isinstance(err, Terminated))
        raise SystemExit(128 + signal.SIGTERM) from err
    finally:
        state.active, _STATE = False, outer
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
        sys.unraisablehook = state.previous_hook


@contextlib.contextmanager
def uninterrupted() -> Iterator[None]:
    """Hold the :class:`Terminated` of a SIGTERM arriving inside the block back until its end: in
    ``mlflow.start_run``, between the run's creation and its activation, it left a RUNNING run
    that nothing ended.  A no-op outside :func:`sigterm_as_interrupt`."""
    state = _STATE
    if state is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    state.deferred += 1
    try:
        yield
    finally:
        state.deferred -= 1
        if not state.deferred and state.pending:
            state.pending = False
            raise Terminated("SIGTERM received")


def interrupted(err: BaseException) -> bool:
    """Is ``err`` an interrupt, or an error raised in its place?

    An error raised after a SIGTERM inside :func:`sigterm_as_interrupt`, or caused (directly or
    while handling it) by a ``KeyboardInterrupt``, counts as the interrupt: library code that
    catches the :class:`Terminated` raises its own error in its place -- a store or a thread pool
    wrapping it, numba's dispatcher turning one raised during a compiled call into a
    ``SystemError`` caused by it."""
    if _STATE is not None and _STATE.received:
        return True
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, KeyboardInterrupt):
            return True
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return False


def run_status(err: BaseException | None) -> str:
    """A run's end status: FINISHED without ``err``, KILLED on an interrupt (:func:`interrupted`),
    FAILED on an error: an interrupt that library code wrapped must not turn a killed run into a
    failed one."""
    if err is None:
        return "FINISHED"
    return "KILLED" if interrupted(err) else "FAILED"


def end_runs(status: str, down_to: str | None = None) -> None:
    """End the active runs with ``status``, innermost first (a failure may leave a nested run
    active), down to the run ``down_to`` included, or to the outermost one.  An outer run that is
    not ``down_to`` (when that one was ended already) belongs to a caller: it is left alone."""
    with uninterrupted():   # a SIGTERM meanwhile is raised once they are all ended
        while (active := mlflow.active_run()) is not None:
            outermost = "mlflow.parentRunId" not in active.data.tags
            if down_to is not None and outermost and active.info.run_id != down_to:
                break
            mlflow.end_run(status=status)
            if active.info.run_id == down_to or outermost:
                break


@contextlib.contextmanager
def managed_run(**kwargs) -> Iterator[mlflow.ActiveRun]:
    """``mlflow.start_run(**kwargs)`` ending the run, and the nested runs still active, on every
    exit path: FINISHED, KILLED on an interrupt, FAILED on an error (:func:`run_status`); the
    exception is re-raised.  (``with mlflow.start_run()`` ends a run FAILED on Ctrl-C, and only
    the innermost run.)"""
    active = None
    try:
        with uninterrupted():   # not between the run's creation and its activation
            active = mlflow.start_run(**kwargs)
        yield active
    except BaseException as err:
        if active is not None:
            end_runs(run_status(err), down_to=active.info.run_id)
        raise
    end_runs("FINISHED", down_to=active.info.run_id)


def flatten(cfg: Mapping, prefix: str = "") -> dict[str, str]:
    """Dotted keys of a nested config: ``{"method.params.mu": "0.01", ...}`` (lists kept whole)."""
    out: dict[str, str] = {}
    for key, value in cfg.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        else:
            out[name] = str(value)
    return out


def command_line(module: str) -> str:
    """This process's command line as ``python -m <module> <its arguments>``, shell-quoted."""
    import shlex

    return " ".join(["python", "-m", module, *(shlex.quote(a) for a in sys.argv[1:])])


def made_by(module: str) -> str:
    """The provenance sentence of a committed result this process writes: ``Made by `python -m
    <module> <its arguments>` at commit `<sha>` on <date>.``"""
    import datetime

    today = datetime.date.today().isoformat()
    return f"Made by `{command_line(module)}` at commit `{git_commit()}` on {today}."


def git_commit() -> str:
    """The commit of the checkout the harness runs from ("unknown" outside a git checkout)."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"
