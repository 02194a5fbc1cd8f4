"""One reproduction of a name at a time (``python -m runners.reproduce``).

Two reproductions of one ``reproduce.name`` in one MLflow experiment share their parent run (or
race to create two) and the Optuna studies of their units, whose names derive from it.  Optuna's
workers of a study refit it once, so one process refitted each study and the other, finding no
refit of its own, failed with "no FINISHED run was logged" although the first had logged it.
Sharing the work correctly would make every unit wait for the other process's refit; what a
careful user wants instead is to be told at once, before any run, that the reproduction is already
running, by which process, and how to run a separate one.  So:

* :func:`hold` takes an exclusive ``flock`` for the reproduction while it runs, and refuses when
  another process holds it.  The kernel releases the lock when its process ends, even SIGKILLed,
  so a killed reproduction never blocks the rerun that resumes it.  The lock file lies next to an
  SQLite store (the processes that share the store share the folder) or, for a server, in the
  machine's temporary folder.
* :func:`check_not_running` refuses to resume a parent run that is RUNNING in a live process: the
  guard for processes on other machines sharing a tracking server, which share no lock file.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

from mlflow.entities import Run
from omegaconf import DictConfig

from runners.tracking import stores, workers


def lock_path(cfg: DictConfig) -> Path:
    """The lock file of the reproduction ``cfg.reproduce.name`` in ``cfg.tracking``'s experiment."""
    uri = str(cfg.tracking.uri)
    folder = Path(tempfile.gettempdir())
    if uri.startswith("sqlite:///"):
        db = Path(uri[len("sqlite:///"):].split("?")[0]).expanduser().absolute()
        folder, uri = db.parent, f"sqlite:///{db}"   # one key whatever the folder it is run from
    name = str(cfg.reproduce.name)
    key = hashlib.sha1(f"{uri}\n{cfg.tracking.experiment}\n{name}".encode()).hexdigest()[:12]
    return folder / f".reproduce-{re.sub(r'[^A-Za-z0-9_.-]', '_', name)[:40]}-{key}.lock"


@contextlib.contextmanager
def hold(cfg: DictConfig) -> Iterator[Path]:
    """Hold the reproduction's lock inside the block (:func:`lock_path`).

    Raises
    ------
    RuntimeError
        At once, naming the process that holds it, when another reproduction of the same name in
        the same experiment runs.
    """
    path = lock_path(cfg)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except PermissionError:   # another user's lock file: it can still be locked, not written
        fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
            raise RuntimeError(
                f"reproduction {str(cfg.reproduce.name)!r} (MLflow experiment {cfg.tracking.experiment!r} "
                f"at {stores.shown(str(cfg.tracking.uri))}) is already running in process {holder} (lock "
                f"{path}). Two processes of one reproduction would share its studies and each miss the "
                f"refits the other logs. Wait for it to end (the same command then resumes it), or run "
                f"a separate reproduction with reproduce.name=<another name>") from None
        with contextlib.suppress(OSError):   # who holds it, for the message above (not if read-only)
            os.ftruncate(fd, 0)
            os.pwrite(fd, workers.worker_id().encode(), 0)
        yield path
    finally:
        os.close(fd)   # releases the lock


def check_not_running(parent: Run, uri: str) -> None:
    """Raise ``RuntimeError`` if the reproduction's parent run ``parent`` is RUNNING in a live process
    other than this one (:func:`runners.tracking.workers.process_alive`; a process of another host counts
    as alive, so the message says how to release a run whose process is gone)."""
    worker = parent.data.tags.get("worker")
    if parent.info.status != "RUNNING" or not worker or worker == workers.worker_id():
        return
    if not workers.process_alive(worker):
        return
    run_id, name = parent.info.run_id, parent.data.tags.get("reproduction_name", "?")
    raise RuntimeError(
        f"reproduction {name!r} is already running: its MLflow run {run_id} is RUNNING in process "
        f"{worker}. Wait for it to end (the same command then resumes it), or run a separate "
        f"reproduction with reproduce.name=<another name>. If that process is gone (another machine's), "
        f"end its run first: python -c \"from mlflow import MlflowClient; "
        f"MlflowClient('{stores.shown(uri)}').set_terminated('{run_id}', 'KILLED')\"")
