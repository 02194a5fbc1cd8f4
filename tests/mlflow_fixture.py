"""A real ``mlflow server`` on 127.0.0.1 for the tests of remote tracking (the ``mlflow_server``
fixture of ``conftest.py``).

The server takes from a few seconds to about a minute to start (it imports MLflow and migrates a
fresh SQLite store; 50 s were seen on a loaded machine), so readiness is polled on ``/health``
with a generous bound, and a server that exits early fails the test at once with its output.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runners.tracking.local_server import answers, free_port

#: seconds to wait for ``/health``; only reached when the server hangs (a dead one fails at once)
START_BOUND = 180.0
#: seconds for the server to stop after SIGTERM before it is killed
STOP_BOUND = 30.0


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (its web workers too), SIGKILL if it lingers."""
    for sig, bound in ((signal.SIGTERM, STOP_BOUND), (signal.SIGKILL, STOP_BOUND)):
        if proc.poll() is not None:
            break
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)   # its own group: start_new_session=True
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=bound)
    with contextlib.suppress(ProcessLookupError):   # workers that outlived the main process
        os.killpg(proc.pid, signal.SIGKILL)


def _start(root: Path, attempt: int) -> tuple[subprocess.Popen, str, Path]:
    port, log = free_port(), root / f"mlflow-server-{attempt}.log"
    with open(log, "wb") as out:   # a file, not a pipe: nobody reads a pipe while the test runs
        proc = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
             "--backend-store-uri", f"sqlite:///{root}/server.db",
             "--artifacts-destination", str(root / "server-artifacts"), "--workers", "1"],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            # no job runner: its seven consumer processes slow the start and the tests need none
            env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
    return proc, f"http://127.0.0.1:{port}", log


@contextlib.contextmanager
def mlflow_server(root: Path, start_bound: float = START_BOUND) -> Iterator[str]:
    """Run ``mlflow server`` (SQLite backend and proxied artifacts under ``root``) and yield its
    URL once ``/health`` answers; stop it on leaving.

    Fails the test if the server exits before it is ready (with the end of its output) or is not
    ready within ``start_bound`` seconds.  A port taken between :func:`free_port` and the bind
    is retried on another port, twice.
    """
    for attempt in range(3):
        proc, url, log = _start(root, attempt)
        try:
            deadline = time.monotonic() + start_bound
            while not answers(url, body=b"OK"):
                if proc.poll() is not None:
                    break
                if time.monotonic() > deadline:
                    pytest.fail(f"mlflow server not ready after {start_bound:.0f} s:\n"
                                f"{log.read_text(errors='replace')[-3000:]}")
                time.sleep(0.2)   # the poll interval, not a wait for the server
            else:
                yield url
                return
        finally:
            _stop(proc)
        output = log.read_text(errors="replace")
        if "address already in use" not in output.lower():
            break
    pytest.fail(f"mlflow server exited with status {proc.returncode} before it was ready:\n{output[-3000:]}")
