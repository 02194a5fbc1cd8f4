"""Quantile binning of raw features into ``uint8`` bins.

A feature with at most 255 distinct training values gets one bin per value
(edges at the midpoints between consecutive values); otherwise the edges are the
255-quantiles of a row subsample, as in LightGBM and scikit-learn.  ``min_data_in_bin``
(LightGBM's parameter) merges rare values: with few distinct values a bin is closed only once it
holds that many rows (LightGBM's ``GreedyFindBin``, the same partition of the training values;
only the last bin may hold fewer), and with many the number of quantile bins is capped at
``n_rows // min_data_in_bin``.  On tiny data this keeps the root from separating single rows.  NaN always
maps to the dedicated missing bin 255.  The edges are kept so that a split on bin
``t`` can be applied to raw values as ``x <= edges[t]``, which is exactly the same
decision as ``bin(x) <= t`` because ``bin(x) = #{edges < x}``.

A categorical feature (``categorical``) holds non-negative integer codes instead: each of its
``max_bins`` most frequent codes gets its own bin, the most frequent first (ties: the smaller code,
LightGBM's order, which breaks ties in the split search the same way), the rarer codes, codes
never seen and NaN share the missing bin; its splits are sets of bins
(:mod:`gbfs.booster.kernels.categorical`).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse

from .kernels._types import MAX_BINS, MISSING_BIN, X_BINNED_DTYPE, X_DTYPE
from .kernels.bins.edges import fit_edges, fit_edges_csc
from .kernels.bins.lookup import map_csc_to_bins, map_to_bins
from .kernels.sparse_binned import SparseBinned
from .kernels.tasks import run_tasks


def _column(X, f: int) -> np.ndarray:
    """Column ``f`` of a dense array or a CSC matrix, as a dense float64 vector."""
    if scipy.sparse.issparse(X):
        return np.asarray(X[:, [f]].toarray()).ravel().astype(X_DTYPE)
    return np.asarray(X[:, f], dtype=X_DTYPE)


def _dense(X) -> np.ndarray:
    """A C-ordered float64 or float32 array of ``X``: float32 data (counts, images, as most data
    sets are distributed) is binned as it is -- every float32 is a float64, so its bins are those
    of its float64 copy -- without the copy's time and memory."""
    X = np.asarray(X)
    return np.ascontiguousarray(X, dtype=X.dtype if X.dtype in (np.float32, np.float64) else X_DTYPE)


def _csc(X):
    """A canonical float64 CSC matrix of a scipy.sparse matrix (duplicates summed): ``X`` itself when
    it is one already (nothing is changed in it), else a copy."""
    if X.format == "csc" and X.dtype == X_DTYPE and X.has_canonical_format:
        return X
    X = X.tocsc(copy=True).astype(X_DTYPE, copy=False)
    X.sum_duplicates()
    return X


