"""GT-GBM: group-testing split search over prefix-sum pseudo-features.

Section 4 and Algorithm 2 of the GT-GBM paper.  Before training (the *precompute*):

1. every feature is standardised to [0, 1] by min-max (the paper's footnote 1).  We
   standardise the binned feature: ``z_ij`` is the min-max standardised mean of the
   training values in ``x_ij``'s bin (``BinMapper.standardised_values_``), which is
   exactly ``(x_ij - min_j) / (max_j - min_j)`` for a feature with at most 255 distinct
   values and within half a quantile bin of it otherwise.  A NaN becomes the
   feature's mean standardised value, so a missing entry neither raises nor lowers a
   pseudo-feature on average (the exact evaluation of the candidates still sees NaN
   in its own bin); a constant feature is 0.  Reading ``z`` through the uint8 binned
   matrix and a 256-entry table per feature needs no float copy of the data: at the
   Epsilon shape that copy alone (640 MB, transposed from the C-ordered input) took
   longer than an A-GBM tree to write on our build machine;
2. ``p`` random subsets of ``m = ceil(d / s)`` features are drawn, each in a random
   order (``p = ceil(e s ln(s / delta))`` by default, Theorem 4.1; ``p = 1`` with
   ``m = d`` when ``s = 1``, Algorithm 2 line 2);
3. prefix sums of ``z`` along each subset's order are stored (float32) so that the
   pseudo-feature of a contiguous half, ``Z_G = sum_{j in G} z_j``, costs one
   subtraction per row (the paper's footnote 2).

The binary search always halves a subset the same way (``[lo, mid)`` and
``[mid, hi)`` with ``mid = lo + (hi - lo) // 2``), so the halves it can ever test
form a fixed binary tree over the subset's positions.  Only the boundaries of
halves with at least :data:`DIRECT_SUM_BELOW` features are stored; smaller halves
are summed directly from the binned columns (at most 7 column reads, about the
cost of two prefix differences).  With ``direct_sum_below=1`` the store is the
paper's full prefix array; the default keeps ~8x less memory and precompute time
(at the Gisette shape with s = 10: 64 instead of 500 columns per subset) with the
same pseudo-feature values up to float32 rounding.

At a node (Algorithm 2 lines 4-10, :mod:`gbfs.criteria.group_test_search`) every
subset is halved until one feature is left, and the survivors are the candidate set C.
The grower then evaluates Omega and C exactly on their histograms with the
penalty (lines 1 and 11-16): the best of ``gain / SSE_root - penalty`` over
Omega u C, which is the paper's "best of C if it beats l after its penalty, else
the best used feature".
"""

from __future__ import annotations

import math
import mmap
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit

from ..booster.binning import BinMapper
from ..booster.kernels._types import MAX_BINS
from ..booster.kernels.portable import mean, total
from ..booster.kernels.tasks import run_tasks
from .group_test_search import (
    GT_BINS,
    fill_binned_hist,
    fill_pseudo_hist,
    group_tests,
    half_values,
    halves,
    keep_better,
    min_max,
    pseudo_bins,
    pseudo_hist_gain,
)

DIRECT_SUM_BELOW = 8  # halves with fewer features are summed directly, not by prefix difference
DEFAULT_DELTA = 0.1
DEFAULT_N_TARGET_FEATURES = 10
DEFAULT_MAX_PRECOMPUTE_BYTES = 4 * 2**30
_ROW_BLOCK = 1024  # rows per block of the precompute (the block's columns stay in cache)
#: bytes of the tested halves' bins kept between trees (:class:`PseudoBins`; pages are only
#: touched as halves are first tested)
PSEUDO_BIN_BYTES = 256 * 2**20


def default_n_subsets(n_target_features: int, delta: float) -> int:
    """Number of random subsets ``p = ceil(e * s * ln(s / delta))`` (Theorem 4.1); 1 when s = 1."""
    s = int(n_target_features)
    if s == 1:
        return 1  # Algorithm 2, line 2: "if s = 1, we just select [d]"
    return math.ceil(math.e * s * math.log(s / delta))


def default_subset_size(n_features: int, n_target_features: int) -> int:
    """``ceil(d / s)`` features per subset (Algorithm 2, line 2)."""
    return math.ceil(n_features / n_target_features)


