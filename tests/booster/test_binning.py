"""BinMapper against the specification: midpoint edges, equal-frequency quantiles, NaN bin,
``bin(x) = #{edges < x}`` and ``x <= threshold(f, t)  <=>  bin(x) <= t``."""

from __future__ import annotations

import naive
import numpy as np
import pytest

from gbfs.booster.binning import BinMapper
from gbfs.booster.kernels._types import MISSING_BIN


def _edges(mapper, f):
    return mapper.bin_edges_[f, :mapper.n_edges_[f]]


def _check_threshold_property(mapper, f, x):
    """For every bin threshold t (including n_edges: everything non-missing left)."""
    x = x[~np.isnan(x)]
    b = mapper.transform(np.column_stack([x if g == f else np.zeros_like(x)
                                          for g in range(mapper.n_edges_.shape[0])]))[:, f]
    for t in range(int(mapper.n_edges_[f]) + 1):
        thr = mapper.threshold(f, t)
        np.testing.assert_array_equal(x <= thr, b <= t, err_msg=f"feature {f}, t={t}, thr={thr}")


def test_few_distinct_values_hand_example():
    X = np.array([[3.0], [1.0], [2.0], [2.0], [7.0], [1.0]])
    m = BinMapper(min_data_in_bin=1).fit(X)
    assert m.n_edges_[0] == 3
    np.testing.assert_array_equal(_edges(m, 0), [1.5, 2.5, 5.0])
    np.testing.assert_array_equal(m.n_bins_non_missing_, [4])
    np.testing.assert_array_equal(m.transform(X)[:, 0], [2, 0, 1, 1, 3, 0])


@pytest.mark.parametrize("n_distinct,max_bins", [(2, 255), (17, 255), (255, 255), (10, 16), (16, 16)])
def test_few_distinct_values_one_bin_per_value(n_distinct, max_bins):
    rng = np.random.default_rng(n_distinct)
    u = np.sort(rng.choice(np.arange(-1000, 1000), n_distinct, replace=False) * 0.37)
    X = rng.choice(u, size=(600, 2))
    X[:n_distinct, 0] = u  # every value present in column 0
    X[:n_distinct, 1] = u
    X[rng.random(600) < 0.1, 1] = np.nan
    m = BinMapper(max_bins=max_bins, min_data_in_bin=1).fit(X)
    for f in range(2):
        col = X[:, f]
        ref = naive.midpoint_edges(col)
        e = _edges(m, f)
        assert e.shape == ref.shape
        np.testing.assert_allclose(e, ref, rtol=1e-14)
        uf = np.unique(col[~np.isnan(col)])
        assert np.all(uf[:-1] < e) and np.all(e < uf[1:]), "edge not strictly between its values"
        bins = m.transform(np.column_stack([uf, uf]))[:, f]
        np.testing.assert_array_equal(bins, np.arange(len(uf)))  # one bin per value


@pytest.mark.parametrize("max_bins", [255, 16])
@pytest.mark.parametrize("dist", ["uniform", "lognormal"])
def test_many_distinct_values_equal_frequency(max_bins, dist):
    rng = np.random.default_rng(1)
    n = 40 * max_bins
    col = rng.random(n) if dist == "uniform" else rng.lognormal(0.0, 2.0, n)
    m = BinMapper(max_bins=max_bins).fit(col[:, None])
    e = _edges(m, 0)
    assert 0 < m.n_edges_[0] <= max_bins - 1
    assert np.all(np.diff(e) > 0)
    assert m.bin_edges_.shape == (1, max_bins - 1)
    bins = m.transform(col[:, None])[:, 0]
    assert bins.max() <= max_bins - 1
    counts = np.bincount(bins, minlength=m.n_edges_[0] + 1)
    expected = n / (m.n_edges_[0] + 1)
    assert counts.min() >= 0.8 * expected and counts.max() <= 1.2 * expected, counts


def test_256_distinct_values_switch_to_quantiles():
    col = np.arange(256, dtype=np.float64)
    m = BinMapper(min_data_in_bin=1).fit(col[:, None])
    assert m.n_edges_[0] <= 254
    bins = m.transform(col[:, None])[:, 0]
    assert bins.max() <= 254
    counts = np.bincount(bins)
    assert counts.max() <= 3


