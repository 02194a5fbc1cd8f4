"""Row samplers inside the booster: every row scored, weights reach the leaves, penalties and GT-GBM
still work, seeds reproduce, bad arguments are refused before any kernel."""

from __future__ import annotations

import naive
import numpy as np
import pytest
from sklearn.metrics import log_loss
from sklearn.utils import check_random_state

from gbfs import GBFSClassifier, GBFSRegressor, load_model
from gbfs.booster.losses.loss import LOSSES

SAMPLERS = [dict(sampler="sgb", subsample=0.3), dict(sampler="goss", top_rate=0.1, other_rate=0.2),
            dict(sampler="goss", goss_style="lightgbm"), dict(sampler="mvs", subsample=0.3, mvs_lambda=0.1),
            dict(sampler="mvs_adaptive", subsample=0.3)]


def _fit(data, **kw):
    Xt, yt, Xv, yv = data
    params = dict(n_estimators=20, max_leaves=8, min_samples_leaf=5, random_state=0, n_threads=1)
    params.update(kw)
    return GBFSClassifier(**params).fit(Xt, yt, eval_set=(Xv, yv))


@pytest.mark.parametrize("kw", SAMPLERS, ids=lambda kw: f"{kw['sampler']}-{kw.get('goss_style', 'paper')}")
def test_every_row_is_scored_and_the_model_learns(data, kw):
    Xt, yt, Xv, yv = data
    est = _fit(data, **kw)
    # train_loss is computed from the booster's running scores: it must equal the loss of the
    # returned model on every training row, sampled this iteration or not
    proba = est.predict_proba(Xt)[:, 1]
    assert est.history_[-1]["train_loss"] == pytest.approx(log_loss(yt, proba), rel=1e-9)
    assert est.history_[-1]["val_auc"] > 0.85
    assert all(0 < rec["n_rows_sampled"] <= len(yt) for rec in est.history_)
    # same seed, same model; another seed, another sample
    again = _fit(data, **kw)
    np.testing.assert_array_equal(again.predict_proba(Xv), est.predict_proba(Xv))
    other = _fit(data, random_state=1, **kw)
    assert not np.array_equal(other.predict_proba(Xv), est.predict_proba(Xv))


def test_sample_sizes_follow_the_sampler(data):
    n = len(data[1])
    assert {rec["n_rows_sampled"] for rec in _fit(data, sampler="sgb", subsample=0.3).history_} == {450}
    assert {rec["n_rows_sampled"] for rec in _fit(data, sampler="goss", top_rate=0.1,
                                                  other_rate=0.2).history_} == {450}
    # LightGBM's GOSS samples nothing during the first 1/learning_rate iterations
    lgb_style = _fit(data, sampler="goss", goss_style="lightgbm", learning_rate=0.2)
    assert [rec["n_rows_sampled"] for rec in lgb_style.history_[:5]] == [n] * 5
    assert lgb_style.history_[5]["n_rows_sampled"] == round(0.2 * n) + round(0.1 * n)
    mvs = [rec["n_rows_sampled"] for rec in _fit(data, sampler="mvs", subsample=0.3).history_]
    assert abs(np.mean(mvs) - 450) < 60          # Poisson sampling: 450 rows in expectation


def test_sgb_at_rate_one_is_the_unsampled_model(data):
    Xv = data[2]
    full = _fit(data)
    sgb1 = _fit(data, sampler="sgb", subsample=1.0)
    np.testing.assert_allclose(sgb1.predict_proba(Xv), full.predict_proba(Xv), rtol=1e-9)


@pytest.mark.parametrize("method, mu, prohibitive", [("gbfs", 2.0, 1e9), ("agbm", 0.02, 1.0),
                                                     ("gtgbm", 0.02, 1.0)])
def test_samplers_with_feature_selection(data, method, mu, prohibitive):
    extra = dict(n_target_features=3) if method == "gtgbm" else {}
    for kw in (dict(sampler="mvs", subsample=0.3), dict(sampler="goss")):
        plain = _fit(data, method=method, mu=0.0, **extra, **kw)
        est = _fit(data, method=method, mu=mu, **extra, **kw)
        assert est.n_features_selected_ <= plain.n_features_selected_
        assert {0, 1} <= set(est.selected_features_.tolist())   # the strongest signals survive
        assert est.history_[-1]["val_auc"] > 0.85
        # the penalty is applied to the sampled gains: a prohibitive price buys no feature at all
        assert _fit(data, method=method, mu=prohibitive, **extra, **kw).n_features_selected_ == 0


def test_regressor_and_newton_mode_with_mvs(data):
    Xt, _, Xv, _ = data
    y = 2 * Xt[:, 0] - 3 * 2.0 ** Xt[:, 1] + np.log2(1 + Xt[:, 2])
    reg = GBFSRegressor(n_estimators=30, sampler="mvs", subsample=0.3, random_state=0).fit(Xt, y)
    assert np.sqrt(np.mean((reg.predict(Xt) - y) ** 2)) < 0.5 * y.std()
    clf = _fit(data, sampler="mvs_adaptive", subsample=0.3, criterion="newton", leaf_estimate="newton")
    assert clf.history_[-1]["val_auc"] > 0.85


def test_model_file_keeps_the_sampler(tmp_path, data):
    est = _fit(data, sampler="mvs", subsample=0.3, mvs_lambda=1.0)
    est.save_model(tmp_path / "m.json")
    back = load_model(tmp_path / "m.json")
    assert (back.sampler, back.subsample, back.mvs_lambda) == ("mvs", 0.3, 1.0)
    np.testing.assert_array_equal(back.predict_proba(data[2]), est.predict_proba(data[2]))


