"""GT-GBM in the grower: with every feature in Omega it is A-GBM; every split is the best penalised
split over Omega (at the time of the split) and the node's candidates, which needs the refresh of
pending nodes on features a sibling's split made free; feature bags."""

from __future__ import annotations

import dataclasses

import naive
import numpy as np
import pytest
from group_test_cases import (
    HIST_MODES,
    NO_H,
    assert_same_tree,
    make_tester,
    tree_problem,
)

from gbfs import GBFSClassifier, GBFSRegressor
from gbfs.booster.binning import BinMapper
from gbfs.booster.growing.feature_search import group_tests
from gbfs.booster.growing.grower import GrowthParams, TreeGrower
from gbfs.booster.tree import Tree
from gbfs.criteria import group_testing as gt
from gbfs.criteria.penalty import FeatureUsage

# -- every feature in Omega: GT-GBM is A-GBM ----------------------------------------------------


@pytest.mark.parametrize("scope", ["node", "tree"])
@pytest.mark.parametrize("case", ["unit", "weighted-subset"])
def test_all_features_in_omega_gives_the_agbm_tree(scope, case):
    rng, X, mapper, Xb, rw, hw = tree_problem(0, weights=case != "unit")
    n, d = Xb.shape
    rows = np.arange(n, dtype=np.int32) if case == "unit" else \
        np.sort(rng.choice(n, 450, replace=False)).astype(np.int32)
    norm = naive.sse(rw[rows] / hw[rows], hw[rows])
    # two subsets of four features: C alone would be a poor choice of features
    _, tester = make_tester(X, 2, seed=0, mapper=mapper, n_subsets=2, subset_size=4)
    base = GrowthParams(max_leaves=12, min_samples_leaf=8)

    def usage(all_used):
        u = FeatureUsage(d, 0.02)
        for f in range(d) if all_used else ():
            u.mark_used(f)
        return u

    unit = case == "unit"
    for extra in HIST_MODES:
        params = dataclasses.replace(base, **extra)
        ref = TreeGrower(Xb, mapper, params).grow(rows, rw, hw, usage(True), norm, hw_is_one=unit)
        search = group_tests(tester, scope)
        grown = TreeGrower(Xb, mapper, params, search).grow(rows, rw, hw, usage(True), norm, hw_is_one=unit)
        tree = assert_same_tree(grown, ref)
    assert tree.n_leaves == 12
    # not vacuous: starting from an empty Omega the same tester grows another tree
    other = TreeGrower(Xb, mapper, base, group_tests(tester, scope)).grow(rows, rw, hw, usage(False), norm,
                                                                          hw_is_one=unit)
    t_other = other.builder.build(np.zeros(len(other.builder.cols["feature"])))
    assert t_other.n_nodes != tree.n_nodes or not np.array_equal(t_other.feature, tree.feature)




# -- 10. every split is the best over Omega (at its time) and the node's candidates ----------------

@dataclasses.dataclass
class _Grown:
    """A tree grown with a logged split order, and what the checks need to re-derive its choices."""

    tree: Tree
    grown: object  # GrownTree
    log: list  # per split, in order: (node id, its rows, Omega and penalty at the time)
    usage: FeatureUsage
    Xb: np.ndarray
    mapper: BinMapper
    rw: np.ndarray
    hw: np.ndarray
    tester: gt.GroupTester
    scope: str
    params: GrowthParams
    mu: float
    norm: float
    bags: np.ndarray | None
    pre_used: tuple


def _grow_logged(Xb, mapper, rw, hw, tester, scope, params, mu, norm, bags=None, pre_used=(),
                 complete=True) -> _Grown:
    d = Xb.shape[1]
    usage = FeatureUsage(d, mu, bags=bags)
    for f in pre_used:
        usage.mark_used(f)
    grower = TreeGrower(Xb, mapper, params, group_tests(tester, scope))
    if not complete:  # the best-first grower without the refresh of pending nodes on new features
        grower._complete = lambda node: None
    log = []
    split = grower._split

    def recording(node, builder):
        rows = grower._partition[node.start:node.end].copy()
        log.append((node.id, rows, usage.free_features().copy(), usage.penalty().copy()))
        return split(node, builder)

    grower._split = recording
    grown = grower.grow(np.arange(Xb.shape[0], dtype=np.int32), rw, hw, usage, norm)
    tree = grown.builder.build(np.zeros(len(grown.builder.cols["feature"])))
    return _Grown(tree, grown, log, usage, Xb, mapper, rw, hw, tester, scope, params, mu, norm, bags,
                  tuple(pre_used))


