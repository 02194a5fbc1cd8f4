"""Recursive feature elimination: its sizes, its definition on a hand-made case, and as a path source."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification

from gbfs import GBFSClassifier, selection_path
from gbfs.selection.elimination import eliminate, elimination_sizes


def test_sizes_shrink_by_the_step_and_stop_at_every_budget():
    assert elimination_sizes(100, (5, 10, 20, 50), 0.2) == [80, 64, 51, 50, 40, 32, 25, 20, 16, 12, 10, 8,
                                                              6, 5]
    assert elimination_sizes(4, (2,), 0.1) == [3, 2]  # at least one fewer per fit
    assert elimination_sizes(10, (10, 20), 0.5) == []  # no budget below the start


def test_elimination_refits_between_steps():
    # features 0 and 1 are redundant: together each earns half its gain, alone the whole
    base = np.array([10.0, 10.0, 8.0, 1.0, 0.5])
    calls = []

    def importance_of(current):
        calls.append(current.tolist())
        gain = base[current].copy()
        if 0 in current and 1 in current:
            gain[np.isin(current, [0, 1])] = 5.0
        return gain

    got = eliminate(importance_of, np.arange(5), budgets=(2, 4), step=0.2)
    # 5 -> 4 drops 4; 4 -> 3 drops 3; 3 -> 2 keeps 2 (8) and 0 (5, before 1 on the tie)
    assert calls == [[0, 1, 2, 3, 4], [2, 0, 1, 3], [2, 0, 1]]
    np.testing.assert_array_equal(got[4], [2, 0, 1, 3])
    np.testing.assert_array_equal(got[2], [2, 0])
    # a ranking of one fit would keep 0 and 1, the pair that says the same thing twice
    assert set(got[2]) != set(np.argsort(-base, kind="stable")[:2])


@pytest.fixture(scope="module")
def split():
    X, y = make_classification(n_samples=900, n_features=40, n_informative=6, n_redundant=6,
                               random_state=0)
    return X[:600], y[:600], X[600:], y[600:]


def _template():
    return GBFSClassifier(method="agbm", criterion="newton", leaf_estimate="newton", n_estimators=40,
                          max_leaves=8, min_samples_leaf=10, early_stopping_rounds=5, random_state=0)


def test_the_path_offers_elimination_sets_of_every_budget_nested(split):
    X, y, Xv, yv = split
    path = selection_path(_template(), X, y, eval_set=(Xv, yv), budgets=(3, 6, 12), rfe_step=0.25)
    rfe = {c["budget"]: c["features"] for c in path.candidates if "rfe" in [c["source"], *c["also"]]}
    assert sorted(rfe) == [3, 6, 12] and all(len(f) == k for k, f in rfe.items())
    assert set(rfe[3]) <= set(rfe[6]) <= set(rfe[12])  # counts monotone along the budgets
    without = selection_path(_template(), X, y, eval_set=(Xv, yv), budgets=(3, 6, 12), rfe_step=None)
    assert not any("rfe" in [c["source"], *c["also"]] for c in without.candidates)
    for r in path.results:  # elimination only adds candidates: a choice is never worse on validation
        assert r.val_score >= without[r.budget].val_score


@pytest.mark.parametrize("step, match", [(0.0, "rfe_step must be > 0"), (1.0, "rfe_step must be < 1"),
                                         ("a", "rfe_step must be a float in \\(0, 1\\), 'auto' or None")])
def test_bad_rfe_step_is_refused(split, step, match):
    X, y, Xv, yv = split
    with pytest.raises((ValueError, TypeError), match=match):
        selection_path(_template(), X, y, eval_set=(Xv, yv), budgets=(3,), rfe_step=step)


def test_rfe_step_with_bags_is_refused(split):
    X, y, Xv, yv = split
    with pytest.raises(ValueError, match="rfe_step does not apply with feature_bags"):
        selection_path(_template().set_params(feature_bags=np.arange(40) // 2), X, y, eval_set=(Xv, yv),
                       budgets=(3,), rfe_step=0.2)
    # the default ("auto") eliminates features without bags and leaves it out with them
    bagged = selection_path(_template().set_params(feature_bags=np.arange(40) // 2), X, y, eval_set=(Xv, yv),
                            budgets=(3,))
    assert not any("rfe" in [c["source"], *c["also"]] for c in bagged.candidates)
    plain = selection_path(_template(), X, y, eval_set=(Xv, yv), budgets=(3, 6))
    assert any("rfe" in [c["source"], *c["also"]] for c in plain.candidates)


def test_elimination_starts_from_the_unpenalised_fits_best_features(split, monkeypatch):
    import gbfs.selection.path as path_module

    seen = []

    def recording(importance_of, features, budgets, step):
        seen.append(np.asarray(features))
        return eliminate(importance_of, features, budgets, step)

    monkeypatch.setattr(path_module, "eliminate", recording)
    X, y, Xv, yv = split
    path = selection_path(_template(), X, y, eval_set=(Xv, yv), budgets=(2, 3), rfe_step=0.25)
    ranking = GBFSClassifier(**{**_template().get_params(), "mu": 0.0}).fit(X, y, eval_set=(Xv, yv))
    gain = ranking.feature_importance("gain")
    used = np.flatnonzero(gain > 0)
    assert used.size > path_module.RFE_START * 3  # the cap applies on this data
    best = used[np.argsort(-gain[used], kind="stable")][:path_module.RFE_START * 3]
    np.testing.assert_array_equal(seen[0], best)
    rfe = {c["budget"]: c["features"] for c in path.candidates if "rfe" in [c["source"], *c["also"]]}
    assert set(rfe[2]) <= set(rfe[3]) <= set(best)
