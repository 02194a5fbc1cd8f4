"""The exact split search against brute force over every cut of the raw values, its two ways
(presorted lists, a sort per node) against each other, and the exact grower against the histogram
grower where every distinct value has its own bin (the same search then)."""

from __future__ import annotations

import numpy as np
import pytest

from gbfs.booster.kernels.exact import (
    presort,
    presorted_best_splits,
    presorted_best_splits_serial,
    sorted_best_splits,
    sorted_best_splits_serial,
    split_lists,
    split_rows,
    tree_lists,
)
from gbfs.booster.kernels.splitting import SplitRule, Splits


def _naive(x, g, h, msl, mcw, lam):
    """Best (gain, left mask) over every cut between distinct non-missing values of ``x`` and both
    sides for its missing rows, by direct sums."""
    miss = np.isnan(x)
    values = np.unique(x[~miss])
    G, H, C = g.sum(), h.sum(), float(x.shape[0])
    parent = G * G / (H + lam)
    best, best_left = -np.inf, None
    for j, v in enumerate(values):
        last = j == values.shape[0] - 1
        for missing_left in (False, True):
            if missing_left and (not miss.any() or last):
                continue
            if not missing_left and last and not miss.any():
                continue
            left = (x <= v) & ~miss
            if missing_left:
                left |= miss
            lg, lh, lc = g[left].sum(), h[left].sum(), float(left.sum())
            rg, rh, rc = G - lg, H - lh, C - lc
            if lc < msl or rc < msl or lh < mcw or rh < mcw:
                continue
            gain = lg * lg / (lh + lam) + rg * rg / (rh + lam) - parent
            if best == -np.inf or gain > best + 1e-12 * max(1.0, abs(best)):
                best, best_left = gain, left
    return best, best_left


def _data(seed, n=90, d=6, ties=True):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    if ties:
        X[:, 1] = np.round(X[:, 1])          # few distinct values
        X[:, 2] = np.round(X[:, 2] * 3) / 3
    X[rng.random(n) < 0.15, 3] = np.nan      # missing values
    X[rng.random(n) < 0.9, 4] = np.nan       # mostly missing
    X[:, 5] = 1.0                            # constant: no split
    g = rng.normal(size=n) + (X[:, 0] > 0.3)
    h = rng.random(n) + 0.1
    return np.asfortranarray(X), g, h


def _rule(g, h, n, msl, mcw=1e-3, lam=0.0):
    return SplitRule(float(g.sum()), float(h.sum()), float(n), float(msl), 0.0, mcw, lam)


def _out(d):
    s = Splits.empty(d, -np.inf)
    return s, np.full(d, np.nan)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("msl,lam", [(1, 0.0), (7, 0.5)])
def test_both_ways_find_the_brute_force_best_split(seed, msl, lam):
    X, g, h = _data(seed)
    n, d = X.shape
    rng = np.random.default_rng(seed + 10)
    rows = np.sort(rng.choice(n, 60, replace=False)).astype(np.int32)
    features = np.arange(d, dtype=np.int64)
    rule = _rule(g[rows], h[rows], rows.shape[0], msl, lam=lam)
    # a node's segment of the presorted lists, as the grower keeps it
    in_tree = np.zeros(n, dtype=np.bool_)
    in_tree[rows] = True
    lists = np.empty((d, n), dtype=np.int32)
    tree_lists(presort(X), in_tree, lists)
    results = []
    for kernel in ("presorted", "presorted_serial", "sorted", "sorted_serial"):
        s, thr = _out(d)
        out = (s.gain, thr, s.missing_left, s.left_sums)
        if kernel == "presorted":
            presorted_best_splits(X, lists, 0, rows.shape[0], g, h, False, features, 3, rule, *out)
        elif kernel == "presorted_serial":
            presorted_best_splits_serial(X, lists, 0, rows.shape[0], g, h, False, features, rule, *out)
        elif kernel == "sorted":
            sorted_best_splits(X, rows, g[rows], h[rows], features, 2, rule, *out)
        else:
            sorted_best_splits_serial(X, rows, g[rows], h[rows], features, rule, *out)
        results.append((s, thr))
    for f in range(d):
        x = X[rows, f]
        want, want_left = _naive(x, g[rows], h[rows], msl, 1e-3, lam)
        for s, thr in results:
            assert np.isfinite(s.gain[f]) == np.isfinite(want), f
            if not np.isfinite(want):
                continue
            np.testing.assert_allclose(s.gain[f], want, rtol=1e-10, atol=1e-12)
            miss = np.isnan(x)
            left = np.where(miss, s.missing_left[f], x <= thr[f])
            np.testing.assert_array_equal(left, want_left)
            np.testing.assert_allclose(s.left_sums[f], [g[rows][left].sum(), h[rows][left].sum(), left.sum()],
                                       rtol=1e-12, atol=1e-12)
    # the two ways sum in the same (sorted) order: bit-identical records
    for s, thr in results[1:]:
        np.testing.assert_array_equal(s.gain, results[0][0].gain)
        np.testing.assert_array_equal(thr, results[0][1])


