"""Recursive feature elimination (RFE) in this booster: the selection path's backward source.

What users reach for next to LightGBM (scikit-learn's ``RFE`` over a booster): fit on the current
features, drop the ``step`` share of them with the least gain, refit on the rest, and so on down to
the smallest budget.  A step that would pass a budget stops at it, so every budget gets a set of
exactly its size; each set is ranked by the gain of the last model fitted before it was cut.  The
fits are whatever ``importance_of`` does -- in the path, the unpenalised refit on the shared binned
matrix that every candidate gets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


def elimination_sizes(n_start: int, budgets: Sequence[int], step: float) -> list[int]:
    """The sizes elimination visits below ``n_start``: each ``floor(n (1 - step))`` (at least one
    fewer than ``n``), stopping at every budget on the way, ending at the smallest budget."""
    targets = sorted((int(k) for k in budgets if k < n_start), reverse=True)
    sizes, n = [], int(n_start)
    while targets:
        nxt = min(n - 1, int(n * (1.0 - step)))
        if nxt <= targets[0]:
            nxt = targets.pop(0)
        sizes.append(nxt)
        n = nxt
    return sizes


def eliminate(importance_of: Callable[[np.ndarray], np.ndarray], features: np.ndarray,
              budgets: Sequence[int], step: float) -> dict[int, np.ndarray]:
    """Backward elimination from ``features`` through every budget smaller than their number.

    Parameters
    ----------
    importance_of : callable
        ``importance_of(features)`` fits a model on ``features`` and returns the gain of each of
        them, in the order given.
    features : ndarray of int
        The starting set.
    budgets : sequence of int
    step : float in (0, 1)
        Share of the current features dropped per fit.

    Returns
    -------
    dict
        ``{budget: features}`` for every budget below ``len(features)``; each set in order of the
        gain that kept it (ties: the earlier feature of the current set first).
    """
    current = np.asarray(features, dtype=np.int64)
    wanted = {int(k) for k in budgets}
    out = {}
    for size in elimination_sizes(current.shape[0], budgets, step):
        gain = np.asarray(importance_of(current), dtype=np.float64)
        current = current[np.argsort(-gain, kind="stable")[:size]]
        if size in wanted:
            out[size] = current.copy()
    return out
