"""TreeGrower against a naive best-first grower that re-scores every pending leaf from scratch.

The whole tree is compared (features, bin thresholds, missing directions, children, counts,
gains), as are the row partition, the order in which features enter Omega, and predictions
(binned and raw) of the grown tree.  A hand-made case checks the refresh of pending leaves
after a split makes a new feature free (LightGBM CEGB issues 3245 and 3679).

Every comparison grows the tree once per histogram mode of the grower (subtraction or direct
builds), which must not change the tree.  One tie is left to rounding by the split kernel: a
{missing} | {non-missing} split can be stored either way round (see
test_splitting.test_missing_split_representation_is_deterministic); only there may the reference
follow the grown tree's choice (_reference_for).
"""

from __future__ import annotations

import dataclasses
from unittest import mock

import naive
import numpy as np
import pytest
from grower_cases import refresh_case

import gbfs.booster.growing.grower as grower_module
from gbfs.booster.binning import BinMapper
from gbfs.booster.growing.grower import NUMERIC, GrowthParams, TreeGrower
from gbfs.booster.growing.partition import split_partition
from gbfs.booster.kernels._types import MISSING_BIN
from gbfs.booster.kernels.categorical import bits_of
from gbfs.booster.kernels.histogram import HistogramLayout
from gbfs.booster.tree import PackedEnsemble
from gbfs.criteria.penalty import FeatureUsage


# -- split_partition ------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("missing_left", [False, True])
def test_split_partition_matches_naive(seed, missing_left):
    rng = np.random.default_rng(seed)
    n = 90
    col = rng.integers(0, 8, n).astype(np.uint8)
    col[rng.random(n) < 0.2] = MISSING_BIN
    partition = rng.permutation(n).astype(np.int32)
    start, end = 13, 71
    t = int(rng.integers(0, 8))
    before = partition.copy()
    buffer = np.full(n, -7, dtype=np.int32)
    n_left = split_partition(partition, start, end, col, t, missing_left, NUMERIC, buffer)
    left, right = naive.split_rows(before[start:end], col, t, missing_left)
    assert n_left == left.shape[0]
    np.testing.assert_array_equal(partition[start:start + n_left], left)  # stable
    np.testing.assert_array_equal(partition[start + n_left:end], right)
    np.testing.assert_array_equal(partition[:start], before[:start])
    np.testing.assert_array_equal(partition[end:], before[end:])


def test_split_partition_all_one_side():
    col = np.array([0, 1, 2, MISSING_BIN], dtype=np.uint8)
    for t, ml, expected in ((5, True, 4), (5, False, 3), (0, False, 1)):
        p = np.arange(4, dtype=np.int32)
        assert split_partition(p, 0, 4, col, t, ml, NUMERIC, np.empty(4, dtype=np.int32)) == expected
        assert sorted(p) == [0, 1, 2, 3]


@pytest.mark.parametrize("seed", range(3))
def test_split_partition_by_category_set_is_stable(seed):
    rng = np.random.default_rng(seed)
    n = 120
    col = rng.integers(0, 40, n).astype(np.uint8)
    col[rng.random(n) < 0.1] = MISSING_BIN
    left_bins = rng.choice(40, 13, replace=False)
    partition = rng.permutation(n).astype(np.int32)
    before = partition.copy()
    n_left = split_partition(partition, 5, 100, col, 0, True, bits_of(left_bins),
                             np.empty(n, dtype=np.int32))
    rows = before[5:100]
    goes_left = np.isin(col[rows], left_bins)   # the missing bin is never in a left set
    assert n_left == goes_left.sum()
    np.testing.assert_array_equal(partition[5:5 + n_left], rows[goes_left])
    np.testing.assert_array_equal(partition[5 + n_left:100], rows[~goes_left])


# -- random problems --------------------------------------------------------------------------------
def _problem(seed, n=150, d=6, max_bins=10, weights=False):
    rng = np.random.default_rng(seed)
    X = np.column_stack([
        rng.normal(size=n),
        rng.integers(0, 4, n).astype(float),
        rng.random(n),
        rng.integers(0, 3, n).astype(float),
        rng.exponential(size=n),
        rng.normal(size=n),
    ])[:, :d]
    X[rng.random(n) < 0.15, 2] = np.nan
    X[rng.random(n) < 0.4, 5] = np.nan
    mapper = BinMapper(max_bins=max_bins).fit(X)
    Xb = mapper.transform(X)
    r = (np.where(X[:, 0] > 0, 1.0, -1.0) + 0.8 * X[:, 1] - 1.5 * np.nan_to_num(X[:, 2] > 0.5)
         + 0.6 * np.isnan(X[:, 5]) + rng.normal(size=n))
    rw = r - r.mean()
    hw = rng.random(n) * 1.5 + 0.25 if weights else np.ones(n)
    return rng, X, mapper, Xb, rw, hw


