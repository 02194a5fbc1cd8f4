"""Row samplers of stochastic boosting: SGB, GOSS, MVS and MVS Adaptive.

Ibragimov & Gusev, "Minimal Variance Sampling in Stochastic Gradient Boosting" (NeurIPS 2019),
Sections 2.2-2.3 (SGB, GOSS), 4 (MVS: Eq. 9, Theorem 2, Algorithms 1 and 2) and 5 (MVS Adaptive).

A sampler is a function of one iteration's residuals ``g`` and hessians ``h`` that returns the rows
used to grow the tree and their weights.  Every sampler here returns inverse-probability weights
(IPWE, the paper's Eq. 6), so weighted sums of ``g`` and ``h`` over any node are unbiased estimates
of the full sums; the tree still scores every row afterwards.  All randomness comes from the
``rng`` argument (drawn here, outside the kernels), so the same Generator state gives the same rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from .validation import check_choice, check_int, check_real, warn_user

SAMPLERS = ("sgb", "goss", "mvs", "mvs_adaptive")
GOSS_STYLES = ("paper", "lightgbm")
N_PIVOTS = 64  # quickselect steps per threshold are ~2 ln N (~32 for 10^7 rows); cycled beyond that
USED_BY = {"subsample": ("sgb", "mvs", "mvs_adaptive"), "top_rate": ("goss",),
          "other_rate": ("goss",), "mvs_lambda": ("mvs",)}
DEFAULTS = {"subsample": 0.5, "top_rate": 0.2, "other_rate": 0.1, "mvs_lambda": 0.1}


@njit(cache=True, nogil=True)
def _regularized_abs(g, h, lam):
    """g_hat_i = sqrt(g_i^2 + lambda h_i^2), the 'regularized absolute value' of Theorem 2."""
    out = np.empty(g.shape[0], dtype=np.float64)
    for i in range(g.shape[0]):
        out[i] = np.sqrt(g[i] * g[i] + lam * h[i] * h[i])
    return out


@njit(cache=True, nogil=True, inline="always")
def _pick(u, size):
    # min(): u * size may round up to size when u is within 2^-53 of 1
    return min(int(u * size), size - 1)


# reassoc lets LLVM vectorise the count/sum pass (~6x faster); it only changes rounding of sum_lt
@njit(cache=True, nogil=True, fastmath={"reassoc", "nsz"})
def _threshold_step(a, size, c, sum_small, n_large, target, out):
    """One step of Algorithm 2 on ``a[:size]`` with candidate ``c``; kept values go to ``out[:k]``.

    Two passes (count, then compact the side that survives) instead of an in-place 3-way
    partition: the first pass is branch-free and the second writes only the kept side, and
    compacting forwards is safe when ``out is a``.  Returns (found, mu, sum_small, n_large, k).
    """
    n_lt = 0
    n_gt = 0
    sum_lt = 0.0
    for i in range(size):
        v = a[i]
        n_lt += v < c
        n_gt += v > c
        sum_lt += v if v < c else 0.0
    n_eq = size - n_lt - n_gt
    # f(c) = sum_i min(1, v_i / c); at c == 0 the zeros contribute nothing for any mu > 0, so the
    # threshold is larger: treat f(0) as +inf and discard the zeros into the "small" side
    up = True
    if c > 0.0:
        f = n_large + n_eq + n_gt + (sum_small + sum_lt) / c
        if f == target:
            return True, c, sum_small, n_large, 0
        up = f > target
    # branch-free compaction (unconditional store, conditional advance): with the values in
    # random order a branch here is mispredicted half the time, which costs more than the store
    k = 0
    if up:      # mu > c: values <= c are below the threshold (p = v / mu)
        sum_small += sum_lt + n_eq * c
        for i in range(size):
            v = a[i]
            out[k] = v
            k += v > c
    else:       # mu < c: values >= c are above it (p = 1)
        n_large += n_eq + n_gt
        for i in range(size):
            v = a[i]
            out[k] = v
            k += v < c
    return False, 0.0, sum_small, n_large, k


@njit(cache=True, nogil=True)
def _threshold(values, target, pivots):
    """Algorithm 2 ("Calculate Threshold"), iterative; see :func:`mvs_threshold`."""
    n = values.shape[0]
    if target >= n:
        return values.min()
    work = np.empty(n, dtype=np.float64)
    # the first step reads ``values`` and writes the surviving side to ``work``; later steps
    # compact ``work`` in place, so ``values`` is never modified and never copied whole
    c = values[_pick(pivots[0], n)]
    found, mu, sum_small, n_large, size = _threshold_step(values, n, c, 0.0, 0, target, work)
    step = 1
    while not found and size > 0:
        c = work[_pick(pivots[step % pivots.shape[0]], size)]
        step += 1
        found, mu, sum_small, n_large, size = _threshold_step(work, size, c, sum_small, n_large,
                                                              target, work)
    if found:
        return mu
    # every value is classified: f(mu) = n_large + sum_small / mu = target.  n_large < target
    # holds (a side only moves to "large" when f(c) < target); sum_small == 0 means fewer than
    # target positive values, where no threshold exists and 0 is returned
    return sum_small / (target - n_large)


@njit(cache=True, nogil=True, inline="always")
def _prob(v, mu, p_zero):
    """Theorem 2: p = min(1, g_hat / mu); mu == 0 (no threshold): 1 for g_hat > 0, else p_zero."""
    if mu > 0.0:
        return min(1.0, v / mu)
    return 1.0 if v > 0.0 else p_zero


# error_model="numpy": 1 / p of an unkept row with p == 0 is stored (inf) and then overwritten
@njit(cache=True, nogil=True, error_model="numpy")
def _mvs_select(values, mu, p_zero, u):
    """Bernoulli(p_i) selection (row i kept iff u_i < p_i) with weights 1 / p_i, in one fused kernel."""
    n = values.shape[0]
    k = 0
    for i in range(n):
        k += u[i] < _prob(values[i], mu, p_zero)
    if k == 0:  # never an empty tree: keep the row of largest p (p is increasing in g_hat)
        best = np.argmax(values)
        rows = np.full(1, best, dtype=np.int32)
        return rows, np.full(1, 1.0 / _prob(values[best], mu, p_zero))
    # branch-free compaction as in _threshold_step; the spare slot takes stores after the last keep
    rows = np.empty(k + 1, dtype=np.int32)
    weights = np.empty(k + 1, dtype=np.float64)
    j = 0
    for i in range(n):
        p = _prob(values[i], mu, p_zero)
        rows[j] = i
        weights[j] = 1.0 / p
        j += u[i] < p
    return rows[:k], weights[:k]


@njit(cache=True, nogil=True)
def _top_mask(key, kth, a):
    """Mask of exactly ``a`` rows of largest ``key``: all above ``kth`` (the a-th largest value),
    then ties at ``kth`` in row order."""
    n_above = 0
    for i in range(key.shape[0]):
        n_above += key[i] > kth
    ties = a - n_above
    top = np.empty(key.shape[0], dtype=np.bool_)
    for i in range(key.shape[0]):
        tie = key[i] == kth and ties > 0
        top[i] = key[i] > kth or tie
        ties -= tie
    return top


@njit(cache=True, nogil=True)
def _sequential_select(top, n_top, k, u, w_other):
    """Rows with ``top`` set (weight 1) plus exactly ``k`` of the others, uniformly without
    replacement (weight ``w_other``), in ascending order.

    Knuth's selection sampling (Algorithm S): the i-th non-top row is kept with probability
    (still needed) / (still left), which yields a uniform k-subset in one O(N) pass, already
    sorted; LightGBM's GOSS draws its "other" rows the same way.  Branch-free like _mvs_select.
    """
    rows = np.empty(n_top + k + 1, dtype=np.int32)
    weights = np.empty(n_top + k + 1, dtype=np.float64)
    left = top.shape[0] - n_top
    need = k
    j = 0
    for i in range(top.shape[0]):
        is_top = top[i]
        other = 1 - np.int64(is_top)
        take_other = other * (u[i] * left < need)
        rows[j] = i
        weights[j] = 1.0 if is_top else w_other
        j += is_top + take_other
        need -= take_other
        left -= other
    return rows[:n_top + k], weights[:n_top + k]


def mvs_threshold(values: np.ndarray, sample_size: float, pivots: np.ndarray) -> float:
    """The threshold mu of Theorem 2: ``sum_i min(1, values_i / mu) == sample_size``.

    Found in expected O(N) by the quickselect-style Algorithm 2 ("Calculate Threshold"): a random
    candidate c splits the remaining values into < c, == c and > c; f(c) = n_large + #(>= c) +
    (sum_small + sum(< c)) / c decides the side that holds mu, the other side is folded into
    ``sum_small`` (values below mu, p = v / mu) or ``n_large`` (values above mu, p = 1).  When every
    value is classified, mu = sum_small / (sample_size - n_large).

    Parameters
    ----------
    values : ndarray of float64, shape (N,)
        The regularized absolute values g_hat (finite, >= 0); not modified.
    sample_size : float
        Expected sample size s * N, > 0.
    pivots : ndarray of float64
        Uniforms in [0, 1) drawn by the caller; step t picks its candidate with pivots[t % len].

    Returns
    -------
    float
        mu > 0; ``min(values)`` when ``sample_size >= N`` (every p is 1); 0.0 when fewer than
        ``sample_size`` values are positive (no threshold exists, see :func:`mvs_probabilities`).
    """
    values = np.ascontiguousarray(values, dtype=np.float64)
    pivots = np.ascontiguousarray(pivots, dtype=np.float64)
    if values.ndim != 1 or values.shape[0] == 0:
        raise ValueError(f"values must be a non-empty 1-D array, got shape {values.shape}")
    if not (np.all(np.isfinite(values)) and values.min() >= 0.0):
        raise ValueError("values must be finite and >= 0")
    check_real("sample_size", sample_size, low=0.0, low_open=True)
    if pivots.ndim != 1 or pivots.shape[0] == 0 or not np.all((pivots >= 0.0) & (pivots < 1.0)):
        raise ValueError("pivots must be a non-empty 1-D array of uniforms in [0, 1)")
    return float(_threshold(values, float(sample_size), pivots))


def _uniform_p_zero(values: np.ndarray, target: float) -> float:
    """Probability of the zero rows when mu == 0: the budget left after every positive row."""
    n_pos = int(np.count_nonzero(values))
    return (target - n_pos) / (values.shape[0] - n_pos)


def mvs_probabilities(g: np.ndarray, h: np.ndarray | None, lam: float, subsample: float,
                      pivots: np.ndarray) -> np.ndarray:
    """MVS inclusion probabilities p_i = min(1, g_hat_i / mu) (Theorem 2), g_hat_i = sqrt(g_i^2 + lam h_i^2).

    They sum to ``subsample * N`` (Eq. 5).  lam = 0 is importance sampling (p proportional to |g|
    below the cap), lam -> infinity with constant h is SGB (p = subsample).  When fewer than
    ``subsample * N`` rows have g_hat > 0 no threshold exists (mu = 0): those rows get p = 1 and
    the remaining budget is spread uniformly over the zero rows, so with all g_hat == 0 every
    p = subsample (uniform sampling); this is the limit of MVS as lam -> 0+ with constant h.
    ``h`` None means unit hessians (the first-order case of Section 2.1).
    """
    subsample = check_real("subsample", subsample, low=0.0, low_open=True, high=1.0)
    lam = check_real("lam", lam, low=0.0)
    g, h = _check_gh(g, h)
    values = _regularized_abs(g, h, lam)
    target = subsample * values.shape[0]
    mu = mvs_threshold(values, target, pivots)
    if mu > 0.0:
        return np.minimum(1.0, values / mu)
    return np.where(values > 0.0, 1.0, _uniform_p_zero(values, target))


def adaptive_lambda(g: np.ndarray, h: np.ndarray | None) -> float:
    """MVS Adaptive's lambda: the squared Newton value of a single leaf holding every row.

    Section 5 replaces lambda, "an approximation of squared mean leaf value upper bound" (c_l^2 of
    Eq. 7-9), by "a squared mean of the initial leaf"; we take that leaf value to be the one a
    single leaf holding all N rows would get, c = sum(g) / sum(h), so lambda = (sum g / sum h)^2,
    recomputed every iteration.  0 when sum(h) <= 0.  The booster passes the hessians of its split
    criterion: the logistic / squared-error ones for criterion="newton" (c is then the root's
    Newton leaf value) and h = 1 for the papers' criterion="sse" (c is the mean residual, the
    root's leaf value under leaf_estimate="mean").
    """
    g, h = _check_gh(g, h)
    sum_h = float(np.sum(h))
    return (float(np.sum(g)) / sum_h) ** 2 if sum_h > 0.0 else 0.0


def _check_gh(g, h):
    g = np.ascontiguousarray(g, dtype=np.float64)
    if g.ndim != 1 or g.shape[0] == 0:
        raise ValueError(f"g must be a non-empty 1-D array, got shape {g.shape}")
    h = np.ones_like(g) if h is None else np.ascontiguousarray(h, dtype=np.float64)
    if h.shape != g.shape:
        raise ValueError(f"h must have the shape of g {g.shape}, got {h.shape}")
    return g, h


def _check_values(kind, subsample, top_rate, other_rate, mvs_lambda, goss_style, learning_rate):
    """Ranges of RowSampler's fields; a RowSampler built directly must not set goss_style unless
    it is a GOSS sampler (from_params warns about and ignores the arguments a sampler does not read)."""
    check_choice("sampler", kind, SAMPLERS)
    check_real("subsample", subsample, low=0.0, low_open=True, high=1.0)
    check_real("top_rate", top_rate, low=0.0, high=1.0, high_open=True)
    check_real("other_rate", other_rate, low=0.0, low_open=True, high=1.0)
    if top_rate + other_rate > 1.0 + 1e-12:
        raise ValueError(f"top_rate + other_rate must be <= 1, got {top_rate} + {other_rate}")
    check_real("mvs_lambda", mvs_lambda, low=0.0)
    check_choice("goss_style", goss_style, GOSS_STYLES)
    if goss_style != "paper" and kind != "goss":
        raise ValueError(f'goss_style is only used by sampler="goss", got goss_style={goss_style!r} '
                         f'with sampler="{kind}"')
    check_real("learning_rate", learning_rate, low=0.0, low_open=True)


@dataclass(frozen=True)
class RowSampler:
    """Per-iteration row sampler; build it with :func:`from_params` (which also warns about unused
    arguments).  Stateless: everything random comes from the ``rng`` given to :meth:`sample`.

    Parameters
    ----------
    kind : {"sgb", "goss", "mvs", "mvs_adaptive"}
    subsample : float
        Sample rate s of sgb / mvs / mvs_adaptive (expected rows s * N).
    top_rate, other_rate : float
        GOSS: shares of N taken from the largest-|g| rows and uniformly from the rest.
    mvs_lambda : float
        "mvs": lambda of g_hat = sqrt(g^2 + lambda h^2) (Eq. 9; about 0.1 works well, Section 5).
    goss_style : {"paper", "lightgbm"}
        "lightgbm" ranks by |g h| and samples nothing during the first floor(1 / learning_rate)
        iterations, as LightGBM's goss.hpp does.
    learning_rate : float
        The booster's learning rate, read only by goss_style="lightgbm".
    """

    kind: str
    subsample: float = 0.5
    top_rate: float = 0.2
    other_rate: float = 0.1
    mvs_lambda: float = 0.1
    goss_style: str = "paper"
    learning_rate: float = 0.1

    def __post_init__(self):  # a RowSampler built directly is checked too
        _check_values(self.kind, self.subsample, self.top_rate, self.other_rate, self.mvs_lambda,
                      self.goss_style, self.learning_rate)

    def lambda_for(self, g: np.ndarray, h: np.ndarray | None) -> float | None:
        """The lambda :meth:`sample` uses for these g, h (for logging); None for sgb and goss."""
        if self.kind == "mvs":
            return self.mvs_lambda
        return adaptive_lambda(g, h) if self.kind == "mvs_adaptive" else None

    def sample(self, g: np.ndarray, h: np.ndarray | None, iteration: int, rng: np.random.Generator
               ) -> tuple[np.ndarray, np.ndarray]:
        """Rows used to grow this iteration's tree and their weights.

        Parameters
        ----------
        g : ndarray of float64, shape (N,)
            Residuals (negative gradients).
        h : ndarray of float64, shape (N,) or None
            Hessians; None means 1 for every row.
        iteration : int
            0-based boosting iteration (read by goss_style="lightgbm" only).
        rng : numpy.random.Generator
            Source of every random draw.

        Returns
        -------
        rows : ndarray of int32, sorted ascending, unique, non-empty
        weights : ndarray of float64, same length; sum(weights * g) over any subset of rows is an
            unbiased estimate of sum(g) over that subset (likewise for h).
        """
        g, h = _check_gh(g, h)
        check_int("iteration", iteration, 0)
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
        n = g.shape[0]
        if self.kind == "sgb":
            return self._sgb(n, rng)
        if self.kind == "goss":
            return self._goss(g, h, iteration, rng)
        lam = self.lambda_for(g, h)
        return self._mvs(g, h, lam, rng)

    def _sgb(self, n, rng):
        # Friedman's SGB: exactly k rows uniformly without replacement.  Classic SGB leaves their
        # weight at 1; we use N / k so node sums estimate full-data sums without bias -- otherwise
        # every gain shrinks by the rate s while GBFS's first-use penalty does not, and sampling
        # would silently strengthen feature selection.
        k = max(1, round(self.subsample * n))
        if k == n:
            return np.arange(n, dtype=np.int32), np.ones(n)
        return _sequential_select(np.zeros(n, dtype=np.bool_), 0, k, rng.random(n), n / k)

    def _goss(self, g, h, iteration, rng):
        """GOSS (Section 2.3).  "paper": the a = round(top_rate N) rows of largest |g| with weight 1
        and b = round(other_rate N) of the other N - a rows uniformly without replacement, each with
        weight (N - a) / b: the exact inverse inclusion probability, hence unbiased; it equals the
        paper's (1 - top_rate) / other_rate when both roundings are exact.  b is clipped to
        [1, N - a] (rounding can give a + b = N + 1; b = 0 would leave the rest unrepresented).
        Ties at the a-th largest |g| go to the lowest rows; exactly a rows are kept.
        "lightgbm": rows ranked by |g h| instead, and every row with weight 1 while iteration <
        floor(1 / learning_rate) (LightGBM does not sample while the gradients are still large).
        """
        n = g.shape[0]
        lightgbm = self.goss_style == "lightgbm"
        if lightgbm and iteration < int(1.0 / self.learning_rate):
            return np.arange(n, dtype=np.int32), np.ones(n)
        a = min(n, round(self.top_rate * n))
        b = min(n - a, max(1, round(self.other_rate * n)))
        top = np.zeros(n, dtype=np.bool_)
        if a > 0:
            key = np.abs(g * h) if lightgbm else np.abs(g)
            top = _top_mask(key, np.partition(key, n - a)[n - a], a)
        w_other = (n - a) / b if b > 0 else 1.0
        return _sequential_select(top, a, b, rng.random(n), w_other)

    def _mvs(self, g, h, lam, rng):
        """Algorithm 1: p_i = min(1, g_hat_i / mu), row i kept iff u_i < p_i, weight 1 / p_i.

        Rows with g_hat == 0 under mu > 0 have p = 0 and are never drawn (their g and, if lam > 0,
        h are 0, so the sums lose nothing).  For mu == 0 see :func:`mvs_probabilities`.  If no row
        is drawn (possible, the size is random) the row of largest p is kept with weight 1 / p.
        """
        n = g.shape[0]
        if self.subsample >= 1.0:
            return np.arange(n, dtype=np.int32), np.ones(n)
        values = _regularized_abs(g, h, lam)
        target = self.subsample * n
        mu = _threshold(values, target, rng.random(N_PIVOTS))
        p_zero = _uniform_p_zero(values, target) if mu == 0.0 else 0.0
        return _mvs_select(values, mu, p_zero, rng.random(n))


def from_params(sampler: str | None, subsample: float | None = None, top_rate: float | None = None,
                other_rate: float | None = None, mvs_lambda: float | None = None,
                goss_style: str = "paper", learning_rate: float = 0.1,
                warn: bool = True) -> RowSampler | None:
    """Validate an estimator's sampling arguments and build the sampler (None when sampler is None).

    Every bad value is a ValueError naming the argument, raised here before any kernel runs, also
    for an argument the chosen sampler does not read.  Such an argument (a value other than None,
    or goss_style other than "paper") is ignored with a UserWarning naming it -- as the GT-GBM
    arguments are under another method -- so that a grid over ``sampler`` with a fixed
    ``subsample`` works, and nothing is dropped silently.  Defaults for None: subsample 0.5,
    top_rate 0.2, other_rate 0.1, mvs_lambda 0.1.  ``warn=False`` ignores them without the warning
    (a loaded model file was warned about when it was fitted).
    """
    if sampler is not None:
        check_choice("sampler", sampler, SAMPLERS)
    check_choice("goss_style", goss_style, GOSS_STYLES)
    given = {"subsample": subsample, "top_rate": top_rate, "other_rate": other_rate,
             "mvs_lambda": mvs_lambda}
    filled = {name: DEFAULTS[name] if value is None else value for name, value in given.items()}
    # every given value is range-checked, read or not ("goss" is the kind that admits them all)
    _check_values("goss", **filled, goss_style=goss_style, learning_rate=learning_rate)
    unused = [name for name, value in given.items()
              if value is not None and sampler not in USED_BY[name]]
    if goss_style != "paper" and sampler != "goss":
        unused.append("goss_style")
    if unused and warn:
        shown = "None" if sampler is None else f'"{sampler}"'
        users = "; ".join(f"{name} by sampler in ({', '.join(USED_BY.get(name, ('goss',)))})"
                          for name in unused)
        warn_user(f"{', '.join(unused)} ignored with sampler={shown} (read {users})")
    if sampler is None:
        return None
    values = {name: DEFAULTS[name] if name in unused else value for name, value in filled.items()}
    goss_style = "paper" if "goss_style" in unused else goss_style
    return RowSampler(kind=sampler, goss_style=goss_style, learning_rate=learning_rate, **values)
