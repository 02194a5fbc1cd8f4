"""Pure-numpy reference implementations, written from the specification (not from the kernels).

Everything here favours obviousness over speed: masks over rows, brute force over every
threshold and missing-value direction, and a grower that recomputes every pending leaf's best
penalised split from scratch at every step.  The tests compare the numba kernels with these.
"""

from __future__ import annotations

import math

import numpy as np

MISSING = 255


# -- binning -------------------------------------------------------------------------------------
def midpoint_edges(values: np.ndarray) -> np.ndarray:
    """Edges of a column with few distinct values: midpoints of consecutive distinct values."""
    u = np.unique(values[~np.isnan(values)])
    return (u[:-1] + u[1:]) / 2.0


def edges_and_means(values: np.ndarray, max_bins: int, min_data_in_bin: int) -> tuple[np.ndarray, np.ndarray]:
    """A column's edges and the mean of the (non-NaN) values of each bin, from the whole sorted
    column: with at most ``max_bins`` distinct values a bin closes at a value change once it holds
    ``min_data_in_bin`` values (LightGBM's greedy rule; the edge is the midpoint), otherwise the
    edges are the ``q / n_bins`` quantiles (midpoint interpolation, equal ones merged) with
    ``n_bins = min(max_bins, n // min_data_in_bin)``; empty bins get NaN means."""
    v = np.sort(values[~np.isnan(values)])
    edges = []
    if np.unique(v).size <= max_bins:
        start = 0
        for i in range(1, v.size):
            if v[i] != v[i - 1] and i - start >= min_data_in_bin:
                edges.append(v[i - 1] * 0.5 + v[i] * 0.5)
                start = i
    else:
        n_bins = max(1, min(max_bins, v.size // min_data_in_bin))
        for q in range(1, n_bins):
            pos = q * (v.size - 1) / n_bins
            edge = v[math.floor(pos)] * 0.5 + v[math.ceil(pos)] * 0.5
            if not edges or edge > edges[-1]:
                edges.append(edge)
    edges = np.asarray(edges)
    bins = np.searchsorted(edges, v, side="left")
    means = np.array([v[bins == b].mean() if np.any(bins == b) else np.nan for b in range(edges.size + 1)])
    return edges, means


def bin_values(x: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """``bin(x) = #{edges < x}``; NaN -> 255."""
    x = np.asarray(x, dtype=np.float64)
    out = np.searchsorted(edges, x, side="left").astype(np.int64)
    out[np.isnan(x)] = MISSING
    return out


def bin_matrix(X: np.ndarray, edges_list) -> np.ndarray:
    return np.column_stack([bin_values(X[:, f], e) for f, e in enumerate(edges_list)])


# -- losses --------------------------------------------------------------------------------------
def logistic_loss_per_row(y, raw):
    """``log(1 + e^f) - y f`` without overflow."""
    return np.logaddexp(0.0, raw) - y * raw


def squared_loss_per_row(y, raw):
    return 0.5 * (y - raw) ** 2


# -- histograms ----------------------------------------------------------------------------------
def histogram(X_binned, rows, rw, hw, features=None):
    """(n_features, 256, 3) sums of rw, hw and counts of ``rows``, by np.add.at."""
    d = X_binned.shape[1]
    hist = np.zeros((d, 256, 3))
    for f in range(d) if features is None else features:
        b = X_binned[rows, f].astype(np.int64)
        np.add.at(hist[f, :, 0], b, rw[rows])
        np.add.at(hist[f, :, 1], b, hw[rows])
        np.add.at(hist[f, :, 2], b, 1.0)
    return hist


def flat_histogram(X_binned, rows, rw, hw, n_bins):
    """:func:`histogram` in the learner's flat layout: per feature its ``n_bins[f]`` value bins,
    then its missing bin (bin 255 of the binned column)."""
    hist = histogram(X_binned, rows, rw, hw)
    parts = []
    for f, nb in enumerate(n_bins):
        assert not np.any(hist[f, nb:255]), f"feature {f} has values above its {nb} bins"
        parts += [hist[f, :nb], hist[f, 255:]]
    return np.concatenate(parts)


# -- split finding -------------------------------------------------------------------------------
def split_gain(GL, HL, GR, HR, lam):
    G, H = GL + GR, HL + HR
    return GL * GL / (HL + lam) + GR * GR / (HR + lam) - G * G / (H + lam)


def sse(r, w=None):
    """Weighted sum of squared deviations from the weighted mean."""
    w = np.ones_like(r) if w is None else w
    if r.size == 0:
        return 0.0
    m = np.sum(w * r) / np.sum(w)
    return float(np.sum(w * (r - m) ** 2))


def left_mask(col, t, missing_left):
    """Rows going left for threshold ``t``: ``bin <= t``, missing rows by ``missing_left``."""
    miss = col == MISSING
    return (~miss & (col <= t)) | (miss & bool(missing_left))


def candidate_splits(col, n_bins):
    """Every (threshold, missing direction) of one feature, in canonical order.

    Without missing values in the node the direction is None (decided afterwards).  The
    partition {missing} | {non-missing} is listed once, as "all non-missing left, missing
    right" (the split the specification names); its mirror image "(t, missing left) with no
    non-missing value <= t" is skipped (see :func:`mirrored_missing_split`).
    """
    miss = col == MISSING
    has_missing = bool(np.any(miss))
    for t in range(n_bins):
        for ml in ((False, True) if has_missing else (None,)):
            if ml and not np.any(~miss & (col <= t)):
                continue  # left = the missing rows only: the mirror of "non-missing left"
            yield t, ml


def mirrored_missing_split(col, t, missing_left):
    """The other representation of the partition {missing} | {non-missing}, or None.

    If (t, missing_left) sends every non-missing row of the node left and the missing rows right,
    the same partition is also "threshold 0, missing left" when bin 0 holds none of the node's
    rows: both have the same gain (left and right swapped), so which one a float implementation
    reports is decided by rounding.
    """
    miss = col == MISSING
    if missing_left or not miss.any() or np.any(~miss & (col > t)) or np.any(col == 0):
        return None
    return 0, True


def best_split_feature(col, r, h, n_bins, min_samples_leaf, min_child_weight, lam):
    """Brute force over every threshold / missing direction of one feature of one node.

    ``col``, ``r``, ``h`` are the node's rows only.  Returns (gain, bin, missing_left,
    (G_L, H_L, count_L)); gain is -inf (bin -1) when nothing is admissible.  Ties keep the
    first candidate in canonical order (lowest threshold, missing right before missing left).
    Every candidate's left set is an explicit row mask; the sums are row-wise reductions, so
    candidates with the same left set get bitwise-equal gains.
    """
    cands = list(candidate_splits(col, n_bins))
    masks = np.array([left_mask(col, t, bool(ml)) for t, ml in cands]).reshape(len(cands), -1)
    nl = masks.sum(axis=1)
    nr = col.shape[0] - nl
    GL = (masks * r).sum(axis=1)
    HL = (masks * h).sum(axis=1)
    GR = (~masks * r).sum(axis=1)
    HR = (~masks * h).sum(axis=1)
    ok = (nl >= min_samples_leaf) & (nr >= min_samples_leaf)
    ok &= (HL >= min_child_weight) & (HR >= min_child_weight)
    if not ok.any():
        return -np.inf, -1, False, (0.0, 0.0, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        gains = np.where(ok, split_gain(GL, HL, GR, HR, lam), -np.inf)
    k = int(np.argmax(gains))  # first maximum
    t, ml = cands[k]
    direction = bool(ml) if ml is not None else bool(nl[k] >= nr[k])
    return float(gains[k]), t, direction, (float(GL[k]), float(HL[k]), float(nl[k]))


def best_splits(X_binned, rows, rw, hw, n_bins, min_samples_leaf, min_child_weight, lam):
    """Per-feature brute-force best splits of the node holding ``rows``."""
    d = X_binned.shape[1]
    gain = np.full(d, -np.inf)
    bin_ = np.full(d, -1)
    ml = np.zeros(d, dtype=bool)
    left = np.zeros((d, 3))
    for f in range(d):
        g, b, m, s = best_split_feature(X_binned[rows, f], rw[rows], hw[rows], int(n_bins[f]),
                                        min_samples_leaf, min_child_weight, lam)
        gain[f], bin_[f], ml[f], left[f] = g, b, m, s
    return gain, bin_, ml, left


# -- penalty -------------------------------------------------------------------------------------
def penalty(mu, costs, bags, used):
    """``mu * c_j * 1{no feature of bag(j) is used}``."""
    d = len(costs)
    bags = np.arange(d) if bags is None else np.asarray(bags)
    out = np.zeros(d)
    for j in range(d):
        bag_used = any(used[k] for k in range(d) if bags[k] == bags[j])
        out[j] = 0.0 if bag_used else mu * costs[j]
    return out


def penalized_best(gain, pen, norm):
    """Feature maximising gain / norm - penalty (first on ties); (-1, -inf) if none admissible."""
    best_f, best_s = -1, -np.inf
    for j in range(len(gain)):
        if not np.isfinite(gain[j]):
            continue
        s = gain[j] / norm - pen[j]
        if s > best_s:
            best_f, best_s = j, s
    return best_f, best_s


# -- partition -----------------------------------------------------------------------------------
def split_rows(rows, col, t, missing_left):
    """Stable split of ``rows`` into (left, right) by bin threshold and missing direction."""
    left = left_mask(col[rows], t, missing_left)
    return rows[left], rows[~left]


# -- the grower ----------------------------------------------------------------------------------
class NaiveTree:
    """Node arrays in the same layout as gbfs.booster.tree.Tree (node 0 the root, children appended)."""

    def __init__(self):
        self.feature, self.bin_threshold, self.missing_left = [], [], []
        self.left, self.right, self.count, self.gain = [], [], [], []
        self.rows = []  # rows of every node
        self.mirrored = 0  # splits stored in their mirrored representation (see grow's prefer)

    def add(self, rows):
        for name, v in (("feature", -1), ("bin_threshold", -1), ("missing_left", False),
                        ("left", -1), ("right", -1), ("count", len(rows)), ("gain", 0.0)):
            getattr(self, name).append(v)
        self.rows.append(rows)
        return len(self.feature) - 1

    def leaves(self):
        return [i for i, f in enumerate(self.feature) if f < 0]


def grow(X_binned, n_bins, rows, rw, hw, *, mu, costs=None, bags=None, used=None, norm=1.0,
         max_depth=None, max_leaves=None, min_samples_leaf=1, min_node_fraction=None,
         min_child_weight=1e-3, reg_lambda=0.0, refresh=True, prefer=None):
    """Reference best-first grower.

    At every step every pending leaf's best penalised split is recomputed from scratch with the
    current used set (``refresh=True``).  ``refresh=False`` reproduces the LightGBM CEGB bug
    (issues 3245, 3679): a leaf's choice is frozen with the used set at the time it was created.

    ``prefer(node, feature) -> (bin, missing_left) or None`` may only pick the mirrored
    representation of a {missing} | {non-missing} split (:func:`mirrored_missing_split`, a tie the
    specification leaves to rounding): partitions, gains and choices stay the reference's own, only
    which child is called left follows ``prefer``.  ``tree.mirrored`` counts such nodes.

    Returns (NaiveTree, used, order): ``used`` the final used-feature mask, ``order`` the
    features in order of first use during this tree.
    """
    d = X_binned.shape[1]
    costs = np.ones(d) if costs is None else np.asarray(costs, dtype=float)
    used = np.zeros(d, dtype=bool) if used is None else np.array(used, dtype=bool)
    order = []
    n = len(rows)
    min_count = max(2 * min_samples_leaf,
                    math.ceil(min_node_fraction * n) if min_node_fraction else 0, 2)
    tree = NaiveTree()
    depth = {tree.add(np.asarray(rows)): 0}
    pending = [0]
    frozen = {}  # node -> (feature, score) chosen when the node was created (refresh=False)

    def splittable(node):
        if max_depth is not None and depth[node] >= max_depth:
            return False
        return tree.count[node] >= min_count

    def choose(node):
        if not splittable(node):
            return -1, -np.inf, None
        per_feature = best_splits(X_binned, tree.rows[node], rw, hw, n_bins, min_samples_leaf,
                                  min_child_weight, reg_lambda)
        f, s = penalized_best(per_feature[0], penalty(mu, costs, bags, used), norm)
        return f, s, per_feature

    while pending and (max_leaves is None or len(tree.leaves()) < max_leaves):
        choices = {}
        for node in pending:
            if refresh or node not in frozen:
                frozen[node] = choose(node)
            choices[node] = frozen[node]
        best = max(pending, key=lambda nd: choices[nd][1])  # first on ties, as in list order
        f, score, per_feature = choices[best]
        if not score > 0:
            break
        pending.remove(best)
        gain, bin_, ml, _ = per_feature
        b, m = int(bin_[f]), bool(ml[f])
        if prefer is not None:
            alt = mirrored_missing_split(X_binned[tree.rows[best], f], b, m)
            if alt is not None and prefer(best, f) == alt:
                b, m = alt
                tree.mirrored += 1
        lrows, rrows = split_rows(tree.rows[best], X_binned[:, f], b, m)
        left, right = tree.add(lrows), tree.add(rrows)
        depth[left] = depth[right] = depth[best] + 1
        tree.feature[best], tree.bin_threshold[best] = f, b
        tree.missing_left[best], tree.gain[best] = m, float(gain[f])
        tree.left[best], tree.right[best] = left, right
        if not used[f]:
            used[f] = True
            order.append(f)
        pending += [left, right]
        if not refresh:  # children are scored once, with the used set of their creation
            for child in (left, right):
                frozen[child] = choose(child)
    return tree, used, order