def test_thresholds_lie_between_the_values_they_cut():
    X, g, h = _data(3, ties=False)
    n, d = X.shape
    s, thr = _out(d)
    sorted_best_splits_serial(X, np.empty(0, np.int32), g, h, np.arange(d), _rule(g, h, n, 1),
                              s.gain, thr, s.missing_left, s.left_sums)
    for f in np.flatnonzero(np.isfinite(s.gain)):
        x = X[:, f][~np.isnan(X[:, f])]
        if np.isinf(thr[f]):
            continue
        assert x[x <= thr[f]].max() < x[x > thr[f]].min()
        lo, hi = x[x <= thr[f]].max(), x[x > thr[f]].min()
        assert thr[f] == lo * 0.5 + hi * 0.5


def test_a_split_keeps_every_feature_list_sorted_and_the_rows_stable():
    X, _, _ = _data(5)
    n, d = X.shape
    lists = np.empty((d, n), dtype=np.int32)
    tree_lists(presort(X), np.zeros(0, np.bool_), lists)
    partition = np.arange(n, dtype=np.int32)
    side = np.zeros(n, dtype=np.bool_)
    buffer = np.empty(n, np.int32)
    # the root, then its left child: every feature's segment of a node holds the node's rows
    nodes = [(0, n, 3, 0.1, True), None]
    n_left = split_rows(partition, 0, n, X[:, 3], 0.1, True, side, buffer)
    split_lists(lists, 0, n, side, 2)
    assert all(np.isnan(X[r, 3]) or X[r, 3] <= 0.1 for r in partition[:n_left])
    nodes = [(0, n_left), (n_left, n)]
    k = split_rows(partition, 0, n_left, X[:, 0], 0.0, False, side, buffer)
    split_lists(lists, 0, n_left, side, 1)
    nodes = [(0, k), (k, n_left), (n_left, n)]
    assert all(X[r, 0] <= 0.0 for r in partition[:k]) and all(X[r, 0] > 0.0 for r in partition[k:n_left])
    for a, b in nodes:
        seg = partition[a:b]
        assert np.all(np.diff(seg) > 0)  # stable: rows stay in order
        for f in range(d):
            part = lists[f, a:b]
            assert set(part) == set(seg)
            v = X[part, f]
            ok = ~np.isnan(v)
            assert np.all(np.diff(v[ok]) >= 0) and ok[:ok.sum()].all()  # sorted, NaN last


def test_presort_puts_nan_last_and_keeps_ties_in_row_order():
    # two columns: a one-column array is C-ordered too, and would compile presort a second time
    X = np.asfortranarray(np.column_stack([[2.0, np.nan, 1.0, 2.0, np.nan, 1.0], np.zeros(6)]))
    np.testing.assert_array_equal(presort(X)[0], [2, 5, 0, 3, 1, 4])


# -- the exact grower inside the estimators ---------------------------------------------------------

from gbfs import GBFSClassifier, GBFSRegressor, load_model  # noqa: E402


