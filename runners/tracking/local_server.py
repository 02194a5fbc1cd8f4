"""Helpers for servers the harness starts on 127.0.0.1 (``mlflow server``, ``mlflow models serve``)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import urllib.request


def free_port() -> int:
    """A port nothing listens on now (the OS's choice; another process could take it before the
    server binds it, so callers that start servers retry)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(url: str, path: str = "/health", body: bytes | None = None) -> bool:
    """Whether ``url + path`` answers 200 (and, with ``body``, exactly that body, stripped)."""
    try:
        with urllib.request.urlopen(url + path, timeout=5) as response:
            return response.status == 200 and (body is None or response.read().strip() == body)
    except OSError:   # refused while it starts, or a timeout under load
        return False


def stop(proc: subprocess.Popen, grace: float = 20.0) -> None:
    """Stop a server started in its own session (``start_new_session=True``) with its workers: its
    whole process group gets SIGTERM, and SIGKILL if it has not ended after ``grace`` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
            break
