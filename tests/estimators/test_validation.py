"""Bad inputs are refused in Python, before any training, with an error that names the argument."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import NotFittedError

import gbfs.estimators.fitting
from gbfs import GBFSClassifier, GBFSRegressor

rng = np.random.default_rng(0)
X = rng.random((60, 4))
Y = (X[:, 0] > 0.5).astype(np.int64)
YR = X[:, 0] + X[:, 1]


def _with(value, i=0, j=0, base=X):
    out = base.copy()
    out[i, j] = value
    return out


def _y_nan():
    y = YR.copy()
    y[3] = np.nan
    return y


def _string_frame():
    df = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    df["colour"] = ["red", "blue"] * 30
    return df


def _not_callable_cb():
    return [lambda env: None, 42]


# (id, estimator class, constructor params, fit args (X, y, fit kwargs), exception type, message regex)
CASES = [
    # -- X
    ("X_empty_rows", GBFSClassifier, {}, lambda: (np.empty((0, 4)), np.empty(0)), ValueError, r"\bX\b"),
    ("X_no_features", GBFSRegressor, {}, lambda: (np.empty((60, 0)), YR), ValueError, r"\bX\b"),
    ("X_1d", GBFSRegressor, {}, lambda: (X[:, 0], YR), ValueError, r"\bX\b"),
    ("X_3d", GBFSRegressor, {}, lambda: (X.reshape(60, 2, 2), YR), ValueError, r"\bX\b"),
    ("X_pos_inf", GBFSClassifier, {}, lambda: (_with(np.inf), Y), ValueError, r"\bX\b.*infinity"),
    ("X_neg_inf", GBFSRegressor, {}, lambda: (_with(-np.inf, 5, 2), YR), ValueError, r"\bX\b.*infinity"),
    ("X_string_columns_df", GBFSClassifier, {}, lambda: (_string_frame(), Y), TypeError,
     r"\bX\b.*non-numeric.*colour"),
    ("X_numpy_strings", GBFSClassifier, {}, lambda: (X.astype(str), Y), TypeError, r"\bX\b.*str"),
    ("X_numpy_bytes", GBFSRegressor, {}, lambda: (X.astype("S8"), YR), TypeError, r"\bX\b"),
    # -- y
    ("y_length_mismatch", GBFSClassifier, {}, lambda: (X, Y[:-1]), ValueError, r"\by\b"),
    ("y_nan_regressor", GBFSRegressor, {}, lambda: (X, _y_nan()), ValueError, r"\by\b.*NaN"),
    ("y_inf_regressor", GBFSRegressor, {}, lambda: (X, np.where(YR > 1, np.inf, YR)), ValueError,
     r"\by\b.*infinity"),
    ("y_2d_regressor", GBFSRegressor, {}, lambda: (X, np.c_[YR, YR]), ValueError, r"\by\b"),
    ("y_one_class", GBFSClassifier, {}, lambda: (X, np.ones(60)), ValueError, r"\by\b.*one class"),
    ("y_three_classes_eval_unseen", GBFSClassifier, {},
     lambda: (X, np.arange(60) % 3, {"eval_set": (X[:6], np.arange(6))}), ValueError,
     r"eval_set\[0\] y.*\[3, 4, 5\] not seen"),
    ("y_strings_regressor", GBFSRegressor, {}, lambda: (X, np.array(["a"] * 60)), ValueError, r"\by\b"),
    ("y_numeric_strings_regressor", GBFSRegressor, {}, lambda: (X, [str(v) for v in YR]), ValueError,
     r"^y must be numeric"),
    ("y_too_large_regressor", GBFSRegressor, {}, lambda: (X, YR * 1e300), ValueError, r"^y is too large"),
    ("y_mixed_labels", GBFSClassifier, {}, lambda: (X, np.array([0, "1"] * 30, dtype=object)), ValueError,
     r"^y: Mix of label input types"),
    # -- eval_set
    ("eval_set_other_width", GBFSClassifier, {}, lambda: (X, Y, {"eval_set": (X[:, :3], Y)}),
     ValueError, r"eval_set\[0\].*3 features"),
    ("eval_set_not_tuple", GBFSClassifier, {}, lambda: (X, Y, {"eval_set": [X, Y]}), TypeError,
     r"eval_set\[0\] must be a tuple"),
    ("eval_set_array", GBFSClassifier, {}, lambda: (X, Y, {"eval_set": np.zeros((2, 3))}), TypeError,
     r"eval_set must be a tuple"),
    ("eval_set_triple", GBFSRegressor, {}, lambda: (X, YR, {"eval_set": [(X, YR, YR)]}), TypeError,
     r"eval_set\[0\]"),
    ("eval_set_unseen_label", GBFSClassifier, {}, lambda: (X, Y, {"eval_set": (X, Y + 5)}), ValueError,
     r"eval_set\[0\] y.*not seen"),
    ("eval_set_y_length", GBFSClassifier, {}, lambda: (X, Y, {"eval_set": (X, Y[:10])}), ValueError,
     r"eval_set\[0\].*\by\b"),
    ("eval_set_y_nan", GBFSRegressor, {}, lambda: (X, YR, {"eval_set": (X, _y_nan())}), ValueError,
     r"eval_set\[0\] y.*NaN"),
    ("eval_set_X_inf", GBFSRegressor, {}, lambda: (X, YR, {"eval_set": (_with(np.inf), YR)}), ValueError,
     r"eval_set\[0\].*infinity"),
    ("eval_set_second_width", GBFSRegressor, {},
     lambda: (X, YR, {"eval_set": [(X, YR), (X[:, :2], YR)]}), ValueError, r"eval_set\[1\]"),
    # -- mu
    ("mu_negative", GBFSClassifier, {"mu": -0.1}, lambda: (X, Y), ValueError, r"\bmu\b.*>= 0"),
    ("mu_nan", GBFSClassifier, {"mu": float("nan")}, lambda: (X, Y), ValueError, r"\bmu\b.*finite"),
    ("mu_inf_gbfs", GBFSRegressor, {"mu": float("inf"), "method": "gbfs"}, lambda: (X, YR), ValueError,
     r"\bmu\b.*finite"),
    ("mu_above_1_agbm", GBFSClassifier, {"mu": 1.5, "method": "agbm"}, lambda: (X, Y), ValueError,
     r"\bmu\b.*agbm"),
    ("mu_string", GBFSClassifier, {"mu": "0.1"}, lambda: (X, Y), TypeError, r"\bmu\b"),
    # -- tree shape
    ("min_node_fraction_0", GBFSClassifier, {"min_node_fraction": 0.0}, lambda: (X, Y), ValueError,
     r"min_node_fraction"),
    ("min_node_fraction_1", GBFSClassifier, {"min_node_fraction": 1.0}, lambda: (X, Y), ValueError,
     r"min_node_fraction"),
    ("max_depth_0", GBFSClassifier, {"max_depth": 0}, lambda: (X, Y), ValueError, r"max_depth"),
    ("max_leaves_1", GBFSRegressor, {"max_leaves": 1}, lambda: (X, YR), ValueError, r"max_leaves"),
    ("min_samples_leaf_0", GBFSRegressor, {"min_samples_leaf": 0}, lambda: (X, YR), ValueError,
     r"min_samples_leaf"),
    ("min_child_weight_negative", GBFSRegressor, {"min_child_weight": -1.0}, lambda: (X, YR), ValueError,
     r"min_child_weight"),
    ("reg_lambda_negative", GBFSRegressor, {"reg_lambda": -1.0}, lambda: (X, YR), ValueError,
     r"reg_lambda"),
    # -- bags and costs
    ("feature_bags_wrong_length", GBFSClassifier, {"feature_bags": [0, 0, 1]}, lambda: (X, Y), ValueError,
     r"feature_bags.*3 entries"),
    ("feature_bags_non_integer", GBFSClassifier, {"feature_bags": [0.0, 0.5, 1.0, 1.0]}, lambda: (X, Y),
     TypeError, r"feature_bags.*integer"),
    ("feature_bags_strings", GBFSClassifier, {"feature_bags": ["a", "a", "b", "b"]}, lambda: (X, Y),
     TypeError, r"feature_bags"),
    ("feature_bags_2d", GBFSClassifier, {"feature_bags": [[0, 0, 1, 1]]}, lambda: (X, Y), ValueError,
     r"feature_bags.*1-D"),
    ("feature_costs_wrong_length", GBFSRegressor, {"feature_costs": [1.0] * 5}, lambda: (X, YR), ValueError,
     r"feature_costs.*5 entries"),
    ("feature_costs_negative", GBFSRegressor, {"feature_costs": [1.0, -2.0, 1.0, 1.0]}, lambda: (X, YR),
     ValueError, r"feature_costs.*entry 1"),
    ("feature_costs_nan", GBFSRegressor, {"feature_costs": [1.0, 1.0, np.nan, 1.0]}, lambda: (X, YR),
     ValueError, r"feature_costs.*entry 2"),
    ("feature_costs_strings", GBFSRegressor, {"feature_costs": ["1"] * 4}, lambda: (X, YR), TypeError,
     r"feature_costs"),
    # -- choices
    ("method_unknown", GBFSClassifier, {"method": "lasso"}, lambda: (X, Y), ValueError, r"method.*lasso"),
    ("criterion_unknown", GBFSClassifier, {"criterion": "gini"}, lambda: (X, Y), ValueError,
     r"criterion.*gini"),
    ("leaf_estimate_unknown", GBFSRegressor, {"leaf_estimate": "median"}, lambda: (X, YR), ValueError,
     r"leaf_estimate.*median"),
    # -- boosting
    ("learning_rate_0", GBFSClassifier, {"learning_rate": 0.0}, lambda: (X, Y), ValueError,
     r"learning_rate.*> 0"),
    ("learning_rate_negative", GBFSClassifier, {"learning_rate": -0.1}, lambda: (X, Y), ValueError,
     r"learning_rate"),
    ("learning_rate_huge", GBFSRegressor, {"learning_rate": 1e300}, lambda: (X, YR), ValueError,
     r"learning_rate must be <= 100"),
    ("n_estimators_0", GBFSClassifier, {"n_estimators": 0}, lambda: (X, Y), ValueError, r"n_estimators"),
    ("n_estimators_float", GBFSClassifier, {"n_estimators": 10.0}, lambda: (X, Y), TypeError,
     r"n_estimators.*int"),
    ("n_estimators_bool", GBFSClassifier, {"n_estimators": True}, lambda: (X, Y), TypeError,
     r"n_estimators"),
    ("max_bins_256", GBFSClassifier, {"max_bins": 256}, lambda: (X, Y), ValueError, r"max_bins.*255"),
    ("max_bins_1", GBFSClassifier, {"max_bins": 1}, lambda: (X, Y), ValueError, r"max_bins"),
    ("bin_subsample_small", GBFSClassifier, {"bin_subsample": 10}, lambda: (X, Y), ValueError,
     r"bin_subsample"),
    ("n_threads_0", GBFSClassifier, {"n_threads": 0}, lambda: (X, Y), ValueError, r"n_threads"),
    ("n_threads_too_many", GBFSClassifier, {"n_threads": 10_000}, lambda: (X, Y), ValueError,
     r"n_threads"),
    ("early_stopping_rounds_0", GBFSClassifier, {"early_stopping_rounds": 0},
     lambda: (X, Y, {"eval_set": (X, Y)}), ValueError, r"early_stopping_rounds"),
    ("early_stopping_without_eval_set", GBFSClassifier, {"early_stopping_rounds": 5}, lambda: (X, Y),
     ValueError, r"early_stopping_rounds.*eval_set"),
    # -- callbacks
    ("callbacks_not_callable", GBFSClassifier, {}, lambda: (X, Y, {"callbacks": _not_callable_cb()}),
     TypeError, r"callbacks\[1\].*not callable"),
    ("callbacks_scalar", GBFSClassifier, {}, lambda: (X, Y, {"callbacks": 42}), TypeError, r"callbacks"),
]


@pytest.fixture
def no_training(monkeypatch):
    """Fail loudly if a bad-input fit reaches the boosting loop."""
    def boom(*args, **kwargs):
        raise AssertionError("boost() was called: the input was not validated before training")

    monkeypatch.setattr(gbfs.estimators.fitting, "boost", boom)


def test_enough_cases():
    assert len(CASES) >= 20


@pytest.mark.parametrize("Est, params, make_args, exc, match", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input_refused_before_training(no_training, Est, params, make_args, exc, match):
    args = make_args()
    Xa, ya = args[:2]
    kwargs = args[2] if len(args) > 2 else {}
    est = Est(**{"n_estimators": 5, **params})
    with pytest.raises(exc, match=match):
        est.fit(Xa, ya, **kwargs)
    # nothing was fitted
    assert not hasattr(est, "history_")
    assert not hasattr(est, "_trees")


def test_object_array_of_strings_is_refused(no_training):
    # documented choice (validation.reject_non_numeric): object arrays go to sklearn's conversion,
    # whose message names the offending value
    Xo = X.astype(object)
    Xo[2, 1] = "seven"
    with pytest.raises(ValueError, match="seven"):
        GBFSClassifier().fit(Xo, Y)


def test_no_training_fixture_is_effective(no_training):
    # the guard above must fire on valid input, otherwise the tests using it prove nothing
    with pytest.raises(AssertionError, match="boost"):
        GBFSClassifier(n_estimators=2).fit(X, Y)


# -- NaN is allowed ----------------------------------------------------------------------------------

def test_nan_in_X_is_allowed_and_used():
    rng = np.random.default_rng(1)
    Xn = rng.random((200, 4))
    y = rng.integers(0, 2, 200)
    Xn[y == 1, 2] = np.nan  # missingness of x2 is the label
    Xn[::5, 3] = np.nan  # noise missingness
    est = GBFSClassifier(n_estimators=5, min_samples_leaf=2, random_state=0).fit(Xn, y)
    assert est.selected_features_[0] == 2
    assert np.array_equal(est.predict(Xn), y)
    # eval_set and predict accept NaN too, and an all-NaN row gets a finite score
    est.fit(Xn, y, eval_set=(Xn, y))
    assert est.history_[-1]["val_auc"] == pytest.approx(1.0)
    assert np.all(np.isfinite(est.decision_function(np.full((3, 4), np.nan))))


def test_all_nan_column_is_allowed():
    Xn = X.copy()
    Xn[:, 1] = np.nan
    est = GBFSRegressor(n_estimators=5, min_samples_leaf=2).fit(Xn, YR)
    assert 1 not in est.selected_features_
    assert np.all(np.isfinite(est.predict(Xn)))


# -- prediction-time errors ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def fitted():
    return (GBFSClassifier(n_estimators=3, min_samples_leaf=2).fit(X, Y),
            GBFSRegressor(n_estimators=3, min_samples_leaf=2).fit(X, YR))


@pytest.mark.parametrize("method", ["predict", "predict_proba", "decision_function", "transform"])
def test_predict_wrong_number_of_features(fitted, method):
    clf, _ = fitted
    with pytest.raises(ValueError, match=r"\bX\b has 3 features.*expecting 4"):
        getattr(clf, method)(X[:, :3])


def test_regressor_predict_wrong_number_of_features(fitted):
    _, reg = fitted
    with pytest.raises(ValueError, match=r"\bX\b has 5 features.*expecting 4"):
        reg.predict(np.c_[X, X[:, 0]])


def test_predict_refuses_inf_and_strings(fitted):
    clf, reg = fitted
    with pytest.raises(ValueError, match=r"\bX\b.*infinity"):
        reg.predict(_with(-np.inf))
    with pytest.raises(TypeError, match=r"\bX\b.*non-numeric"):
        clf.predict(_string_frame().iloc[:, 2:])


@pytest.mark.parametrize("Est, method", [
    (GBFSClassifier, "predict"), (GBFSClassifier, "predict_proba"), (GBFSClassifier, "decision_function"),
    (GBFSClassifier, "transform"), (GBFSRegressor, "predict"), (GBFSRegressor, "transform"),
])
def test_predict_before_fit(Est, method):
    with pytest.raises(NotFittedError):
        getattr(Est(), method)(X)


@pytest.mark.parametrize("Est", [GBFSClassifier, GBFSRegressor])
def test_other_attributes_before_fit(Est, tmp_path):
    est = Est()
    with pytest.raises(NotFittedError):
        est.get_support()
    with pytest.raises(NotFittedError):
        est.save_model(tmp_path / "m.json")
    with pytest.raises(NotFittedError):
        est.trees_  # noqa: B018


def test_failed_fit_keeps_previous_model():
    """A refit refused by parameter validation leaves the fitted model untouched."""
    clf = GBFSClassifier(n_estimators=3, min_samples_leaf=2).fit(X, Y)
    before = clf.decision_function(X)
    clf.set_params(mu=-1.0)
    with pytest.raises(ValueError, match="mu"):
        clf.fit(X[:, :2], Y)
    assert clf.n_features_in_ == 4
    np.testing.assert_array_equal(clf.decision_function(X), before)


def test_refused_refit_does_not_mix_old_trees_with_new_width():
    """A refit refused at the eval_set check must not leave the old trees behind a new input width.

    ``fit`` runs sklearn's ``validate_data(reset=True)`` (which sets ``n_features_in_``) before it
    checks ``eval_set``; the old trees split on x3, so a 2-column X would then be accepted and the
    numba predictor would read column 3 out of bounds.  Either the old model stays usable on 4
    columns, or the estimator is unfitted; a 2-column X must never be scored.
    """
    rng = np.random.default_rng(3)
    X4 = rng.random((60, 4))
    y = (X4[:, 3] > 0.5).astype(np.int64)
    clf = GBFSClassifier(n_estimators=3, min_samples_leaf=2).fit(X4, y)
    assert 3 in clf.selected_features_
    with pytest.raises(ValueError, match=r"eval_set\[0\]"):
        clf.fit(X4[:, :2], y, eval_set=(X4[:, :3], y))
    with pytest.raises((ValueError, NotFittedError)):
        clf.predict(X4[:, :2])
