"""Which process ran an MLflow run, and the runs left RUNNING by processes that died.

Nothing survives SIGKILL (the OOM killer, SLURM after its grace period), so every run carries its
process in the tag ``worker`` (:func:`worker_id`), and :func:`fail_dead_runs` (called by
:func:`runners.tracking.runs.configure` before every runner's runs) marks FAILED the RUNNING runs of
this host whose process no longer exists.
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path

import mlflow
from mlflow.tracking import MlflowClient

log = logging.getLogger(__name__)


def worker_id() -> str:
    """This process as the ``worker`` tag of its runs: ``host:pid:start``, ``start`` being its
    start time in clock ticks since boot (Linux; it tells a reused pid apart), or ``host:pid``
    where ``/proc`` is not available."""
    pid = os.getpid()
    start = proc_stat(pid)
    return f"{socket.gethostname()}:{pid}" + ("" if start is None else f":{start[1]}")


def proc_stat(pid: int) -> tuple[str, str] | None:
    """``(state, start time)`` of process ``pid`` from ``/proc/<pid>/stat``, or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()   # the command name, in parentheses, may hold spaces
    return fields[0], fields[19]                # fields 3 (state) and 22 (starttime) of proc(5)


def _parse_worker(worker: str) -> tuple[str, int, str | None] | None:
    parts = worker.split(":")
    if len(parts) >= 3 and parts[-1].isdigit() and parts[-2].isdigit():
        return ":".join(parts[:-2]), int(parts[-2]), parts[-1]
    if len(parts) >= 2 and parts[-1].isdigit():
        return ":".join(parts[:-1]), int(parts[-1]), None
    return None


def process_alive(worker: str | None) -> bool:
    """Whether the process ``worker`` (``host:pid`` or ``host:pid:start``, :func:`worker_id`) may
    still be running.

    False only when it certainly is not: on this host, its pid is gone, a zombie, or a process
    started at another time.  Another host's process, or an unparsable worker, counts as alive
    (machines may share a store).  Without a start time (``host:pid``, no ``/proc``) a reused pid
    passes for alive.  Hosts are told apart by name: containers sharing a host name but not a
    PID namespace must not share a store.
    """
    parsed = _parse_worker(worker or "")
    if parsed is None or parsed[0] != socket.gethostname():
        return True
    _, pid, start = parsed
    try:
        os.kill(pid, 0)   # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:
        pass   # it exists, under another user
    now = proc_stat(pid)
    if now is None:
        return True
    return now[0] not in ("Z", "X") and (start is None or now[1] == start)


def fail_dead_runs(exp_id: str) -> list[str]:
    """Mark FAILED the RUNNING runs of experiment ``exp_id`` whose process (tag ``worker``) ran on
    this host and died (:func:`process_alive`), with the tag ``terminated_reason``; return their ids.

    A SIGKILLed process (the OOM killer, SLURM after its grace period) ends none of its runs.
    Runs of other hosts, and runs without the tag, are never touched.
    """
    host = socket.gethostname()
    client = MlflowClient()
    like = f"{host}:%".replace("'", "")   # a host name holds no quote; the filter must not either
    query = f"attributes.status = 'RUNNING' and tags.worker LIKE '{like}'"
    try:
        found = client.search_runs([exp_id], filter_string=query, max_results=1000)
        dead = [r for r in found if not process_alive(r.data.tags.get("worker"))]
        for r in dead:
            pid = _parse_worker(r.data.tags["worker"])[1]
            client.set_tag(r.info.run_id, "terminated_reason", f"process {pid} on {host} died")
            client.set_terminated(r.info.run_id, "FAILED")
    except mlflow.exceptions.MlflowException as err:   # housekeeping: never the reason a run fails
        log.warning("could not look for MLflow runs left RUNNING by dead processes: %s", err)
        return []
    if dead:
        log.warning("marked FAILED %d MLflow run(s) left RUNNING by dead processes of %s: %s", len(dead),
                    host, ", ".join(r.info.run_id for r in dead))
    return [r.info.run_id for r in dead]