@pytest.mark.parametrize("kw, name", [(dict(sampler="bagging"), "sampler"),
                                      (dict(subsample=1.5), "subsample"),
                                      (dict(sampler="sgb", subsample=0.0), "subsample"),
                                      (dict(sampler="goss", top_rate=0.7, other_rate=0.5), "top_rate"),
                                      (dict(sampler="mvs", mvs_lambda=-1.0), "mvs_lambda"),
                                      (dict(sampler="mvs", goss_style="bogus"), "goss_style")])
def test_bad_sampler_arguments_are_refused(data, kw, name):
    with pytest.raises(ValueError, match=name):
        _fit(data, **kw)


def test_unused_sampler_argument_warns_and_is_ignored(data):
    with pytest.warns(UserWarning, match='subsample ignored with sampler="goss"'):
        got = _fit(data, sampler="goss", subsample=0.9, n_estimators=3)
    plain = _fit(data, sampler="goss", n_estimators=3)
    np.testing.assert_array_equal(got.predict_proba(data[2]), plain.predict_proba(data[2]))


@pytest.mark.parametrize("kw", [dict(sampler="sgb", subsample=0.3),
                                dict(sampler="goss", top_rate=0.1, other_rate=0.2),
                                dict(sampler="mvs", subsample=0.3, mvs_lambda=0.5),
                                dict(sampler="mvs", subsample=0.6, criterion="newton",
                                     leaf_estimate="newton"),
                                dict(sampler="mvs_adaptive", subsample=0.3)],
                         ids=lambda kw: f"{kw['sampler']}-{kw.get('criterion', 'sse')}")
def test_first_tree_is_the_weighted_reference_tree(data, kw):
    """The first tree equals the naive grower's on the sampled rows with their weights: splits from
    the weighted histograms (sum w r, sum w or sum w h) and leaves lr * sum(w r) / sum(w [h])."""
    Xt, yt, _, _ = data
    params = dict(method="gbfs", mu=0.0, max_leaves=6, min_samples_leaf=5, learning_rate=0.3)
    est = _fit(data, n_estimators=1, **params, **kw)
    # the booster's first residuals and its row sampler, drawn from the estimator's seed as it does
    loss = LOSSES["logistic"]
    init = loss.init_score(yt)
    r, h = np.empty(len(yt)), np.empty(len(yt))
    loss.residuals(yt.astype(float), np.full(len(yt), init), r, h)
    newton = kw.get("criterion") == "newton"
    seed = check_random_state(0).randint(np.iinfo(np.int32).max)
    rows, w = est._validate_params().sampler.sample(r, h if newton else None, 0,
                                                          np.random.default_rng([seed, 3]))
    assert not np.allclose(w, 1.0)                      # the weights are not all 1
    rw, hw = np.zeros(len(yt)), np.zeros(len(yt))
    rw[rows], hw[rows] = w * r[rows], w * (h[rows] if newton else 1.0)
    Xb = est._bin_mapper.transform(Xt)
    ref, _, _ = naive.grow(Xb, est._bin_mapper.n_bins_non_missing_, rows, rw, hw, mu=0.0,
                           max_leaves=6, min_samples_leaf=5)
    assert len(ref.leaves()) == est.trees_[0].n_leaves == 6
    expected = np.empty(len(yt))
    for leaf in ref.leaves():                           # every training row routed to its leaf
        in_leaf = _route(ref, Xb) == leaf
        sampled = ref.rows[leaf]
        expected[in_leaf] = 0.3 * rw[sampled].sum() / hw[sampled].sum()
    np.testing.assert_allclose(est.decision_function(Xt) - init, expected, rtol=1e-9, atol=1e-12)


def _route(tree, Xb):
    """Leaf of every row of a naive.NaiveTree."""
    node = np.zeros(Xb.shape[0], dtype=int)
    for _ in range(len(tree.feature)):
        f = np.asarray(tree.feature)[node]
        inner = f >= 0
        if not inner.any():
            break
        idx = np.flatnonzero(inner)
        go_left = naive.left_mask(Xb[idx, f[inner]], np.asarray(tree.bin_threshold)[node[idx]],
                                  False) | ((Xb[idx, f[inner]] == naive.MISSING)
                                            & np.asarray(tree.missing_left)[node[idx]])
        node[idx] = np.where(go_left, np.asarray(tree.left)[node[idx]], np.asarray(tree.right)[node[idx]])
    return node


@pytest.mark.parametrize("kw", [dict(sampler="mvs", subsample=0.3), dict(sampler="sgb", subsample=0.2),
                                dict(sampler="goss", criterion="newton", leaf_estimate="newton")])
def test_compact_copy_of_the_sample_grows_the_same_tree(data, kw, monkeypatch):
    """Small samples are grown on a gathered copy of their rows; the full-matrix path is the reference."""
    import gbfs.booster.tree_step as B

    compact = _fit(data, **kw)
    monkeypatch.setattr(B, "COMPACT_MAX_FRACTION", 0.0)
    reference = _fit(data, **kw)
    np.testing.assert_allclose(compact.predict_proba(data[2]), reference.predict_proba(data[2]), rtol=1e-12)
    assert [t.n_leaves for t in compact.trees_] == [t.n_leaves for t in reference.trees_]