def test_heavy_ties_with_many_distinct_values():
    rng = np.random.default_rng(2)
    col = np.concatenate([np.zeros(3000), rng.random(1000)])
    m = BinMapper(min_data_in_bin=1).fit(col[:, None])
    e = _edges(m, 0)
    assert np.all(np.diff(e) > 0)
    bins = m.transform(col[:, None])[:, 0]
    assert len(np.unique(bins[col == 0])) == 1  # a value never straddles two bins
    _check_threshold_property(m, 0, np.concatenate([col, e, np.nextafter(e, np.inf)]))


def test_nan_goes_to_missing_bin_and_is_ignored_by_fit():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(500, 3))
    X[rng.random(500) < 0.3, 0] = np.nan
    X[::7, 2] = np.nan
    m = BinMapper().fit(X)
    Xb = m.transform(X)
    np.testing.assert_array_equal(Xb[np.isnan(X)], MISSING_BIN)
    assert np.all(Xb[~np.isnan(X)] < MISSING_BIN)
    for f in (0, 2):
        clean = X[~np.isnan(X[:, f]), f]
        m_clean = BinMapper().fit(clean[:, None])
        np.testing.assert_array_equal(_edges(m, f), _edges(m_clean, 0))


@pytest.mark.parametrize("max_bins", [255, 32, 2])
def test_transform_equals_searchsorted(max_bins):
    rng = np.random.default_rng(4)
    train = np.column_stack([rng.normal(size=800), rng.integers(0, 5, 800), rng.exponential(size=800)])
    train[rng.random(800) < 0.05, 2] = np.nan
    m = BinMapper(max_bins=max_bins).fit(train)
    edges = [_edges(m, f) for f in range(3)]
    # test values: fresh draws, out-of-range values, exactly the edges and their neighbours, NaN
    test = [np.concatenate([rng.normal(size=300) * 3, e, np.nextafter(e, -np.inf),
                            np.nextafter(e, np.inf), [np.nan, -1e300, 1e300]]) for e in edges]
    k = max(len(t) for t in test)
    X = np.column_stack([np.resize(t, k) for t in test])
    Xb = m.transform(X)
    assert Xb.dtype == np.uint8 and Xb.flags.f_contiguous
    np.testing.assert_array_equal(Xb, naive.bin_matrix(X, edges))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_threshold_iff_bin(seed):
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.normal(size=2000), rng.integers(-3, 4, 2000).astype(float),
                         np.round(rng.random(2000), 2)])
    m = BinMapper(max_bins=[255, 64, 8][seed]).fit(X)
    for f in range(3):
        e = _edges(m, f)
        x = np.concatenate([X[:, f], e, np.nextafter(e, np.inf), np.nextafter(e, -np.inf),
                            rng.normal(size=500) * 5])
        _check_threshold_property(m, f, x)
    assert m.threshold(0, int(m.n_edges_[0])) == np.inf


def test_constant_column():
    X = np.column_stack([np.full(50, 2.5), np.arange(50.0)])
    m = BinMapper(min_data_in_bin=1).fit(X)
    assert m.n_edges_[0] == 0 and m.n_bins_non_missing_[0] == 1
    Xb = m.transform(np.array([[2.5, 0.0], [-10.0, 0.0], [10.0, 0.0], [np.nan, 0.0]]))
    np.testing.assert_array_equal(Xb[:, 0], [0, 0, 0, MISSING_BIN])
    assert m.threshold(0, 0) == np.inf


@pytest.mark.parametrize("shape", [(5, 0), (0, 3), (1, 1)])
def test_a_matrix_without_columns_or_rows_is_fitted(shape):
    """Edge finding's column blocks hold at least one column: no columns, no rows or one cell each
    give a mapper (no edges where there is nothing to split)."""
    mapper = BinMapper().fit(np.zeros(shape))
    assert mapper.n_edges_.shape == (shape[1],) and not mapper.n_edges_.any()
    assert mapper.transform(np.zeros(shape)).shape == shape


