"""Multiclass GBFSClassifier: softmax gradients by finite differences, LightGBM's multiclass at
matched settings, one Omega for all classes, prediction, model files and refusals."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import log_loss, roc_auc_score

from gbfs import GBFSClassifier, GBFSMultitaskClassifier, load_model
from gbfs.booster.losses.softmax import ClassGradient, RoundScores, SoftmaxLoss, macro_auc

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


def test_model_equals_lightgbm_multiclass():
    """30 rounds of 4 trees equal LightGBM's to 1e-6: the same gradients, hessians, initial scores
    and, with ``leaf_count="auto"`` (LightGBM's hessian-estimated ``min_data_in_leaf``), splits."""
    X, y = _data()
    for rounds in (1, 30):
        ours = GBFSClassifier(n_estimators=rounds, **NEWTON).fit(X, y)
        booster = lgb.train(dict(objective="multiclass", num_class=4, num_leaves=15, min_data_in_leaf=20,
                                 min_sum_hessian_in_leaf=1e-3, lambda_l2=1.0, learning_rate=0.1, max_bin=255,
                                 deterministic=True, num_threads=2, verbose=-1),
                            lgb.Dataset(X, y), num_boost_round=rounds)
        np.testing.assert_allclose(ours.decision_function(X), booster.predict(X, raw_score=True), atol=1e-6)
        np.testing.assert_allclose(ours.predict_proba(X), booster.predict(X), atol=1e-6)
        assert len(ours.trees_) == 4 * rounds and ours.n_iter_ == rounds
    # counting rows exactly instead parts from LightGBM within a few rounds
    rows = GBFSClassifier(n_estimators=30, leaf_count="rows", **NEWTON).fit(X, y)
    assert np.max(np.abs(rows.decision_function(X) - booster.predict(X, raw_score=True))) > 1e-3


def _naive_scan(hist, n, msl, factor):
    """Brute force of LightGBM's rule: the right child's bins count round(H_b * factor) rows each,
    the left child the node's other rows; returns (best gain, its threshold bin)."""
    G, H = hist[:, 0].sum(), hist[:, 1].sum()
    best, best_t = -np.inf, -1
    for t in range(hist.shape[0] - 1):
        right = sum(np.floor(hist[b, 1] * factor + 0.5) for b in range(t + 1, hist.shape[0]))
        if right < msl or n - right < msl:
            continue
        gl, hl = hist[:t + 1, 0].sum(), hist[:t + 1, 1].sum()
        gain = gl ** 2 / hl + (G - gl) ** 2 / (H - hl) - G ** 2 / H
        if gain > best:
            best, best_t = gain, t
    return best, best_t


def test_hessian_leaf_count_matches_a_brute_force_reference():
    from gbfs.booster.kernels.scan import scan_feature
    from gbfs.booster.kernels.splitting import SplitRule

    rng = np.random.default_rng(3)
    for _ in range(200):
        nb = int(rng.integers(2, 12))
        counts = rng.integers(1, 15, nb).astype(float)
        h = counts * rng.uniform(0.001, 0.25, nb)          # softmax-like hessians, very unequal
        hist = np.zeros((nb + 1, 3))                         # value bins, then an empty missing bin
        hist[:nb, 0], hist[:nb, 1], hist[:nb, 2] = rng.normal(size=nb) * h, h, counts
        n = counts.sum()
        msl = float(rng.integers(1, 20))
        factor = n / (h.sum() + 2e-15)
        gain, t, *_ = scan_feature(hist, nb, SplitRule(hist[:, 0].sum(), h.sum(), n, msl, factor, 0.0, 0.0))
        ref_gain, ref_t = _naive_scan(hist[:nb], n, msl, factor)
        assert t == ref_t
        if ref_t >= 0:
            assert gain == pytest.approx(ref_gain, rel=1e-9)


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
                         criterion="newton", leaf_estimate="newton", train_metrics="all")
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
