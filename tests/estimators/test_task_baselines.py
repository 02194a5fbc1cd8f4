"""The per-tree residual statistics of the LightGBM baselines of the other tasks
(gbfs.baselines.lightgbm_tasks) against a naive recomputation from the booster's own predictions."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_diabetes, load_wine

from gbfs.baselines.lightgbm_tasks import (
    LightGBMMulticlassBaseline,
    LightGBMRankerBaseline,
    LightGBMRegressionBaseline,
)
from gbfs.booster.normaliser import gain_normaliser

KW = {"n_estimators": 12, "random_state": 0, "n_threads": 1}


def _before(booster, X, it, **kw):
    """The booster's predictions before tree ``it`` (``it >= 1``: trees 0 .. it-1)."""
    return booster.predict(X, num_iteration=it, **kw)


def test_regression_records_the_residuals_variance_and_normaliser_of_every_tree():
    X, y = load_diabetes(return_X_y=True)
    est = LightGBMRegressionBaseline("full", reg_lambda=2.0, **KW).fit(X, y)
    for it in (0, 1, 5, 11):
        pred = np.full(y.shape, y.mean()) if it == 0 else _before(est.booster_, X, it)
        g = y - pred
        rec = est.history_[it]
        assert rec["root_variance"] == pytest.approx(np.var(g), rel=1e-9), it
        assert rec["gain_normaliser"] == pytest.approx(gain_normaliser(g.sum(), len(g), g @ g, 2.0), rel=1e-9)
    assert est.history_[-1]["root_variance"] < est.history_[0]["root_variance"]


def test_multiclass_records_the_mean_residual_variance_over_the_classes_and_no_normaliser():
    X, y = load_wine(return_X_y=True)
    est = LightGBMMulticlassBaseline("full", **KW).fit(X, y)
    onehot = np.eye(3)[y]
    for it in (0, 1, 6):
        p = np.bincount(y) / len(y) if it == 0 else _before(est.booster_, X, it)
        naive = np.mean(np.var(onehot - p, axis=0))
        assert est.history_[it]["root_variance"] == pytest.approx(naive, rel=1e-9), it
    assert all("gain_normaliser" not in r for r in est.history_)


def test_ranker_records_no_residual_statistics():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y = np.clip(np.round(X[:, 0] + rng.normal(scale=0.5, size=300)), 0, 3)
    est = LightGBMRankerBaseline("full", **KW).fit(X, y, group=[30] * 10)
    assert est.history_ and all("root_variance" not in r and "gain_normaliser" not in r
                                for r in est.history_)
    assert "train_ndcg@10" in est.history_[0]
