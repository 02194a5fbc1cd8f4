"""Sparse storage of binned data: a scipy.sparse input is binned into a dense block plus the sparse
columns' (row, bin) pairs, every view of it equals the dense binning, and a fit on it grows exactly
the model of a fit on the dense array without ever holding ``rows x features`` bytes."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

from gbfs import GBFSClassifier, GBFSRegressor, selection_path
from gbfs.booster.binning import BinMapper
from gbfs.booster.growing.grower import GrowthParams, TreeGrower
from gbfs.booster.kernels.sparse_binned import SparseBinned, take_columns, take_rows, to_dense
from gbfs.booster.kernels.sparse_rows import SPARSE_SHARE
from gbfs.criteria.penalty import FeatureUsage
from gbfs.estimators.model_io import model_to_dict


def _mixed(seed, n=500, d=40):
    """Columns from dense to a handful of non-zeros; NaN, negatives, explicit zeros, a column of
    mostly 3.0 (most frequent bin not zero's) and one all zero."""
    rng = np.random.default_rng(seed)
    X = np.zeros((n, d))
    for j in range(d):
        share = 0.9 if j < 6 else 3.0 / (j + 1)
        on = rng.random(n) < share
        X[on, j] = rng.integers(-2, 6, on.sum())
    X[rng.random(n) < 0.03, 7] = np.nan
    X[rng.random(n) < 0.85, 8] = 3.0
    X[:, 9] = 0.0
    Xs = sp.csr_matrix(X)
    Xs.data[::23] = 0.0  # explicitly stored zeros
    return Xs, rng


@pytest.mark.parametrize("seed", range(3))
def test_sparse_storage_equals_the_dense_binning_in_every_view(seed):
    Xs, rng = _mixed(seed)
    mapper = BinMapper(max_bins=12).fit(Xs)
    binned = mapper.transform(Xs)
    dense = mapper.transform(Xs.toarray())
    assert isinstance(binned, SparseBinned) and binned.shape == dense.shape
    zero = mapper.transform(np.zeros((1, Xs.shape[1])))[0]
    outside = (dense != zero).mean(axis=0)
    np.testing.assert_array_equal(binned.col_of < 0, outside <= SPARSE_SHARE)
    assert binned.rows.shape[0] == int((dense != zero)[:, binned.col_of < 0].sum())
    assert binned.nbytes < dense.nbytes
    np.testing.assert_array_equal(binned.toarray(), dense)
    assert binned.toarray().flags.f_contiguous
    cols = rng.permutation(Xs.shape[1])[:15]
    rows = rng.permutation(Xs.shape[0])[:200]  # any order
    np.testing.assert_array_equal(binned.take(cols), dense[:, cols])
    np.testing.assert_array_equal(to_dense(take_columns(binned, cols)), dense[:, cols])
    np.testing.assert_array_equal(to_dense(take_rows(binned, rows)), dense[rows])
    np.testing.assert_array_equal(to_dense(take_rows(take_columns(binned, cols), rows)), dense[rows][:, cols])
    with pytest.raises(ValueError, match="repeat"):
        binned.take_rows(np.array([1, 1, 2]))


@pytest.mark.parametrize("seed", range(2))
def test_numeric_columns_among_sparse_ones_bin_as_the_dense_array(seed):
    """A column of many stored values (a numeric feature next to one-hot codes) is looked up in its
    grid: every value gets ``#{edges < value}`` as in the dense binning -- continuous values, their
    edges and neighbours, infinities, -0.0 and NaN."""
    rng = np.random.default_rng(seed)
    n, d = 2000, 30
    X = np.zeros((n, d))
    X[:, 0] = rng.normal(size=n)
    X[:, 1] = np.exp(rng.normal(0, 3, n))
    X[rng.random(n) < 0.05, 0] = np.nan
    X[:4, 0] = [np.inf, -np.inf, -0.0, 1e300]
    for j in range(2, d):
        X[rng.random(n) < 0.02, j] = 1.0
    mapper = BinMapper().fit(sp.csr_matrix(X))
    for f in (0, 1):  # the training rows hit every bin; add the edges and their float neighbours
        e = mapper.bin_edges_[f, :mapper.n_edges_[f]]
        X[4:4 + 3 * e.size, f] = np.concatenate([e, np.nextafter(e, np.inf), np.nextafter(e, -np.inf)])
    binned = mapper.transform(sp.csr_matrix(X))
    assert isinstance(binned, SparseBinned) and binned.col_of[0] >= 0 and binned.col_of[1] >= 0
    np.testing.assert_array_equal(binned.toarray(), mapper.transform(X))
    for f in (0, 1):
        e = mapper.bin_edges_[f, :mapper.n_edges_[f]]
        expected = np.where(np.isnan(X[:, f]), 255, np.searchsorted(e, X[:, f], side="left"))
        np.testing.assert_array_equal(binned.toarray()[:, f], expected, err_msg=f"column {f}")


def test_dense_storage_when_few_columns_are_sparse_or_any_is_categorical():
    rng = np.random.default_rng(0)
    X = sp.csr_matrix(rng.random((300, 12)) * (rng.random((300, 12)) < 0.6))
    assert isinstance(BinMapper().fit(X).transform(X), np.ndarray)
    Xs, _ = _mixed(1)
    cats = np.zeros(Xs.shape[1], dtype=bool)
    cats[2] = True
    mapper = BinMapper(categorical=cats).fit(Xs)
    assert isinstance(mapper.transform(Xs), np.ndarray)


def _grow(Xb, mapper, share, rw, hw, max_features):
    params = GrowthParams(max_leaves=12, min_samples_leaf=5, sparse_share=share, subtraction_min_rows=0)
    usage = FeatureUsage(Xb.shape[1], 0.0, None, None, max_features)
    grower = TreeGrower(Xb, mapper, params)
    rows = np.arange(Xb.shape[0], dtype=np.int32)
    return grower, grower.grow(rows, rw, hw, usage, 1.0).builder.cols


@pytest.mark.parametrize("share,max_features", [(SPARSE_SHARE, None), (SPARSE_SHARE, 2), (0.05, None),
                                                (0.0, None)])
def test_grower_on_sparse_storage_grows_the_dense_arrays_tree(share, max_features):
    """Stored columns come from the row-wise index, or are materialised for a restricted search
    (a full budget), or the grower densifies when its settings index fewer columns."""
    Xs, rng = _mixed(2, n=800)
    mapper = BinMapper().fit(Xs)
    binned, dense = mapper.transform(Xs), mapper.transform(Xs.toarray())
    rw = np.nan_to_num(np.asarray(Xs[:, [1, 12, 20]].sum(axis=1)).ravel()) + rng.normal(size=Xs.shape[0])
    hw = rng.random(Xs.shape[0]) + 0.5
    g_sparse, a = _grow(binned, mapper, share, rw, hw, max_features)
    g_dense, b = _grow(dense, mapper, share, rw, hw, max_features)
    assert a == b and len(a["feature"]) > 5
    assert isinstance(g_sparse.X_binned, SparseBinned) == (share == SPARSE_SHARE)


def _text(seed, n=1200, d=400):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.02, random_state=seed, format="csr",
                  data_rvs=lambda k: rng.integers(1, 6, k).astype(float))
    dense = rng.random((n, 3)) * (rng.random((n, 3)) < 0.7)   # a few dense columns too
    X = sp.hstack([sp.csr_matrix(dense), X[:, 3:]], format="csr")
    y = (np.asarray(X[:, 3:13].sum(axis=1)).ravel() + X[:, 0].toarray().ravel() + rng.normal(size=n) > 1.0)
    return X, y.astype(int)


