"""Relaxed refit, GBDT-topK in our booster and LightGBM's importance definitions
(:mod:`gbfs.criteria.refit`)."""

from __future__ import annotations

import lightgbm as lgb
import numpy as np
import pytest
from sklearn.feature_selection import RFE, SelectFromModel

from gbfs import GBFSClassifier, GBFSRegressor, load_model
from gbfs.booster.tree import Tree
from gbfs.criteria.refit import importances

TREES = dict(n_estimators=40, max_leaves=8, min_samples_leaf=5, early_stopping_rounds=5, random_state=0)
UNPENALISED = dict(method="gbfs", mu=0.0, criterion="newton", leaf_estimate="newton")


def _used(est) -> set[int]:
    return {int(f) for t in est.trees_ for f in t.feature if f >= 0}


@pytest.mark.parametrize("method,mu", [("agbm", 0.02), ("gbfs", 2.0), ("gtgbm", 0.02)])
def test_refit_is_an_unpenalised_fit_on_the_selected_columns(clf_split, method, mu):
    Xt, yt, Xv, yv = clf_split
    extra = dict(n_target_features=3) if method == "gtgbm" else {}
    est = GBFSClassifier(method=method, mu=mu, max_features=4, refit=True, **TREES, **extra).fit(
        Xt, yt, eval_set=(Xv, yv))
    sel = est.selected_features_
    assert 1 <= sel.size <= 4
    assert _used(est) <= set(sel.tolist())  # the refit model uses no other feature
    # the selection order is the penalised fit's order of first use
    plain = GBFSClassifier(method=method, mu=mu, max_features=4, **TREES, **extra).fit(
        Xt, yt, eval_set=(Xv, yv))
    assert sel.tolist() == plain.selected_features_[:sel.size].tolist()
    ref = GBFSClassifier(**UNPENALISED, **TREES).fit(Xt[:, sel], yt, eval_set=(Xv[:, sel], yv))
    np.testing.assert_array_equal(est.decision_function(Xv), ref.decision_function(Xv[:, sel]))
    assert est.n_iter_ == ref.n_iter_
    assert est.selection_history_ and est.timings_["refit_seconds"] > 0


def test_refit_regressor_and_model_file_keep_the_selection(reg_split, tmp_path):
    Xt, yt, Xv, yv = reg_split
    est = GBFSRegressor(method="agbm", mu=0.01, refit=True, **TREES).fit(Xt, yt, eval_set=(Xv, yv))
    est.save_model(tmp_path / "m.json")
    back = load_model(tmp_path / "m.json")
    assert back.selected_features_.tolist() == est.selected_features_.tolist()
    np.testing.assert_array_equal(back.predict(Xv), est.predict(Xv))
    np.testing.assert_array_equal(back.transform(Xv), Xv[:, np.sort(est.selected_features_)])


def test_selection_patience_ends_the_selection_fit(clf_split):
    Xt, yt, Xv, yv = clf_split
    est = GBFSClassifier(method="agbm", mu=0.05, refit=True, selection_patience=3, **TREES).fit(
        Xt, yt, eval_set=(Xv, yv))
    used = [r["n_features_used"] for r in est.selection_history_]
    assert len(used) < TREES["n_estimators"] and used[-1] == used[-4]
    with pytest.raises(ValueError, match="selection_patience only applies with refit=True"):
        GBFSClassifier(selection_patience=3).fit(Xt, yt)


@pytest.mark.parametrize("importance_type", ["gain", "split"])
def test_own_topk_equals_its_definition(clf_split, importance_type):
    """Rank the features of an unpenalised fit by importance, refit on the top K."""
    Xt, yt, Xv, yv = clf_split
    trees = {**TREES, "n_estimators": 200, "learning_rate": 0.5}  # early stopping ends the fit
    est = GBFSClassifier(method="topk", max_features=3, importance_type=importance_type,
                         criterion="newton", leaf_estimate="newton", **trees).fit(Xt, yt, eval_set=(Xv, yv))
    full = GBFSClassifier(**UNPENALISED, **trees).fit(Xt, yt, eval_set=(Xv, yv))
    # the ranking counts every tree the ranking fit grew, also the ones early stopping drops
    grown = GBFSClassifier(**UNPENALISED, **{**trees, "early_stopping_rounds": None,
                                             "n_estimators": len(full.history_)}).fit(Xt, yt)
    assert len(grown.trees_) > len(full.trees_)
    imp = grown.feature_importance(importance_type)
    top = np.argsort(-imp, kind="stable")[:3]
    assert est.selected_features_.tolist() == top.tolist()
    ref = GBFSClassifier(**UNPENALISED, **trees).fit(Xt[:, top], yt, eval_set=(Xv[:, top], yv))
    np.testing.assert_array_equal(est.decision_function(Xv), ref.decision_function(Xv[:, top]))


def test_topk_needs_max_features(clf_data):
    X, y = clf_data
    with pytest.raises(ValueError, match="method='topk' needs max_features"):
        GBFSClassifier(method="topk").fit(X, y)


def _trees_from_lightgbm(booster) -> list[Tree]:
    """Our Tree arrays (feature, gain) from LightGBM's dump: a hand-made tree with LightGBM's gains."""
    out = []
    for info in booster.dump_model()["tree_info"]:
        feats, gains, stack = [], [], [info["tree_structure"]]
        while stack:
            node = stack.pop()
            if "split_feature" in node:
                feats.append(node["split_feature"])
                gains.append(node["split_gain"])
                stack.extend((node["left_child"], node["right_child"]))
            else:
                feats.append(-1)
                gains.append(0.0)
        n = len(feats)
        zeros = np.zeros(n)
        out.append(Tree(np.asarray(feats, np.int32), zeros, zeros.astype(np.int32), zeros.astype(bool),
                        -np.ones(n, np.int32), -np.ones(n, np.int32), zeros, np.asarray(gains),
                        zeros.astype(np.int64)))
    return out


def test_importances_equal_lightgbms_definitions(clf_data):
    X, y = clf_data
    booster = lgb.train({"objective": "binary", "num_leaves": 6, "verbosity": -1, "min_data_in_leaf": 5},
                        lgb.Dataset(X, y), num_boost_round=5)
    trees = _trees_from_lightgbm(booster)
    for kind in ("gain", "split"):
        np.testing.assert_allclose(importances(trees, X.shape[1], kind), booster.feature_importance(kind),
                                   rtol=1e-6)


def test_scikit_learn_selectors_use_the_importances(clf_data):
    X, y = clf_data
    est = GBFSClassifier(method="gbfs", mu=0.0, n_estimators=10, max_leaves=4, random_state=0)
    sfm = SelectFromModel(est, max_features=3, threshold=-np.inf).fit(X, y)
    assert set(np.flatnonzero(sfm.get_support())) == set(np.argsort(-sfm.estimator_.feature_importances_)[:3])
    rfe = RFE(est, n_features_to_select=3, step=3).fit(X, y)
    assert rfe.support_.sum() == 3 and rfe.support_[:3].sum() >= 2  # the informative columns survive
