"""Multitask stand-in: related tasks sharing some relevant features (GT-GBM paper, Section 3)."""

from __future__ import annotations

import numpy as np

from ...booster.kernels.portable import exp2, log2
from .base import (
    SyntheticData,
    check_int,
    check_positive,
    check_seed,
    child,
    draw_rows,
    finish,
    n_rows,
    streams,
)

TASK_TYPES = ("binary", "regression")
N_CALIBRATION = 20_000
# Figure 1's shapes x, 2^x and log2(1 + x) on U(0, 1), with their exact means; all three have
# variance within 3 % of 1/12, so multiplying by sqrt(12) gives (nearly) unit-variance terms.
# (gbfs.booster.kernels.portable's 2^x and log2: the same values on every CPU)
_SHAPES = (lambda x: x, exp2, lambda x: log2(1.0 + x))
_SHAPE_MEANS = (0.5, 1.0 / np.log(2.0), 2.0 - 1.0 / np.log(2.0))


def _task_signal(X_rel: np.ndarray, coef: np.ndarray, shape_ids: np.ndarray) -> np.ndarray:
    """``sum_k coef_k sqrt(12) (f_k(x_k) - E f_k)`` over a task's relevant columns."""
    out = np.zeros(len(X_rel))
    for k, s in enumerate(shape_ids):
        out += coef[k] * np.sqrt(12.0) * (_SHAPES[s](X_rel[:, k].astype(np.float64)) - _SHAPE_MEANS[s])
    return out


def _split_features(rng: np.random.Generator, n_features: int, n_tasks: int, n_shared: int,
                    n_specific: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """Shared columns and each task's own columns, all disjoint, at random positions."""
    perm = rng.permutation(n_features)
    shared = np.sort(perm[:n_shared])
    starts = n_shared + n_specific * np.arange(n_tasks)
    specific = [np.sort(perm[s:s + n_specific]) for s in starts]
    return shared, specific


def _check(n_tasks: int, n_features: int, n_shared: int, n_specific: int, task_type: str) -> None:
    check_int("n_tasks", n_tasks, 1)
    check_int("n_features", n_features, 1)
    check_int("n_shared", n_shared, 0)
    check_int("n_specific", n_specific, 0)
    if task_type not in TASK_TYPES:
        raise ValueError(f"task_type must be one of {TASK_TYPES}, got {task_type!r}")
    if n_shared + n_specific == 0:
        raise ValueError("n_shared and n_specific must not both be 0: every task needs a relevant feature")
    needed = n_shared + n_tasks * n_specific
    if needed > n_features:
        raise ValueError(f"n_features must be >= n_shared + n_tasks * n_specific = {needed}, "
                         f"got {n_features}")


def multitask(scale: float = 1.0, n_tasks: int = 4, n_features: int = 200, n_shared: int = 5,
              n_specific: int = 3, task_type: str = "binary", random_state: int = 0) -> SyntheticData:
    """Related tasks whose labels share ``n_shared`` features, plus ``n_specific`` of their own.

    The setting of the GT-GBM paper's multitask A-GBM (Section 3, Eq. 2): the group penalty
    ``mu_G`` should find the shared features, the task penalty ``mu_t`` each task's own ones.
    Features are i.i.d. U(0, 1); each relevant feature enters a task's signal through one of
    Figure 1's shapes (x, 2^x, log2(1 + x)). A shared feature has the same shape and sign in
    every task and a task-perturbed magnitude (the tasks are related, not identical).
    ``y = signal + 0.5 * |coef| * eps`` for regression, thresholded at the task's median
    for binary. Rows are interleaved by task (row ``i`` belongs to task ``i % n_tasks``).

    Parameters
    ----------
    scale : float
        Multiplies the rows per task: 2000 train + 500 test at 1 (at least 50 each).
    n_tasks : int
    n_features : int
        Total columns, at least ``n_shared + n_tasks * n_specific``.
    n_shared : int
        Relevant features common to all tasks.
    n_specific : int
        Relevant features of each task alone (disjoint across tasks and from the shared ones).
    task_type : {"binary", "regression"}
    random_state : int

    Returns
    -------
    SyntheticData
        With ``task_train``/``task_test`` (int64 task ids), ``relevant`` (the union) and
        ``relevant_per_task[t]`` (shared and task ``t``'s own columns, sorted).
    """
    scale, seed = check_positive("scale", scale), check_seed(random_state)
    _check(n_tasks, n_features, n_shared, n_specific, task_type)
    rng, train_seq, test_seq = streams(seed)
    shared, specific = _split_features(rng, n_features, n_tasks, n_shared, n_specific)
    shared_shape = rng.integers(0, 3, n_shared)
    shared_coef = rng.uniform(1.0, 2.0, n_shared) * rng.choice([-1.0, 1.0], n_shared)
    cols, models = [], []
    for t in range(n_tasks):
        cols.append(np.concatenate([shared, specific[t]]).astype(np.int64))
        coef = np.concatenate([shared_coef * rng.uniform(0.75, 1.25, n_shared),
                               rng.uniform(1.0, 2.0, n_specific) * rng.choice([-1.0, 1.0], n_specific)])
        shapes = np.concatenate([shared_shape, rng.integers(0, 3, n_specific)])
        noise = 0.5 * float(np.linalg.norm(coef))
        # The binary threshold comes from a calibration sample, not the split, so labels
        # do not depend on the split sizes.
        cal = _task_signal(rng.random((N_CALIBRATION, len(coef))), coef, shapes)
        threshold = float(np.median(cal + noise * rng.standard_normal(N_CALIBRATION)))
        models.append((coef, shapes, noise, threshold if task_type == "binary" else None))

    def make_split(seq: np.random.SeedSequence, n_per_task: int) -> tuple[np.ndarray, ...]:
        X = np.empty((n_tasks * n_per_task, n_features), dtype=np.float32)
        y = np.empty(n_tasks * n_per_task, dtype=np.int64 if task_type == "binary" else np.float64)
        for t in range(n_tasks):
            def block(r: np.random.Generator, rows: int, t: int = t) -> tuple[np.ndarray, np.ndarray]:
                Xb = r.random((rows, n_features), dtype=np.float32)
                coef, shapes, noise, threshold = models[t]
                score = _task_signal(Xb[:, cols[t]], coef, shapes) + noise * r.standard_normal(rows)
                return Xb, score if threshold is None else (score > threshold).astype(np.int64)

            # one seed per task: its rows are an independent stream, prefix-stable in scale
            X[t::n_tasks], y[t::n_tasks] = draw_rows(n_per_task, n_features, child(seq, t), block, y.dtype)
        return X, y, np.tile(np.arange(n_tasks, dtype=np.int64), n_per_task)

    X_train, y_train, task_train = make_split(train_seq, n_rows(2000, scale))
    X_test, y_test, task_test = make_split(test_seq, n_rows(500, scale))
    per_task = tuple(np.sort(c) for c in cols)
    return finish(X_train, y_train, X_test, y_test, [f"f{j}" for j in range(n_features)],
                  np.unique(np.concatenate(cols)), task_type, task_train=task_train, task_test=task_test,
                  relevant_per_task=per_task)