def halving_boundaries(subset_size: int, direct_sum_below: int = DIRECT_SUM_BELOW) -> np.ndarray:
    """Positions whose prefix sums are stored: the ends of the halving tree's halves of at least
    ``direct_sum_below`` features (always including 0 and ``subset_size``)."""
    out = {0, subset_size}
    stack = [(0, subset_size)]
    while stack:
        lo, hi = stack.pop()
        if hi - lo < 2:
            continue
        mid = lo + (hi - lo) // 2
        for a, b in ((lo, mid), (mid, hi)):
            if b - a >= direct_sum_below:
                out.update((a, b))
                stack.append((a, b))
    return np.array(sorted(out), dtype=np.int64)


@dataclass(frozen=True)
class GroupTestPlan:
    """Sizes of a precompute, known before any array is allocated."""

    n_rows: int
    n_features: int
    n_target_features: int
    delta: float
    n_subsets: int
    subset_size: int
    n_stored: int  # prefix columns per subset (boundary 0 is implicit)

    @property
    def nbytes(self) -> int:
        """Bytes of the float32 prefix sums (the binned matrix is shared with the booster)."""
        return 4 * self.n_rows * self.n_subsets * self.n_stored


def plan(n_rows: int, n_features: int, n_target_features: int, delta: float = DEFAULT_DELTA,
         n_subsets: int | None = None, subset_size: int | None = None,
         direct_sum_below: int = DIRECT_SUM_BELOW) -> GroupTestPlan:
    """Subset count and size (defaults of Algorithm 2 / Theorem 4.1) and the memory they need."""
    s = int(n_target_features)
    p = default_n_subsets(s, delta) if n_subsets is None else int(n_subsets)
    m = (n_features if s == 1 else default_subset_size(n_features, s)) if subset_size is None \
        else int(subset_size)
    m = min(m, n_features)
    n_stored = len(halving_boundaries(m, direct_sum_below)) - 1
    return GroupTestPlan(n_rows, n_features, s, float(delta), p, m, n_stored)


def _gib(b: float) -> str:
    return f"{b / 2**30:.2f} GiB"


def check_memory(pl: GroupTestPlan, max_bytes: int, n_subsets: int | None = None,
                 subset_size: int | None = None, direct_sum_below: int = DIRECT_SUM_BELOW) -> None:
    """Refuse a precompute above ``max_bytes``, naming settings that would fit.

    ``n_subsets`` / ``subset_size`` are the values the user gave (None: defaults); each
    suggestion keeps the user's other settings, so following any one of them fits.
    """
    if pl.nbytes <= max_bytes:
        return
    hints = []
    per_subset = 4 * pl.n_rows * pl.n_stored
    if max_bytes >= per_subset:
        hints.append(f"n_subsets <= {max_bytes // per_subset}")

    def fits(s, delta):
        return plan(pl.n_rows, pl.n_features, s, delta, n_subsets, subset_size,
                    direct_sum_below).nbytes <= max_bytes

    if subset_size is None or n_subsets is None:  # s changes the default p or the default m
        s_fit = sorted((s for s in range(1, pl.n_features + 1) if s != pl.n_target_features),
                       key=lambda s: abs(s - pl.n_target_features))
        s_fit = next((s for s in s_fit if fits(s, pl.delta)), None)
        if s_fit is not None:
            hints.append(f"n_target_features={s_fit}")
    if n_subsets is None and pl.n_target_features > 1:  # delta only enters the default p
        d_fit = next((d for d in (0.2, 0.3, 0.5, 0.7, 0.9, 0.99) if d > pl.delta
                      and fits(pl.n_target_features, d)), None)
        if d_fit is not None:
            hints.append(f"delta >= {d_fit}")
    hint = (" Use " + " or ".join(hints) + ", or raise max_precompute_bytes.") if hints else \
        " Even one subset does not fit: raise max_precompute_bytes or use fewer rows."
    raise ValueError(
        f"max_precompute_bytes: the GT-GBM precompute needs {_gib(pl.nbytes)} ({pl.nbytes} bytes of "
        f"float32 prefix sums for n_subsets={pl.n_subsets} of subset_size={pl.subset_size} on "
        f"{pl.n_rows} rows) but max_precompute_bytes={max_bytes}.{hint}")


