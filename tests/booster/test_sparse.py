"""Sparse data: scipy.sparse input binned without densifying, and the row-wise histograms of
mostly-default features (the default bin derived from the node totals) against np.add.at."""

from __future__ import annotations

import tracemalloc

import naive
import numpy as np
import pytest
import scipy.sparse as sp

from gbfs import GBFSClassifier, GBFSMultitaskClassifier, GBFSRegressor, load_model
from gbfs.booster.binning import BinMapper
from gbfs.booster.growing.grower import GrowthParams, TreeGrower
from gbfs.booster.kernels import sparse_rows
from gbfs.booster.kernels.histogram import HistogramLayout, gather
from gbfs.booster.kernels.sparse_binned import SparseBinned, to_dense
from gbfs.booster.kernels.sparse_rows import SparseRows
from gbfs.criteria.penalty import FeatureUsage


def _sparse(seed, n=400, d=30, density=0.05, fmt="csr"):
    """Counts 1..5 at ``density``, some negative values, NaNs and explicit zeros."""
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, random_state=seed, format="coo",
                  data_rvs=lambda k: rng.integers(1, 6, k).astype(float))
    X.data[::17] = np.nan
    X.data[1::13] = -2.5
    X.data[2::11] = 0.0  # explicitly stored zeros are zeros
    return X.asformat(fmt), rng


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
def test_bin_mapper_on_sparse_equals_dense(fmt):
    Xs, _ = _sparse(0, fmt=fmt)
    Xd = Xs.toarray()
    a, b = BinMapper(max_bins=16).fit(Xd), BinMapper(max_bins=16).fit(Xs)
    np.testing.assert_array_equal(a.n_edges_, b.n_edges_)
    np.testing.assert_array_equal(a.bin_edges_, b.bin_edges_)
    np.testing.assert_array_equal(a.standardised_values_, b.standardised_values_)
    binned = b.transform(Xs)
    assert isinstance(binned, SparseBinned)  # every column is mostly zero: all stored sparse
    assert binned.dense.shape[1] == 0 and binned.sparse_features.size == Xs.shape[1]
    np.testing.assert_array_equal(a.transform(Xd), to_dense(binned))
    assert to_dense(binned).flags.f_contiguous


def test_duplicate_entries_are_summed_and_subsample_reads_sparse_rows():
    rows, cols = np.array([0, 0, 3, 5]), np.array([1, 1, 2, 2])
    Xs = sp.coo_matrix((np.array([1.0, 2.0, 4.0, 5.0]), (rows, cols)), shape=(8, 3))
    Xd = Xs.toarray()  # scipy sums duplicates: entry (0, 1) is 3
    np.testing.assert_array_equal(BinMapper().fit(Xs).transform(Xs), BinMapper().fit(Xd).transform(Xd))
    Xs2, _ = _sparse(1, n=600)
    a = BinMapper(subsample=200, random_state=3).fit(Xs2.toarray())
    b = BinMapper(subsample=200, random_state=3).fit(Xs2)
    np.testing.assert_array_equal(a.bin_edges_, b.bin_edges_)


@pytest.mark.parametrize("fmt", ["csc", "csr"])
def test_fit_transform_leaves_the_users_matrix_as_it_was(fmt):
    """fit_transform converts sparse input to canonical CSC once: a matrix with duplicate entries
    and unsorted indices bins as its dense equal and is not changed (its arrays and its flags); an
    already canonical float64 CSC matrix is read in place and bins the same."""
    rng = np.random.default_rng(0)
    n_major, n_minor, per = (8, 60, 50) if fmt == "csc" else (60, 8, 7)
    indices = rng.integers(0, n_minor, n_major * per)  # unsorted, with repeats: duplicate entries
    indptr = np.arange(0, n_major * per + 1, per)
    data = np.round(rng.standard_normal(n_major * per), 1)
    kind = sp.csc_matrix if fmt == "csc" else sp.csr_matrix
    X = kind((data, indices, indptr), shape=(60, 8))
    assert not X.has_canonical_format
    before = (X.data.copy(), X.indices.copy(), X.indptr.copy())
    dense = X.toarray()  # duplicates summed
    want = BinMapper().fit_transform(dense)
    np.testing.assert_array_equal(to_dense(BinMapper().fit_transform(X)), want)
    for a, b in zip(before, (X.data, X.indices, X.indptr)):
        np.testing.assert_array_equal(a, b)
    assert not X.has_canonical_format
    canonical = sp.csc_matrix(dense)
    assert canonical.has_canonical_format
    np.testing.assert_array_equal(to_dense(BinMapper().fit_transform(canonical)), want)