CONFIGS = {
    # name: (GrowthParams kwargs, method, mu, costs?, bags, pre-used features, row fraction)
    "gbfs-max_leaves": (dict(max_leaves=12, min_samples_leaf=3), "gbfs", 4.0, True, None, (), 1.0),
    "agbm-bags-max_depth": (dict(max_leaves=None, max_depth=3, min_samples_leaf=2), "agbm", 0.04, True,
                            [0, 0, 1, 1, 2, 3], (), 1.0),
    "gbfs-min_node_fraction-newton": (dict(max_leaves=None, min_samples_leaf=1, min_node_fraction=0.12,
                                           min_child_weight=3.0, reg_lambda=1.0),
                                      "gbfs", 1.5, False, None, (), 1.0),
    "agbm-subset-preused": (dict(max_leaves=16, min_samples_leaf=4), "agbm", 0.3, True,
                            [5, 4, 3, 2, 1, 0], (3,), 0.6),
    "plain-depth": (dict(max_leaves=8, max_depth=2, min_samples_leaf=5), "gbfs", 0.0, False, None,
                    (), 1.0),
    "gbfs-bags-preused-all-binding": (dict(max_leaves=10, max_depth=4, min_samples_leaf=2,
                                           min_node_fraction=0.05), "gbfs", 8.0, True,
                                      [1, 1, 2, 2, 1, 3], (0, 2), 0.8),
}


def _setup(config, seed):
    kw, method, mu, with_costs, bags, pre_used, frac = CONFIGS[config]
    weights = kw.get("reg_lambda", 0.0) > 0
    rng, X, mapper, Xb, rw, hw = _problem(seed, weights=weights)
    n, d = Xb.shape
    rows = np.arange(n, dtype=np.int32) if frac == 1.0 else \
        np.sort(rng.choice(n, int(frac * n), replace=False)).astype(np.int32)
    costs = rng.choice([0.5, 1.0, 2.0], d) if with_costs else None
    if method == "agbm":
        norm = naive.sse(rw[rows], hw[rows])  # SSE of the residuals at the root (unit weights here)
    else:
        norm = 1.0
    params = GrowthParams(**{"min_child_weight": 1e-3, **kw})
    return X, mapper, Xb, rw, hw, rows, params, dict(mu=mu, costs=costs, bags=bags), pre_used, norm


def _histogram_modes():
    """Extra GrowthParams that steer the grower's histogram bookkeeping through all its paths.

    The grower may keep a node's histogram and derive the larger child's by subtraction, or build
    both children from rows; which one it does must not change the tree.  Tiny test data would
    otherwise never take the subtraction path when it is reserved for large nodes.
    """
    names = {f.name for f in dataclasses.fields(GrowthParams)}
    modes = [{}]
    if "subtraction_min_rows" in names:
        modes.append({"subtraction_min_rows": 0})  # subtraction everywhere, buffer cap binding
        if "histogram_memory_ratio" in names:
            modes.append({"subtraction_min_rows": 0, "histogram_memory_ratio": 1e6})  # no cap
    if "sparse_share" in names:  # row-wise histograms of every feature / of the mostly-default ones
        modes.append({"sparse_share": 1.0, "sparse_min_features": 1})
        modes.append({"sparse_share": 0.6, "sparse_min_features": 1, "subtraction_min_rows": 0})
    return modes


class _UnfusedGrower(TreeGrower):
    """Searches a split's children in two passes: build the smaller one, then subtract it."""

    fuses_pairs = False