@pytest.mark.parametrize("kwargs", [dict(method="agbm", mu=0.002),
                                    dict(method="gbfs", mu=0.0, max_features=3),
                                    dict(method="agbm", sampler="goss", top_rate=0.2, other_rate=0.1),
                                    dict(method="agbm", mu=0.0, max_features=5, refit=True),
                                    dict(method="gtgbm", mu=0.002)])
def test_fit_on_sparse_storage_is_the_dense_fit(kwargs):
    X, y = _text(0)
    Xd = X.toarray()
    common = dict(n_estimators=12, random_state=0, **kwargs)
    a = GBFSClassifier(**common).fit(Xd, y, eval_set=(Xd, y))
    b = GBFSClassifier(**common).fit(X, y, eval_set=(X, y))
    assert model_to_dict(a) == model_to_dict(b)
    drop = {"seconds", "elapsed_seconds"}
    assert [{k: v for k, v in r.items() if k not in drop} for r in a.history_] == \
        [{k: v for k, v in r.items() if k not in drop} for r in b.history_]
    assert a.n_features_selected_ > 0


def test_selection_path_and_its_cross_validation_on_sparse_storage():
    X, y = _text(1)
    common = dict(n_estimators=10, random_state=0)
    a = selection_path(GBFSClassifier(**common), X.toarray(), y, budgets=[2, 4], cv=3)
    b = selection_path(GBFSClassifier(**common), X, y, budgets=[2, 4], cv=3)
    assert [list(r.features) for r in a.results] == [list(r.features) for r in b.results]
    assert [r.val_score for r in a.results] == [r.val_score for r in b.results]
    assert [r.cv_mean for r in a.results] == [r.cv_mean for r in b.results]


def test_a_large_sparse_fit_never_holds_a_dense_binned_matrix():
    """20000 x 20000 at 0.2 %: one byte per entry would be 400 MB.  The fit holds the entries and
    its histogram pool (a few MB per kept histogram at 20000 features), about 110 MB."""
    rng = np.random.default_rng(0)
    n = d = 20_000
    nnz = n * d // 500
    X = sp.csr_matrix((rng.integers(1, 4, nnz).astype(np.float32),
                       (rng.integers(0, n, nnz), rng.integers(0, d, nnz))), shape=(n, d))
    y = (np.asarray(X[:, :30].sum(axis=1)).ravel() > 0.5).astype(float)
    est = GBFSRegressor(n_estimators=3, random_state=0)
    tracemalloc.start()
    try:
        est.fit(X, y)
        est.predict(X[:100])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < n * d // 2, f"peak {peak / 2**20:.0f} MiB"
