"""One boosting step: grow one tree for one task and update its scores.

:class:`TreeStep` holds what a task keeps across its trees (its binned rows, labels, running raw
scores, grower and row-sample buffers) and, per call, carries out lines 2-7 of the GT-GBM paper's
Algorithm 3 (Algorithm 1 of GBFS): residuals of the current model, the rows and weights of this
tree (a row sampler's, or all rows), the tree's gain normaliser, one penalised tree grown against a
:class:`~gbfs.booster.usage.Usage` (Omega), shrunk leaf values and updated scores.  The single-task loop
(:func:`gbfs.booster.boosting.boost`) runs one step per iteration; multitask boosting (Algorithm 1 of the
GT-GBM paper) one step per task and round, all against one Omega.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .growing import make_grower
from .growing.feature_search import FeatureSearch
from .growing.grower import TreeGrower
from .kernels._types import MAX_TARGET_SCALE
from .kernels.portable import dot, total
from .losses.loss import loss_for
from .normaliser import HESSIAN_FLOOR, root_sse, sum_g2_over_h, tree_normaliser, weighted_newton_sums
from .tree import Tree
from .usage import Usage


class TreeStep:
    """A task's boosting state; :meth:`grow` fits its next tree.

    Parameters
    ----------
    X_binned : ndarray of uint8, Fortran-ordered, shape (n_rows, n_features)
    y : ndarray of float64 (labels in {0, 1} for the logistic loss)
    bin_mapper : fitted BinMapper
    params : BoostingParams
    search : FeatureSearch or None
        The grower's feature restriction (None: every feature).
    sample_rng : numpy Generator or None
        Source of the row sampler's draws (``params.sampler``).
    loss : object or None
        The residuals' source (None: :func:`gbfs.booster.losses.loss.loss_for` ``params``; multiclass boosting
        gives each class its view of the softmax, :class:`gbfs.booster.losses.softmax.ClassGradient`).
    grower : TreeGrower or None
        A grower shared with other steps on the same rows (its ``search`` is then this step's);
        None: a new one, of ``params.growth.split_search`` (:data:`gbfs.booster.growing.GROWERS`).
    X : ndarray of float or None
        The raw training values, which the exact split search (``split_search="exact"``) needs.
    """

    def __init__(self, X_binned: np.ndarray, y: np.ndarray, bin_mapper, params,
                 search: FeatureSearch | None = None, sample_rng: np.random.Generator | None = None,
                 loss=None, grower: TreeGrower | None = None, X: np.ndarray | None = None):
        self.X_binned, self.y, self.params, self.sample_rng = X_binned, y, params, sample_rng
        self.loss = loss_for(params) if loss is None else loss
        n = y.shape[0]
        self.init_score = self.loss.init_score(y)
        self.raw = np.full(n, self.init_score, dtype=np.float64)
        self._r = np.empty(n, dtype=np.float64)
        self._h = np.empty(n, dtype=np.float64)
        self._ones = np.ones(n, dtype=np.float64)
        self._rows = np.arange(n, dtype=np.int32)
        if grower is None:
            grower = make_grower(X_binned, X, bin_mapper, params.growth, search)
        self.grower = grower
        search = grower.search
        # a small sample is grown on a compact copy of its rows, unless the search reads per-row
        # data of the full matrix by row id (group tests read the precomputed prefix sums)
        # (or the grower's row-wise index of sparse features, which is by row id too)
        self._sampled = (_SampleBuffers(n, compact=grower.compacts and not (search.reads_rows
                                                                           or grower.sparse is not None))
                         if params.sampler is not None else None)
        self.score_bound = abs(self.init_score)  # bounds |score| of every row the model predicts

    def grow(self, it: int, usage: Usage) -> tuple[Tree, dict]:
        """Fit tree ``it`` to the current residuals against ``usage``; update the raw scores.

        Returns the tree and its statistics (``root_variance``, ``gain_normaliser``, ``n_leaves``
        and, with a sampler, ``n_rows_sampled``).
        """
        params, r, h, X_binned = self.params, self._r, self._h, self.X_binned
        self.loss.residuals(self.y, self.raw, r, h)
        _check_residuals(r, it, params)
        sampled = self._sampled
        unit_h = False
        if sampled is None:      # all rows with weight 1
            n = r.shape[0]
            tree_rows, rw = self._rows, r
            hw = h if params.criterion.hessian_weighted else self._ones
            unit_h = not params.criterion.hessian_weighted
            den = h if params.leaf_estimate.newton else self._ones
            w_sum = float(n)
            sse = root_sse(rw, w_sum, dot(r, r))
            norm = tree_normaliser(params, sse, total(r), w_sum,
                                   lambda: (sum_g2_over_h(r, h, HESSIAN_FLOOR), total(h)))
        else:                    # a row sampler's rows and weights (gbfs.sampling.samplers)
            # the sampler sees the hessians the split criterion uses (unit ones for "sse")
            tree_rows, weights = params.sampler.sample(r, h if params.criterion.hessian_weighted else None,
                                                       it, self.sample_rng)
            rw, hw, den, sse, w_sum = sampled.fill(tree_rows, weights, r, h, params)
            wr = rw[:tree_rows.shape[0]] if sampled.compacted else rw[tree_rows]
            norm = tree_normaliser(params, sse, total(wr), w_sum,
                                   lambda rows=tree_rows, w=weights: weighted_newton_sums(r, h, rows, w))
        divisor = 1.0 if params.method is None else params.method.divisor(norm)
        if sampled is not None and sampled.compacted:
            Xs = sampled.matrix(tree_rows.shape[0], X_binned.shape[1], X_binned.dtype)
            _gather_rows(self.grower.X_binned, tree_rows, Xs)  # the grower's: dense when it compacts
            # the leaf partition then holds positions in the sample, which index the compact channels
            grown = self.grower.grow(np.arange(tree_rows.shape[0], dtype=np.int32), rw, hw, usage, divisor,
                                     X_binned=Xs, normaliser=norm)
        else:
            grown = self.grower.grow(tree_rows, rw, hw, usage, divisor, hw_is_one=unit_h,
                                     normaliser=norm)
        values = _leaf_values(grown, rw, den, params)
        self.score_bound += float(np.max(np.abs(values)))
        check_score_bound(self.score_bound, it, params)
        tree = grown.builder.build(node_values(grown, values))
        if sampled is None:
            add_leaf_values(grown.partition, grown.leaf_starts, grown.leaf_ends, values, self.raw)
        else:                    # rows outside the sample are scored by the tree too
            self.grower.add_scores(tree, self.raw, X_binned)
        stats = {"root_variance": sse / w_sum, "gain_normaliser": norm, "n_leaves": len(grown.leaf_ids)}
        if sampled is not None:
            stats["n_rows_sampled"] = int(tree_rows.shape[0])
        return tree, stats

    def release(self) -> None:
        """Free the grower's histogram pool."""
        self.grower.release_buffers()


@njit(cache=True)
def _leaf_sums(partition, starts, ends, num, den, out_num, out_den):
    for k in range(starts.shape[0]):
        a = 0.0
        b = 0.0
        for i in range(starts[k], ends[k]):
            row = partition[i]
            a += num[row]
            b += den[row]
        out_num[k] = a
        out_den[k] = b


@njit(cache=True)
def add_leaf_values(partition, starts, ends, values, raw):
    """``raw[row] += values[k]`` for the rows ``partition[starts[k]:ends[k]]`` of every leaf ``k``."""
    for k in range(starts.shape[0]):
        for i in range(starts[k], ends[k]):
            raw[partition[i]] += values[k]


def _check_residuals(r: np.ndarray, it: int, params) -> None:
    """Refuse residuals whose sums or squared sums (the split gains) would overflow float64; NaN
    included.  One O(n) pass per tree, cheap next to growing it."""
    check_residual_scale(r.shape[0] * float(np.max(np.abs(r))), it, params)


def check_residual_scale(scale: float, it: int, params) -> None:
    """Refuse tree ``it`` when ``n_rows * max|r|`` of its residuals (``scale``) would overflow
    float64 sums of squares (NaN included)."""
    if not scale <= 2 * MAX_TARGET_SCALE:
        raise ValueError(_diverged(it, params, f"its residuals reached n_rows * max|r| = {scale:.3g} "
                                   f"(at most {2 * MAX_TARGET_SCALE:.0e} fit in float64 gains)"))


def check_score_bound(score_bound: float, it: int, params) -> None:
    """Refuse tree ``it`` when the bound on every score (the sum of the trees' largest leaf values)
    is no longer a finite float."""
    if not math.isfinite(score_bound):
        raise ValueError(_diverged(it, params, "its leaf values, or the sum of the largest "
                                   "leaf values of all trees, are no longer finite floats"))


def _diverged(it: int, params, what: str) -> str:
    return (f"boosting diverged at tree {it}: {what}; learning_rate={params.learning_rate!r} is too "
            "large for this data (lower it); no model was kept")


#: samples up to this share of the rows are grown on a compact copy of their binned rows: a
#: column-major uint8 matrix read at 20 % of its rows still touches every cache line, so the
#: histograms would cost nearly as much as on all rows
COMPACT_MAX_FRACTION = 0.5


class _SampleBuffers:
    """Per-row channels of a sampled tree.

    Either compact (entry ``i`` belongs to the ``i``-th sampled row, for :func:`_grow_compact`) or
    full-length buffers reused across iterations (only sampled rows are written; the grower reads
    only the rows it is given).
    """

    def __init__(self, n: int, compact: bool):
        self.n, self.compact, self.compacted = n, compact, False
        self.rw, self.hw, self.den = np.zeros(n), np.zeros(n), np.zeros(n)
        self._matrix = np.empty(0, dtype=np.uint8)

    def matrix(self, k: int, d: int, dtype) -> np.ndarray:
        """A Fortran-ordered (k, d) matrix for the compact copy, reusing one buffer across trees:
        a fresh 30 MB array per tree costs more in first-touch page faults than the copy itself.
        It grows with 10 % headroom, as MVS's sample size varies from tree to tree."""
        size = k * d * np.dtype(dtype).itemsize
        if self._matrix.size < size:
            self._matrix = np.empty(int(size * 1.1), dtype=np.uint8)
        return self._matrix[:size].view(dtype).reshape((k, d), order="F")

    def fill(self, rows, w, r, h, params) -> tuple:
        """``w r``, the second channel (``w`` or ``w h``), the leaf denominator channel, the weighted
        root SSE ``sum w r^2 - (sum w r)^2 / sum w`` (A-GBM's SSE_r on the sample) and ``sum w``."""
        r_s = r[rows]
        wr = w * r_s
        wh = w * h[rows]
        hw = wh if params.criterion.hessian_weighted else w
        den = wh if params.leaf_estimate.newton else w
        w_sum = total(w)
        sse = dot(wr, r_s) - total(wr) ** 2 / w_sum if w_sum > 0 else 0.0
        self.compacted = self.compact and rows.shape[0] <= COMPACT_MAX_FRACTION * self.n
        if self.compacted:
            return wr, hw, den, sse, w_sum
        self.rw[rows], self.hw[rows], self.den[rows] = wr, hw, den
        return self.rw, self.hw, self.den, sse, w_sum


@njit(parallel=True, cache=True)
def _gather_rows(X_binned, rows, out):
    # column by column: sorted rows make each column's reads sequential, the writes contiguous;
    # 1-D column views and four independent loads per step measured 2.4x faster than out[i, j] =
    # X[rows[i], j] (12 vs 28 ms for 16 000 of 80 000 rows x 2000 columns)
    m = rows.shape[0]
    for j in prange(X_binned.shape[1]):
        col = X_binned[:, j]
        dst = out[:, j]
        i = 0
        while i + 4 <= m:
            a = col[rows[i]]
            b = col[rows[i + 1]]
            c = col[rows[i + 2]]
            e = col[rows[i + 3]]
            dst[i] = a
            dst[i + 1] = b
            dst[i + 2] = c
            dst[i + 3] = e
            i += 4
        while i < m:
            dst[i] = col[rows[i]]
            i += 1


def leaf_sums(partition, starts, ends, num_channel, den_channel) -> tuple[np.ndarray, np.ndarray]:
    """Each leaf's sums of two per-row channels over its rows ``partition[starts[k]:ends[k]]``,
    in their order."""
    k = starts.shape[0]
    num = np.empty(k)
    den = np.empty(k)
    _leaf_sums(partition, starts, ends, num_channel, den_channel, num, den)
    return num, den


def _leaf_values(grown, rw, den_channel, params) -> np.ndarray:
    """Shrunk leaf values: lr * sum(w r) / (sum(w) or sum(w h) + lambda)."""
    num, den = leaf_sums(grown.partition, grown.leaf_starts, grown.leaf_ends, rw, den_channel)
    return leaf_values(grown, num, den, params)


def leaf_values(grown, num: np.ndarray, den: np.ndarray, params) -> np.ndarray:
    """Shrunk leaf values of a grown tree from each leaf's sums ``num`` (of ``w r``) and ``den``
    (of ``w`` or ``w h``): ``lr * num / (den + lambda)``."""
    lam = params.growth.reg_lambda if params.leaf_estimate.newton else 0.0
    den = den + lam
    if params.leaf_estimate.newton and grown.builder.cat_left:
        # a categorical split's children also carry its cat_l2 (LightGBM's leaf outputs do)
        cols = grown.builder.cols
        children = [c for node in grown.builder.cat_left for c in (cols["left"][node], cols["right"][node])]
        den = den + params.growth.cat_settings[1] * np.isin(grown.leaf_ids, children)
    # divided only where den > 0 (no floating-point warning state to set up per tree)
    v = np.divide(num, den, out=np.zeros_like(num), where=den > 0)
    return params.learning_rate * v


def node_values(grown, leaf_vals) -> np.ndarray:
    """Every node's value of a grown tree: its leaves' values ``leaf_vals``, 0 elsewhere."""
    values = np.zeros(len(grown.builder.cols["feature"]))
    values[grown.leaf_ids] = leaf_vals
    return values