def _budget_growers(Xb, mapper, params):
    """Growers whose histogram budget holds exactly one histogram (fused pairs subtract along the
    larger children; the two-pass search, which needs a second buffer, builds every node from rows),
    and a two-pass grower subtracting everywhere."""
    n, d = Xb.shape
    one = 1.5 * HistogramLayout(mapper.n_bins_non_missing_).nbytes / (n * d)
    tight = dataclasses.replace(params, subtraction_min_rows=0, histogram_memory_ratio=one)
    free = dataclasses.replace(params, subtraction_min_rows=0, histogram_memory_ratio=1e6)
    return [TreeGrower(Xb, mapper, tight), _UnfusedGrower(Xb, mapper, tight),
            _UnfusedGrower(Xb, mapper, free)]


def _grow_all_modes(Xb, mapper, params, rows, rw, hw, make_usage, norm):
    """Grow with every histogram mode; all must give the same tree. Returns (grown, usage) of each."""
    out = []
    for extra in _histogram_modes():
        usage = make_usage()
        p = dataclasses.replace(params, **extra)
        out.append((TreeGrower(Xb, mapper, p).grow(rows, rw, hw, usage, norm), usage))
    for grower in _budget_growers(Xb, mapper, params):
        usage = make_usage()
        out.append((grower.grow(rows, rw, hw, usage, norm), usage))
    for cut in (-1, 1 << 62):  # every kernel call in a parallel region, and every one serial
        with mock.patch.object(grower_module, "SERIAL_WORK", cut):
            for p in (params, dataclasses.replace(params, subtraction_min_rows=0)):
                usage = make_usage()
                out.append((TreeGrower(Xb, mapper, p).grow(rows, rw, hw, usage, norm), usage))
    if np.all(hw[rows] == 1.0):  # the unit-weight fast path (count copied into channel 1)
        for extra in _histogram_modes():
            usage = make_usage()
            p = dataclasses.replace(params, **extra)
            out.append((TreeGrower(Xb, mapper, p).grow(rows, rw, hw, usage, norm, hw_is_one=True),
                        usage))
    return out


def _naive_grow(Xb, mapper, rows, rw, hw, params, pen, used, norm, refresh=True, like=None):
    """The reference tree.  ``like`` (a grown tree) only settles, node by node, which of the two
    equal-gain representations of a {missing} | {non-missing} split is stored (the kernel decides
    it by rounding: see test_splitting.test_missing_split_representation_is_deterministic)."""
    prefer = None
    if like is not None:
        t = like.builder.build(np.zeros(len(like.builder.cols["feature"])))

        def prefer(node, f):
            if node < t.n_nodes and t.feature[node] == f:
                return int(t.bin_threshold[node]), bool(t.missing_left[node])
            return None

    return naive.grow(Xb, mapper.n_bins_non_missing_, rows, rw, hw, mu=pen["mu"], costs=pen["costs"],
                      bags=pen["bags"], used=None if used is None else used.copy(), norm=norm,
                      max_depth=params.max_depth, max_leaves=params.max_leaves,
                      min_samples_leaf=params.min_samples_leaf,
                      min_node_fraction=params.min_node_fraction,
                      min_child_weight=params.min_child_weight, reg_lambda=params.reg_lambda,
                      refresh=refresh, prefer=prefer)


def _reference_for(grown, ref, rerun):
    """``ref``, or -- if ``grown`` stores a {missing} | {non-missing} split the other way round --
    the reference re-run with that representation (``rerun(like=grown)``)."""
    t = grown.builder.build(np.zeros(len(grown.builder.cols["feature"])))
    same = t.n_nodes == len(ref.feature) and all(
        np.array_equal(getattr(t, name), getattr(ref, name))
        for name in ("feature", "bin_threshold", "missing_left", "left", "right", "count"))
    if same:
        return ref
    guided = rerun(like=grown)
    assert guided.mirrored > 0, "the trees differ by more than the representation of a missing split"
    return guided


def _naive_leaf_of(ref, Xb):
    """Walk the naive tree with every binned row (an independent prediction)."""
    out = np.empty(Xb.shape[0], dtype=np.int64)
    for i in range(Xb.shape[0]):
        node = 0
        while ref.feature[node] >= 0:
            b = Xb[i, ref.feature[node]]
            go_left = ref.missing_left[node] if b == MISSING_BIN else b <= ref.bin_threshold[node]
            node = ref.left[node] if go_left else ref.right[node]
        out[i] = node
    return out


