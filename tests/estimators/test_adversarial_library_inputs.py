"""Hostile inputs to the library's estimators and tools: rankers whose rows carry no gradient,
default arguments on narrow data, text columns, integers in a text categorical column, and the
selection path on more than two classes.

Every refusal must be a clear error naming the argument (or the column), raised before any
training; no model with non-finite scores may be returned.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import gbfs.estimators.fitting
from gbfs import GBFSClassifier, GBFSRanker, GBFSRegressor
from gbfs.selection.path import selection_path
from gbfs.selection.stability import selection_stability

rng = np.random.default_rng(7)
X = rng.random((120, 4))
Y = (X[:, 0] + 0.3 * rng.random(120) > 0.6).astype(np.int64)
FAST = dict(n_estimators=5, max_leaves=6, min_samples_leaf=5, random_state=0)


@pytest.fixture
def no_training(monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("boost() was called: the input was not validated before training")

    monkeypatch.setattr(gbfs.estimators.fitting, "boost", boom)


# -- LambdaRank with no pair to order: zero gradients and hessians --------------------------------

def _mostly_constant_queries(n_queries=200, size=5, graded=10, seed=0):
    """``n_queries`` queries of ``size`` rows; only the first ``graded`` have distinct relevances."""
    r = np.random.default_rng(seed)
    Xq = r.random((n_queries * size, 4))
    y = np.zeros(n_queries * size, dtype=np.int64)
    y[:graded * size] = r.integers(0, 3, graded * size)
    return Xq, y, [size] * n_queries


@pytest.mark.parametrize("seed", range(5))
def test_ranker_whose_sample_holds_only_constant_queries_fits_a_finite_model(seed):
    # 2 % of the rows: most trees see only all-zero queries, whose lambdas and hessians are all 0
    Xq, y, group = _mostly_constant_queries()
    est = GBFSRanker(n_estimators=6, sampler="sgb", subsample=0.02, random_state=seed).fit(Xq, y, group)
    assert np.all(np.isfinite(est.predict(Xq)))
    assert not any(np.isnan(r["gain_normaliser"]) for r in est.history_)  # inf: no gain to divide
    assert all(np.all(np.isfinite(t.value)) for t in est.trees_)


@pytest.mark.parametrize("method", ["gbfs", "agbm"])
@pytest.mark.parametrize("y, group", [([1], [1]), ([2] * 20, [10, 10]), ([0] * 12, [12])],
                         ids=["one_row", "equal_relevance", "all_zero"])
def test_ranker_without_any_pair_is_a_constant_model(method, y, group):
    # LightGBM: lambdarank gradients are 0, no split is possible, every tree is one leaf of value 0
    Xq = rng.random((len(y), 3))
    est = GBFSRanker(n_estimators=3, method=method, mu=0.1, random_state=0).fit(Xq, y, group)
    assert all(t.n_leaves == 1 for t in est.trees_)
    np.testing.assert_array_equal(est.predict(Xq), np.zeros(len(y)))


def test_ranker_with_zero_min_child_weight_gives_no_child_of_zero_hessians():
    Xq, y, group = _mostly_constant_queries(n_queries=40, graded=10)
    est = GBFSRanker(n_estimators=4, min_child_weight=0.0, random_state=0).fit(Xq, y, group)
    pred = est.predict(Xq)
    assert np.all(np.isfinite(pred)) and np.ptp(pred) > 0  # the graded queries are still learnt


# -- GT-GBM's defaults on data narrower than its default s ----------------------------------------

def test_gtgbm_default_target_features_fit_data_with_fewer_than_ten_features():
    est = GBFSClassifier(method="gtgbm", mu=0.01, **FAST).fit(X, Y)
    assert est.get_params()["n_target_features"] is None  # the default is recorded, not rewritten
    same = GBFSClassifier(method="gtgbm", mu=0.01, n_target_features=4, **FAST).fit(X, Y)
    np.testing.assert_array_equal(est.predict_proba(X), same.predict_proba(X))  # min(10, d) = 4
    assert est.subset_size_ == 1 and 0 in est.selected_features_


@pytest.mark.parametrize("scope", ["tree", "node"])
def test_gtgbm_with_one_feature_per_subset_tests_that_feature(scope):
    # s = d: ceil(d / s) = 1 feature per subset, nothing to halve; each subset's feature is its
    # survivor, scored alone (it used to be dropped as if no split were admissible)
    Xw = rng.random((200, 10))
    yw = (Xw[:, 3] + 0.2 * rng.random(200) > 0.6).astype(np.int64)
    est = GBFSClassifier(method="gtgbm", mu=0.01, n_target_features=10, group_test_scope=scope,
                         **FAST).fit(Xw, yw)
    assert est.subset_size_ == 1 and est.selected_features_[0] == 3


def test_gtgbm_explicit_target_features_above_the_width_is_still_refused(no_training):
    with pytest.raises(ValueError, match=r"^n_target_features=10 exceeds the 4 features of X"):
        GBFSClassifier(method="gtgbm", n_target_features=10, **FAST).fit(X, Y)


# -- text columns ---------------------------------------------------------------------------------

def test_text_column_without_categorical_features_names_it_and_the_remedy(no_training):
    df = pd.DataFrame({"x": X[:, 0], "city": np.where(Y == 1, "Paris", "Rome")})
    with pytest.raises(TypeError, match=r"non-numeric columns \['city'\].*categorical_features=\['city'\]"
                                        r".*'category' dtype") as err:
        GBFSClassifier(**FAST).fit(df, Y)
    assert "one-hot" not in str(err.value)  # categorical_features is the library's own way


def _text_model():
    df = pd.DataFrame({"x": X[:, 0], "city": np.array(["a", "b", "c"])[(X[:, 1] * 3).astype(int)]})
    return df, GBFSClassifier(**FAST, categorical_features=["city"]).fit(df, Y)


@pytest.mark.parametrize("column", [
    pd.Series([0, 1, 2] * 40, dtype=object),
    pd.Series(pd.Categorical([0, 1, 2] * 40)),
    pd.Series(np.array([0, 1, 2] * 40, dtype=np.int64)),
    pd.Series(["a", 1, "b"] * 40, dtype=object),
], ids=["object_ints", "category_ints", "int64", "mixed"])
def test_integers_in_a_text_categorical_column_are_refused_at_predict(column):
    df, est = _text_model()
    with pytest.raises(TypeError, match=r"X column 'city'.*fitted on string categories"):
        est.predict(df.assign(city=column))


def test_unseen_strings_in_a_text_categorical_column_still_predict_as_missing():
    df, est = _text_model()
    unseen = est.predict_proba(df.assign(city="nowhere"))
    np.testing.assert_array_equal(unseen, est.predict_proba(df.assign(city=None)))


def test_integer_categories_are_matched_by_value_not_position():
    cats = np.array([10, 20, 30])[(X[:, 1] * 3).astype(int)]
    df = pd.DataFrame({"x": X[:, 0], "c": pd.Categorical(cats)})
    est = GBFSClassifier(**FAST).fit(df, Y)
    as_int = df.assign(c=cats)  # the same values as a plain integer column
    np.testing.assert_array_equal(est.predict_proba(as_int), est.predict_proba(df))
    with pytest.raises(TypeError, match=r"X column 'c'.*fitted on numeric categories"):
        est.predict(df.assign(c=cats.astype(str)))


def test_arrays_and_sparse_matrices_for_a_column_fitted_on_categories():
    import scipy.sparse

    df, est = _text_model()
    codes = np.column_stack([X[:, 0], (X[:, 1] * 3).astype(int)])  # the positions of 'a', 'b', 'c'
    with pytest.raises(TypeError, match=r"X column 1 holds numeric values, .*fitted on string categories"):
        est.predict(codes)
    with pytest.raises(TypeError, match=r"X is sparse, but column 1 was fitted on category values"):
        est.predict(scipy.sparse.csr_matrix(codes))
    cats = np.array([10, 20, 30])[(X[:, 1] * 3).astype(int)]
    num = GBFSClassifier(**FAST).fit(pd.DataFrame({"x": X[:, 0], "c": pd.Categorical(cats)}), Y)
    plain = np.column_stack([X[:, 0], cats])
    with pytest.warns(UserWarning, match="feature names"):  # scikit-learn's: fitted on a frame
        np.testing.assert_array_equal(num.predict_proba(plain), num.predict_proba(
            pd.DataFrame({"x": X[:, 0], "c": pd.Categorical(cats)})))


# -- the selection path and stability on more than two classes ------------------------------------

def _three_classes(n=240, seed=3):
    r = np.random.default_rng(seed)
    Xm = r.random((n, 5))
    ym = np.digitize(Xm[:, 0] + 0.5 * Xm[:, 1] + 0.2 * r.random(n), [0.6, 1.0])
    return Xm, ym


@pytest.mark.parametrize("method, mu", [("gbfs", 1.0), ("agbm", 0.01)])
def test_selection_path_on_three_classes_scores_by_macro_auc(method, mu):
    from sklearn.metrics import roc_auc_score

    Xm, ym = _three_classes()
    est = GBFSClassifier(method=method, mu=mu, n_estimators=6, max_leaves=4, min_samples_leaf=5,
                         random_state=0)
    path = selection_path(est, Xm[:160], ym[:160], eval_set=(Xm[160:], ym[160:]), budgets=(1, 2),
                          n_probes=3, test_set=(Xm[160:], ym[160:]))
    assert path.timings["metric"] == "macro_auc" and np.isfinite(path.mu_max) and path.mu_max > 0
    for r in path.results:
        assert r.n_features <= r.budget and r.model.classes_.tolist() == [0, 1, 2]
        want = roc_auc_score(ym[160:], r.model.predict_proba(Xm[160:]), multi_class="ovr")
        assert r.val_score == pytest.approx(want, rel=1e-12) and r.test_score == r.val_score


def test_selection_path_mu_max_on_three_classes_selects_nothing():
    # mu_max is the smallest mu at which no first-round tree (of any class) can split
    Xm, ym = _three_classes()
    est = GBFSClassifier(method="agbm", n_estimators=3, max_leaves=4, min_samples_leaf=5, random_state=0)
    path = selection_path(est, Xm[:160], ym[:160], eval_set=(Xm[160:], ym[160:]), budgets=(1,), n_probes=2)
    at = GBFSClassifier(**{**est.get_params(), "mu": path.mu_max * (1 + 1e-9)}).fit(Xm[:160], ym[:160])
    below = GBFSClassifier(**{**est.get_params(), "mu": path.mu_max * 0.99}).fit(Xm[:160], ym[:160])
    assert at.n_features_selected_ == 0 and below.n_features_selected_ > 0


def test_selection_stability_on_three_classes():
    Xm, ym = _three_classes()
    res = selection_stability(GBFSClassifier(mu=1.0, n_estimators=4, max_leaves=4, random_state=0), Xm, ym,
                              n_resamples=2, random_state=0)
    assert res.n_resamples == 2 and 0.0 <= res.jaccard <= 1.0


def test_regressor_selection_path_still_scores_by_rmse():
    Xr = rng.random((160, 4))
    yr = 2 * Xr[:, 0] - Xr[:, 1]
    path = selection_path(GBFSRegressor(n_estimators=4, max_leaves=4, random_state=0), Xr[:120], yr[:120],
                          eval_set=(Xr[120:], yr[120:]), budgets=(1,), n_probes=2)
    assert path.timings["metric"] == "neg_rmse" and path.results[0].val_score < 0
