"""Synthetic data with a known sparse signal (the offline default everywhere)."""

from __future__ import annotations

import numpy as np

# (n_train, n_features) of the GT-GBM paper's Table 2
PAPER_SHAPES = {"gisette": (6000, 5000), "epsilon": (80000, 2000), "flight": (100000, 634)}


def make_sparse_classification(n_samples: int, n_features: int, n_informative: int = 10,
                               noise: float = 0.5, missing_rate: float = 0.0,
                               random_state: int | None = 0, dtype=np.float64):
    """Binary labels from a sparse additive model on uniform features.

    ``y = 1{sum_k a_k f_k(x_{j_k}) + noise * eps > median}`` over ``n_informative``
    features ``j_k`` (the first ones: columns ``0..n_informative-1``), with ``f_k``
    alternating among ``x``, ``2^x`` and ``log2(1 + x)`` shapes (Figure 1 of the
    GT-GBM paper) plus one pairwise interaction.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of int in {0, 1}
    informative : ndarray of int, the informative columns
    """
    rng = np.random.default_rng(random_state)
    X = rng.random((n_samples, n_features), dtype=np.float64).astype(dtype, copy=False)
    k = min(n_informative, n_features)
    informative = np.arange(k)
    coef = rng.uniform(1.0, 2.0, size=k) * rng.choice([-1.0, 1.0], size=k)
    signal = np.zeros(n_samples)
    shapes = (lambda x: x, lambda x: 2.0 ** x, lambda x: np.log2(1.0 + x))
    for i, j in enumerate(informative):
        signal += coef[i] * shapes[i % 3](X[:, j].astype(np.float64))
    if k >= 2:
        signal += 2.0 * (X[:, 0] - 0.5) * (X[:, 1] - 0.5)
    signal = (signal - signal.mean()) / signal.std()
    score = signal + noise * rng.standard_normal(n_samples)
    y = (score > np.median(score)).astype(np.int64)
    if missing_rate > 0:
        X[rng.random(X.shape) < missing_rate] = np.nan
    return X, y, informative


def make_figure1_regression(n_samples: int, n_features: int, random_state: int | None = 0):
    """``y = 2 x1 - 3 * 2^x2 + log2(1 + x3) + eps`` (GT-GBM paper, Section 4.3, Figure 1).

    x are i.i.d. uniform on [0, 1] and eps ~ N(0, 1); x1, x2, x3 are columns 0, 1, 2.
    """
    rng = np.random.default_rng(random_state)
    X = rng.random((n_samples, n_features))
    y = 2 * X[:, 0] - 3 * 2.0 ** X[:, 1] + np.log2(1 + X[:, 2]) + rng.standard_normal(n_samples)
    return X, y
