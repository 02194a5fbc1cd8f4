"""The selection path's cross-validated choice (``cv``), the one-standard-error rule, and regret."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_classification

from gbfs import GBFSClassifier, GBFSRegressor, selection_path
from gbfs.booster.losses.metrics import roc_auc
from gbfs.selection.path_cv import cross_validate, make_folds, one_standard_error

BUDGETS = (3, 6, 12)


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(n_samples=800, n_features=30, n_informative=5, n_redundant=5, flip_y=0.05,
                               random_state=4)
    return X[:450], y[:450], X[450:600], y[450:600], X[600:], y[600:]


def _template(**kw):
    return GBFSClassifier(method="agbm", criterion="newton", leaf_estimate="newton", n_estimators=40,
                          max_leaves=8, min_samples_leaf=10, early_stopping_rounds=8, random_state=0, **kw)


def _answers(path):
    return [(r.budget, r.features.tolist(), r.source, r.cv_mean, r.cv_se) for r in path.results]


@pytest.mark.slow  # two cross-validated paths: ~8 s
def test_cv_choice_is_reproducible_by_seed_and_never_reads_the_test_set(data):
    X, y, Xv, yv, Xs, ys = data
    fit = dict(eval_set=(Xv, yv), budgets=BUDGETS, cv=3)
    a = selection_path(_template(), X, y, test_set=(Xs, ys), **fit)
    b = selection_path(_template(), X, y, test_set=(Xs, ys), **fit)
    assert _answers(a) == _answers(b)
    assert [c["cv_mean"] for c in a.candidates] == [c["cv_mean"] for c in b.candidates]
    scrambled = selection_path(_template(), X, y, test_set=(Xs, np.random.default_rng(0).permutation(ys)),
                               **fit)
    assert _answers(scrambled) == _answers(a)  # every choice and every fold score: the test set is unread
    assert [r.test_score for r in scrambled.results] != [r.test_score for r in a.results]
    other = selection_path(_template().set_params(random_state=1), X, y, **fit)
    assert [c["cv_mean"] for c in other.candidates] != [c["cv_mean"] for c in a.candidates]  # other folds
    for r in a.results:
        assert r.cv_mean is not None and r.cv_se > 0 and r.n_features <= r.budget


def test_the_rule_takes_the_fewest_features_within_one_standard_error():
    options = [("a", 3, 0.900, 0.010), ("b", 6, 0.907, 0.004), ("c", 12, 0.912, 0.006)]

    def pick(opts):
        return one_standard_error(opts, lambda o: o[2], lambda o: o[3], lambda o: o[1])[0]

    assert pick(options) == "b"  # the floor is the best's 0.912 - 0.006 = 0.906: b is above, a is not
    assert pick(options[:1] + [("b", 6, 0.905, 0.004)] + options[2:]) == "c"  # b below the floor
    assert pick([("a", 3, 0.900, 0.01), ("c", 12, 0.905, 0.01)]) == "a"  # 0.900 >= 0.905 - 0.01
    assert pick([("x", 5, 0.90, 0.0), ("y", 5, 0.91, 0.0)]) == "y"  # same size: the higher mean
    assert pick([("x", 5, 0.90, 0.0), ("y", 9, 0.90, 0.0)]) == "x"  # no error: ties go to fewer


def test_folds_are_stratified_disjoint_and_cover_every_row(data):
    X, y = data[0], data[1]
    prep = _template()._prepare(X, y, (data[2], data[3]))
    folds = make_folds(prep, X, y, 5, classifier=True)
    held = np.sort(np.concatenate([_rows(X, h) for h in folds.held_X]))
    np.testing.assert_array_equal(held, np.arange(len(y)))  # every row held out exactly once
    for p, yh in zip(folds.preps, folds.held_y):
        assert p.X_binned.shape[0] + yh.shape[0] == len(y) and p.X_binned.flags["F_CONTIGUOUS"]
        assert abs(yh.mean() - y.mean()) < 0.03  # stratified
        assert p.evals[0][0] == "val" and p.evals[0][1].shape[0] == yh.shape[0]


def _rows(X, held_X):
    """Row numbers of ``held_X`` in ``X`` (its rows are distinct floats)."""
    index = {row.tobytes(): i for i, row in enumerate(X)}
    return np.array([index[row.tobytes()] for row in held_X])


def test_cross_validate_is_the_folds_mean_and_standard_error(data):
    X, y = data[0], data[1]
    template = _template()
    prep = template._prepare(X, y, (data[2], data[3]))
    folds = make_folds(prep, X, y, 4, classifier=True)
    models = []

    def fit(p):
        models.append(clone(template).set_params(refit=True)._fit_prepared(p, selection=np.arange(6)))
        return models[-1]

    rec = cross_validate(fit, folds)
    scores = [roc_auc(yh.astype(float), m.decision_function(Xh))
              for m, Xh, yh in zip(models, folds.held_X, folds.held_y)]
    assert rec["cv_scores"] == scores
    assert rec["cv_mean"] == pytest.approx(np.mean(scores), abs=1e-15)
    assert rec["cv_se"] == pytest.approx(np.std(scores, ddof=1) / math.sqrt(4), rel=1e-12)
    assert rec["cv_trees"] == round(np.mean([m.n_iter_ for m in models]))
    assert all(m.n_iter_ < 40 for m in models)  # each fold stopped early on its held-out rows


@pytest.mark.slow  # 1.5-2 s: the default suite stays under 5 minutes (CI runs the slow tests too)
def test_cv_without_an_eval_set_refits_on_all_rows_with_the_folds_tree_count(data):
    X, y = data[0], data[1]
    template = _template()
    path = selection_path(template, X, y, budgets=BUDGETS, cv=3)
    assert template.early_stopping_rounds == 8  # the user's estimator is not changed
    for r in path.results:
        assert r.val_score is None and r.cv_mean is not None
        assert r.model.early_stopping_rounds is None and 1 <= r.model.n_estimators < 40
        assert r.model.n_iter_ == r.model.n_estimators  # no eval set: every tree kept
    with pytest.raises(ValueError, match="eval_set is required without cv"):
        selection_path(template, X, y, budgets=BUDGETS)


@pytest.mark.parametrize("bad, match", [(1, "cv must be >= 2"), (2.5, "cv must be an int"),
                                        ("5", "cv must be an int")])
def test_bad_cv_is_refused_naming_it(data, bad, match):
    X, y, Xv, yv = data[:4]
    with pytest.raises((TypeError, ValueError), match=match):
        selection_path(_template(), X, y, eval_set=(Xv, yv), budgets=BUDGETS, cv=bad)


def test_more_folds_than_the_rows_allow_are_refused_before_any_fit(data):
    X, y = data[0], data[1]
    with pytest.raises(ValueError, match="cv=300 folds need at least 300 rows of every class; class 0 has"):
        selection_path(_template(), X, y, budgets=BUDGETS, cv=300)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="cv=20 folds need at least 20 training rows; y has 12"):
        selection_path(GBFSRegressor(method="agbm"), rng.random((12, 3)), rng.random(12), budgets=(1,), cv=20)


@pytest.mark.parametrize("exact", [False, True])
def test_regret_is_the_best_candidate_in_hindsight_minus_the_answer(data, exact):
    X, y, Xv, yv, Xs, ys = data
    path = selection_path(_template(), X, y, eval_set=(Xv, yv), budgets=BUDGETS, test_set=(Xs, ys),
                          exact=exact)
    for r in path.results:
        pool = [c["test_score"] for c in path.candidates
                if (c["budget"] == r.budget if exact else c["budget"] <= r.budget)]
        assert r.regret == pytest.approx(max(pool) - r.test_score, abs=1e-15) and r.regret >= 0


def test_a_regressor_cross_validates_by_rmse():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((300, 12))
    y = X[:, 0] - 2 * X[:, 1] + 0.3 * rng.standard_normal(300)
    path = selection_path(GBFSRegressor(method="agbm", n_estimators=30, max_leaves=8, min_samples_leaf=5,
                                        random_state=0), X, y, budgets=(2, 4), cv=3)
    assert all(r.cv_mean < 0 for r in path.results)  # minus the RMSE
    assert set(path[2].features.tolist()) == {0, 1}


@pytest.mark.slow  # 1.5-2 s: the default suite stays under 5 minutes (CI runs the slow tests too)
def test_the_plot_of_a_cross_validated_path_shows_what_the_choice_compared(data):
    import matplotlib

    matplotlib.use("Agg")
    X, y = data[0], data[1]
    path = selection_path(_template(), X, y, budgets=BUDGETS, cv=3)
    ax = path.plot()
    chosen = [line for line in ax.get_lines() if line.get_label() == "chosen (cross-validated)"]
    assert len(chosen) == 1 and list(chosen[0].get_ydata()) == [r.cv_mean for r in path.results]