def test_all_nan_column():
    X = np.column_stack([np.full(30, np.nan), np.arange(30.0)])
    m = BinMapper(min_data_in_bin=1).fit(X)
    assert m.n_edges_[0] == 0 and m.n_bins_non_missing_[0] == 1
    np.testing.assert_array_equal(m.transform(X)[:, 0], MISSING_BIN)
    np.testing.assert_array_equal(m.transform(np.array([[1.0, 0.0]]))[:, 0], [0])


def test_integer_input_same_as_float():
    rng = np.random.default_rng(5)
    Xi = rng.integers(-20, 20, size=(300, 3))
    mi = BinMapper(min_data_in_bin=1).fit(Xi)
    mf = BinMapper(min_data_in_bin=1).fit(Xi.astype(np.float64))
    np.testing.assert_array_equal(mi.bin_edges_, mf.bin_edges_)
    np.testing.assert_array_equal(mi.transform(Xi), mf.transform(Xi.astype(np.float64)))
    np.testing.assert_array_equal(_edges(mi, 0), naive.midpoint_edges(Xi[:, 0].astype(float)))


def test_float32_input():
    rng = np.random.default_rng(6)
    X32 = (rng.integers(0, 40, size=(400, 2)) * 0.1).astype(np.float32)  # 0.1 is inexact in float32
    X32[::9, 1] = np.nan
    m = BinMapper().fit(X32)
    Xb = m.transform(X32)
    np.testing.assert_array_equal(Xb, m.transform(X32.astype(np.float64)))
    for f in range(2):
        col = X32[:, f].astype(np.float64)
        u = np.unique(col[~np.isnan(col)])
        np.testing.assert_array_equal(m.transform(np.column_stack([u, u]))[:, f], np.arange(len(u)))
        _check_threshold_property(m, f, col)


def test_subsample_is_deterministic_given_seed():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(3000, 2))
    a = BinMapper(subsample=500, random_state=42).fit(X)
    b = BinMapper(subsample=500, random_state=42).fit(X)
    c = BinMapper(subsample=500, random_state=43).fit(X)
    np.testing.assert_array_equal(a.bin_edges_, b.bin_edges_)
    assert not np.array_equal(a.bin_edges_, c.bin_edges_)
    g1 = BinMapper(subsample=500, random_state=np.random.default_rng(9)).fit(X)
    g2 = BinMapper(subsample=500, random_state=np.random.default_rng(9)).fit(X)
    np.testing.assert_array_equal(g1.bin_edges_, g2.bin_edges_)
    # edges of the subsample are the edges of some 500 training rows
    assert a.n_edges_[0] <= 254
    full = BinMapper(subsample=None).fit(X)
    big = BinMapper(subsample=3000, random_state=0).fit(X)  # subsample >= n: all rows
    np.testing.assert_array_equal(full.bin_edges_, big.bin_edges_)
    assert not np.array_equal(a.bin_edges_, full.bin_edges_)


def test_subsample_edges_come_from_the_subsample():
    # 300 distinct values in X but a 100-row subsample has <= 100: one bin per subsampled value
    X = np.arange(300, dtype=np.float64)[:, None]
    m = BinMapper(subsample=100, random_state=0, min_data_in_bin=1).fit(X)
    assert m.n_edges_[0] == 99
    e = _edges(m, 0)

    def values_from(first):  # the edges are midpoints: s[k + 1] = 2 e[k] - s[k]
        s = [first]
        for edge in e:
            s.append(2 * edge - s[-1])
        return np.array(s)

    ok = [s0 for s0 in range(300) if np.all(np.diff(values_from(s0)) > 0)
          and np.all(np.isin(values_from(s0), X[:, 0]))]
    assert ok, "edges are not the midpoints of any 100 training values"


def test_bad_arguments():
    X = np.zeros((5, 2))
    for mb in (1, 256):
        with pytest.raises(ValueError, match="max_bins"):
            BinMapper(max_bins=mb).fit(X)
    m = BinMapper(min_data_in_bin=1).fit(X)
    with pytest.raises(ValueError, match="features"):
        m.transform(np.zeros((5, 3)))