# -- precompute kernel -------------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def _prefix_sums(lo, hi, Xb, z_values, subsets, stored, prefix):
    """``prefix[k, c, i] = sum_{t < stored[c]} z_values[f_t, Xb[i, f_t]]``, ``f_t = subsets[k, t]``,
    for the subsets ``k`` in ``lo..hi-1`` (once per fit: :func:`gbfs.booster.kernels.tasks.run_tasks`).

    Rows in blocks: a block's float64 running sums stay in L1 and every column chunk is a
    contiguous slice of the Fortran-ordered binned matrix.  Two features are added per pass over
    a block unless a stored boundary falls between them: ``(acc + z_t) + z_(t+1)``, the same two
    roundings in the same order as two passes, with one load and store of the sums fewer.
    """
    n = Xb.shape[0]
    m = subsets.shape[1]
    n_stored = stored.shape[0]
    acc = np.empty(_ROW_BLOCK)
    for k in range(lo, hi):
        for i0 in range(0, n, _ROW_BLOCK):
            size = min(n, i0 + _ROW_BLOCK) - i0
            for ii in range(size):
                acc[ii] = 0.0
            c = 0
            t = 0
            while t < m:
                f = subsets[k, t]
                col = Xb[i0:i0 + size, f]
                z = z_values[f]
                if t + 1 < m and not (c < n_stored and stored[c] == t + 1):
                    col2 = Xb[i0:i0 + size, subsets[k, t + 1]]
                    z2 = z_values[subsets[k, t + 1]]
                    for ii in range(size):
                        acc[ii] = (acc[ii] + z[col[ii]]) + z2[col2[ii]]
                    t += 2
                else:
                    for ii in range(size):
                        acc[ii] += z[col[ii]]
                    t += 1
                if c < n_stored and stored[c] == t:
                    for ii in range(size):
                        prefix[k, c, i0 + ii] = acc[ii]
                    c += 1


def draw_subsets(pl: GroupTestPlan, n_features: int, rng: np.random.Generator) -> np.ndarray:
    """The plan's ``p`` random subsets, shape (p, m): each a uniform subset of the features in
    uniformly random order (Algorithm 2, line 3)."""
    subsets = np.empty((pl.n_subsets, pl.subset_size), dtype=np.int64)
    for k in range(pl.n_subsets):
        subsets[k] = rng.permutation(n_features)[:pl.subset_size]
    return subsets


def _unhinted_empty(shape: tuple, dtype) -> np.ndarray:
    """An uninitialised array in its own anonymous mapping, without NumPy's huge-page hint.

    NumPy asks the kernel for transparent huge pages on every large array (``madvise``); where the
    kernel's THP ``defrag`` setting is ``madvise`` (the common default) the first write to each
    2 MB page may then wait for the kernel to compact memory.  The precompute writes its whole
    buffer once: at the Gisette shape (185 MB) that took 0.36-0.51 s with the hint and 0.14-0.16 s
    without it.  Later reads stream whole columns, which ordinary pages serve as well.
    """
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    if nbytes == 0:
        return np.empty(shape, dtype=dtype)
    return np.frombuffer(mmap.mmap(-1, nbytes), dtype=dtype).reshape(shape)


