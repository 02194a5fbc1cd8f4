"""The benchmarks' defaults of the matched settings (:class:`runners.core.matched.Matched`), and the
warm-up before timing.

:func:`matched_params` and :func:`lgb_params` give both learners depth 5 / 32 leaves, 255 bins,
learning rate 0.1, 20 rows per leaf, Newton gain and leaves and no penalty; :func:`warm_up`
compiles (or loads from numba's cache) every kernel, so that timings exclude JIT.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from gbfs import GBFSClassifier
from runners.core.matched import Matched


def matched_params(n_trees: int, threads: int) -> dict:
    """Our estimator's parameters that match :func:`lgb_params` (:class:`runners.core.matched.Matched`)."""
    return Matched(n_estimators=n_trees, threads=threads).ours()


def lgb_params(threads: int) -> dict:
    """LightGBM's parameters that match :func:`matched_params`, all rows and columns in every tree."""
    return Matched(threads=threads).lightgbm(force_col_wise=False, bagging_fraction=1.0,
                                             feature_fraction=1.0)


def warm_up(threads: int, sparse: bool = False) -> None:
    """Compile (or load from numba's cache) every kernel so timings and memory exclude JIT.

    Dense data with and without mostly-zero columns; with ``sparse``, also ``scipy.sparse`` CSR.
    """
    rng = np.random.default_rng(0)
    X = rng.random((3000, 6))
    X[::9, 2] = np.nan
    y = (X[:, 0] + X[:, 1] > 1).astype(int)
    Xs = sp.csr_matrix(np.where(rng.random(X.shape) < 0.2, np.round(5 * X), 0.0))
    for method, crit in (("gbfs", "newton"), ("agbm", "sse")):
        for data in (X, Xs.toarray(), Xs) if sparse else (X, Xs.toarray()):
            GBFSClassifier(method=method, criterion=crit, n_estimators=2, n_threads=threads,
                           max_depth=5).fit(data, y).predict(data)