def _compare(grown, ref, mapper, X, Xb, rows):
    tree = grown.builder.build(np.zeros(len(ref.feature)))
    np.testing.assert_array_equal(tree.feature, ref.feature, err_msg="split features")
    np.testing.assert_array_equal(tree.bin_threshold, ref.bin_threshold, err_msg="bin thresholds")
    np.testing.assert_array_equal(tree.missing_left, ref.missing_left, err_msg="missing directions")
    np.testing.assert_array_equal(tree.left, ref.left)
    np.testing.assert_array_equal(tree.right, ref.right)
    np.testing.assert_array_equal(tree.count, ref.count)
    np.testing.assert_allclose(tree.gain, ref.gain, rtol=1e-9, atol=1e-9)
    for node in np.flatnonzero(tree.feature >= 0):
        f, b = tree.feature[node], tree.bin_threshold[node]
        expected = mapper.bin_edges_[f, b] if b < mapper.n_edges_[f] else np.inf
        assert tree.threshold[node] == expected
    # partition: leaves are contiguous, sorted by start, and hold exactly the naive leaf rows
    leaves = ref.leaves()
    assert sorted(grown.leaf_ids.tolist()) == leaves
    np.testing.assert_array_equal(grown.leaf_starts[0], 0)
    np.testing.assert_array_equal(grown.leaf_starts[1:], grown.leaf_ends[:-1])
    assert grown.leaf_ends[-1] == rows.shape[0]
    for leaf, a, b in zip(grown.leaf_ids, grown.leaf_starts, grown.leaf_ends):
        np.testing.assert_array_equal(grown.partition[a:b], ref.rows[leaf], err_msg=f"leaf {leaf}")
    # prediction with the leaf id as value: binned, raw and the naive walk agree on every row
    values = np.zeros(len(ref.feature))
    values[leaves] = leaves
    tree = grown.builder.build(values)
    ens = PackedEnsemble([tree])
    out_b = np.zeros(X.shape[0])
    ens.predict_binned(Xb, out_b)
    out_r = np.zeros(X.shape[0])
    ens.predict_raw(np.ascontiguousarray(X), out_r)
    np.testing.assert_array_equal(out_b, _naive_leaf_of(ref, Xb))
    np.testing.assert_array_equal(out_r, out_b)
    # the one-tree packing boosting scores each new tree with is the general packing's
    one = PackedEnsemble.of_tree(tree)
    for name in ("roots", "feature", "threshold", "bin_threshold", "missing_left", "value", "left", "right",
                 "cat_set", "cat_bits"):
        a, b = getattr(one, name), getattr(ens, name)
        assert a.dtype == b.dtype and a.shape == b.shape, name
        np.testing.assert_array_equal(a, b, err_msg=name)
    out_one = np.zeros(X.shape[0])
    one.predict_binned(Xb, out_one)
    np.testing.assert_array_equal(out_one, out_b)
    for leaf, a, b in zip(grown.leaf_ids, grown.leaf_starts, grown.leaf_ends):
        np.testing.assert_array_equal(out_b[grown.partition[a:b]], leaf)
    # raw prediction of values lying exactly on the edges, next to them, and NaN
    d = X.shape[1]
    cols = []
    for f in range(d):
        e = mapper.bin_edges_[f, :mapper.n_edges_[f]]
        cols.append(np.concatenate([e, np.nextafter(e, np.inf), np.nextafter(e, -np.inf), [np.nan]]))
    k = max(len(c) for c in cols)
    rng = np.random.default_rng(0)
    Xt = np.column_stack([rng.permutation(np.resize(c, k)) for c in cols])
    out_b = np.zeros(k)
    out_r = np.zeros(k)
    ens.predict_binned(mapper.transform(Xt), out_b)
    ens.predict_raw(Xt, out_r)
    np.testing.assert_array_equal(out_r, out_b)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("config", list(CONFIGS))
def test_grower_matches_naive(config, seed):
    X, mapper, Xb, rw, hw, rows, params, pen, pre_used, norm = _setup(config, seed)
    d = Xb.shape[1]

    def make_usage():
        bags = None if pen["bags"] is None else np.array(pen["bags"])
        usage = FeatureUsage(d, pen["mu"], pen["costs"], bags)
        for f in pre_used:
            usage.mark_used(f)
        return usage

    used0 = np.isin(np.arange(d), pre_used)
    ref, used, order = _naive_grow(Xb, mapper, rows, rw, hw, params, pen, used0, norm)

    def rerun(like):
        return _naive_grow(Xb, mapper, rows, rw, hw, params, pen, used0, norm, like=like)[0]

    for grown, usage in _grow_all_modes(Xb, mapper, params, rows, rw, hw, make_usage, norm):
        _compare(grown, _reference_for(grown, ref, rerun), mapper, X, Xb, rows)
        assert usage.order == list(pre_used) + order
        np.testing.assert_array_equal(usage.used, used)
    assert len(ref.leaves()) >= 3, "degenerate test problem"
    # the shape constraints of the configuration hold
    if params.max_leaves is not None:
        assert len(ref.leaves()) <= params.max_leaves
    depth = {0: 0}
    for node in range(len(ref.feature)):
        if ref.feature[node] >= 0:
            depth[ref.left[node]] = depth[ref.right[node]] = depth[node] + 1
    if params.max_depth is not None:
        assert max(depth.values()) <= params.max_depth