def _best_allowed(g: _Grown, rows, free, pen, root_cand):
    """Brute-force best penalised split of the node holding ``rows`` over Omega (``free``) and the
    candidates (the node's own group tests, or the root's in tree scope): (feature, score, gains)."""
    p = g.params
    r, h = g.rw[rows], g.hw[rows]
    cand = g.tester.candidates(rows.astype(np.int32), r, h, float(r.sum()), float(h.sum()), rows.shape[0],
                               p.min_samples_leaf, p.min_child_weight, 0.0)
    allowed = np.union1d(free, root_cand if g.scope == "tree" and root_cand is not None else cand)
    gain, *_ = naive.best_splits(g.Xb, rows, g.rw, g.hw, g.mapper.n_bins_non_missing_, p.min_samples_leaf,
                                 p.min_child_weight, 0.0)
    restricted = np.full(gain.shape[0], -np.inf)
    restricted[allowed.astype(int)] = gain[allowed.astype(int)]
    f, score = naive.penalized_best(restricted, pen, g.norm)
    return f, score, gain, cand


def _check_choices(g: _Grown):
    """Every split: Omega as the splits before it made it, and the node's best penalised split over Omega
    and its candidates.  Every final leaf that could be split (the tree stopped below max_leaves): no
    positive penalised split over the final Omega and its candidates."""
    d = g.Xb.shape[1]
    bag_of = np.arange(d) if g.bags is None else np.asarray(g.bags)

    def omega(used):
        free = np.flatnonzero(np.isin(bag_of, bag_of[sorted(used)])) if used else np.empty(0, np.int64)
        return free, np.where(np.isin(np.arange(d), free), 0.0, g.mu)

    used = set(g.pre_used)
    root_cand = None
    for node_id, rows, free, pen in g.log:
        free_ref, pen_ref = omega(used)
        np.testing.assert_array_equal(free, free_ref)
        np.testing.assert_array_equal(pen, pen_ref)
        f, _, gain, cand = _best_allowed(g, rows, free_ref, pen_ref, root_cand)
        root_cand = cand if root_cand is None else root_cand
        assert g.tree.feature[node_id] == f, f"node {node_id}: split on {g.tree.feature[node_id]}, best {f}"
        assert g.tree.gain[node_id] == pytest.approx(gain[f], rel=1e-9)
        used.add(f)
    assert sorted(used) == sorted(set(g.pre_used) | set(g.usage.order))
    if g.params.max_leaves is not None and g.tree.n_leaves >= g.params.max_leaves:
        return
    free_ref, pen_ref = omega(used)
    for leaf, a, b in zip(g.grown.leaf_ids, g.grown.leaf_starts, g.grown.leaf_ends):
        if b - a >= 2 * g.params.min_samples_leaf:
            rows = g.grown.partition[a:b]
            _, score, _, _ = _best_allowed(g, rows, free_ref, pen_ref, root_cand)
            assert not score > 0, f"leaf {leaf} has a split scoring {score}"


def _refresh_case(seed):
    """Root on A = x0 > 0.5.  L (A false): y depends strongly on F = x1.  R (A true): on G = x2 and less on
    F.  L splits first, on F; in R the group test (one subset: s = 1) finds G, not F, but once F is free
    it beats G after G's penalty.  Only the completion of R on F (grower._complete) finds that split."""
    rng = np.random.default_rng(seed)
    n, d = 1200, 16
    X = rng.random((n, d))
    A, F, G = X[:, 0] > 0.5, X[:, 1] > 0.5, X[:, 2] > 0.5
    y = 4.0 * A + np.where(A, 2.0 * G + 1.0 * F, 3.0 * F) + 0.3 * rng.standard_normal(n)
    mapper = BinMapper(max_bins=32).fit(X)
    r = y - y.mean()
    _, tester = make_tester(X, 1, seed=seed, mapper=mapper)
    return X, mapper, mapper.transform(X), r, tester


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pending_node_is_completed_on_features_a_sibling_made_free(seed):
    X, mapper, Xb, r, tester = _refresh_case(seed)
    h = np.ones_like(r)
    params = GrowthParams(max_leaves=None, min_samples_leaf=60)
    mu, norm = 0.08, float(np.sum(r ** 2))
    g = _grow_logged(Xb, mapper, r, h, tester, "node", params, mu, norm)
    assert [entry[0] for entry in g.log[:3]] == [0, 1, 2]  # root, then L, then R
    np.testing.assert_array_equal(g.tree.feature[:3], [0, 1, 1])  # R splits on F, made free by L
    rows_r = g.log[2][1]
    cand_r = tester.candidates(rows_r, r[rows_r], NO_H, float(r[rows_r].sum()), float(len(rows_r)),
                               len(rows_r), params.min_samples_leaf, 1e-3, 0.0)
    assert 1 not in cand_r and 2 in cand_r  # F reached R only through the completion
    _check_choices(g)
    # without the completion R keeps its stale choice, and the checks see it
    stale = _grow_logged(Xb, mapper, r, h, tester, "node", params, mu, norm, complete=False)
    assert stale.tree.feature[2] != 1
    with pytest.raises(AssertionError):
        _check_choices(stale)


