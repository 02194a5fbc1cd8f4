"""Helpers for servers the harness starts on 127.0.0.1 (``mlflow server``, ``mlflow models serve``)."""

from __future__ import annotations

import socket
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