@pytest.mark.parametrize("config", list(CONFIGS))
def test_a_budget_of_one_histogram_subtracts_along_the_larger_children(config):
    """With room for one histogram the grower keeps it and derives larger children by subtraction in
    one pass with their smaller siblings; the two-pass search, which needs a second buffer, keeps none
    (both grow the naive tree: test_grower_matches_naive)."""
    X, mapper, Xb, rw, hw, rows, params, pen, pre_used, norm = _setup(config, 2)
    fused, unfused, _ = _budget_growers(Xb, mapper, params)
    larger = []
    search_pair = fused._search_pair
    fused._search_pair = lambda parent, small, large, features: (larger.append(large.count),
                                                                 search_pair(parent, small, large, features))
    for grower in (fused, unfused):
        bags = None if pen["bags"] is None else np.array(pen["bags"])
        usage = FeatureUsage(Xb.shape[1], pen["mu"], pen["costs"], bags)
        for f in pre_used:
            usage.mark_used(f)
        grower.grow(rows, rw, hw, usage, norm)
    assert (fused._n_hists, unfused._n_hists) == (1, 0)
    assert larger, "no pair was searched by subtraction"


def test_constraints_bind_in_configs():
    """Each configuration's advertised constraint changes the naive tree (the tests are not vacuous)."""
    for config, relax in (("agbm-bags-max_depth", dict(max_depth=None)),
                          ("gbfs-min_node_fraction-newton", dict(min_node_fraction=None)),
                          ("gbfs-max_leaves", dict(max_leaves=None)),
                          ("plain-depth", dict(max_depth=None))):
        X, mapper, Xb, rw, hw, rows, params, pen, pre_used, norm = _setup(config, 0)
        used0 = np.isin(np.arange(Xb.shape[1]), pre_used)
        a, *_ = _naive_grow(Xb, mapper, rows, rw, hw, params, pen, used0, norm)
        loose = GrowthParams(**{**params.__dict__, **relax})
        b, *_ = _naive_grow(Xb, mapper, rows, rw, hw, loose, pen, used0, norm)
        assert a.feature != b.feature or a.count != b.count, config
    # and the penalty matters: mu = 0 grows a different tree in the penalised configurations
    for config in ("gbfs-max_leaves", "agbm-bags-max_depth", "gbfs-min_node_fraction-newton",
                   "agbm-subset-preused", "gbfs-bags-preused-all-binding"):
        X, mapper, Xb, rw, hw, rows, params, pen, pre_used, norm = _setup(config, 1)
        used0 = np.isin(np.arange(Xb.shape[1]), pre_used)
        a, *_ = _naive_grow(Xb, mapper, rows, rw, hw, params, pen, used0, norm)
        b, *_ = _naive_grow(Xb, mapper, rows, rw, hw, params, {**pen, "mu": 0.0}, used0, norm)
        assert a.feature != b.feature, config


