"""Feature-selection behaviour of the papers: GBFS (Eq. 14 of the GBFS paper, Eq. 1 of GT-GBM), A-GBM.

The penalised split score is ``gain - mu * c_j * 1{bag(j) unused}`` (GBFS) or
``gain / SSE_root - mu * c_j * 1{bag(j) unused}`` (A-GBM); a node is split only when its best
penalised score is positive -- the first split of the ensemble is not exempt.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from gbfs import GBFSClassifier, GBFSRegressor
from gbfs.criteria.penalty import FeatureUsage

TREES = dict(n_estimators=30, max_leaves=8, min_samples_leaf=5, random_state=0)


def _distinct_split_features(est):
    return {int(f) for t in est.trees_ for f in t.feature if f >= 0}


def first_use_order(est):
    order = []
    for t in est.trees_:
        for f in t.feature:  # node order is split order
            if f >= 0 and int(f) not in order:
                order.append(int(f))
    return order


# -- mu = 0 is plain boosting --------------------------------------------------------------------------

@pytest.mark.parametrize("Est", [GBFSClassifier, GBFSRegressor])
def test_mu_zero_gbfs_equals_agbm(clf_data, reg_data, Est):
    X, y = clf_data if Est is GBFSClassifier else reg_data
    gbfs_ = Est(method="gbfs", mu=0.0, **TREES).fit(X, y)
    agbm = Est(method="agbm", mu=0.0, **TREES).fit(X, y)
    # dividing every gain by the same positive SSE_root changes neither the argmax nor the sign
    raw = (lambda e: e.decision_function(X)) if Est is GBFSClassifier else (lambda e: e.predict(X))
    np.testing.assert_array_equal(raw(gbfs_), raw(agbm))
    for est in (gbfs_, agbm):
        distinct = _distinct_split_features(est)
        assert est.n_features_selected_ == len(distinct)
        assert set(est.selected_features_.tolist()) == distinct
        assert est.selected_features_.tolist() == first_use_order(est)
    # plain boosting with 30 trees of 8 leaves picks up noise columns too
    assert gbfs_.n_features_selected_ > 3


def test_mu_zero_first_tree_is_the_least_squares_stump():
    """One stump of plain boosting = the SSE-optimal split found by brute force, leaves = lr * mean."""
    rng = np.random.default_rng(4)
    n = 300
    X = rng.integers(0, 12, (n, 5)).astype(float)  # few distinct values: bins are exact
    y = np.sin(X[:, 2]) + 0.3 * X[:, 4] + 0.2 * rng.standard_normal(n)
    est = GBFSRegressor(method="gbfs", mu=0.0, n_estimators=1, max_leaves=2, min_samples_leaf=7,
                        learning_rate=0.3).fit(X, y)
    r = y - y.mean()
    best = (-np.inf, None, None)
    for j in range(X.shape[1]):
        values = np.unique(X[:, j])
        for a, b in zip(values[:-1], values[1:]):
            left = X[:, j] <= (a + b) / 2
            if min(left.sum(), (~left).sum()) < 7:
                continue
            gain = (r ** 2).sum() - ((r[left] - r[left].mean()) ** 2).sum() \
                - ((r[~left] - r[~left].mean()) ** 2).sum()
            if gain > best[0] + 1e-9:
                best = (gain, j, (a + b) / 2)
    tree = est.trees_[0]
    assert tree.feature[0] == best[1]
    assert tree.threshold[0] == pytest.approx(best[2])
    assert tree.gain[0] == pytest.approx(best[0], rel=1e-9)
    left = X[:, best[1]] <= best[2]
    np.testing.assert_allclose(np.sort(est.predict(X[[np.argmax(left), np.argmin(left)]])),
                               np.sort(y.mean() + 0.3 * np.array([r[left].mean(), r[~left].mean()])),
                               rtol=1e-12)


# -- mu controls sparsity -----------------------------------------------------------------------------

MU_GRID = [0.0, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0]


@pytest.mark.parametrize("Est", [GBFSClassifier, GBFSRegressor])
@pytest.mark.parametrize("method", ["agbm", "gbfs"])
def test_larger_mu_selects_fewer_features(clf_data, reg_data, Est, method):
    X, y = clf_data if Est is GBFSClassifier else reg_data
    # GBFS's mu is in gain units: scale the grid by the root SSE bound n * var(residual) ~ n / 4
    scale = 1.0 if method == "agbm" else len(y) * (0.25 if Est is GBFSClassifier else np.var(y))
    counts = [Est(method=method, mu=mu * scale, **TREES).fit(X, y).n_features_selected_ for mu in MU_GRID]
    assert all(b <= a for a, b in zip(counts, counts[1:])), counts
    assert counts[0] >= 5 and counts[-1] <= 1, counts


def test_moderate_mu_keeps_exactly_the_informative_features(reg_data):
    X, y = reg_data
    # y = 2 x0 - 3 * 2^x1 + log2(1 + x2) + noise; x2's effect (range 1) is weak but real.
    # (A-GBM normalises by the current root SSE: once the residual is mostly noise, a noise split
    # explains a visible fraction of it, so mu must stay above that fraction.)
    for method, mu in [("agbm", 0.05), ("gbfs", 0.02 * len(y) * np.var(y))]:
        est = GBFSRegressor(method=method, mu=mu, n_estimators=60, max_leaves=8, min_samples_leaf=5,
                            random_state=0).fit(X, y)
        assert set(est.selected_features_.tolist()) == {0, 1, 2}, method
        assert est.selected_features_[0] == 1  # the largest effect comes first


def _step_data(n=400, seed=7):
    """One dominant feature: y = 10 * 1{x0 > 0.5} + N(0, 1); the x0 split explains ~96% of the SSE."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, 6))
    y = 10.0 * (X[:, 0] > 0.5) + rng.standard_normal(n)
    return X, y