def test_extreme_finite_values_stay_apart():
    """Distinct finite values must get distinct bins even when their midpoint overflows.

    ``a + (b - a) * 0.5`` overflows to +inf for a = -DBL_MAX, b = DBL_MAX (b - a > DBL_MAX), so the
    edge becomes inf and both values land in bin 0; ``a * 0.5 + b * 0.5`` would not overflow.
    """
    big = np.finfo(np.float64).max
    X = np.array([[-big], [big], [-big], [big]])
    m = BinMapper(min_data_in_bin=1).fit(X)
    e = _edges(m, 0)
    assert np.all(np.isfinite(e)), e
    b = m.transform(X)[:, 0]
    assert b[0] != b[1]


@pytest.mark.parametrize("kind", ["uniform", "normal", "few_values", "signed_zero_and_denormals",
                                  "extremes", "empty"])
def test_radix_sort_equals_numpy_sort(kind):
    from gbfs.booster.kernels.radix import sort_floats

    rng = np.random.default_rng(7)
    values = {
        "uniform": rng.random(5000),
        "normal": rng.standard_normal(5000) * 1e6,
        "few_values": rng.integers(-3, 4, 5000).astype(np.float64),
        "signed_zero_and_denormals": np.array([0.0, -0.0, 5e-324, -5e-324, 1e-310, -2.0, 3.0]),
        "extremes": np.array([np.finfo(np.float64).max, -np.finfo(np.float64).max, 1.0, -1.0]),
        "empty": np.zeros(0),
    }[kind]
    out = sort_floats(values.copy())
    np.testing.assert_array_equal(out, np.sort(values))
    assert np.all(np.diff(out) >= 0)


@pytest.mark.parametrize("n", [1, 2, 3, 20, 47, 48, 49, 200])
def test_radix_sort_is_the_same_array_bit_for_bit_on_either_side_of_the_insertion_cutoff(n):
    """Short arrays are sorted by insertion, longer ones by radix passes: both give the array of the
    keys' order, -0.0 before +0.0, the same bits as each other and as NumPy's values."""
    from gbfs.booster.kernels import radix

    rng = np.random.default_rng(n)
    pool = np.array([0.0, -0.0, 1.5, -1.5, 5e-324, -5e-324, 2.0, -7.0])
    for trial in range(30):
        values = rng.choice(pool, n) if trial % 2 else np.round(rng.standard_normal(n), 1)
        out = radix.sort_floats(values.copy())
        np.testing.assert_array_equal(out, np.sort(values))
        negative_zero = np.signbit(out[out == 0.0])
        assert np.all(negative_zero[:-1] >= negative_zero[1:])  # every -0.0 before every +0.0
        if n >= radix._INSERTION_BELOW:  # the radix path; the insertion path must give its bits
            continue
        padded = np.concatenate([values, np.full(radix._INSERTION_BELOW, np.inf)])
        assert radix.sort_floats(padded)[:n].tobytes() == out.tobytes()


@pytest.mark.parametrize("n", [0, 1, 20, 47, 48, 300, 4095, 4096, 9000])
def test_sort_with_rows_is_a_stable_argsort_at_either_digit_width(n):
    """The sort binning bins from: the values as :func:`sort_floats` gives them (by insertion, on
    8-bit and on 11-bit digits, whichever ``digit_bits`` picks and the other), each with the row it
    came from, equal values in row order -- NumPy's stable argsort of the keys' order."""
    from gbfs.booster.kernels import radix

    rng = np.random.default_rng(n)
    values = np.round(rng.standard_normal(n), 2) * 10.0 ** rng.integers(-3, 3, n)
    values[::5] = -0.0
    values[1::9] = 5e-324
    rows = rng.permutation(n).astype(np.int32)
    bits_of = values.view(np.uint64)  # the order-preserving keys: -0.0 sorts before +0.0
    keys = np.where(bits_of >> np.uint64(63), ~bits_of, bits_of | np.uint64(1 << 63))
    want = np.argsort(keys, kind="stable")
    for bits in {int(radix.digit_bits(n)), 8, 11}:
        sorted_values, order = radix.sort_floats_with_rows(values.copy(), rows.copy(), bits)
        assert sorted_values.tobytes() == radix.sort_floats(values.copy(), bits).tobytes()
        np.testing.assert_array_equal(order, rows[want])
        assert values[np.argsort(rows)[order]].tobytes() == sorted_values.tobytes()