@pytest.mark.parametrize("mode", range(len(_histogram_modes())))
def test_consecutive_trees_share_usage_and_buffers(mode):
    """Three trees from one grower (pooled histogram buffers reused) with Omega carried over."""
    X, mapper, Xb, rw, hw, rows, params, pen, _, norm = _setup("gbfs-max_leaves", 1)
    d = Xb.shape[1]
    usage = FeatureUsage(d, pen["mu"], pen["costs"])
    grower = TreeGrower(Xb, mapper, dataclasses.replace(params, **_histogram_modes()[mode]))
    used = np.zeros(d, dtype=bool)
    rng = np.random.default_rng(5)
    for _ in range(3):
        grown = grower.grow(rows, rw, hw, usage, norm)
        used_before = used.copy()
        ref, used, _ = _naive_grow(Xb, mapper, rows, rw, hw, params, pen, used_before, norm)
        ref = _reference_for(grown, ref, lambda like, rw=rw, u=used_before: _naive_grow(
            Xb, mapper, rows, rw, hw, params, pen, u, norm, like=like)[0])
        _compare(grown, ref, mapper, X, Xb, rows)
        np.testing.assert_array_equal(usage.used, used)
        # next residuals: a boosting-like step on the naive leaves, plus noise
        leaf_of = _naive_leaf_of(ref, Xb)
        leaf_mean = {leaf: rw[ref.rows[leaf]].mean() for leaf in ref.leaves()}
        rw = rw - 0.3 * np.array([leaf_mean[leaf] for leaf in leaf_of]) + 0.1 * rng.normal(size=len(rw))


# -- degenerate trees ----------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["max_leaves=1", "too_few_rows", "penalty_too_high", "max_depth=0"])
def test_single_leaf(case):
    X, mapper, Xb, rw, hw, rows, params, pen, _, norm = _setup("gbfs-max_leaves", 0)
    usage = FeatureUsage(Xb.shape[1], 0.0)
    if case == "max_leaves=1":
        params = GrowthParams(max_leaves=1, min_samples_leaf=1)
    elif case == "too_few_rows":
        params = GrowthParams(max_leaves=10, min_samples_leaf=80)  # 150 rows < 2 * 80
    elif case == "penalty_too_high":
        usage = FeatureUsage(Xb.shape[1], 1e9)
        params = GrowthParams(max_leaves=10, min_samples_leaf=1)
    else:
        params = GrowthParams(max_leaves=10, max_depth=0, min_samples_leaf=1)
    grown = TreeGrower(Xb, mapper, params).grow(rows, rw, hw, usage, norm)
    tree = grown.builder.build(np.array([0.5]))
    assert tree.n_nodes == 1 and tree.feature[0] == -1 and tree.count[0] == rows.shape[0]
    np.testing.assert_array_equal(grown.leaf_ids, [0])
    np.testing.assert_array_equal(grown.leaf_starts, [0])
    np.testing.assert_array_equal(grown.leaf_ends, [rows.shape[0]])
    np.testing.assert_array_equal(np.sort(grown.partition), rows)
    assert usage.order == []


# -- the refresh of pending leaves (LightGBM CEGB issues 3245 / 3679) ----------------------------
def test_refresh_after_new_feature_changes_the_split():
    X, mapper, Xb, r, h = refresh_case()
    rows = np.arange(X.shape[0], dtype=np.int32)
    params = GrowthParams(max_leaves=4, min_samples_leaf=1)
    usage = FeatureUsage(2, 100.0)
    grown = TreeGrower(Xb, mapper, params).grow(rows, r, h, usage, 1.0)
    tree = grown.builder.build(np.zeros(7))
    # root (A), its left child L (B, split second), its right child R (B, split third)
    np.testing.assert_array_equal(tree.feature, [0, 1, 1, -1, -1, -1, -1])
    np.testing.assert_array_equal(tree.left[:3], [1, 3, 5])
    assert tree.bin_threshold[0] == 1 and tree.bin_threshold[2] == 0
    np.testing.assert_allclose(tree.gain[:3], [tree.gain[0], 360.0, 250.0])
    assert usage.order == [0, 1]

    # the naive reference with refresh agrees; without refresh (the CEGB bug) R splits on A
    pen = dict(mu=100.0, costs=None, bags=None)
    fresh, *_ = _naive_grow(Xb, mapper, rows, r, h, params, pen, None, 1.0, refresh=True)
    stale, *_ = _naive_grow(Xb, mapper, rows, r, h, params, pen, None, 1.0, refresh=False)
    assert fresh.feature == [0, 1, 1, -1, -1, -1, -1]
    assert stale.feature[2] == 0
    _compare(grown, fresh, mapper, X, Xb, rows)

    # the same, spelled out with the split search: R's per-feature gains, penalised before/after
    R = fresh.rows[2]
    gain, *_ = naive.best_splits(Xb, R, r, h, mapper.n_bins_non_missing_, 1, 1e-3, 0.0)
    np.testing.assert_allclose(gain, [160.0, 250.0])
    assert naive.penalized_best(gain, naive.penalty(100.0, np.ones(2), None, [True, False]), 1.0)[0] == 0
    assert naive.penalized_best(gain, naive.penalty(100.0, np.ones(2), None, [True, True]), 1.0)[0] == 1


