"""float32 input is binned and predicted as it is: the same model as its float64 copy, without
making that copy."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from gbfs import GBFSClassifier, GBFSRegressor
from gbfs.booster.binning import BinMapper
from gbfs.estimators.model_io import model_to_dict


def _data(seed=0, n=600, d=30):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    X[rng.random((n, d)) < 0.6] = 0.0          # count-like zeros, both signs of zero
    X[::7, 3] = -0.0
    X[::11, 5] = np.nan
    X[:, 6] = np.float32(1e-30)                 # a value float32 holds inexactly as a decimal
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    return X, y


@pytest.mark.parametrize("estimator", [GBFSClassifier, GBFSRegressor])
def test_float32_fits_the_float64_copy_model(estimator):
    X, y = _data()
    kw = {"n_estimators": 8, "max_leaves": 8, "random_state": 0}
    a = estimator(**kw).fit(X, y)
    b = estimator(**kw).fit(X.astype(np.float64), y)
    assert model_to_dict(a) == model_to_dict(b)
    np.testing.assert_array_equal(a.predict(X), b.predict(X.astype(np.float64)))
    np.testing.assert_array_equal(a.predict(X), a.predict(X.astype(np.float64)))


def test_binning_reads_float32_without_a_float64_copy():
    X, _ = _data(1, n=4000, d=50)
    BinMapper().fit(X).transform(X)                # compiled (or loaded) before tracing
    tracemalloc.start()
    mapper = BinMapper().fit(X)
    binned = mapper.transform(X)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < X.astype(np.float64).nbytes / 2, peak   # the copy alone would be 1.6 MB
    X64 = X.astype(np.float64)
    np.testing.assert_array_equal(binned, BinMapper().fit(X64).transform(X64))
