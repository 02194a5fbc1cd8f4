"""Data shared by the Dask tests (in-process shards and local clusters)."""

from __future__ import annotations

import numpy as np


def wide(n: int = 600, d: int = 30, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Half of ``d`` features informative, 5% missing, a binary target: GT-GBM's candidates decide
    which features a node scans (a wrong subset draw on the shards changes the trees)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[rng.random(X.shape) < 0.05] = np.nan
    w = rng.normal(size=d) * (rng.random(d) < 0.5)
    return X, ((np.nan_to_num(X) @ w + 0.5 * rng.normal(size=n)) > 0).astype(float)
