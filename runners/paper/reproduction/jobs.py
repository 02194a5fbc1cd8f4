"""A reproduction's independent parts side by side: ``reproduce.jobs`` worker processes.

A reproduction's datasets, the MVS paper's tables and the GBFS and utility papers' parts share no
unit, so they can run at the same time.  With ``reproduce.jobs`` above 1 the reproduction (which
holds the lock and the parent run) first gives each of them, as one :class:`Item`, to a worker: the
same command (``python -m runners.reproduce`` with the command line's overrides) restricted to that
item by ``reproduce.papers`` and ``reproduce.datasets``, attached to the parent run through the
environment (:data:`PARENT_ENV`) instead of taking the lock or a parent run of its own.  At most
``jobs`` workers run at once, each with ``cores // jobs`` threads (``n_threads``, unless the command
line sets it), the items in the configured order.  The parent then makes its tables as a
sequential reproduction would, finding every unit FINISHED: what a worker ran is reused exactly as
a resumed reproduction reuses it, and an item a worker did not finish is run there.

A worker's output lines are printed prefixed with its item.  A failing worker stops the scheduling
of further items and is reported once the running ones end; Ctrl-C or SIGTERM of the reproduction
sends SIGTERM to every worker (each then ends its runs KILLED, as a killed reproduction does) and
waits for them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from runners.tracking.runs import command_line
from runners.tracking.stores import DEFAULT_TIMEOUT
from runners.tuning.storages import open_storage

#: the environment variable that makes ``python -m runners.reproduce`` a worker of the reproduction
#: whose MLflow parent run id it holds
PARENT_ENV = "GBFS_REPRODUCTION_PARENT"
#: the reproduction's own command line, which a worker's results record as what made them
COMMAND_ENV = "GBFS_REPRODUCTION_COMMAND"
#: overrides a worker sets itself: the command line's are dropped for it
OWN_KEYS = ("reproduce.papers", "reproduce.datasets", "reproduce.jobs", "hydra.run.dir")
#: seconds a worker has to end its runs after SIGTERM before it is killed
GRACE = 60.0


@dataclass(frozen=True)
class Item:
    """One independent part of a reproduction: ``name`` (a dataset, ``mvs`` or a part) and the
    overrides that restrict the command to it."""

    name: str
    overrides: tuple[str, ...]


def items(datasets: Sequence[str], mvs: bool, parts: Sequence[str]) -> list[Item]:
    """The items of a reproduction: each dataset of the GT-GBM paper's tables (on disk), the MVS
    paper's tables when made, each part of :mod:`runners.paper.reproduction.parts`."""
    out = [Item(d, ("reproduce.papers=[gtgbm]", f"reproduce.datasets=[{d}]")) for d in datasets]
    if mvs:
        out.append(Item("mvs", ("reproduce.papers=[mvs]", "reproduce.datasets=[mvs]")))
    out += [Item(p, (f"reproduce.papers=[{p}]",)) for p in parts]
    return out


def command() -> str:
    """The reproduction's command line as it was given (in a worker: the reproduction's, not the
    worker's own)."""
    return os.environ.get(COMMAND_ENV) or command_line("runners.reproduce")


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def check_jobs(jobs) -> int:
    """``reproduce.jobs`` as a positive integer, or ``ValueError`` naming the key."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"reproduce.jobs must be a positive integer (parts run at once), got {jobs!r}")
    return jobs


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


@dataclass
class Workers:
    """Runs a reproduction's items in worker processes of the command ``module`` given ``overrides``
    (the command line's)."""

    overrides: Sequence[str]
    module: str = "runners.reproduce"

    def argv(self, item: Item, jobs: int, log_dir: Path) -> list[str]:
        """The worker's command line: the command line's overrides but those it sets itself, the
        item's, one job, its own Hydra folder and its share of the cores as ``n_threads``."""
        own = [o for o in self.overrides if _key(o) not in OWN_KEYS]
        threads = [] if any(_key(o) == "n_threads" for o in own) else [f"n_threads={max(1, cores() // jobs)}"]
        return [sys.executable, "-m", self.module, *own, *item.overrides, "reproduce.jobs=1", *threads,
                f"hydra.run.dir={log_dir / item.name}"]

    def run_all(self, cfg: DictConfig, todo: Sequence[Item], jobs: int, parent_id: str) -> bool:
        """Run the items ``todo`` of the reproduction ``cfg`` (its parent run ``parent_id``) in
        ``jobs`` workers at once, when there are two or more; return whether workers ran them."""
        if len(todo) < 2:
            return False
        if cfg.tune.get("enabled"):   # created once here: workers on a fresh storage race to create it
            open_storage(cfg.tune.storage, cfg.tune.get("storage_timeout", DEFAULT_TIMEOUT))
        log_dir = Path(HydraConfig.get().runtime.output_dir) / "jobs" if HydraConfig.initialized() \
            else Path(tempfile.mkdtemp(prefix="reproduce-jobs-"))
        self.run(todo, min(jobs, len(todo)), parent_id, log_dir)
        return True

    def run(self, todo: Sequence[Item], jobs: int, parent_id: str, log_dir: Path) -> None:
        """Run ``todo`` in at most ``jobs`` workers at once, each attached to the parent run
        ``parent_id``.

        Raises
        ------
        RuntimeError
            Naming every item whose worker failed, once the running ones have ended.
        """
        # no progress bars in a worker (their redraws would interleave with the other workers' lines);
        # unbuffered, so its lines come as they are printed
        env = {**os.environ, PARENT_ENV: parent_id, COMMAND_ENV: command(), "TQDM_DISABLE": "1",
               "PYTHONUNBUFFERED": "1"}
        procs: dict[str, subprocess.Popen] = {}
        stop = threading.Event()
        lock = threading.Lock()

        def one(item: Item) -> int | None:
            with lock:
                if stop.is_set():
                    return None
                print(f"[{item.name}] worker started", flush=True)
                proc = subprocess.Popen(self.argv(item, jobs, log_dir), env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, bufsize=1)
                procs[item.name] = proc
            for line in proc.stdout:
                print(f"[{item.name}] {line}", end="", flush=True)
            rc = proc.wait()
            if rc:
                stop.set()
            return rc

        pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="reproduce-job")
        futures = [pool.submit(one, item) for item in todo]
        try:
            codes = [f.result() for f in futures]
        except BaseException:
            with lock:
                stop.set()
                for proc in procs.values():
                    if proc.poll() is None:
                        proc.send_signal(signal.SIGTERM)
            for proc in procs.values():
                try:
                    proc.wait(timeout=GRACE)
                except subprocess.TimeoutExpired:
                    proc.kill()
            raise
        finally:
            pool.shutdown(wait=True)
        failed = [f"{item.name} (exit status {rc})" for item, rc in zip(todo, codes) if rc]
        if failed:
            raise RuntimeError(f"reproduction workers failed: {', '.join(failed)}; their output is above "
                               f"(each line prefixed with its item). The same command resumes: what "
                               f"finished is reused")
