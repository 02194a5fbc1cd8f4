"""Synthetic data with a known sparse signal (the offline default everywhere).

Besides the array generators used by the runners (``make_sparse_classification``,
``make_figure1_regression``), this module holds seeded stand-ins of the papers' data sets,
all returning a :class:`SyntheticData` and listed in ``GENERATORS``. Seeding and row
blocking are described in :mod:`gbfs.data.synthetic.base`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ...booster.kernels.portable import exp2, log2, matvec
from .base import (
    SyntheticData,
    check_int,
    check_positive,
    check_seed,
    draw_rows,
    finish,
    n_rows,
    streams,
)
from .flight import flight_frames, flight_like, flight_like_categorical
from .multitask import multitask
from .ranking import ranking_like
from .redundancy import Copies, draw_copies, gaussian_copies, mixture_copies

__all__ = ["GENERATORS", "PAPER_SHAPES", "SyntheticData", "epsilon_like", "figure1", "flight_frames",
           "flight_like", "gisette_like", "make_figure1_regression", "make_gbfs_figure1",
           "make_sparse_classification",
           "multitask"]

#: a data set's generator: keyword arguments such as ``scale`` and ``random_state``
_Generator = Callable[..., SyntheticData]
# (n_train, n_features) of the GT-GBM paper's Table 2
PAPER_SHAPES = {"gisette": (6000, 5000), "epsilon": (80000, 2000), "flight": (100000, 634)}


def make_sparse_classification(n_samples: int, n_features: int, n_informative: int = 10,
                               noise: float = 0.5, missing_rate: float = 0.0,
                               random_state: int | None = 0, dtype=np.float64):
    """Binary labels from a sparse additive model on uniform features.

    ``y = 1{sum_k a_k f_k(x_{j_k}) + noise * eps > median}`` over ``n_informative``
    features ``j_k`` (the first ones: columns ``0..n_informative-1``), with ``f_k``
    alternating among ``x``, ``2^x`` and ``log2(1 + x)`` shapes (Figure 1 of the
    GT-GBM paper) plus one pairwise interaction.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of int in {0, 1}
    informative : ndarray of int, the informative columns
    """
    rng = np.random.default_rng(random_state)
    X = rng.random((n_samples, n_features), dtype=np.float64).astype(dtype, copy=False)
    k = min(n_informative, n_features)
    informative = np.arange(k)
    coef = rng.uniform(1.0, 2.0, size=k) * rng.choice([-1.0, 1.0], size=k)
    signal = np.zeros(n_samples)
    shapes = (lambda x: x, exp2, lambda x: log2(1.0 + x))
    for i, j in enumerate(informative):
        signal += coef[i] * shapes[i % 3](X[:, j].astype(np.float64))
    if k >= 2:
        signal += 2.0 * (X[:, 0] - 0.5) * (X[:, 1] - 0.5)
    signal = (signal - signal.mean()) / signal.std()
    score = signal + noise * rng.standard_normal(n_samples)
    y = (score > np.median(score)).astype(np.int64)
    if missing_rate > 0:
        X[rng.random(X.shape) < missing_rate] = np.nan
    return X, y, informative


def make_figure1_regression(n_samples: int, n_features: int, random_state: int | None = 0):
    """``y = 2 x1 - 3 * 2^x2 + log2(1 + x3) + eps`` (GT-GBM paper, Section 4.3, Figure 1).

    x are i.i.d. uniform on [0, 1] and eps ~ N(0, 1); x1, x2, x3 are columns 0, 1, 2.
    """
    rng = np.random.default_rng(random_state)
    X = rng.random((n_samples, n_features))
    # gbfs.booster.kernels.portable's 2^x and log2: numpy's SIMD versions round by CPU, and so
    # would the target
    y = 2 * X[:, 0] - 3 * exp2(X[:, 1]) + log2(1 + X[:, 2]) + rng.standard_normal(n_samples)
    return X, y



#: the shapes of :func:`make_gbfs_figure1`'s label
GBFS_FIGURE1_SHAPES = ("disc", "xor")


def make_gbfs_figure1(n_samples: int, shape: str = "disc", random_state: int | None = 0):
    """Three features of which two carry a nonlinear label and the third is their sum (GBFS paper,
    Section 5.1, Figure 1).

    ``x`` and ``y`` are i.i.d. uniform on [-1, 1] and ``z = x + y``, so ``z`` is redundant given
    ``x`` and ``y``.  With ``shape="disc"`` the label is 1 inside the disc ``x^2 + y^2 < 1/2`` (half
    the square's area), with ``shape="xor"`` where ``x y > 0``; neither is linearly separable in
    ``(x, y)`` nor in ``(x, y, z)``.  The paper does not give its generator; both shapes meet its
    description.  Returns ``X`` (n x 3: x, y, z) and ``y`` (int64).
    """
    n = check_int("n_samples", n_samples, 1)
    if shape not in GBFS_FIGURE1_SHAPES:
        raise ValueError(f"shape must be one of {GBFS_FIGURE1_SHAPES}, got {shape!r}")
    rng = np.random.default_rng(random_state)
    xy = rng.uniform(-1.0, 1.0, size=(n, 2))
    x, y = xy[:, 0], xy[:, 1]
    label = x * x + y * y < 0.5 if shape == "disc" else x * y > 0
    return np.column_stack([x, y, x + y]), label.astype(np.int64)


# --- stand-ins of the papers' data sets --------------------------------------------------

# Relevant columns of gisette_like / epsilon_like, by the way they enter the label:
# linear terms, one-column nonlinear terms and pairwise products (pure interactions).
N_LINEAR, N_NONLINEAR, N_PAIRED = 16, 6, 8
N_RELEVANT = N_LINEAR + N_NONLINEAR + N_PAIRED
# Rows the label model is calibrated on (standardisation, balanced threshold)
N_CALIBRATION = 20_000


@dataclass(frozen=True)
class _LabelModel:
    """``y = 1{sum_k coef_k * standardised term_k + noise * eps > threshold}``.

    ``columns`` are the relevant columns in role order: ``N_LINEAR`` linear ones, then
    ``N_NONLINEAR`` entering through ``nonlinear``, then consecutive pairs entering as products.
    """

    columns: np.ndarray
    nonlinear: Callable[[np.ndarray], np.ndarray]
    col_mean: np.ndarray
    col_std: np.ndarray
    term_mean: np.ndarray
    term_std: np.ndarray
    coef: np.ndarray
    noise: float
    threshold: float

    def terms(self, X_rel: np.ndarray) -> np.ndarray:
        """Unstandardised terms of the relevant columns (in role order)."""
        Z = (X_rel.astype(np.float64) - self.col_mean) / self.col_std
        paired = Z[:, N_LINEAR + N_NONLINEAR:]
        return np.hstack([Z[:, :N_LINEAR], self.nonlinear(X_rel[:, N_LINEAR:N_LINEAR + N_NONLINEAR]),
                          paired[:, 0::2] * paired[:, 1::2]])

    def score(self, X_rel: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Noisy score whose sign against ``threshold`` is the label."""
        T = (self.terms(X_rel) - self.term_mean) / self.term_std
        return matvec(T, self.coef) + self.noise * rng.standard_normal(len(X_rel))

    def labels(self, X: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """int64 labels of full rows ``X``."""
        return (self.score(X[:, self.columns], rng) > self.threshold).astype(np.int64)


def _relevant_columns(rng: np.random.Generator, n_features: int) -> np.ndarray:
    """The ``N_RELEVANT`` columns the label depends on, at random positions (in role order)."""
    return rng.choice(n_features, size=N_RELEVANT, replace=False).astype(np.int64)


def _fit_label_model(rng: np.random.Generator, columns: np.ndarray, nonlinear: Callable,
                     draw_relevant: Callable[[np.random.Generator, np.ndarray, int], np.ndarray],
                     noise_ratio: float) -> _LabelModel:
    """Calibrate the label model of the relevant ``columns`` on rows of those columns only.

    The standardisation and the median threshold come from a calibration sample of the
    model stream, not from the split itself, so labels do not depend on the split sizes;
    the median makes the classes balanced.
    """
    X_cal = draw_relevant(rng, columns, N_CALIBRATION)
    Z = X_cal.astype(np.float64)
    n_terms = N_LINEAR + N_NONLINEAR + N_PAIRED // 2
    coef = rng.uniform(0.5, 1.5, n_terms) * rng.choice([-1.0, 1.0], n_terms)
    # Calibrate in stages: column standardisation, then term standardisation, then threshold.
    model = _LabelModel(columns, nonlinear, Z.mean(0), Z.std(0), np.zeros(n_terms), np.ones(n_terms),
                        coef, noise_ratio * float(np.linalg.norm(coef)), 0.0)
    T = model.terms(X_cal)
    model = replace(model, term_mean=T.mean(0), term_std=T.std(0))
    return replace(model, threshold=float(np.median(model.score(X_cal, rng))))


def _n_features(n: int, feature_scale: float) -> int:
    """Width at ``feature_scale``: at least twice the relevant columns, so most columns stay noise."""
    return max(int(round(n * check_positive("feature_scale", feature_scale))), 2 * N_RELEVANT)


def _binary_standin(n_features: int) -> Callable[[_Generator], _Generator]:
    """Decorator of a binary stand-in of ``n_features`` columns at ``feature_scale=1``: its docstring's
    Parameters and Returns, which every such stand-in shares."""
    section = f"""
    Parameters
    ----------
    scale : float
        Multiplies the row counts (at least 50 rows per split).
    feature_scale : float
        Multiplies the {n_features} columns (at least {2 * N_RELEVANT}).
    random_state : int

    Returns
    -------
    SyntheticData
        ``task == "binary"``, features ``f0, f1, ...``.
    """

    def document(generator: _Generator) -> _Generator:
        generator.__doc__ = generator.__doc__.rstrip() + "\n" + section
        return generator
    return document


def _gisette_cells(rng: np.random.Generator, density: np.ndarray, rows: int) -> np.ndarray:
    """Gisette-like values: 0 with probability ``1 - density[j]``, else an integer in 1..999.

    One uniform draw per cell serves both: below ``density`` it is nonzero, and rescaled by
    ``density`` it is again uniform, which gives the value (half the random numbers).
    """
    u = rng.random((rows, len(density)), dtype=np.float32)
    values = np.minimum(np.floor(u / density * 999.0) + 1.0, 999.0)
    return np.where(u < density, values, np.float32(0.0)).astype(np.float32, copy=False)


@_binary_standin(5000)
def gisette_like(scale: float = 1.0, feature_scale: float = 1.0, random_state: int = 0) -> SyntheticData:
    """Stand-in of Gisette: 6000 + 1000 rows of 5000 sparse integer features (Table 2 of GT-GBM).

    Values are integers 0..999 stored as float32, about 87 % zeros (each column's density
    uniform on [0.05, 0.21]). Balanced labels depend on 30 columns at random positions:
    16 linearly, 6 through their presence (``x > 0``) and 8 through 4 pairwise products.
    Each has 8 noisy copies (fewer at narrow widths; ``copy_of``,
    :mod:`gbfs.data.synthetic.redundancy`): a copy's cell is its source's with probability rho in
    [0.6, 0.95], else its own draw of the source's distribution, so its correlation with the
    source is about rho.
    """
    scale, seed = check_positive("scale", scale), check_seed(random_state)
    d = _n_features(5000, feature_scale)
    rng, train_seq, test_seq = streams(seed)
    density = rng.uniform(0.05, 0.21, d).astype(np.float32)
    columns = _relevant_columns(rng, d)
    copies = draw_copies(rng, d, columns)
    density[copies.columns] = density[copies.sources]
    model = _fit_label_model(rng, columns, lambda x: (x > 0).astype(np.float64),
                             lambda r, cols, n: _gisette_cells(r, density[cols], n), noise_ratio=0.3)

    def cells(r: np.random.Generator, rows: int) -> np.ndarray:
        X = _gisette_cells(r, density, rows)
        mixture_copies(X, copies, r)
        return X
    return _binary_splits(model, copies, cells, d, (n_rows(6000, scale), n_rows(1000, scale)),
                          train_seq, test_seq)


def _binary_splits(model, copies: Copies, cells, d: int, sizes: tuple[int, int], train_seq,
                   test_seq) -> SyntheticData:
    """Train and test rows of a binary stand-in: ``cells(rng, rows)`` draws a block of features,
    ``model`` labels it; features are named ``f0, f1, ...``, ``copies`` are recorded."""
    def block(r: np.random.Generator, rows: int) -> tuple[np.ndarray, np.ndarray]:
        X = cells(r, rows)
        return X, model.labels(X, r)

    X_train, y_train = draw_rows(sizes[0], d, train_seq, block, np.int64)
    X_test, y_test = draw_rows(sizes[1], d, test_seq, block, np.int64)
    return finish(X_train, y_train, X_test, y_test, [f"f{j}" for j in range(d)], model.columns, "binary",
                  copy_of=copies.copy_of(d))


def _epsilon_relevant(rng: np.random.Generator, n_features: int, columns: np.ndarray, copies: Copies,
                      rows: int) -> np.ndarray:
    """Relevant columns of unit-norm Gaussian rows without drawing the other columns.

    The copies of the relevant columns are drawn (they enter the norm); the squared norm of
    the remaining ``d - k - copies`` independent coordinates is chi-square with that many
    degrees of freedom, so this has exactly the distribution of the full rows' columns.
    """
    g = rng.standard_normal((rows, len(columns)))
    position = {int(c): i for i, c in enumerate(columns)}
    source = g[:, [position[int(s)] for s in copies.sources]]
    rho = copies.rho
    copied = rho * source + np.sqrt(1 - rho * rho) * rng.standard_normal(source.shape)
    rest = rng.chisquare(n_features - len(columns) - len(copies.columns), rows)
    return g / np.sqrt((g * g).sum(1) + (copied * copied).sum(1) + rest)[:, None]


def _unit_rows(rng: np.random.Generator, rows: int, n_features: int, copies: Copies) -> np.ndarray:
    """Gaussian rows (with the ``copies``) scaled to unit L2 norm, as Epsilon's rows are."""
    X = rng.standard_normal((rows, n_features), dtype=np.float32)
    gaussian_copies(X, copies)
    X /= np.sqrt(np.einsum("ij,ij->i", X, X))[:, None]
    return X


@_binary_standin(2000)
def epsilon_like(scale: float = 1.0, feature_scale: float = 1.0, random_state: int = 0) -> SyntheticData:
    """Stand-in of Epsilon: 80 000 + 20 000 rows of 2000 dense unit-norm features (Table 2 of GT-GBM).

    Features are Gaussian with every row scaled to unit L2 norm. Balanced labels depend on
    30 columns at random positions: 16 linearly, 6 through their square and 8 through 4
    pairwise products. Each has 8 noisy copies (fewer at narrow widths; ``copy_of``,
    :mod:`gbfs.data.synthetic.redundancy`): ``rho * source + sqrt(1 - rho^2) * noise`` before
    the rows are scaled, rho in [0.6, 0.95]. Rows are generated in float32 blocks straight into
    the output, so the full size needs about 0.8 GB.
    """
    scale, seed = check_positive("scale", scale), check_seed(random_state)
    d = _n_features(2000, feature_scale)
    rng, train_seq, test_seq = streams(seed)
    columns = _relevant_columns(rng, d)
    copies = draw_copies(rng, d, columns)
    model = _fit_label_model(rng, columns, np.square,
                             lambda r, cols, n: _epsilon_relevant(r, d, cols, copies, n), noise_ratio=0.5)
    return _binary_splits(model, copies, lambda r, rows: _unit_rows(r, rows, d, copies), d,
                          (n_rows(80_000, scale), n_rows(20_000, scale)), train_seq, test_seq)


def figure1(scale: float = 1.0, n_features: int = 100, random_state: int = 0) -> SyntheticData:
    """``y = 2 x1 - 3 * 2^x2 + log2(1 + x3) + eps`` as train/test (GT-GBM paper, Section 4.3, Figure 1).

    Each block of rows is a ``make_figure1_regression`` draw; 10 000 + 2000 rows at scale 1.

    Parameters
    ----------
    scale : float
        Multiplies the row counts (at least 50 rows per split).
    n_features : int
        Total columns (>= 3); all but columns 0, 1, 2 are irrelevant uniform noise.
    random_state : int

    Returns
    -------
    SyntheticData
        ``task == "regression"``, ``relevant == [0, 1, 2]``, features ``f0, f1, ...``.
    """
    scale, seed = check_positive("scale", scale), check_seed(random_state)
    d = check_int("n_features", n_features, 3)
    _, train_seq, test_seq = streams(seed)

    def block(r: np.random.Generator, rows: int) -> tuple[np.ndarray, np.ndarray]:
        # y is computed from the float64 draw; storing X as float32 moves it by ~1e-8 << eps.
        return make_figure1_regression(rows, d, random_state=int(r.integers(2**63)))

    X_train, y_train = draw_rows(n_rows(10_000, scale), d, train_seq, block, np.float64)
    X_test, y_test = draw_rows(n_rows(2000, scale), d, test_seq, block, np.float64)
    return finish(X_train, y_train, X_test, y_test, [f"f{j}" for j in range(d)], np.arange(3), "regression")


GENERATORS: dict[str, _Generator] = {
    "gisette_like": gisette_like,
    "epsilon_like": epsilon_like,
    "flight_like": flight_like,
    "flight_like_categorical": flight_like_categorical,
    "figure1": figure1,
    "multitask": multitask,
    "ranking_like": ranking_like,
}