def _node(n, rng, frac):
    rows = np.sort(rng.choice(n, int(frac * n), replace=False)).astype(np.int32)
    return rows


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("unit", [False, True])
@pytest.mark.parametrize("all_rows", [False, True])
@pytest.mark.parametrize("chunked", [False, True])
@pytest.mark.parametrize("subset", [False, True])
def test_row_wise_histogram_matches_add_at(seed, unit, all_rows, chunked, subset, monkeypatch):
    if chunked:  # large-node path: rows accumulated in parallel chunks, then added in order
        monkeypatch.setattr(sparse_rows, "MIN_CHUNK_ROWS", 16)
        monkeypatch.setattr(sparse_rows, "CHUNK_WORK", 0)
    Xs, rng = _sparse(seed)
    mapper = BinMapper(max_bins=16).fit(Xs)
    Xb = to_dense(mapper.transform(Xs))
    Xb[rng.random(Xb.shape[0]) < 0.7, 3] = 255  # a feature whose most frequent bin is the missing one
    layout = HistogramLayout(mapper.n_bins_non_missing_)
    index = SparseRows.build(Xb, layout, max_share=0.5, min_features=1)
    assert index is not None and index.features.size > 20 and 3 in index.features
    assert (index._chunks(160) > 1) == chunked
    assert index.default[3] == layout.n_bins[3]
    n = Xb.shape[0]
    rows = np.arange(n, dtype=np.int32) if all_rows else _node(n, rng, 0.4)
    rw, hw = rng.normal(size=n), (np.ones(n) if unit else rng.random(n) + 0.1)
    r_ord, h_ord = np.empty(rows.size), np.empty(rows.size)
    gather(rw, rows, r_ord)
    gather(hw, rows, h_ord)
    hist = layout.new()
    hist[...] = np.nan  # pooled buffers are not zeroed
    # a subset: the features a node still searches (the others' bins are scratch)
    built = index.features[seed % 2::2] if subset else index.features
    index.build_histogram(np.empty(0, np.int32) if all_rows else rows, r_ord, np.empty(0) if unit else h_ord,
                          float(r_ord.sum()), float(h_ord.sum()), float(rows.size), layout.offsets, hist,
                          built if subset else None)
    ref = naive.flat_histogram(Xb, rows, rw, hw, layout.n_bins)
    for f in range(Xb.shape[1]):
        hf = layout.feature(hist, f)
        if f in built:
            np.testing.assert_allclose(hf, layout.feature(ref, f), rtol=1e-9, atol=1e-9)
            np.testing.assert_array_equal(hf[:, 2], layout.feature(ref, f)[:, 2])  # counts exact
        elif f not in index.features:
            assert np.all(np.isnan(hf)), "a dense feature's bins were written"


def test_index_is_none_for_dense_data_and_counts_only_non_default_entries():
    rng = np.random.default_rng(0)
    X = rng.random((500, 20))
    mapper = BinMapper().fit(X)
    layout = HistogramLayout(mapper.n_bins_non_missing_)
    assert SparseRows.build(mapper.transform(X), layout) is None
    Xs, _ = _sparse(4, n=500, d=40, density=0.03)
    mapper = BinMapper().fit(Xs)
    Xb = to_dense(mapper.transform(Xs))
    index = SparseRows.build(Xb, HistogramLayout(mapper.n_bins_non_missing_))
    assert index.features.size == 40 and index.dense_features.size == 0
    zero_bins = [int(mapper.transform(np.zeros((1, 40)))[0, f]) for f in range(40)]
    assert index.idx.size == int(np.count_nonzero(Xb != np.array(zero_bins, dtype=np.uint8)))


def _grow(Xb, mapper, share, rows, rw, hw, mu, max_features=None):
    params = GrowthParams(max_leaves=12, min_samples_leaf=5, sparse_share=share, sparse_min_features=1,
                          subtraction_min_rows=0)
    usage = FeatureUsage(Xb.shape[1], mu, None, None, max_features)
    grower = TreeGrower(Xb, mapper, params)
    assert (grower.sparse is not None) == (share > 0)
    return grower.grow(rows, rw, hw, usage, 1.0).builder, usage


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("mu,max_features", [(0.0, None), (0.5, None), (0.0, 3)])
def test_row_wise_grower_grows_the_dense_kernels_trees(seed, mu, max_features):
    Xs, rng = _sparse(seed, n=600, d=25, density=0.15)
    mapper = BinMapper().fit(Xs)
    Xb = mapper.transform(Xs)  # stored sparse: the grower indexes it (share 1) or densifies it (share 0)
    n = Xb.shape[0]
    rw = np.asarray(Xs[:, :4].sum(axis=1)).ravel() + rng.normal(size=n)
    rw = np.nan_to_num(rw - np.nanmean(rw))
    rows = _node(n, rng, 0.8)
    hw = rng.random(n) + 0.5
    dense, u_dense = _grow(Xb, mapper, 0.0, rows, rw, hw, mu, max_features)
    sparse, u_sparse = _grow(Xb, mapper, 1.0, rows, rw, hw, mu, max_features)
    assert dense.cols["feature"] == sparse.cols["feature"]
    assert dense.cols["bin_threshold"] == sparse.cols["bin_threshold"]
    np.testing.assert_allclose(dense.cols["gain"], sparse.cols["gain"], rtol=1e-9)
    assert u_dense.order == u_sparse.order
    assert len(dense.cols["feature"]) > 5