def _root_gains(X, y):
    """Best root gain (SSE reduction) of every feature alone, and the root SSE."""
    gains = []
    for j in range(X.shape[1]):
        stump = GBFSRegressor(method="gbfs", mu=0.0, n_estimators=1, max_leaves=2,
                              min_samples_leaf=5).fit(X[:, [j]], y)
        gains.append(stump.trees_[0].gain[0])
    return np.asarray(gains), float(((y - y.mean()) ** 2).sum())


@pytest.mark.parametrize("method", ["agbm", "gbfs"])
def test_huge_mu_uses_exactly_one_feature(method):
    """No split is free: the first one must also beat mu.

    In the first tree every feature is unused, so the root's penalised scores are
    ``gain_j / norm - mu``.  With mu midway between the best and the second-best root gain only x0
    can open; after that x0 is free, and no other feature ever explains more than mu (they are
    noise), so the model uses exactly one feature.  With mu above the best root gain nothing can
    open: no split is made at all and the model is the constant init score.
    """
    X, y = _step_data()
    gains, sse_root = _root_gains(X, y)
    norm = sse_root if method == "agbm" else 1.0
    order = np.argsort(gains)[::-1]
    assert order[0] == 0
    top, second = gains[order[0]] / norm, gains[order[1]] / norm
    assert second < 0.1 * top  # precondition: one dominant feature

    one = GBFSRegressor(method=method, mu=(top + second) / 2, **TREES).fit(X, y)
    assert one.selected_features_.tolist() == [0]
    assert one.n_features_selected_ == 1
    assert all(t.n_leaves >= 2 for t in one.trees_[:5])  # x0 is reused freely
    assert one.score(X, y) > 0.9

    none = GBFSRegressor(method=method, mu=min(top * 1.01, 1.0) if method == "agbm" else top * 1.01,
                         **TREES).fit(X, y)
    assert none.n_features_selected_ == 0
    assert all(t.n_leaves == 1 for t in none.trees_)
    np.testing.assert_allclose(none.predict(X), y.mean(), rtol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # sklearn: "No features were selected"
        assert none.transform(X).shape == (X.shape[0], 0)


def test_agbm_mu_one_selects_nothing(clf_data):
    # a normalised gain is at most 1, so mu = 1 leaves no positive penalised score
    X, y = clf_data
    est = GBFSClassifier(method="agbm", mu=1.0, **TREES).fit(X, y)
    assert est.n_features_selected_ == 0
    assert len(np.unique(est.decision_function(X))) == 1


# -- Omega is ensemble-wide and refreshed inside a tree -----------------------------------------------

def test_pending_leaves_are_rescored_when_a_feature_becomes_free():
    """LightGBM CEGB issues 3245/3679: a pending leaf scored while x1 was still penalised.

    y = 5 * 1{x0 > .5} + b * 1{x1 > .5} with b = 2 on the left of x0 = .5 and 0.7 on the right.
    The root splits on x0.  The left child's x1 split pays mu and is taken first; the right
    child's x1 gain (normalised ~0.01) is below mu, so before the refresh its best score was a
    noise split on x0.  Once x1 is used it is free, and the right child must split on x1 too.
    """
    rng = np.random.default_rng(0)
    X = rng.random((400, 4))
    y = 5 * (X[:, 0] > 0.5) + np.where(X[:, 0] <= 0.5, 2.0, 0.7) * (X[:, 1] > 0.5) \
        + 0.05 * rng.standard_normal(400)
    est = GBFSRegressor(method="agbm", mu=0.03, n_estimators=1, max_depth=2, max_leaves=4,
                        min_samples_leaf=5).fit(X, y)
    t = est.trees_[0]
    assert t.feature[0] == 0
    left, right = t.left[0], t.right[0]
    sse_root = ((y - y.mean()) ** 2).sum()
    assert t.gain[right] / sse_root < 0.03 < t.gain[left] / sse_root  # precondition
    assert t.feature[left] == 1
    assert t.feature[right] == 1


def test_features_used_by_earlier_trees_are_free():
    """With a penalty above every noise gain, later trees keep reusing the opened features only."""
    X, y = _step_data(seed=8)
    est = GBFSRegressor(method="gbfs", mu=50.0, n_estimators=50, max_leaves=4, min_samples_leaf=5,
                        random_state=0).fit(X, y)
    assert est.selected_features_.tolist() == [0]
    # x0 keeps being split on once the step is nearly fitted, with gains far below mu: a used
    # feature pays nothing, in this tree or any later one
    late_gains = [g for t in est.trees_[40:] for g in t.gain[t.feature >= 0]]
    assert late_gains and max(late_gains) < 50.0


# -- feature bags (GBFS paper, Section 4.2) ----------------------------------------------------------

def _bag_data(n=600, seed=0):
    """Three bags of four features; latents z0, z1, z2 drive y = 3 z0 + 2 z1 + 2 z2.

    bag 0 = [z0, z1 + small noise, z2 + small noise, noise]
    bag 1 = [clean z1, noise, noise, noise]
    bag 2 = [clean z2, noise, noise, noise]
    Without bags each clean copy beats its noisy one, so three bags are touched; with bags, once
    bag 0 is opened by z0 its noisy copies are free and are preferred to paying for bags 1 and 2.
    """
    rng = np.random.default_rng(seed)
    z = rng.random((n, 3))
    X = rng.random((n, 12))
    X[:, 0] = z[:, 0]
    X[:, 1] = z[:, 1] + 0.05 * rng.standard_normal(n)
    X[:, 2] = z[:, 2] + 0.05 * rng.standard_normal(n)
    X[:, 4] = z[:, 1]
    X[:, 8] = z[:, 2]
    y = 3 * z[:, 0] + 2 * z[:, 1] + 2 * z[:, 2] + 0.1 * rng.standard_normal(n)
    return X, y, np.repeat([0, 1, 2], 4)


BAG_PARAMS = dict(method="agbm", mu=0.1, n_estimators=60, max_leaves=8, min_samples_leaf=5, random_state=0)


def test_feature_bags_select_whole_bags():
    X, y, bags = _bag_data()
    plain = GBFSRegressor(**BAG_PARAMS).fit(X, y)
    bagged = GBFSRegressor(feature_bags=bags, **BAG_PARAMS).fit(X, y)
    plain_bags = set(bags[plain.selected_features_].tolist())
    bagged_bags = set(bags[bagged.selected_features_].tolist())
    assert len(bagged_bags) < len(plain_bags)
    assert bagged_bags == {0}
    # the opened bag's informative members are all used (they are free)
    assert {0, 1, 2} <= set(bagged.selected_features_.tolist())
    # without bags the noisy copies are not worth a penalty of their own
    assert plain.selected_features_[0] == 0 and len(plain_bags) == 3
    assert bagged.score(X, y) > 0.95


def test_bag_ids_are_labels_only():
    X, y, bags = _bag_data()
    a = GBFSRegressor(feature_bags=bags, **BAG_PARAMS).fit(X, y)
    relabelled = np.array([70, -3, 12])[bags]  # any integers, any order
    b = GBFSRegressor(feature_bags=relabelled, **BAG_PARAMS).fit(X, y)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    # singleton bags are the same as no bags
    c = GBFSRegressor(feature_bags=np.arange(12)[::-1], **BAG_PARAMS).fit(X, y)
    d = GBFSRegressor(**BAG_PARAMS).fit(X, y)
    np.testing.assert_array_equal(c.predict(X), d.predict(X))


def test_feature_usage_frees_the_whole_bag():
    usage = FeatureUsage(6, mu=0.5, costs=np.array([1, 2, 3, 1, 1, 1.0]), bags=np.array([4, 4, 4, 9, 9, 1]))
    np.testing.assert_array_equal(usage.penalty(), [0.5, 1.0, 1.5, 0.5, 0.5, 0.5])
    assert usage.mark_used(1) is True
    np.testing.assert_array_equal(usage.penalty(), [0, 0, 0, 0.5, 0.5, 0.5])
    assert usage.mark_used(0) is False  # bag already free: no change of the penalty vector
    assert usage.mark_used(0) is False
    assert usage.order == [1, 0]
    assert usage.mark_used(4) is True
    np.testing.assert_array_equal(usage.penalty(), [0, 0, 0, 0, 0, 0.5])


# -- feature costs -----------------------------------------------------------------------------------

def _duplicate_data(n=500, seed=0):
    """x1 is a slightly noisy duplicate of the informative x0; x5 is a second, independent signal."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, 8))
    X[:, 1] = X[:, 0] + 0.03 * rng.standard_normal(n)
    y = 3 * X[:, 0] + X[:, 5] + 0.1 * rng.standard_normal(n)
    return X, y


COST_PARAMS = dict(method="agbm", mu=0.05, n_estimators=50, max_leaves=8, min_samples_leaf=5, random_state=0)


def test_expensive_feature_is_replaced_by_a_cheaper_duplicate():
    X, y = _duplicate_data()
    free = GBFSRegressor(**COST_PARAMS).fit(X, y)
    assert free.selected_features_[0] == 0 and 1 not in free.selected_features_
    # x0 costs 3x: its penalty (0.15) outweighs its small gain advantage over x1 (penalty 0.05)
    costly = GBFSRegressor(feature_costs=[3.0] + [1.0] * 7, **COST_PARAMS).fit(X, y)
    assert costly.selected_features_[0] == 1
    assert 0 not in costly.selected_features_
    assert 5 in costly.selected_features_
    assert costly.score(X, y) > free.score(X, y) - 0.02  # slightly worse, not useless


def test_uniform_costs_rescale_mu():
    X, y = _duplicate_data()
    params = {**COST_PARAMS, "mu": 0.02}
    a = GBFSRegressor(feature_costs=np.full(8, 2.5), **params).fit(X, y)
    b = GBFSRegressor(**{**params, "mu": 0.05}).fit(X, y)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))


def test_zero_cost_feature_is_free():
    X, y = _duplicate_data()
    # every feature but the noise column x7 costs more than any split can gain: only x7 is usable
    costs = [100.0] * 7 + [0.0]
    est = GBFSRegressor(feature_costs=costs, **COST_PARAMS).fit(X, y)
    assert est.selected_features_.tolist() == [7]


# -- A-GBM normalisation (GT-GBM paper, Section 2) ----------------------------------------------------

def test_agbm_selection_is_invariant_to_the_scale_of_y(reg_data):
    X, y = reg_data
    params = dict(n_estimators=30, max_leaves=8, min_samples_leaf=5, random_state=0)
    small = GBFSRegressor(method="agbm", mu=0.02, **params).fit(X, y)
    big = GBFSRegressor(method="agbm", mu=0.02, **params).fit(X, 1000 * y)
    assert big.selected_features_.tolist() == small.selected_features_.tolist()
    for ts, tb in zip(small.trees_, big.trees_):
        np.testing.assert_array_equal(ts.feature, tb.feature)
        np.testing.assert_array_equal(ts.bin_threshold, tb.bin_threshold)
    np.testing.assert_allclose(big.predict(X), 1000 * small.predict(X), rtol=1e-9)
    # GBFS's penalty is in gain units: the same mu means a 10^6 times weaker penalty on 1000 y
    mu = 0.02 * len(y) * np.var(y)
    gsmall = GBFSRegressor(method="gbfs", mu=mu, **params).fit(X, y)
    gbig = GBFSRegressor(method="gbfs", mu=mu, **params).fit(X, 1000 * y)
    assert gbig.selected_features_.tolist() != gsmall.selected_features_.tolist()
    assert gbig.n_features_selected_ > gsmall.n_features_selected_


def test_agbm_classifier_is_invariant_to_label_encoding(clf_data):
    # the logistic residuals do not depend on the label values, only on which class is positive
    X, y = clf_data
    a = GBFSClassifier(method="agbm", mu=0.02, **TREES).fit(X, y)
    b = GBFSClassifier(method="agbm", mu=0.02, **TREES).fit(X, np.where(y == 1, 100, -100))
    np.testing.assert_array_equal(a.selected_features_, b.selected_features_)


# -- selector interface -----------------------------------------------------------------------------

@pytest.mark.parametrize("mu", [0.0, 0.02])
def test_get_support_and_transform_match_selected_features(clf_data, mu):
    X, y = clf_data
    est = GBFSClassifier(method="agbm", mu=mu, **TREES).fit(X, y)
    sel = est.selected_features_
    assert len(np.unique(sel)) == len(sel) == est.n_features_selected_
    mask = est.get_support()
    assert mask.dtype == bool and mask.shape == (X.shape[1],)
    np.testing.assert_array_equal(np.flatnonzero(mask), np.sort(sel))
    np.testing.assert_array_equal(est.get_support(indices=True), np.sort(sel))
    np.testing.assert_array_equal(est.transform(X), X[:, np.sort(sel)])
    assert est.selected_feature_names_ == [f"x{j}" for j in sel]
    # a model refitted on the selected columns only is as good on them
    sub = GBFSClassifier(method="agbm", mu=mu, **TREES).fit(est.transform(X), y)
    assert sub.n_features_selected_ <= est.n_features_selected_
