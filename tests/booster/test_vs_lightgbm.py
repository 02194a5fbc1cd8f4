"""With mu = 0 and the Newton criterion/leaves, the learner is a LightGBM-like GBDT: compare to LightGBM.

Matched settings: num_leaves = max_leaves, max_depth, min_data_in_leaf = min_samples_leaf,
min_sum_hessian_in_leaf = min_child_weight, lambda_l2 = reg_lambda, learning_rate, number of trees,
max_bin = 255, no bagging / feature fraction, deterministic, 2 threads.  Binning and tie-breaking
differ slightly between the two, so the test metrics are compared with a tolerance; on data whose
features have few distinct values the binning is identical and the root split must be the same.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split

from gbfs import GBFSClassifier, GBFSRegressor

lgb = pytest.importorskip("lightgbm")

PARAMS = dict(n_estimators=100, learning_rate=0.1, max_leaves=15, max_depth=None, min_samples_leaf=20,
              min_child_weight=1e-3, reg_lambda=1.0)
AUC_TOLERANCE = 0.005
RMSE_TOLERANCE = 0.03  # relative


def _lgb_params(params, objective):
    return dict(objective=objective, num_leaves=params["max_leaves"],
                max_depth=-1 if params["max_depth"] is None else params["max_depth"],
                min_data_in_leaf=params["min_samples_leaf"],
                min_sum_hessian_in_leaf=params["min_child_weight"], lambda_l2=params["reg_lambda"],
                lambda_l1=0.0, min_gain_to_split=0.0, learning_rate=params["learning_rate"], max_bin=255,
                bagging_fraction=1.0, bagging_freq=0, feature_fraction=1.0, deterministic=True,
                num_threads=2, verbose=-1, seed=0)


def _lgb_fit(params, objective, X, y):
    return lgb.train(_lgb_params(params, objective), lgb.Dataset(X, y),
                     num_boost_round=params["n_estimators"])


def _newton(Est, params=PARAMS):
    return Est(mu=0.0, criterion="newton", leaf_estimate="newton", random_state=0, n_threads=2, **params)


def _paper(Est, params=PARAMS):
    return Est(mu=0.0, random_state=0, n_threads=2, **params)  # criterion="sse", leaf_estimate="mean"


def _synthetic_classification():
    rng = np.random.default_rng(0)
    n, d = 2000, 20
    X = rng.random((n, d))
    logit = (3 * X[:, 0] - 2 * 2.0 ** X[:, 1] + 2 * np.log2(1 + X[:, 2]) + 1.5 * np.sin(6 * X[:, 3])
             + 4 * (X[:, 4] - 0.5) * (X[:, 5] - 0.5) + X[:, 6])
    y = (logit - np.median(logit) + 0.6 * rng.standard_normal(n) > 0).astype(np.int64)
    return train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)


def _breast_cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)


def _digit_vs_rest(digit=8):
    X, labels = load_digits(return_X_y=True)
    y = (labels == digit).astype(np.int64)
    return train_test_split(X, y, test_size=0.3, random_state=0, stratify=labels)


DATASETS = {"synthetic": _synthetic_classification, "breast_cancer": _breast_cancer,
            "digits_8_vs_rest": _digit_vs_rest}


@pytest.mark.parametrize("name", list(DATASETS))
def test_auc_matches_lightgbm(name, capsys):
    Xt, Xv, yt, yv = DATASETS[name]()
    ours = _newton(GBFSClassifier).fit(Xt, yt)
    booster = _lgb_fit(PARAMS, "binary", Xt, yt)
    paper = _paper(GBFSClassifier).fit(Xt, yt)
    auc_ours = roc_auc_score(yv, ours.decision_function(Xv))
    auc_lgb = roc_auc_score(yv, booster.predict(Xv, raw_score=True))
    auc_paper = roc_auc_score(yv, paper.decision_function(Xv))
    with capsys.disabled():
        print(f"\n[vs LightGBM] {name}: test AUC gbfs(newton)={auc_ours:.5f} lightgbm={auc_lgb:.5f} "
              f"diff={auc_ours - auc_lgb:+.5f}; paper mode (sse/mean)={auc_paper:.5f}")
    assert auc_lgb > 0.85  # both learn the task
    assert abs(auc_ours - auc_lgb) <= AUC_TOLERANCE
    # the same number of trees; none is a stump only by accident
    assert ours.n_iter_ == booster.num_trees() == PARAMS["n_estimators"]


def test_rmse_matches_lightgbm(capsys):
    rng = np.random.default_rng(1)
    n = 2000
    X = rng.random((n, 15))
    y = 2 * X[:, 0] - 3 * 2.0 ** X[:, 1] + np.log2(1 + X[:, 2]) + np.sin(5 * X[:, 3]) \
        + 0.5 * rng.standard_normal(n)
    Xt, Xv, yt, yv = train_test_split(X, y, test_size=0.3, random_state=0)
    ours = _newton(GBFSRegressor).fit(Xt, yt)
    booster = _lgb_fit(PARAMS, "regression", Xt, yt)
    paper = _paper(GBFSRegressor).fit(Xt, yt)

    def rmse(pred):
        return float(np.sqrt(np.mean((yv - pred) ** 2)))

    r_ours, r_lgb, r_paper = rmse(ours.predict(Xv)), rmse(booster.predict(Xv)), rmse(paper.predict(Xv))
    with capsys.disabled():
        print(f"\n[vs LightGBM] regression: test RMSE gbfs(newton)={r_ours:.5f} lightgbm={r_lgb:.5f} "
              f"ratio={r_ours / r_lgb:.4f}; paper mode (sse/mean)={r_paper:.5f}")
    assert r_lgb < np.std(yv)
    assert abs(r_ours / r_lgb - 1) <= RMSE_TOLERANCE


# -- structure on identically binned data ---------------------------------------------------------

def _few_values(n=300, d=6, seed=2):
    """Integer features 1..8 (positive: LightGBM treats the bin that holds 0 specially)."""
    rng = np.random.default_rng(seed)
    X = rng.integers(1, 9, (n, d)).astype(np.float64)
    score = np.sin(X[:, 1]) + 0.4 * X[:, 3] - 0.3 * X[:, 0] + 0.3 * rng.standard_normal(n)
    return X, score


def _root(booster):
    return booster.dump_model()["tree_info"][0]["tree_structure"]


STRUCT = dict(n_estimators=1, learning_rate=0.1, max_leaves=4, max_depth=None, min_samples_leaf=5,
              min_child_weight=1e-3, reg_lambda=0.0)


@pytest.mark.parametrize("task", ["binary", "regression"])
def test_root_split_equals_lightgbm(task):
    X, score = _few_values()
    if task == "binary":
        y = (score > np.median(score)).astype(np.int64)
        ours = _newton(GBFSClassifier, STRUCT).fit(X, y)
    else:
        y = score
        ours = _newton(GBFSRegressor, STRUCT).fit(X, y)
    booster = _lgb_fit(STRUCT, task, X, y)
    root = _root(booster)
    tree = ours.trees_[0]
    assert tree.feature[0] == root["split_feature"]
    # LightGBM writes the midpoint of the two values plus an ulp or so
    assert tree.threshold[0] == pytest.approx(root["threshold"], rel=1e-12)
    assert tree.threshold[0] % 1 == 0.5
    # the same rows go left, and the gains agree (LightGBM keeps gradients in float32)
    assert tree.count[tree.left[0]] == root["left_child"].get("internal_count",
                                                               root["left_child"].get("leaf_count"))
    assert tree.gain[0] == pytest.approx(root["split_gain"], rel=1e-4)


def test_root_split_on_digits_equals_lightgbm():
    """Digits have at most 17 distinct values per feature: identical bins, identical root split."""
    Xt, _, yt, _ = _digit_vs_rest()
    ours = _newton(GBFSClassifier, {**PARAMS, "n_estimators": 1}).fit(Xt, yt)
    booster = _lgb_fit({**PARAMS, "n_estimators": 1}, "binary", Xt, yt)
    root = _root(booster)
    tree = ours.trees_[0]
    assert tree.feature[0] == root["split_feature"]
    # the split separates the same rows (LightGBM puts the 0 | 1 threshold at 1e-35, we at 0.5)
    f = tree.feature[0]
    np.testing.assert_array_equal(Xt[:, f] <= tree.threshold[0], Xt[:, f] <= root["threshold"])
    assert tree.gain[0] == pytest.approx(root["split_gain"], rel=1e-4)


def _split_gains(booster) -> list[float]:
    out, todo = [], [_root(booster)]
    while todo:
        node = todo.pop()
        if "split_gain" in node:
            out.append(node["split_gain"])
            todo += [node["left_child"], node["right_child"]]
    return sorted(out)


def test_min_split_gain_stops_the_splits_lightgbm_stops():
    X, score = _few_values(n=600, seed=4)
    y = (score > np.median(score)).astype(np.int64)
    settings = {**STRUCT, "max_leaves": 15}
    free = _split_gains(_lgb_fit(settings, "binary", X, y))
    assert len(free) == 14
    # a threshold between two of LightGBM's gains, far from both (the two agree to ~1e-4)
    k = len(free) // 2
    threshold = float(np.sqrt(free[k - 1] * free[k]))
    assert free[k] / free[k - 1] > 1.01
    params = {**_lgb_params(settings, "binary"), "min_gain_to_split": threshold}
    theirs = _split_gains(lgb.train(params, lgb.Dataset(X, y), num_boost_round=1))
    ours = _newton(GBFSClassifier, {**settings, "min_split_gain": threshold}).fit(X, y).trees_[0]
    gains = sorted(ours.gain[ours.feature >= 0].tolist())
    assert len(theirs) < len(free) and all(g > threshold for g in gains)
    np.testing.assert_allclose(gains, theirs, rtol=1e-4)
