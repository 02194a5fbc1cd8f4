"""Coarse parallel work on Python threads: a serial, GIL-free kernel over ranges of tasks.

Binning and prediction are one call over thousands of independent columns or rows.  Written as
numba ``prange`` loops, each parallel region costs about a second of compilation in a fresh
environment; the same work as a serial ``nogil`` kernel, called on a few Python threads for ranges
of its tasks, compiles in a fraction of that and runs as fast.  Kernels called once per tree node
stay ``prange`` loops: handing work to a Python thread costs tens of microseconds.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numba

#: ranges of tasks per thread: enough for the threads to even out columns of unequal cost
RANGES_PER_THREAD = 8
#: least work (in units of the caller's ``task_cost``) worth a thread of its own
MIN_WORK_PER_THREAD = 1 << 16

_pools: dict[int, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()  # fits run from several user threads make one pool per size, not two
# a forked child inherits the pools but not their threads: it makes its own (else its work would wait
# forever on threads that do not exist in it)
if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_pools.clear)


def _pool(threads: int) -> ThreadPoolExecutor:
    """A pool of ``threads`` worker threads, made once per size (starting threads costs more than
    the ranges of a small call)."""
    with _pools_lock:
        if threads not in _pools:
            _pools[threads] = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="gbfs")
        return _pools[threads]


def run_tasks(kernel: Callable, n_tasks: int, *args, task_cost: int = MIN_WORK_PER_THREAD,
              even: bool = False) -> None:
    """``kernel(lo, hi, *args)`` over ranges ``[lo, hi)`` covering ``range(n_tasks)``, on numba's
    current number of threads (:func:`numba.get_num_threads`, which the estimators' ``n_threads``
    sets), at most one per :data:`MIN_WORK_PER_THREAD` of work (``task_cost`` per task).  ``even``:
    the tasks cost alike (rows of a prediction), one range per thread; otherwise
    :data:`RANGES_PER_THREAD` ranges per thread even out tasks of unequal cost (columns).

    ``kernel`` must be a ``nogil`` numba function whose tasks write disjoint outputs, so the result
    does not depend on the threads or on the order the ranges run in.  An exception in any range is
    raised here.
    """
    work = n_tasks * max(int(task_cost), 1)
    threads = min(numba.get_num_threads(), n_tasks, max(1, work // MIN_WORK_PER_THREAD))
    if threads <= 1:
        kernel(0, n_tasks, *args)
        return
    n_ranges = threads if even else min(n_tasks, threads * RANGES_PER_THREAD)
    bounds = [n_tasks * k // n_ranges for k in range(n_ranges + 1)]
    pool = _pool(threads)
    futures = [pool.submit(kernel, bounds[k], bounds[k + 1], *args) for k in range(n_ranges)]
    for future in futures:
        future.result()


__all__ = ["MIN_WORK_PER_THREAD", "RANGES_PER_THREAD", "run_tasks"]