# -- min_data_in_bin: LightGBM's merging of rare values ---------------------------------------------

def _same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two binnings of the same rows group them alike (bin ids may differ by an offset)."""
    return len(set(zip(a.tolist(), b.tolist()))) == len(set(a.tolist())) == len(set(b.tolist()))


@pytest.mark.parametrize("min_data_in_bin", [1, 2, 3, 5, 10])
@pytest.mark.parametrize("seed", [0, 1])
def test_min_data_in_bin_bins_small_data_as_lightgbm(min_data_in_bin, seed):
    """60 rows of positive values with ties (microarray-like): LightGBM's GreedyFindBin partition.

    Positive values only: LightGBM keeps zero in a bin of its own, which it adds (empty here) to
    every feature -- its bin count is ours plus one."""
    lgb = pytest.importorskip("lightgbm")
    rng = np.random.default_rng(seed)
    X = np.round(rng.lognormal(size=(60, 40)), 1) + 0.1
    ds = lgb.Dataset(X, label=rng.integers(0, 2, 60), free_raw_data=False,
                     params={"min_data_in_bin": min_data_in_bin, "max_bin": 255, "verbose": -1,
                             "min_data_in_leaf": 1, "feature_pre_filter": False}).construct()
    ours = BinMapper(min_data_in_bin=min_data_in_bin).fit(X)
    np.testing.assert_array_equal([ds.feature_num_bin(j) for j in range(X.shape[1])], ours.n_edges_ + 2)
    binned = ours.transform(X)
    for j in range(X.shape[1]):  # each bin but the last holds at least min_data_in_bin rows
        counts = np.bincount(binned[:, j])
        assert counts[:-1].min(initial=min_data_in_bin) >= min_data_in_bin
    if hasattr(ds, "_dump_text"):  # LightGBM's own bin of every row, where its build offers it
        import tempfile
        from pathlib import Path

        with tempfile.TemporaryDirectory() as tmp:
            ds._dump_text(str(Path(tmp) / "bins.txt"))
            rows = (Path(tmp) / "bins.txt").read_text().splitlines()[-X.shape[0]:]
        theirs = np.array([[int(v) for v in r.split(",")[:-1]] for r in rows])
        assert all(_same_partition(theirs[:, j], binned[:, j]) for j in range(X.shape[1]))


def test_min_data_in_bin_caps_the_quantile_bins_of_a_wide_column():
    x = np.random.default_rng(0).standard_normal(3000)[:, None]
    m = BinMapper(min_data_in_bin=20).fit(x)
    assert m.n_edges_[0] + 1 == 3000 // 20
    counts = np.bincount(m.transform(x)[:, 0])
    assert counts.min() >= 19 and counts.max() <= 21  # equal-frequency bins of ~n / n_bins rows
    assert BinMapper(min_data_in_bin=1).fit(x).n_edges_[0] + 1 == 255  # unchanged without it


def test_min_data_in_bin_one_keeps_every_distinct_value():
    x = np.array([[1.0], [2.0], [2.0], [3.0], [9.0]])
    np.testing.assert_array_equal(_edges(BinMapper(min_data_in_bin=1).fit(x), 0), [1.5, 2.5, 6.0])
    np.testing.assert_array_equal(_edges(BinMapper(min_data_in_bin=2).fit(x), 0), [2.5])
    # the default is LightGBM's 3: five rows make at most one bin of three and the rest
    assert BinMapper().min_data_in_bin == 3
    np.testing.assert_array_equal(_edges(BinMapper().fit(x), 0),
                                  _edges(BinMapper(min_data_in_bin=3).fit(x), 0))


def test_min_data_in_bin_sparse_equals_dense():
    import scipy.sparse as sp

    rng = np.random.default_rng(3)
    X = np.round(rng.random((80, 6)), 1) * (rng.random((80, 6)) < 0.4)
    dense = BinMapper(min_data_in_bin=3).fit(X)
    sparse = BinMapper(min_data_in_bin=3).fit(sp.csr_matrix(X))
    np.testing.assert_array_equal(dense.n_edges_, sparse.n_edges_)
    np.testing.assert_array_equal(dense.transform(X), sparse.transform(sp.csr_matrix(X)))


@pytest.mark.parametrize("min_data_in_bin", [1, 3, 20])
@pytest.mark.parametrize("max_bins", [4, 255])
def test_mostly_zero_columns_bin_as_their_whole_sorted_column(min_data_in_bin, max_bins):
    """Zeros are never written out when a column is fitted (dense or sparse): its edges and bin
    means equal those of the whole sorted column, whatever side of the zeros the other values lie
    on, with -0.0 among them, one zero, none or almost all."""
    import scipy.sparse as sp

    rng = np.random.default_rng(min_data_in_bin * max_bins)
    n, d = 400, 12
    X = np.zeros((n, d))
    for f in range(d):
        share = [0.0, 0.003, 0.02, 0.3, 0.9, 1.0][f % 6]
        values = [rng.standard_normal(n), np.round(rng.standard_normal(n), 1), -rng.random(n),
                  rng.integers(1, 4, n).astype(float)][f % 4]
        X[:, f] = np.where(rng.random(n) < share, values, 0.0)
    X[:3, 3] = [-0.0, np.nan, 0.0]
    X[0, 5] = 0.0  # a column of non-zeros but one
    for given in (X, sp.csr_matrix(X)):
        mapper = BinMapper(max_bins, None, 0, None, min_data_in_bin).fit(given)
        for f in range(d):
            edges, means = naive.edges_and_means(X[:, f], max_bins, min_data_in_bin)
            np.testing.assert_array_equal(_edges(mapper, f), edges, err_msg=f"feature {f}")
            col = X[~np.isnan(X[:, f]), f]
            if col.max() > col.min():
                z = mapper.standardised_values_[f, :edges.size + 1]
                want = (means - col.min()) / (col.max() - col.min())
                filled = ~np.isnan(want)
                np.testing.assert_allclose(z[filled], want[filled], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("bad", [0, -1, 2.5, "3"])
def test_bad_min_data_in_bin_is_refused_naming_it(bad):
    from gbfs import GBFSClassifier

    X = np.random.default_rng(0).random((50, 3))
    with pytest.raises((ValueError, TypeError), match="min_data_in_bin"):
        GBFSClassifier(min_data_in_bin=bad, n_estimators=2).fit(X, (X[:, 0] > 0.5).astype(int))
    with pytest.raises(ValueError, match="min_data_in_bin"):
        BinMapper(min_data_in_bin=bad).fit(X)


def test_min_data_in_bin_reaches_the_model_and_its_file(tmp_path):
    from gbfs import GBFSClassifier, load_model

    rng = np.random.default_rng(0)
    X = np.round(rng.random((60, 5)), 2)
    y = (X[:, 0] > 0.5).astype(int)
    est = GBFSClassifier(min_data_in_bin=5, min_samples_leaf=3, n_estimators=5, random_state=0).fit(X, y)
    assert np.all(np.bincount(est._bin_mapper.transform(X)[:, 0])[:-1] >= 5)
    est.save_model(tmp_path / "m.json")
    back = load_model(tmp_path / "m.json")
    assert back.min_data_in_bin == 5
    np.testing.assert_array_equal(back.predict_proba(X), est.predict_proba(X))


def _columns(rng, n):
    """Columns where a grid over the edges is easy, skewed, degenerate or unusable."""
    big = np.where(rng.random(n) < 0.5, -1e308, 1e308)      # the range overflows: no grid
    near = 1e8 + rng.integers(0, 300, n) * 1e-7               # edges ulps apart relative to their size
    skew = np.exp(rng.normal(0, 4, n))                        # most edges in a sliver of the range
    return np.column_stack([rng.random(n), skew, -skew, near, big, rng.integers(0, 5, n),
                            np.round(rng.normal(0, 1, n), 2), rng.standard_cauchy(n)])


@pytest.mark.parametrize("seed", range(4))
def test_grid_search_equals_full_search_on_every_value(seed):
    """The lookup grid narrows the search but never changes a bin: every value's bin is
    ``#{edges < value}``, at, between and beyond the edges, for infinities, -0.0 and NaN."""
    rng = np.random.default_rng(seed)
    X = _columns(rng, 3000)
    mapper = BinMapper().fit(X)
    probe = np.concatenate([X, np.full((1, X.shape[1]), np.inf), np.full((1, X.shape[1]), -np.inf),
                            np.full((1, X.shape[1]), -0.0), np.full((1, X.shape[1]), np.nan)])
    for f in range(X.shape[1]):   # every edge itself and its float neighbours
        e = mapper.bin_edges_[f, :mapper.n_edges_[f]]
        extra = np.concatenate([e, np.nextafter(e, np.inf), np.nextafter(e, -np.inf)])
        col = np.full((extra.size, X.shape[1]), 0.5)
        col[:, f] = extra
        probe = np.concatenate([probe, col])
    binned = mapper.transform(probe)
    for f in range(X.shape[1]):
        e = mapper.bin_edges_[f, :mapper.n_edges_[f]]
        v = probe[:, f]
        expected = np.where(np.isnan(v), MISSING_BIN, np.searchsorted(e, v, side="left"))
        np.testing.assert_array_equal(binned[:, f], expected, err_msg=f"column {f}")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("n", [700, 5000])
