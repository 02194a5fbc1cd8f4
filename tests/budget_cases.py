"""Random data and booster settings for the budget properties (``max_features``, ``max_cost``)."""

from __future__ import annotations

import numpy as np


def random_case(seed: int, signal_share: float = 0.5):
    """``(rng, X, y, kw)``: data with NaNs and a sparse linear signal (classification unless ``seed``
    is a multiple of 3), and settings of every method, criterion and sampler -- without a budget,
    which the caller draws from ``rng``."""
    rng = np.random.default_rng(seed)
    n, d = int(rng.integers(150, 400)), int(rng.integers(8, 30))
    X = rng.standard_normal((n, d))
    X[rng.random((n, d)) < 0.05] = np.nan
    w = rng.standard_normal(d) * (rng.random(d) < signal_share)
    signal = np.nan_to_num(X) @ w + rng.standard_normal(n)
    y = (signal > 0).astype(int) if seed % 3 else signal
    method = ["gbfs", "agbm", "gtgbm"][seed % 3]
    kw = dict(method=method, mu=float(rng.choice([0.0, 1e-3, 0.01])) * (50 if method == "gbfs" else 1),
              criterion=str(rng.choice(["sse", "newton"])), n_estimators=int(rng.integers(5, 25)),
              max_leaves=int(rng.integers(3, 16)), min_samples_leaf=int(rng.integers(3, 15)),
              random_state=seed, sampler=[None, "sgb", "goss", "mvs"][int(rng.integers(4))])
    if method == "gtgbm":
        kw.update(n_target_features=3, group_test_scope=str(rng.choice(["node", "tree"])))
    return rng, X, y, kw
