"""Shared pieces of the synthetic stand-ins: the return type, argument checks and seeding.

Seeding scheme: ``SeedSequence(random_state)`` has three independent children, the label
model (which columns are relevant, their coefficients, the decision threshold), the train
rows and the test rows. Rows are drawn in fixed-size blocks, block ``b`` of a split from
its own grandchild seed, so row ``i`` depends only on ``(random_state, split, i)``: the test
split never depends on the train size, and a smaller ``scale`` gives a prefix of a larger one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np

MODEL, TRAIN, TEST = 0, 1, 2
MIN_ROWS = 50
# Values per generated block: bounds the temporary memory of a block (16 MB of float64)
# while keeping the per-block Python overhead negligible.
BLOCK_CELLS = 1 << 21


@dataclass(frozen=True)
class SyntheticData:
    """A synthetic train/test pair with its known sparse signal.

    Attributes
    ----------
    X_train, X_test : ndarray of float32, C-contiguous, shape (n, d)
        ``X_train`` is the whole train pool: the caller splits off validation.
    y_train, y_test : ndarray
        int64 labels in {0, 1} (``task == "binary"``) or float64 targets (``"regression"``).
    feature_names : list of str
    relevant : ndarray of int64
        Sorted indices of the columns the label depends on.
    task : {"binary", "regression"}
    task_train, task_test : ndarray of int64 or None
        Multitask only: the task id of each row.
    relevant_per_task : tuple of ndarray or None
        Multitask only: sorted relevant columns of each task.
    categorical : tuple of int
        Columns holding integer codes of categories (split on sets of categories).
    categories : tuple of tuple of str or None
        The category of each code, per categorical column.
    group_train, group_test : ndarray of int64 or None
        Ranking only (``task == "ranking"``): the sizes of the consecutive query groups.
    copy_of : ndarray of int64 or None
        Redundant columns: per column, the column it is a noisy copy of (correlated with it by
        construction, not used by the label), -1 for a column that copies none; None when the
        stand-in has no copies.
    """

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    feature_names: list[str]
    relevant: np.ndarray
    task: str
    task_train: np.ndarray | None = None
    task_test: np.ndarray | None = None
    relevant_per_task: tuple[np.ndarray, ...] | None = None
    categorical: tuple[int, ...] = ()
    categories: tuple[tuple[str, ...], ...] | None = None
    group_train: np.ndarray | None = None
    group_test: np.ndarray | None = None
    copy_of: np.ndarray | None = None


def check_positive(name: str, value: object) -> float:
    """``value`` as a float, or ``ValueError`` naming ``name`` unless it is a finite positive number."""
    if isinstance(value, bool) or not isinstance(value, Real) or not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return float(value)


def check_int(name: str, value: object, minimum: int) -> int:
    """``value`` as an int, or ``ValueError`` naming ``name`` unless it is an integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_seed(random_state: object) -> int:
    """The seed as an int (``SeedSequence`` needs a non-negative integer)."""
    return check_int("random_state", random_state, 0)


def n_rows(n: int, scale: float) -> int:
    """Rows of a split at ``scale``, never fewer than ``MIN_ROWS`` so every split stays usable."""
    return max(int(round(n * scale)), MIN_ROWS)


def child(seq: np.random.SeedSequence, i: int) -> np.random.SeedSequence:
    """The ``i``-th child of ``seq``, as ``seq.spawn`` would make it but without mutating ``seq``."""
    return np.random.SeedSequence(seq.entropy, spawn_key=(*seq.spawn_key, i), pool_size=seq.pool_size)


def streams(random_state: int) -> tuple[np.random.Generator, np.random.SeedSequence, np.random.SeedSequence]:
    """The label-model generator and the train/test row seeds of ``random_state``."""
    root = np.random.SeedSequence(random_state)
    return np.random.default_rng(child(root, MODEL)), child(root, TRAIN), child(root, TEST)


def block_rows(width: int) -> int:
    """Rows per block for rows of ``width`` values; a function of the width only (prefix stability)."""
    return max(64, BLOCK_CELLS // max(width, 1))


def draw_rows(n: int, width: int, seq: np.random.SeedSequence,
              make_block: Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]],
              y_dtype: type) -> tuple[np.ndarray, np.ndarray]:
    """``n`` rows ``(X, y)`` of a split, block by block, into preallocated arrays.

    ``make_block(rng, rows)`` returns a ``(rows, width)`` block and its labels. A full block is
    always drawn and the last one truncated: drawing fewer rows would change their values, and
    rows must not depend on the split size. Preallocating (rather than stacking blocks) keeps
    the peak memory at one copy of the split.
    """
    X = np.empty((n, width), dtype=np.float32)
    y = np.empty(n, dtype=y_dtype)
    step = block_rows(width)
    for b, start in enumerate(range(0, n, step)):
        Xb, yb = make_block(np.random.default_rng(child(seq, b)), step)
        stop = min(start + step, n)
        X[start:stop] = Xb[: stop - start]
        y[start:stop] = yb[: stop - start]
    return X, y


def finish(X_train: np.ndarray, y_train: np.ndarray, X_test: np.ndarray, y_test: np.ndarray,
           feature_names: list[str], relevant: np.ndarray, task: str, **multitask) -> SyntheticData:
    """A ``SyntheticData`` with the documented dtypes and layouts enforced in one place."""
    y_dtype = np.int64 if task in ("binary", "ranking") else np.float64
    return SyntheticData(
        X_train=np.ascontiguousarray(X_train, dtype=np.float32),
        y_train=np.asarray(y_train, dtype=y_dtype),
        X_test=np.ascontiguousarray(X_test, dtype=np.float32),
        y_test=np.asarray(y_test, dtype=y_dtype),
        feature_names=list(feature_names),
        relevant=np.sort(np.asarray(relevant, dtype=np.int64)),
        task=task, **multitask)
