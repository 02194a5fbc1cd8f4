"""Estimator-level behaviour of GBFSClassifier / GBFSRegressor (scikit-learn contract, labels, history)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from gbfs import GBFSClassifier, GBFSRegressor

# sklearn's check data sets have 20-150 rows: min_samples_leaf=1 lets trees grow on them, and
# a nonzero mu keeps the feature-selection code path active in every check.
SK_PARAMS = dict(n_estimators=10, min_samples_leaf=1, mu=0.001, random_state=0)


@parametrize_with_checks([GBFSClassifier(**SK_PARAMS), GBFSRegressor(**SK_PARAMS)])
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_classifier_is_declared_multiclass():
    tags = GBFSClassifier().__sklearn_tags__()
    assert tags.classifier_tags.multi_class is True
    assert tags.input_tags.allow_nan is True


# -- labels ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("labels", [("neg", "pos"), (-1, 1), (3, 7), (False, True), (0.5, 2.5)],
                         ids=["str", "pm1", "3_7", "bool", "float"])
def test_classifier_restores_any_two_labels(clf_data, fast_params, labels):
    X, y01 = clf_data
    y = np.where(y01 == 1, labels[1], labels[0])
    ref = GBFSClassifier(**fast_params).fit(X, y01)
    est = GBFSClassifier(**fast_params).fit(X, y)
    assert list(est.classes_) == sorted(labels)
    pred = est.predict(X)
    assert set(np.unique(pred)) <= set(labels)
    assert pred.dtype == np.asarray(y).dtype
    # classes_[1] is the positive class, so the model is the same as the 0/1 fit
    np.testing.assert_array_equal(pred, np.where(ref.predict(X) == 1, labels[1], labels[0]))
    np.testing.assert_array_equal(est.predict_proba(X), ref.predict_proba(X))


def test_classifier_label_order_defines_positive_class(clf_data, fast_params):
    X, y01 = clf_data
    # "a" < "b": with "b" on the 0-rows the positive class (classes_[1]) is the 0 class of y01
    y = np.where(y01 == 1, "a", "b")
    est = GBFSClassifier(**fast_params).fit(X, y)
    assert list(est.classes_) == ["a", "b"]
    ref = GBFSClassifier(**fast_params).fit(X, 1 - y01)
    np.testing.assert_allclose(est.decision_function(X), ref.decision_function(X))
    assert np.mean(est.predict(X) == y) > 0.8


def test_dataframe_feature_names(clf_data, fast_params):
    X, y = clf_data
    cols = [f"feat_{c}" for c in "abcdefghijkl"]
    df = pd.DataFrame(X, columns=cols)
    est = GBFSClassifier(**fast_params).fit(df, y)
    assert list(est.feature_names_in_) == cols
    assert est.n_features_selected_ > 0
    assert est.selected_feature_names_ == [cols[f] for f in est.selected_features_]
    # the same model from the bare array has positional names x<j>
    bare = GBFSClassifier(**fast_params).fit(X, y)
    np.testing.assert_array_equal(bare.selected_features_, est.selected_features_)
    assert bare.selected_feature_names_ == [f"x{f}" for f in bare.selected_features_]
    np.testing.assert_array_equal(est.predict_proba(df), bare.predict_proba(X))
    # transform of a DataFrame keeps exactly the selected columns
    Xt = est.transform(df)
    assert Xt.shape == (X.shape[0], est.n_features_selected_)
    assert list(est.get_feature_names_out()) == [cols[f] for f in sorted(est.selected_features_)]


def test_predict_proba_rows_sum_to_one(clf_data, fast_params):
    X, y = clf_data
    est = GBFSClassifier(**fast_params).fit(X, y)
    proba = est.predict_proba(X)
    assert proba.shape == (X.shape[0], 2)
    assert np.all((proba >= 0) & (proba <= 1))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    # P(classes_[1]) is the logistic of the decision function
    np.testing.assert_allclose(proba[:, 1], 1 / (1 + np.exp(-est.decision_function(X))), rtol=1e-12)


def test_decision_function_consistent_with_predict(clf_data, fast_params):
    X, y = clf_data
    est = GBFSClassifier(**fast_params).fit(X, np.where(y == 1, "yes", "no"))
    dec = est.decision_function(X)
    assert dec.shape == (X.shape[0],)
    pred = est.predict(X)
    np.testing.assert_array_equal(pred, np.where(dec > 0, est.classes_[1], est.classes_[0]))
    np.testing.assert_array_equal(pred, est.classes_[est.predict_proba(X).argmax(axis=1)])
    # not a constant model
    assert len(np.unique(pred)) == 2


def test_fit_learns_something(clf_data, reg_data, fast_params):
    X, y = clf_data
    clf = GBFSClassifier(**fast_params, train_metrics="all").fit(X, y)
    assert clf.history_[-1]["train_auc"] > 0.9
    assert clf.history_[-1]["train_loss"] < clf.history_[0]["train_loss"]
    X, y = reg_data
    reg = GBFSRegressor(**fast_params, train_metrics="all").fit(X, y)
    pred = reg.predict(X)
    assert pred.shape == y.shape
    assert np.sqrt(np.mean((pred - y) ** 2)) < np.std(y)
    assert reg.history_[-1]["train_rmse"] == pytest.approx(np.sqrt(np.mean((pred - y) ** 2)), rel=1e-9)


# -- history ----------------------------------------------------------------------------------------

COMMON_KEYS = {"train_loss", "elapsed_seconds", "root_variance", "n_features_used", "n_leaves"}


@pytest.mark.parametrize("Est, metric", [(GBFSClassifier, "auc"), (GBFSRegressor, "rmse")])
def test_history_records(clf_data, reg_data, fast_params, Est, metric):
    X, y = clf_data if Est is GBFSClassifier else reg_data
    est = Est(**fast_params, train_metrics="all").fit(X, y)
    assert est.n_iter_ == fast_params["n_estimators"] == len(est.trees_)
    assert est.best_iteration_ is None
    assert len(est.history_) == est.n_iter_
    for k, rec in enumerate(est.history_):
        # classifiers record AUC and the RMSE of probabilities; regressors RMSE only
        assert COMMON_KEYS | {"train_rmse"} <= set(rec)
        assert ("train_auc" in rec) == (metric == "auc")
        assert not any(key.startswith("val") for key in rec)
        assert rec["n_leaves"] == est.trees_[k].n_leaves
        assert rec["root_variance"] >= 0
    elapsed = [r["elapsed_seconds"] for r in est.history_]
    assert all(b >= a for a, b in zip(elapsed, elapsed[1:]))
    used = [r["n_features_used"] for r in est.history_]
    assert all(b >= a for a, b in zip(used, used[1:]))
    assert used[-1] == est.n_features_selected_
    # root variance of the first tree = variance of the first residuals (y - init)
    if Est is GBFSRegressor:
        assert est.history_[0]["root_variance"] == pytest.approx(np.var(y), rel=1e-9)


@pytest.mark.parametrize("Est, metric", [(GBFSClassifier, "auc"), (GBFSRegressor, "rmse")])
def test_eval_set_adds_val_keys(clf_split, reg_split, fast_params, Est, metric):
    Xt, yt, Xv, yv = clf_split if Est is GBFSClassifier else reg_split
    est = Est(**fast_params).fit(Xt, yt, eval_set=(Xv, yv))
    for rec in est.history_:
        assert {"val_loss", f"val_{metric}"} <= set(rec)
    # val_* of the last record is the metric of the final model on the eval set
    if Est is GBFSRegressor:
        rmse = np.sqrt(np.mean((est.predict(Xv) - yv) ** 2))
        assert est.history_[-1]["val_rmse"] == pytest.approx(rmse, rel=1e-9)
    else:
        from sklearn.metrics import log_loss, roc_auc_score

        proba = est.predict_proba(Xv)[:, 1]
        assert est.history_[-1]["val_auc"] == pytest.approx(roc_auc_score(yv, proba), rel=1e-9)
        assert est.history_[-1]["val_loss"] == pytest.approx(log_loss(yv, proba), rel=1e-6)
        # the classifier also records the RMSE of its probabilities (GT-GBM paper, Table 3)
        assert est.history_[-1]["val_rmse"] == pytest.approx(np.sqrt(np.mean((proba - yv) ** 2)), rel=1e-9)
    # a list of eval sets: the second gets the val1_ prefix
    est2 = Est(**fast_params).fit(Xt, yt, eval_set=[(Xv, yv), (Xt, yt)])
    last = est2.history_[-1]
    assert {"val_loss", "val1_loss", f"val1_{metric}"} <= set(last)
    assert last["val1_loss"] == pytest.approx(last["train_loss"], rel=1e-9)


# -- early stopping -------------------------------------------------------------------------------

# overfits fast: validation loss bottoms out after ~20 trees on clf_split
OVERFIT = dict(learning_rate=0.5, max_leaves=16, min_samples_leaf=2, mu=0.0, random_state=0)


def test_early_stopping_trims_to_best_iteration(clf_split):
    Xt, yt, Xv, yv = clf_split
    rounds = 10
    est = GBFSClassifier(n_estimators=200, early_stopping_rounds=rounds, **OVERFIT)
    est.fit(Xt, yt, eval_set=(Xv, yv))
    best = est.best_iteration_
    assert best is not None and 0 < best < 190
    assert est.n_iter_ == best + 1 == len(est.trees_)
    # the loop ran `rounds` trees past the best one; history keeps every record
    assert len(est.history_) == best + 1 + rounds
    val_loss = [r["val_loss"] for r in est.history_]
    assert int(np.argmin(val_loss)) == best
    # the trimmed model is the model trained for best + 1 trees
    short = GBFSClassifier(n_estimators=best + 1, **OVERFIT).fit(Xt, yt)
    np.testing.assert_array_equal(est.decision_function(Xv), short.decision_function(Xv))
    np.testing.assert_array_equal(est.selected_features_, short.selected_features_)


def test_early_stopping_keeps_best_when_loop_ends_first(clf_split):
    """The estimator docstring: the model keeps the trees up to the best iteration.

    Here the best validation loss is at iteration ~20 of 30 and ``early_stopping_rounds=25`` never
    fires; LightGBM still keeps the best iteration in that case (its callback raises at the final
    iteration), so the model should have ``best_iteration_ + 1`` trees, not all 30.
    """
    Xt, yt, Xv, yv = clf_split
    est = GBFSClassifier(n_estimators=30, early_stopping_rounds=25, **OVERFIT)
    est.fit(Xt, yt, eval_set=(Xv, yv))
    best = int(np.argmin([r["val_loss"] for r in est.history_]))
    assert best < 29  # precondition: the best model is not the last one
    assert est.best_iteration_ == best
    assert est.n_iter_ == best + 1


# -- threads ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("Est", [GBFSClassifier, GBFSRegressor])
def test_n_threads_do_not_change_the_model(clf_data, reg_data, Est):
    X, y = clf_data if Est is GBFSClassifier else reg_data
    X = X.copy()
    X[::7, 3] = np.nan
    params = dict(n_estimators=20, max_leaves=12, min_samples_leaf=3, mu=0.01, random_state=0)
    one = Est(n_threads=1, **params).fit(X, y)
    two = Est(n_threads=2, **params).fit(X, y)
    raw = (lambda e: e.decision_function(X)) if Est is GBFSClassifier else (lambda e: e.predict(X))
    np.testing.assert_array_equal(raw(one), raw(two))
    np.testing.assert_array_equal(one.selected_features_, two.selected_features_)
    for t1, t2 in zip(one.trees_, two.trees_):
        np.testing.assert_array_equal(t1.feature, t2.feature)
        np.testing.assert_array_equal(t1.value, t2.value)


def test_n_threads_restores_numba_setting(clf_data):
    numba = pytest.importorskip("numba")
    X, y = clf_data
    before = numba.get_num_threads()
    GBFSClassifier(n_estimators=2, n_threads=1).fit(X, y)
    assert numba.get_num_threads() == before


# -- selector interface -----------------------------------------------------------------------------

def test_feature_importances(clf_data, fast_params):
    X, y = clf_data
    est = GBFSClassifier(**fast_params).fit(X, y)
    imp = est.feature_importances_
    assert imp.shape == (X.shape[1],)
    # LightGBM's "gain" importance: the total split gain of each feature, not normalised
    gains = np.zeros(X.shape[1])
    for t in est.trees_:
        for f, g in zip(t.feature, t.gain):
            if f >= 0:
                gains[f] += g
    np.testing.assert_allclose(imp, gains, rtol=1e-12)
    np.testing.assert_array_equal(np.flatnonzero(imp > 0), np.sort(est.selected_features_))
    # the strongest signal column (x0) has the largest importance
    assert int(np.argmax(imp)) == 0


def test_refit_is_independent_of_previous_fit(clf_data, reg_data, fast_params):
    X, y = clf_data
    Xr, yr = reg_data
    est = GBFSClassifier(**fast_params)
    first = est.fit(X, y).decision_function(X)
    est.fit(X[:, :5], y)  # another width in between
    assert est.n_features_in_ == 5
    est.fit(X, y)
    np.testing.assert_array_equal(est.decision_function(X), first)
    assert len(est.history_) == est.n_iter_


@pytest.mark.parametrize("Est", [GBFSClassifier, GBFSRegressor])
def test_train_metrics_choose_what_the_training_rows_record(clf_data, reg_data, fast_params, Est):
    """The training rows record their loss by default, every metric with "all", nothing with
    "none"; the eval sets always record everything, and the model is the same whatever is recorded."""
    X, y = clf_data if Est is GBFSClassifier else reg_data
    fits = {m: Est(**fast_params, train_metrics=m).fit(X[:300], y[:300], eval_set=(X[300:], y[300:]))
            for m in ("loss", "all", "none")}
    train = {m: {k for k in est.history_[-1] if k.startswith("train_")} for m, est in fits.items()}
    assert train["loss"] == {"train_loss"} and train["none"] == set()
    assert train["all"] >= {"train_loss", "train_rmse"} and train["all"] > train["loss"]
    assert all({"val_loss", "val_rmse"} <= set(est.history_[-1]) for est in fits.values())
    assert fits["all"].history_[-1]["train_loss"] == fits["loss"].history_[-1]["train_loss"]
    np.testing.assert_array_equal(fits["none"].predict(X), fits["all"].predict(X))
    with pytest.raises(ValueError, match="train_metrics"):
        Est(**fast_params, train_metrics="some").fit(X, y)