def test_refresh_can_turn_a_leaf_splittable():
    """A pending leaf whose only useful split was unaffordable must be split once it becomes free.

    Same data, mu = 300: R's A split (free) scores 160, B 250 - 300 < 0, L's B scores 60.  R splits on
    A first (160 > 60), then L on B (60); now B is free and R's children each split on B (gain 125).
    Without the refresh they would have kept their stale score 125 - 300 < 0 and stayed leaves.
    """
    X, mapper, Xb, r, h = refresh_case()
    rows = np.arange(X.shape[0], dtype=np.int32)
    params = GrowthParams(max_leaves=None, min_samples_leaf=1)
    usage = FeatureUsage(2, 300.0)
    grown = TreeGrower(Xb, mapper, params).grow(rows, r, h, usage, 1.0)
    pen = dict(mu=300.0, costs=None, bags=None)
    fresh, *_ = _naive_grow(Xb, mapper, rows, r, h, params, pen, None, 1.0, refresh=True)
    stale, *_ = _naive_grow(Xb, mapper, rows, r, h, params, pen, None, 1.0, refresh=False)
    _compare(grown, fresh, mapper, X, Xb, rows)
    assert len(fresh.leaves()) > len(stale.leaves())
    assert fresh.feature[:3] == [0, 1, 0]


@pytest.mark.parametrize("method, criterion", [("gbfs", "sse"), ("agbm", "newton"), ("gtgbm", "newton")])
def test_no_split_gains_min_split_gain_or_less(method, criterion):
    from gbfs import GBFSRegressor

    rng = np.random.default_rng(5)
    X = rng.random((500, 8))
    y = X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.standard_normal(500)
    kw = dict(method=method, mu=0.0, criterion=criterion, leaf_estimate="newton" if criterion == "newton"
              else "mean", n_estimators=10, max_leaves=16, min_samples_leaf=5, random_state=0)
    if method == "gtgbm":
        kw["n_target_features"] = 3
    free = GBFSRegressor(**kw).fit(X, y)
    gains = np.concatenate([t.gain[t.feature >= 0] for t in free.trees_])
    threshold = float(np.quantile(gains, 0.5))
    capped = GBFSRegressor(min_split_gain=threshold, **kw).fit(X, y)
    kept = np.concatenate([t.gain[t.feature >= 0] for t in capped.trees_])
    assert kept.size and np.all(kept > threshold)
    assert sum(t.n_leaves for t in capped.trees_) < sum(t.n_leaves for t in free.trees_)
    with pytest.raises(ValueError, match="min_split_gain must be >= 0"):
        GBFSRegressor(min_split_gain=-1.0).fit(X, y)


@pytest.mark.parametrize("method, criterion", [("gbfs", "sse"), ("agbm", "newton"), ("gtgbm", "newton")])
def test_a_pure_node_is_never_split_and_unused_features_have_no_importance(method, criterion, monkeypatch):
    """Once the label's one step is found every leaf is pure: its residuals are equal, so any
    further "gain" is floating-point roundoff.  No such split is taken; only feature 0 is used and
    every other feature's importance is exactly 0.  Without the roundoff floor the same fit splits
    pure nodes on unrelated features (the test's own check that it can fail)."""
    import gbfs.booster.growing.grower as grower_module
    from gbfs import GBFSClassifier

    rng = np.random.default_rng(3)
    X = rng.random((300, 40))
    y = (X[:, 0] > 0.5).astype(int)
    kw = dict(method=method, mu=0.0, criterion=criterion, n_estimators=30, max_leaves=8,
              min_samples_leaf=5, random_state=0, **({"n_target_features": 3} if method == "gtgbm" else {}))
    model = GBFSClassifier(**kw).fit(X, y)
    for kind in ("gain", "split"):
        imp = model.feature_importance(kind)
        assert imp[0] > 0 and np.all(imp[1:] == 0.0), kind
    assert model.selected_features_.tolist() == [0]
    monkeypatch.setattr(grower_module, "ROUNDOFF_GAIN", 0.0)
    loose = GBFSClassifier(**kw).fit(X, y)
    assert np.count_nonzero(loose.feature_importance("split")[1:]) > 0
