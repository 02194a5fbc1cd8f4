"""Multiclass GBFSClassifier: softmax gradients by finite differences, LightGBM's multiclass at
matched settings, one Omega for all classes, prediction, model files and refusals."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import log_loss, roc_auc_score

from gbfs import GBFSClassifier, GBFSMultitaskClassifier, load_model
from gbfs.softmax import ClassGradient, RoundScores, SoftmaxLoss, macro_auc

lgb = pytest.importorskip("lightgbm")

NEWTON = dict(mu=0.0, criterion="newton", leaf_estimate="newton", learning_rate=0.1, max_leaves=15,
              min_samples_leaf=20, min_child_weight=1e-3, reg_lambda=1.0, random_state=0, n_threads=2)


def _data(n=3000, d=10, K=4, seed=0):
    """Integer features (each value on many rows, so both libraries bin them alike); class k's
    logit is a linear function of the first four features."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 16, (n, d)).astype(np.float64)
    W = rng.normal(size=(d, K))
    W[4:] = 0.0
    y = np.argmax((X / 8 - 1) @ W * 1.5 + rng.gumbel(size=(n, K)), axis=1)
    return X, y


def _loss_of(raw, codes):
    return SoftmaxLoss(raw.shape[1]).loss(codes, raw) * raw.shape[0]


def test_softmax_gradients_and_hessians_by_finite_differences():
    rng = np.random.default_rng(1)
    n, K = 7, 5
    raw = rng.normal(scale=2.0, size=(n, K))
    codes = rng.integers(0, K, n)
    shared = RoundScores(SoftmaxLoss(K), codes)
    shared.start_round([raw[:, k].copy() for k in range(K)])
    eps = 1e-4
    for k in range(K):
        r, h = np.empty(n), np.empty(n)
        ClassGradient(shared, k).residuals((codes == k).astype(float), raw[:, k].copy(), r, h)
        for i in range(n):
            row, c = raw[i:i + 1], codes[i:i + 1]     # row i's loss alone: less round-off
            up, down = row.copy(), row.copy()
            up[0, k] += eps
            down[0, k] -= eps
            l0, lu, ld = _loss_of(row, c), _loss_of(up, c), _loss_of(down, c)
            grad = (lu - ld) / (2 * eps)
            second = (lu - 2 * l0 + ld) / eps ** 2
            assert r[i] == pytest.approx(-grad, abs=1e-8)     # the residual is the negative gradient
            assert h[i] == pytest.approx(K / (K - 1) * second, rel=1e-4, abs=1e-6)


def test_loss_init_scores_and_auc_match_references():
    rng = np.random.default_rng(2)
    raw = rng.normal(size=(50, 3))
    codes = rng.integers(0, 3, 50)
    loss = SoftmaxLoss(3)
    proba = loss.inverse_link(raw)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert loss.loss(codes, raw) == pytest.approx(log_loss(codes, proba, labels=[0, 1, 2]), rel=1e-12)
    assert macro_auc(codes, proba) == pytest.approx(roc_auc_score(codes, proba, multi_class="ovr"))
    np.testing.assert_allclose(loss.init_scores(codes), np.log(np.bincount(codes) / 50))


def test_first_rounds_equal_lightgbm_multiclass():
    X, y = _data()
    for rounds in (1, 3):   # later rounds part on float32 near-ties of LightGBM's gradients
        ours = GBFSClassifier(n_estimators=rounds, **NEWTON).fit(X, y)
        booster = lgb.train(dict(objective="multiclass", num_class=4, num_leaves=15, min_data_in_leaf=20,
                                 min_sum_hessian_in_leaf=1e-3, lambda_l2=1.0, learning_rate=0.1, max_bin=255,
                                 deterministic=True, num_threads=2, verbose=-1),
                            lgb.Dataset(X, y), num_boost_round=rounds)
        np.testing.assert_allclose(ours.decision_function(X), booster.predict(X, raw_score=True), atol=1e-6)
        np.testing.assert_allclose(ours.predict_proba(X), booster.predict(X), atol=1e-6)
        assert len(ours.trees_) == 4 * rounds and ours.n_iter_ == rounds


