"""Shared data and settings of the estimator tests: small seeded data sets, small fast trees, one
setting of every selection method.

Everything here is deliberately small (a few hundred rows, a dozen features) so that each test file
stays fast on a 2-core machine once numba has compiled its kernels.
"""

from __future__ import annotations

import numpy as np

#: a few small trees: a fit on a hundred rows takes milliseconds
FAST = dict(n_estimators=5, max_leaves=6, min_samples_leaf=5, random_state=0)

N_SAMPLES = 400
N_FEATURES = 12
N_INFORMATIVE = 3


def sparse_classification(n_samples=N_SAMPLES, n_features=N_FEATURES, seed=0):
    """Binary labels driven by the first ``N_INFORMATIVE`` columns; the rest is noise."""
    rng = np.random.default_rng(seed)
    X = rng.random((n_samples, n_features))
    logit = 4.0 * (X[:, 0] - 0.5) - 3.0 * (X[:, 1] - 0.5) + 2.0 * (X[:, 2] > 0.5) - 1.0
    y = (logit + 0.5 * rng.standard_normal(n_samples) > 0).astype(np.int64)
    return X, y


def sparse_regression(n_samples=N_SAMPLES, n_features=N_FEATURES, seed=1):
    """``y = 2 x0 - 3 * 2^x1 + log2(1 + x2) + 0.3 eps`` (Figure 1 of the GT-GBM paper), noise columns."""
    rng = np.random.default_rng(seed)
    X = rng.random((n_samples, n_features))
    y = 2 * X[:, 0] - 3 * 2.0 ** X[:, 1] + np.log2(1 + X[:, 2]) + 0.3 * rng.standard_normal(n_samples)
    return X, y


def every_method(k: int) -> list[dict]:
    """One setting of each selection method: A-GBM, GBFS on GOSS rows, GT-GBM aiming at ``k``
    features, A-GBM refitted within a budget of ``k`` and GBDT-topK keeping ``k``."""
    return [{"method": "agbm", "mu": 0.01},
            {"method": "gbfs", "mu": 1.0, "sampler": "goss"},
            {"method": "gtgbm", "mu": 0.01, "n_target_features": k},
            {"method": "agbm", "mu": 0.01, "max_features": k, "refit": True},
            {"method": "topk", "max_features": k}]