def test_fit_transform_bins_in_one_pass_as_transform_does(dtype, seed, n):
    """A dense fit on every row bins each column from the values its edges were found from:
    the same bins as ``fit`` then ``transform``, and as ``#{edges < value}``, for columns without
    zeros, mostly zeros, with -0.0, NaN and infinities, all zero, all NaN, and categorical ones;
    on both digit widths of the sort the bins are walked from."""
    rng = np.random.default_rng(seed)
    X = _columns(rng, n)
    X = np.column_stack([X, X[:, 0] * (rng.random(n) < 0.03), np.zeros(n), np.full(n, np.nan),
                         rng.integers(0, 6, n).astype(float)])
    X[rng.random(X.shape) < 0.2] = 0.0
    X[rng.random(X.shape) < 0.03] = -0.0
    X[rng.random(X.shape) < 0.05] = np.nan
    X[3, 1], X[4, 1] = np.inf, -np.inf
    with np.errstate(over="ignore"):  # the largest values are infinities in float32
        X = X.astype(dtype)
    categorical = np.arange(X.shape[1]) == X.shape[1] - 1
    for kw in ({}, {"max_bins": 16}, {"min_data_in_bin": 1}, {"categorical": categorical}):
        one_pass = BinMapper(**kw).fit_transform(X)
        mapper = BinMapper(**kw).fit(X)
        two_pass = mapper.transform(X)
        assert one_pass.dtype == np.uint8 and one_pass.flags.f_contiguous
        np.testing.assert_array_equal(one_pass, two_pass, err_msg=str(kw))
        numeric = np.flatnonzero(~mapper.categorical_)
        edges = [_edges(mapper, f) for f in numeric]
        np.testing.assert_array_equal(one_pass[:, numeric],
                                      naive.bin_matrix(X[:, numeric].astype(np.float64), edges))


def test_fit_transform_of_a_row_subsample_bins_with_its_edges():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(3000, 4))
    X[rng.random(X.shape) < 0.5] = 0.0
    mapper = BinMapper(subsample=500, random_state=3)
    binned = mapper.fit_transform(X)
    np.testing.assert_array_equal(binned, BinMapper(subsample=500, random_state=3).fit(X).transform(X))
    np.testing.assert_array_equal(binned, naive.bin_matrix(X, [_edges(mapper, f) for f in range(4)]))