def _text(seed, n=1500, d=300):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.03, random_state=seed, format="csr",
                  data_rvs=lambda k: rng.integers(1, 6, k).astype(float))
    y = (np.asarray(X[:, :10].sum(axis=1)).ravel() + rng.normal(size=n) > 1.0).astype(int)
    return X, y


@pytest.mark.parametrize("kwargs", [dict(method="agbm", mu=0.002), dict(method="gtgbm", mu=0.002),
                                    dict(method="gbfs", mu=0.5, sampler="mvs", subsample=0.3),
                                    dict(method="agbm", mu=0.0, max_features=4, refit=True)])
def test_estimator_on_sparse_equals_dense(kwargs, tmp_path):
    X, y = _text(0)
    common = dict(n_estimators=15, random_state=0, criterion="newton", leaf_estimate="newton", **kwargs)
    a = GBFSClassifier(**common).fit(X.toarray(), y, eval_set=(X.toarray(), y))
    b = GBFSClassifier(**common).fit(X, y, eval_set=(X.tocsc(), y))
    np.testing.assert_array_equal(a.selected_features_, b.selected_features_)
    np.testing.assert_allclose(a.predict_proba(X.toarray()), b.predict_proba(X), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(b.predict_proba(X.toarray()), b.predict_proba(X))
    assert sp.issparse(b.transform(X)) and b.transform(X).shape[1] == b.n_features_selected_
    b.save_model(tmp_path / "m.json")
    np.testing.assert_array_equal(load_model(tmp_path / "m.json").predict_proba(X), b.predict_proba(X))


def test_regressor_multitask_and_blockwise_prediction(monkeypatch):
    X, y = _text(1)
    reg = GBFSRegressor(n_estimators=8, random_state=0).fit(X, y.astype(float))
    np.testing.assert_allclose(reg.predict(X), GBFSRegressor(n_estimators=8, random_state=0)
                               .fit(X.toarray(), y.astype(float)).predict(X.toarray()), atol=1e-12)
    import gbfs.booster.tree
    full = reg.predict(X)
    monkeypatch.setattr(gbfs.booster.tree, "_PREDICT_BLOCK_VALUES", 7 * X.shape[1])  # blocks of 7 rows
    np.testing.assert_array_equal(reg.predict(X), full)
    task = np.arange(X.shape[0]) % 3
    mt = GBFSMultitaskClassifier(n_estimators=5, random_state=0).fit(X, y, task)
    mt_dense = GBFSMultitaskClassifier(n_estimators=5, random_state=0).fit(X.toarray(), y, task)
    np.testing.assert_allclose(mt.predict_proba(X, task), mt_dense.predict_proba(X.toarray(), task),
                               atol=1e-12)


def test_sparse_errors_name_the_argument():
    X, y = _text(2, n=200, d=20)
    bad = X.copy()
    bad.data[3] = np.inf
    with pytest.raises(ValueError, match="X"):
        GBFSClassifier(n_estimators=2).fit(bad, y)
    est = GBFSClassifier(n_estimators=2).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        est.predict(X[:, :10])
    with pytest.raises(ValueError, match=r"eval_set\[0\]"):
        GBFSClassifier(n_estimators=2).fit(X, y, eval_set=(bad, y))


@pytest.mark.slow  # a few seconds: the default suite stays under 5 minutes
def test_sparse_input_is_never_densified_as_floats():
    """A 4000 x 5000 matrix at 1 % density: dense float64 would be 160 MB, binned uint8 is 20 MB."""
    rng = np.random.default_rng(0)
    X = sp.random(4000, 5000, density=0.01, random_state=0, format="csr",
                  data_rvs=lambda k: rng.integers(1, 6, k).astype(float))
    y = (np.asarray(X[:, :20].sum(axis=1)).ravel() > 0.5).astype(int)
    est = GBFSClassifier(n_estimators=3, random_state=0)
    tracemalloc.start()
    try:
        est.fit(X, y)
        est.predict_proba(X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 80 * 2**20, f"peak {peak / 2**20:.0f} MiB"