def _few_values(seed, n=400, d=8):
    """Data whose every column has at most 40 distinct values: with one bin per value the
    histogram search considers every cut the exact search does."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 40, size=(n, d)).astype(np.float64) / 7.0
    X[rng.random(n) < 0.1, 2] = np.nan
    y = ((X[:, 0] - X[:, 1] + 0.5 * np.nan_to_num(X[:, 2]) + rng.normal(size=n)) > 0.5).astype(int)
    return X, y


@pytest.mark.parametrize("method,mu", [("gbfs", 0.0), ("agbm", 0.05)])
def test_exact_grows_the_histogram_trees_where_every_value_has_its_bin(method, mu):
    X, y = _few_values(0)
    kw = dict(method=method, mu=mu, n_estimators=8, max_leaves=8, min_samples_leaf=5, min_data_in_bin=1,
              random_state=0)
    hist = GBFSClassifier(**kw).fit(X, y)
    exact = GBFSClassifier(split_search="exact", **kw).fit(X, y)
    for th, te in zip(hist._trees, exact._trees):
        np.testing.assert_array_equal(th.feature, te.feature)
        np.testing.assert_allclose(th.value, te.value, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(exact.predict_proba(X), hist.predict_proba(X), rtol=1e-9)
    np.testing.assert_array_equal(exact.get_support(), hist.get_support())


def test_exact_splits_between_values_that_share_a_bin():
    rng = np.random.default_rng(1)
    X = rng.random((600, 3))
    y = (X[:, 0] > 0.5012345).astype(int)  # a cut no 16-bin edge can make
    kw = dict(method="gbfs", mu=0.0, n_estimators=1, max_depth=1, min_samples_leaf=1, max_bins=16,
              learning_rate=1.0, random_state=0)
    exact = GBFSClassifier(split_search="exact", **kw).fit(X, y)
    hist = GBFSClassifier(**kw).fit(X, y)
    below, above = X[y == 0, 0].max(), X[y == 1, 0].min()
    t = exact._trees[0].threshold[0]
    assert below <= t < above
    assert (exact.predict(X) == y).all() and not (hist.predict(X) == y).all()


def _pair(seed=2, n=700, d=30):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[rng.random(n) < 0.05, 4] = np.nan
    y = (X[:, 0] + X[:, 1] * X[:, 2] + 0.3 * rng.normal(size=n) > 0).astype(int)
    return X, y


@pytest.mark.parametrize("kw", [
    dict(method="agbm", mu=0.02),
    dict(method="gtgbm", mu=0.02, group_test_scope="tree", n_target_features=3),
    dict(method="gtgbm", mu=0.02, group_test_scope="node", n_target_features=3),
    dict(method="agbm", mu=0.02, sampler="sgb", subsample=0.5),
    dict(method="agbm", mu=0.02, max_features=3, refit=True),
    dict(method="topk", max_features=4),
], ids=["agbm", "gtgbm-tree", "gtgbm-node", "sgb", "refit", "topk"])
def test_exact_fits_are_reproducible_and_score_eval_sets_on_raw_values(kw):
    X, y = _pair()
    Xv, yv = X[500:], y[500:]
    X, y = X[:500], y[:500]
    args = dict(n_estimators=15, max_leaves=8, min_samples_leaf=10, split_search="exact", random_state=3,
                **kw)
    a = GBFSClassifier(early_stopping_rounds=50, **args).fit(X, y, eval_set=(Xv, yv))
    b = GBFSClassifier(early_stopping_rounds=50, **args).fit(X, y, eval_set=(Xv, yv))
    np.testing.assert_array_equal(a.predict_proba(Xv), b.predict_proba(Xv))
    # the recorded validation loss is the model's own on the raw validation rows
    p = np.clip(a.predict_proba(Xv)[:, 1], 1e-15, 1 - 1e-15)
    last = a.history_[a.best_iteration_ if a.best_iteration_ is not None else -1]
    np.testing.assert_allclose(last["val_loss"], -np.mean(yv * np.log(p) + (1 - yv) * np.log(1 - p)),
                               rtol=1e-9)
    assert roc_auc(yv, p) > 0.7


def test_an_exact_model_file_predicts_the_same(tmp_path):
    X, y = _pair()
    m = GBFSRegressor(split_search="exact", n_estimators=10, random_state=0).fit(X, y.astype(float))
    path = tmp_path / "m.json"
    m.save_model(path)
    np.testing.assert_array_equal(load_model(path).predict(X), m.predict(X))


@pytest.mark.parametrize("case,match", [
    ("sparse", "dense array"), ("multiclass", "multiclass"), ("hessian", "leaf_count"),
    ("categorical", "categorical"), ("name", "split_search"),
])
def test_what_the_exact_search_does_not_do_is_refused(case, match):
    import scipy.sparse as sp

    X, y = _pair()
    kw = dict(split_search="exact", n_estimators=2)
    if case == "sparse":
        X = sp.csr_matrix(X)
    elif case == "multiclass":
        y = np.arange(X.shape[0]) % 3
    elif case == "hessian":
        kw["leaf_count"] = "hessian"
    elif case == "categorical":
        X = np.abs(np.round(X)).astype(float)
        kw["categorical_features"] = [0]
    else:
        kw["split_search"] = "sorted"
    with pytest.raises(ValueError, match=match):
        GBFSClassifier(**kw).fit(X, y)


def roc_auc(y, p):
    from sklearn.metrics import roc_auc_score

    return roc_auc_score(y, p)