def test_one_omega_for_all_classes_pays_a_feature_once():
    X, y = _data(n=1500, d=30)
    est = GBFSClassifier(method="agbm", mu=0.02, n_estimators=20, random_state=0).fit(X, y)
    used = [set(t.used_features().tolist()) for t in est.trees_]
    # the features selected are those of the first use across all classes' trees
    assert set(est.selected_features_.tolist()) == set().union(*used)
    assert set(est.selected_features_.tolist()) == {0, 1, 2, 3}
    # a feature bought by one class's tree is free for every later class: classes reuse features
    per_class = [set().union(*used[k::4]) for k in range(4)]
    assert sum(len(s) for s in per_class) > len(est.selected_features_)
    # the same fit without the penalty uses the noise features too
    free = GBFSClassifier(method="agbm", mu=0.0, n_estimators=20, random_state=0).fit(X, y)
    assert free.n_features_selected_ > 10


@pytest.mark.parametrize("params", [dict(method="agbm", mu=0.05), dict(method="gtgbm", mu=0.05),
                                    dict(method="topk", max_features=4), dict(method="agbm", refit=True),
                                    dict(method="agbm", mu=0.01, max_features=3),
                                    dict(method="agbm", sampler="goss")],
                         ids=["agbm", "gtgbm", "topk", "refit", "budget", "goss"])
def test_every_method_fits_and_round_trips(tmp_path, params):
    X, y = _data(n=1200, d=12, K=3)
    labels = np.array(["cat", "dog", "emu"])[y]
    est = GBFSClassifier(n_estimators=12, max_leaves=8, min_samples_leaf=10, random_state=0, **params)
    est.fit(X[:900], labels[:900])
    proba = est.predict_proba(X[900:])
    assert proba.shape == (300, 3) and np.allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(est.predict(X[900:]), est.classes_[np.argmax(proba, axis=1)])
    assert est.score(X[900:], labels[900:]) > 0.6
    if params.get("max_features"):
        assert est.n_features_selected_ <= params["max_features"]
    est.save_model(tmp_path / "m.json")
    back = load_model(tmp_path / "m.json")
    np.testing.assert_array_equal(back.predict_proba(X[900:]), proba)
    np.testing.assert_array_equal(back.classes_, est.classes_)
    again = GBFSClassifier(**est.get_params()).fit(X[:900], labels[:900])   # the same seed, the same model
    np.testing.assert_array_equal(again.predict_proba(X[900:]), proba)


def test_history_early_stopping_and_best_iteration(tmp_path):
    X, y = _data(n=1500, K=3)
    est = GBFSClassifier(n_estimators=300, learning_rate=0.5, early_stopping_rounds=5, random_state=0,
                         criterion="newton", leaf_estimate="newton")
    est.fit(X[:1000], y[:1000], eval_set=(X[1000:], y[1000:]))
    rec = est.history_[-1]
    assert {"train_loss", "train_auc", "train_accuracy", "val_loss", "val_auc", "val_accuracy"} <= set(rec)
    best = est.best_iteration_
    assert best is not None and est.n_iter_ == best + 1 and len(est.trees_) == 3 * (best + 1)
    assert len(est.history_) > best + 1
    proba = est.predict_proba(X[1000:])
    assert est.history_[best]["val_loss"] == pytest.approx(log_loss(y[1000:], proba), rel=1e-9)
    assert est.history_[best]["val_auc"] == pytest.approx(roc_auc_score(y[1000:], proba, multi_class="ovr"))
    est.save_model(tmp_path / "m.json")
    back = load_model(tmp_path / "m.json")
    assert back.best_iteration_ == best
    np.testing.assert_array_equal(back.predict_proba(X[1000:]), proba)


def test_refusals():
    X, y = _data(n=300, K=3)
    with pytest.raises(ValueError, match=r"eval_set\[0\] y has labels \[7\] not seen"):
        GBFSClassifier(n_estimators=2).fit(X, y, eval_set=(X[:3], np.array([0, 1, 7])))
    with pytest.raises(ValueError, match=r"y has 3 classes.*exactly two"):
        GBFSMultitaskClassifier(n_estimators=2).fit(X, y, np.zeros(300))
    from gbfs import feature_utility

    est = GBFSClassifier(n_estimators=2).fit(X, y)
    with pytest.raises(ValueError, match="model is a classifier of 3 classes"):
        feature_utility(est, X, y, X[:, 0])