class BinMapper:
    """Map raw feature values to quantile bins.

    Parameters
    ----------
    max_bins : int
        Value bins per feature, at most 255; NaN has its own extra bin.
    subsample : int or None
        Rows used to find the edges (``None``: all rows).  Drawn with
        ``random_state`` when the data has more rows.
    random_state : int or numpy.random.Generator or None
        Seed of the subsample.
    categorical : array of bool, shape (n_features,), or None
        The categorical features (non-negative integer codes, NaN for missing).
    min_data_in_bin : int, default=3
        Fewest (subsampled) training rows of a value bin, LightGBM's parameter and default;
        1 gives every distinct value of a narrow column its own bin.  Categorical features ignore it.

    Attributes
    ----------
    bin_edges_ : ndarray of shape (n_features, max_bins - 1)
        Upper edges; only the first ``n_edges_[f]`` entries of row ``f`` are used.
    n_edges_ : ndarray of int32, shape (n_features,)
    n_bins_non_missing_ : ndarray of int32, shape (n_features,)
        ``n_edges_ + 1``.
    standardised_values_ : ndarray of float64, shape (n_features, 256)
        Per bin, the min-max standardised mean of the (subsampled) training values in it;
        the missing bin holds the standardised mean of the column (GT-GBM's pseudo-features).
        A categorical feature's bins get their rank, min-max standardised.
    categorical_ : ndarray of bool, shape (n_features,)
    category_codes_ : list of ndarray of int64
        Per feature, the codes that have a bin, in bin order (bin ``b`` is code
        ``category_codes_[f][b]``); empty for a numeric feature.
    """

    def __init__(self, max_bins: int = MAX_BINS, subsample: int | None = 200_000,
                 random_state=None, categorical=None, min_data_in_bin: int = 3):
        self.max_bins = max_bins
        self.subsample = subsample
        self.random_state = random_state
        self.categorical = categorical
        self.min_data_in_bin = min_data_in_bin

    def fit(self, X) -> BinMapper:
        """Find the edges of ``X`` (an array, or a scipy.sparse matrix: its columns are read one at
        a time, implicit entries are zeros, the matrix is never densified)."""
        return self._fit(X, None)

    def _fit(self, X, out: np.ndarray | None) -> BinMapper:
        """:meth:`fit`; with ``out`` (of ``X``'s shape), a dense ``X`` fitted on every row also bins
        its numeric columns into it (see :meth:`fit_transform`)."""
        if not 2 <= self.max_bins <= MAX_BINS:
            raise ValueError(f"max_bins must be in [2, {MAX_BINS}], got {self.max_bins!r}")
        if not (isinstance(self.min_data_in_bin, (int, np.integer)) and self.min_data_in_bin >= 1):
            raise ValueError(f"min_data_in_bin must be an integer >= 1, got {self.min_data_in_bin!r}")
        sparse = scipy.sparse.issparse(X)
        if not sparse:
            X = _dense(X)
        if self.subsample is not None and X.shape[0] > self.subsample:
            rng = np.random.default_rng(self.random_state)
            rows = np.sort(rng.choice(X.shape[0], self.subsample, replace=False))
            X = X.tocsr()[rows] if sparse else X[rows]
        d = X.shape[1]
        self.bin_edges_ = np.zeros((d, max(self.max_bins - 1, 1)), dtype=X_DTYPE)
        self.n_edges_ = np.zeros(d, dtype=np.int32)
        self.standardised_values_ = np.zeros((d, MISSING_BIN + 1), dtype=np.float64)
        if sparse:
            X = _csc(X)
            run_tasks(fit_edges_csc, d, X.shape[0], X.indptr, X.data, self.max_bins,
                      int(self.min_data_in_bin), self.bin_edges_, self.n_edges_, self.standardised_values_,
                      task_cost=X.shape[0])
        else:
            binning = out is not None and out.shape == X.shape  # else a row subsample, or edges only
            if not binning:
                # not read; numpy flags an empty or one-column array C- as well as F-contiguous, and
                # numba would compile the kernel again for a C-ordered one
                out = np.zeros((2, 2), dtype=X_BINNED_DTYPE, order="F")
            run_tasks(fit_edges, d, X, self.max_bins, int(self.min_data_in_bin), self.bin_edges_,
                      self.n_edges_, self.standardised_values_, out, binning, task_cost=X.shape[0])
        self._fit_categories(X)
        self.n_bins_non_missing_ = self.n_edges_ + 1
        return self

    def _fit_categories(self, X) -> None:
        """Bins of the categorical features: the ``max_bins`` most frequent codes, each its own
        bin, most frequent first (ties: the smaller code)."""
        d = X.shape[1]
        self.categorical_ = np.zeros(d, dtype=bool)
        if self.categorical is not None:
            self.categorical_[:] = np.asarray(self.categorical, dtype=bool)
        self.category_codes_ = [np.zeros(0, dtype=np.int64) for _ in range(d)]
        for f in np.flatnonzero(self.categorical_):
            col = _column(X, f)
            codes, counts = np.unique(col[~np.isnan(col)].astype(np.int64), return_counts=True)
            keep = codes[np.lexsort((codes, -counts))[:self.max_bins]]
            self.category_codes_[f] = keep
            self.bin_edges_[f] = 0.0
            self.n_edges_[f] = max(keep.size - 1, 0)
            z = self.standardised_values_[f]
            z[:] = 0.0
            if keep.size > 1:
                z[:keep.size] = np.arange(keep.size) / (keep.size - 1)
                z[MISSING_BIN] = 0.5

    def _bin_categories(self, X, out: np.ndarray) -> None:
        for f in np.flatnonzero(self.categorical_):
            out[:, f] = self.category_bins(f, _column(X, f)).astype(X_BINNED_DTYPE)

    def category_bins(self, f: int, values: np.ndarray) -> np.ndarray:
        """Bins of categorical feature ``f``'s raw ``values`` (int64; MISSING_BIN for NaN and for
        codes without a bin)."""
        keep = self.category_codes_[f]
        out = np.full(values.shape[0], MISSING_BIN, dtype=np.int64)
        known = ~np.isnan(values)
        if keep.size:
            order = np.argsort(keep)
            codes = values[known].astype(np.int64)
            pos = np.minimum(np.searchsorted(keep[order], codes), keep.size - 1)
            out[known] = np.where(keep[order[pos]] == codes, order[pos], MISSING_BIN)
        return out

    def categories_to_bins(self, X: np.ndarray) -> np.ndarray:
        """``X`` (dense, raw) with each categorical column replaced by its bins as floats, NaN for
        the missing bin: what :meth:`gbfs.booster.tree.PackedEnsemble.predict_raw` reads for them."""
        X = np.array(X, dtype=X_DTYPE, order="C")
        for f in np.flatnonzero(self.categorical_):
            b = self.category_bins(f, X[:, f]).astype(X_DTYPE)
            b[b == MISSING_BIN] = np.nan
            X[:, f] = b
        return X

    @property
    def has_categorical(self) -> bool:
        return bool(getattr(self, "categorical_", np.zeros(0, bool)).any())

    def transform(self, X) -> np.ndarray | SparseBinned:
        """Bin ``X`` (an array or a scipy.sparse matrix); returns a Fortran-ordered uint8 array
        (column scans in the histogram kernel; one byte per entry whatever the input), or, for a
        scipy.sparse ``X`` with enough mostly-zero columns and no categorical ones, a
        :class:`~gbfs.booster.kernels.sparse_binned.SparseBinned` that keeps those columns sparse."""
        sparse = scipy.sparse.issparse(X)
        if not sparse:
            X = _dense(X)
        if X.shape[1] != self.bin_edges_.shape[0]:
            raise ValueError(
                f"X has {X.shape[1]} features, the bin mapper was fitted on {self.bin_edges_.shape[0]}")
        if sparse:
            X = _csc(X)
            if not self.has_categorical:
                binned = SparseBinned.from_csc(X, self.bin_edges_, self.n_edges_)
                if binned is not None:
                    return binned
        out = np.empty(X.shape, dtype=X_BINNED_DTYPE, order="F")
        if sparse:
            map_csc_to_bins(X.indptr, X.indices, X.data, self.bin_edges_, self.n_edges_, out)
        else:
            map_to_bins(X, self.bin_edges_, self.n_edges_, out)
        if self.has_categorical:
            self._bin_categories(X, out)
        return out

    def fit_transform(self, X) -> np.ndarray | SparseBinned:
        """:meth:`fit`, then :meth:`transform` of the same ``X``; a scipy.sparse ``X`` is converted to
        a canonical CSC matrix once for both.  A dense ``X`` whose edges come from every row is read
        once: each column is binned from the values gathered to find its edges (the same bins)."""
        if scipy.sparse.issparse(X):
            X = _csc(X)
            return self.fit(X).transform(X)
        X = _dense(X)
        if self.subsample is not None and X.shape[0] > self.subsample:
            return self.fit(X).transform(X)
        out = np.empty(X.shape, dtype=X_BINNED_DTYPE, order="F")
        self._fit(X, out)
        if self.has_categorical:
            self._bin_categories(X, out)
        return out

    def threshold(self, feature: int, bin_threshold: int) -> float:
        """Raw threshold of the split ``bin <= bin_threshold`` (``inf``: all non-missing go left)."""
        if bin_threshold >= self.n_edges_[feature]:
            return float("inf")
        return float(self.bin_edges_[feature, bin_threshold])

    def subset(self, columns: np.ndarray) -> BinMapper:
        """A fitted mapper of the given columns only (feature ``k`` of it is ``columns[k]`` here),
        sharing these edges: a model grown on ``transform(X)[:, columns]`` has this mapper's
        thresholds."""
        sub = BinMapper(self.max_bins, self.subsample, self.random_state,
                        min_data_in_bin=getattr(self, "min_data_in_bin", 1))
        columns = np.asarray(columns, dtype=np.int64)
        sub.bin_edges_ = self.bin_edges_[columns]
        sub.n_edges_ = self.n_edges_[columns]
        sub.n_bins_non_missing_ = self.n_bins_non_missing_[columns]
        if hasattr(self, "standardised_values_"):
            sub.standardised_values_ = self.standardised_values_[columns]
        if hasattr(self, "categorical_"):
            sub.categorical_ = self.categorical_[columns]
            sub.category_codes_ = [self.category_codes_[f] for f in columns]
        return sub