class PseudoBins(NamedTuple):
    """The bins of every tested half of a search over all rows in order, kept for later trees.

    ``slot_of[k, t]``: the slot of node ``t`` of subset ``k``'s halving tree (-1: none yet);
    ``used[k]``: subset ``k``'s slots taken; ``flat[k, s]``: the half is constant over the rows;
    ``bins[k, s]``: its equal-width bins (uint8, one per row).  Each subset takes slots in the order
    its halves are first tested, until its share is full; the halves after that are binned anew at
    every test, as without the cache.
    """

    slot_of: np.ndarray
    used: np.ndarray
    flat: np.ndarray
    bins: np.ndarray
    counts: np.ndarray  # (p, slots, n_bins) float64: the rows in each bin

    @classmethod
    def empty(cls) -> PseudoBins:
        """No cache: every half is binned at every test."""
        return cls(np.empty((0, 0), np.int64), np.empty(0, np.int64), np.empty((0, 0), np.bool_),
                   np.empty((0, 0, 0), np.uint8), np.empty((0, 0, 0)))

    @classmethod
    def for_subsets(cls, n_subsets: int, subset_size: int, n_rows: int, n_bins: int,
                    max_bytes: int = PSEUDO_BIN_BYTES) -> PseudoBins:
        """Slots for ``n_subsets`` halving trees over ``n_rows`` rows within ``max_bytes``."""
        n_nodes = 2 ** (max(1, subset_size - 1).bit_length() + 1)  # node ids of the halving tree
        slots = min(n_nodes, max_bytes // max(1, n_subsets * (n_rows + 8 * n_bins)))
        if slots == 0:
            return cls.empty()
        return cls(np.full((n_subsets, n_nodes), -1, np.int64), np.zeros(n_subsets, np.int64),
                   np.zeros((n_subsets, slots), np.bool_),
                   _unhinted_empty((n_subsets, slots, n_rows), np.uint8),
                   _unhinted_empty((n_subsets, slots, n_bins), np.float64))

    @property
    def nbytes(self) -> int:
        """Bytes of the bins written so far."""
        return int(self.used.sum()) * (self.bins.shape[2] + 8 * self.counts.shape[2])


class GroupTester:
    """The precomputed pseudo-features of one binned training matrix and the node search.

    Build it with :meth:`precompute`.  Attributes: ``Xb`` the binned matrix (shared, not
    copied); ``z_values`` (d, 256) the standardised value of every bin; ``subsets`` (p, m)
    feature indices in their random order; ``prefix`` (p, n_stored, n) float32;
    ``stored`` the stored boundary positions; ``col_of`` (m + 1,) maps a boundary to its
    column in ``prefix`` (-2: boundary 0, whose prefix is 0; -1: not stored).  Searches over
    every row in order keep the tested halves' bins (:class:`PseudoBins`) in at most
    ``pseudo_bin_bytes``.
    """

    def __init__(self, Xb, z_values, subsets, stored, prefix, n_bins: int = GT_BINS,
                 pseudo_bin_bytes: int = PSEUDO_BIN_BYTES):
        self.Xb = Xb
        self.z_values = z_values
        self.subsets = subsets
        self.stored = stored
        self.prefix = prefix
        self.n_bins = int(n_bins)
        m = subsets.shape[1]
        self.col_of = np.full(m + 1, -1, dtype=np.int64)
        self.col_of[0] = -2
        self.col_of[stored] = np.arange(stored.shape[0])
        self._no_cache = PseudoBins.empty()
        self._cache = None  # PseudoBins of searches over every row, made at the first one
        self._cache_bytes = int(pseudo_bin_bytes)

    @classmethod
    def precompute(cls, X_binned: np.ndarray, z_values: np.ndarray, pl: GroupTestPlan,
                   rng: np.random.Generator, direct_sum_below: int = DIRECT_SUM_BELOW) -> GroupTester:
        """Draw the subsets and store the prefix sums of the standardised binned features.

        ``X_binned`` is the booster's Fortran-ordered uint8 matrix and ``z_values`` its
        mapper's ``standardised_values_``.  The caller checks ``pl`` against the memory
        budget first (:func:`check_memory`).
        """
        return cls.from_subsets(X_binned, z_values, draw_subsets(pl, X_binned.shape[1], rng),
                                direct_sum_below)

    @classmethod
    def from_subsets(cls, X_binned: np.ndarray, z_values: np.ndarray, subsets: np.ndarray,
                     direct_sum_below: int = DIRECT_SUM_BELOW) -> GroupTester:
        """The prefix sums of ``subsets`` (:func:`draw_subsets`) over the rows of ``X_binned``: each
        row's are its own, so a partition of the rows holds exactly its rows' share of the
        precompute of all rows."""
        n = X_binned.shape[0]
        p, m = subsets.shape
        stored = halving_boundaries(m, direct_sum_below)[1:]
        prefix = _unhinted_empty((p, stored.shape[0], n), np.float32)
        run_tasks(_prefix_sums, p, X_binned, z_values, subsets, stored, prefix, task_cost=n * m)
        return cls(X_binned, z_values, subsets, stored, prefix)

    def standardised(self, rows: np.ndarray | None = None) -> np.ndarray:
        """The dense standardised matrix ``z`` (float64) of ``rows`` (all by default); for tests."""
        Xb = self.Xb if rows is None else self.Xb[rows]
        return np.take_along_axis(self.z_values, np.asarray(Xb, dtype=np.intp).T, axis=1).T

    @property
    def nbytes(self) -> int:
        """Bytes of the prefix sums."""
        return int(self.prefix.nbytes)

    @property
    def kept_bytes(self) -> int:
        """Bytes of the tested halves' bins kept so far (:class:`PseudoBins`)."""
        return 0 if self._cache is None else self._cache.nbytes

    def pseudo_feature(self, k: int, lo: int, hi: int, rows: np.ndarray | None = None) -> np.ndarray:
        """Values of the pseudo-feature of positions ``[lo, hi)`` of subset ``k`` (for tests and
        diagnostics; the search uses the same kernel)."""
        rows = np.empty(0, np.int32) if rows is None else np.asarray(rows, dtype=np.int32)
        n = self.Xb.shape[0] if rows.shape[0] == 0 else rows.shape[0]
        out = np.empty(n, dtype=np.float32)
        half_values(self.Xb, self.z_values, self.prefix, self.col_of, self.subsets[k], k, lo, hi, rows,
                     n, out)
        return out

    def search(self, rows, r_ord, h_ord, sum_g, sum_h, count, min_samples_leaf, min_child_weight,
               reg_lambda) -> tuple[np.ndarray, np.ndarray]:
        """Run the group tests on a node; return every subset's (feature, GT score).

        ``rows`` empty means all rows in order; ``r_ord``/``h_ord`` are the node's residuals and
        second channel in row order (``h_ord`` empty: unit weights), as for the histogram kernels.
        """
        p, m = self.subsets.shape
        feature = np.empty(p, dtype=np.int64)
        gain = np.empty(p, dtype=np.float64)
        cache = self._no_cache
        if rows.shape[0] == 0 and r_ord.shape[0] == self.Xb.shape[0]:  # every row: bins repeat
            if self._cache is None:
                self._cache = PseudoBins.for_subsets(p, m, self.Xb.shape[0], self.n_bins, self._cache_bytes)
            cache = self._cache
        group_tests(self.Xb, self.z_values, self.prefix, self.col_of, self.subsets, rows, r_ord, h_ord,
                    self.n_bins, sum_g, sum_h, float(count), float(min_samples_leaf), min_child_weight,
                    reg_lambda, feature, gain, cache)
        return feature, gain

    def candidates(self, *args) -> np.ndarray:
        """The candidate set C of a node (sorted, unique); arguments as :meth:`search`.

        A subset whose last test had no admissible split (e.g. a node too small for two
        leaves of ``min_samples_leaf`` rows) contributes nothing: its survivor is arbitrary.
        """
        feature, gain = self.search(*args)
        return np.unique(feature[np.isfinite(gain)])


def root_candidates(X, y, n_target_features: int, delta: float = DEFAULT_DELTA,
                    n_subsets: int | None = None, subset_size: int | None = None,
                    random_state: int | None = 0, min_samples_leaf: int = 20,
                    max_precompute_bytes: int = DEFAULT_MAX_PRECOMPUTE_BYTES) -> np.ndarray:
    """Candidate set C that GT-GBM finds at the root of its first tree (squared loss).

    The root residuals are ``y - mean(y)`` with unit weights, as in the first tree of
    GT-GBM on a regression target.  Used for the paper's Figure 1.
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise ValueError(f"X must be 2-D with one row per entry of y, got X {X.shape} and y {y.shape}")
    pl = plan(X.shape[0], X.shape[1], n_target_features, delta, n_subsets, subset_size)
    check_memory(pl, max_precompute_bytes, n_subsets, subset_size)
    rng = np.random.default_rng(random_state)
    mapper = BinMapper(MAX_BINS, 200_000, rng).fit(X)
    tester = GroupTester.precompute(mapper.transform(X), mapper.standardised_values_, pl, rng)
    r = y - mean(y)
    return tester.candidates(np.empty(0, np.int32), r, np.empty(0), total(r), float(len(r)),
                             len(r), min_samples_leaf, 1e-3, 0.0)


__all__ = ["GT_BINS", "DIRECT_SUM_BELOW", "GroupTester", "GroupTestPlan", "PseudoBins", "check_memory",
           "default_n_subsets", "default_subset_size", "draw_subsets", "fill_binned_hist", "fill_pseudo_hist",
           "group_tests", "half_values", "halves", "halving_boundaries", "keep_better", "min_max", "plan",
           "pseudo_bins", "pseudo_hist_gain", "root_candidates"]
