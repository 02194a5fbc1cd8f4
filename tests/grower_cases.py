"""A hand-made tree case of the grower's refresh of pending leaves, shared by the single-task and
multitask tests."""

from __future__ import annotations

import numpy as np

from gbfs.booster.binning import BinMapper


def refresh_case():
    """A in {0,1,2,3}, B in {0,1}; 10 rows per cell; residuals exact in binary floating point.

    Root: A <= 1 (gain ~8000).  Left child L (A in {0,1}): residual -10 +- 3 by B, so B gains
    40 * 3^2 = 360.  Right child R (A in {2,3}): residual 10 +- 2 by A and +- 2.5 by B, so A gains
    40 * 2^2 = 160 and B gains 40 * 2.5^2 = 250.  With mu = 100 and A used after the root:
    L scores 360 - 100 = 260 (B), R scores max(160 (A), 250 - 100) = 160 (A): L splits first, on B.
    B is now free, so R's best is B (250 > 160).  A grower that kept R's stale choice splits R on A.
    """
    A, B = np.meshgrid(np.arange(4.0), np.arange(2.0), indexing="ij")
    A = np.repeat(A.ravel(), 10)
    B = np.repeat(B.ravel(), 10)
    sign_b = np.where(B == 1, 1.0, -1.0)
    r = np.where(A <= 1, -10.0 + 3.0 * sign_b, 10.0 + 2.0 * np.where(A == 3, 1.0, -1.0) + 2.5 * sign_b)
    X = np.column_stack([A, B])
    mapper = BinMapper().fit(X)
    return X, mapper, mapper.transform(X), r, np.ones_like(r)
