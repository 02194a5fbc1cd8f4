"""The metrics of ``history_`` against scikit-learn, and the radix sorts behind the AUC and binning."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from gbfs.booster.kernels.radix import argsort_floats, sort_floats
from gbfs.booster.losses.metrics import roc_auc


@pytest.mark.parametrize("bits", [8, 16])
@pytest.mark.parametrize("n", [1, 2, 17, 1000, 70000])
def test_argsort_is_numpys_stable_argsort(n, bits):
    rng = np.random.default_rng(n)
    v = rng.normal(size=n) * 10.0 ** rng.integers(-300, 300, n)
    v[::7] = v[0]                      # ties keep their order
    v[::11] = -0.0                     # -0.0 ties with 0.0
    v[1::11] = 0.0
    v[2::13] = np.inf
    v[3::17] = -np.inf
    v[4::19] = 5e-324                  # subnormals
    np.testing.assert_array_equal(argsort_floats(v + 0.0, bits), np.argsort(v, kind="stable"))
    np.testing.assert_array_equal(sort_floats(v, bits), np.sort(v))


@pytest.mark.parametrize("seed", range(4))
def test_roc_auc_matches_sklearn_with_ties(seed):
    rng = np.random.default_rng(seed)
    y = (rng.random(3000) < 0.3).astype(int)
    s = np.round(rng.normal(size=3000) + y, 1)  # many tied scores
    assert roc_auc(y, s) == pytest.approx(roc_auc_score(y, s), rel=1e-12)
    assert np.isnan(roc_auc(np.zeros(5), rng.normal(size=5)))
