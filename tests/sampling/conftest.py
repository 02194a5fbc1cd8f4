"""The data the row-sampling tests fit: enough rows that every sample size is an exact share."""

from __future__ import annotations

import pytest
from estimator_cases import sparse_classification


@pytest.fixture(scope="module")
def data():
    """(X_train, y_train, X_val, y_val): 1500 + 500 rows of :func:`estimator_cases.sparse_classification`."""
    X, y = sparse_classification(n_samples=2000, seed=0)
    return X[:1500], y[:1500], X[1500:], y[1500:]