def test_tree_scope_searches_omega_and_the_root_candidates():
    """Same data in tree scope: the root's group test (one subset) finds A only, so every node of the tree
    searches {A} and splits on A, where node scope finds F in the children."""
    X, mapper, Xb, r, tester = _refresh_case(0)
    h = np.ones_like(r)
    params = GrowthParams(max_leaves=None, min_samples_leaf=60)
    mu, norm = 0.08, float(np.sum(r ** 2))
    g = _grow_logged(Xb, mapper, r, h, tester, "tree", params, mu, norm)
    assert g.tree.n_leaves >= 8
    assert set(g.tree.used_features().tolist()) == {0}
    _check_choices(g)
    node = _grow_logged(Xb, mapper, r, h, tester, "node", params, mu, norm)
    assert {0, 1} <= set(node.tree.used_features().tolist())


@pytest.mark.parametrize("scope", ["node", "tree"])
@pytest.mark.parametrize("bags", [None, "bags"])
def test_every_split_is_the_best_over_omega_and_candidates(scope, bags):
    rng, X, mapper, Xb, rw, hw = tree_problem(3)
    d = Xb.shape[1]
    bag_ids = None if bags is None else rng.integers(0, 12, d)
    _, tester = make_tester(X, 3, seed=1, mapper=mapper, n_subsets=4)
    params = GrowthParams(max_leaves=10, min_samples_leaf=10)
    mu, norm = 0.01, naive.sse(rw)
    g = _grow_logged(Xb, mapper, rw, hw, tester, scope, params, mu, norm, bag_ids, (9,))
    assert g.tree.n_leaves >= 6
    _check_choices(g)


# -- 11. feature bags ------------------------------------------------------------------------------

def test_free_features_are_the_features_of_used_bags():
    bags = np.array([7, 3, 7, 3, 9, 7, 1, 9])
    usage = FeatureUsage(8, 0.5, bags=bags)
    assert usage.free_features().tolist() == []
    usage.mark_used(2)  # bag 7
    assert usage.free_features().tolist() == [0, 2, 5]
    np.testing.assert_array_equal(usage.penalty(), np.where(bags == 7, 0.0, 0.5))
    usage.mark_used(0)  # the same bag: nothing new
    assert usage.free_features().tolist() == [0, 2, 5]
    usage.mark_used(6)  # bag 1, a single feature
    usage.mark_used(4)  # bag 9
    assert usage.free_features().tolist() == [0, 2, 4, 5, 6, 7]
    assert usage.free_features().dtype == np.int64
    assert usage.order == [2, 0, 6, 4]


@pytest.mark.parametrize("scope", ["node", "tree"])
def test_one_used_bag_of_all_features_gives_the_agbm_tree(scope):
    """A used bag makes all its features Omega: with one bag holding every feature, GT-GBM searches every
    feature at every node, as A-GBM does."""
    _, X, mapper, Xb, rw, hw = tree_problem(1)
    n, d = Xb.shape
    rows = np.arange(n, dtype=np.int32)
    _, tester = make_tester(X, 2, seed=0, mapper=mapper, n_subsets=2, subset_size=4)
    params = GrowthParams(max_leaves=10, min_samples_leaf=8)

    def usage():
        u = FeatureUsage(d, 0.05, bags=np.zeros(d, dtype=int))
        u.mark_used(5)
        return u

    norm = naive.sse(rw)
    ref = TreeGrower(Xb, mapper, params).grow(rows, rw, hw, usage(), norm, hw_is_one=True)
    grown = TreeGrower(Xb, mapper, params, group_tests(tester, scope)).grow(rows, rw, hw, usage(), norm,
                                                                            hw_is_one=True)
    assert assert_same_tree(grown, ref).n_leaves == 10


@pytest.mark.parametrize("Est", [GBFSClassifier, GBFSRegressor])
@pytest.mark.parametrize("scope", ["node", "tree"])
def test_estimator_gtgbm_with_bags_uses_whole_bags(clf_data, reg_data, Est, scope):
    """Bag 0 = the informative columns 0, 1, 2.  With a penalty too high for a second and third feature,
    GT-GBM without bags stops short of all three; with the bag the first one makes the other two free."""
    X, y = clf_data if Est is GBFSClassifier else reg_data
    kw = dict(method="gtgbm", group_test_scope=scope, n_target_features=3, mu=0.2, n_estimators=15,
              max_leaves=8, min_samples_leaf=5, random_state=0)
    bagged = Est(feature_bags=np.repeat(np.arange(4), 3), **kw).fit(X, y)
    plain = Est(**kw).fit(X, y)
    assert set(bagged.selected_features_.tolist()) == {0, 1, 2}
    assert set(plain.selected_features_.tolist()) < {0, 1, 2}
