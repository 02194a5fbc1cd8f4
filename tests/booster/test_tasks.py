"""Coarse kernels on Python threads: every task once, errors raised, results independent of threads."""

from __future__ import annotations

import multiprocessing

import numba
import numpy as np
import pytest
from numba import njit

from gbfs import GBFSClassifier
from gbfs.booster.binning import BinMapper
from gbfs.booster.kernels import tasks
from gbfs.booster.kernels.tasks import run_tasks
from gbfs.estimators._params import numba_threads


@njit(nogil=True)
def _visit(lo, hi, seen, ranges):
    for i in range(lo, hi):
        seen[i] += 1
        ranges[i] = lo


@njit(nogil=True)
def _fail_at(lo, hi, bad):
    for i in range(lo, hi):
        if i == bad:
            raise ValueError("task failed")


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n_tasks", [1, 7, 1000])
def test_every_task_runs_once(threads, n_tasks):
    seen, ranges = np.zeros(n_tasks, np.int64), np.full(n_tasks, -1, np.int64)
    with numba_threads(min(threads, numba.config.NUMBA_NUM_THREADS)):
        run_tasks(_visit, n_tasks, seen, ranges)   # default cost: every task worth a thread
    assert np.all(seen == 1)
    n_ranges = len(np.unique(ranges))
    used = min(threads, numba.config.NUMBA_NUM_THREADS, n_tasks)
    assert n_ranges == (1 if used == 1 else min(n_tasks, used * tasks.RANGES_PER_THREAD))


def test_small_work_runs_in_one_range():
    seen, ranges = np.zeros(50, np.int64), np.full(50, -1, np.int64)
    run_tasks(_visit, 50, seen, ranges, task_cost=1)
    assert np.all(seen == 1) and np.all(ranges == 0)


@pytest.mark.parametrize("threads", [1, 2])
def test_an_error_in_a_range_is_raised(threads):
    with numba_threads(min(threads, numba.config.NUMBA_NUM_THREADS)):
        with pytest.raises(ValueError, match="task failed"):
            run_tasks(_fail_at, 100, 63)


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs two numba threads")
def test_binning_and_prediction_do_not_depend_on_threads():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20000, 40))
    X[rng.random(X.shape) < 0.1] = 0.0
    X[rng.random(X.shape) < 0.02] = np.nan
    y = (np.nan_to_num(X[:, 0]) + rng.standard_normal(20000) > 0).astype(int)
    out = []
    for threads in (1, 2):
        with numba_threads(threads):
            mapper = BinMapper().fit(X)
            binned = mapper.transform(X)
        model = GBFSClassifier(n_estimators=5, n_threads=threads, random_state=0).fit(X, y)
        out.append((mapper.bin_edges_, binned, model.decision_function(X)))
    for a, b in zip(*out):
        np.testing.assert_array_equal(a, b)


def _bin_in_child(X, queue):
    queue.put(BinMapper().fit(X).transform(X).sum())


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs two numba threads")
@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="no fork here")
def test_a_forked_child_runs_tasks_after_its_parent_did():
    X = np.random.default_rng(1).standard_normal((20000, 40))
    with numba_threads(2):
        expected = BinMapper().fit(X).transform(X).sum()   # the parent's pool now has threads
        ctx = multiprocessing.get_context("fork")
        queue = ctx.Queue()
        child = ctx.Process(target=_bin_in_child, args=(X, queue))
        child.start()
        got = queue.get(timeout=120)
        child.join(timeout=60)
    assert got == expected and child.exitcode == 0
