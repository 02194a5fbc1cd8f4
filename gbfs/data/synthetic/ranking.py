"""A learning-to-rank stand-in with known relevant features (``load_dataset("ranking_like")``).

Queries of 5 to 40 documents (``group_train`` / ``group_test``: their sizes, consecutive rows).
Each document has ``n_features`` standard-normal features; its relevance score is a fixed
function of ``n_relevant`` of them -- half linear terms, the rest pairwise products and a
threshold, so trees must combine features -- plus a per-query offset (queries differ in how
relevant their documents are, as in web search) and noise.  Within each query the score is graded
into relevances 0-4 by fixed quantiles of the score's distribution (most documents 0, few 4).
``relevant`` holds exactly the ``n_relevant`` columns.
"""

from __future__ import annotations

import numpy as np

from ...booster.kernels.portable import matvec
from .base import (
    SyntheticData,
    check_int,
    check_positive,
    check_seed,
    child,
    finish,
    streams,
)

MIN_DOCS, MAX_DOCS = 5, 40
#: score quantiles of the relevance grades 1, 2, 3, 4 (the rest are 0)
GRADE_QUANTILES = (0.55, 0.8, 0.93, 0.985)
#: standard deviation of the per-document noise of the score (the signal has about 1.5-2)
NOISE = 1.0


def _split(seq: np.random.SeedSequence, n_queries: int, columns: np.ndarray, coef: np.ndarray,
           n_features: int, cuts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(child(seq, 0))
    sizes = rng.integers(MIN_DOCS, MAX_DOCS + 1, n_queries)
    X = rng.standard_normal((int(sizes.sum()), n_features)).astype(np.float32)
    score = _score(X[:, columns].astype(np.float64), coef)
    score += np.repeat(rng.normal(0.0, 0.5, n_queries), sizes) + NOISE * rng.standard_normal(len(X))
    return X, np.searchsorted(cuts, score).astype(np.int64), sizes


def _score(R: np.ndarray, coef: np.ndarray) -> np.ndarray:
    k = R.shape[1]
    half = (k + 1) // 2
    out = matvec(R[:, :half], coef[:half])  # gbfs.booster.kernels.portable's: BLAS rounds by CPU
    for j in range(half, k - 1, 2):
        out += coef[j] * R[:, j] * R[:, j + 1]
    if k % 2 == 0 or k - half == 1:
        out += coef[k - 1] * (R[:, k - 1] > 0.5)
    return out


def ranking_like(scale: float = 1.0, random_state: int = 0, n_features: int = 100,
                 n_relevant: int = 6) -> SyntheticData:
    """2000 training and 1000 test queries (times ``scale``; about 45 000 + 22 500 rows).

    Parameters
    ----------
    scale : float
        Multiplies the numbers of queries (at least 10 each).
    random_state : int
    n_features : int
        Columns, at least ``n_relevant``.
    n_relevant : int
        Columns the relevance depends on (at least 2).

    Returns
    -------
    SyntheticData
        ``task == "ranking"``, ``y`` relevance grades 0-4, ``group_train`` / ``group_test`` the
        query sizes.
    """
    scale, seed = check_positive("scale", scale), check_seed(random_state)
    n_relevant = check_int("n_relevant", n_relevant, 2)
    n_features = check_int("n_features", n_features, n_relevant)
    rng, train_seq, test_seq = streams(seed)
    columns = np.sort(rng.choice(n_features, n_relevant, replace=False))
    coef = rng.uniform(0.6, 1.2, n_relevant) * rng.choice([-1.0, 1.0], n_relevant)
    # grade cuts from the score distribution of a calibration sample (shared by train and test)
    calib = _score(rng.standard_normal((50_000, n_relevant)), coef)
    calib += rng.normal(0.0, np.hypot(0.5, NOISE), calib.shape[0])
    cuts = np.quantile(calib, GRADE_QUANTILES)
    n_train, n_test = max(10, round(2000 * scale)), max(10, round(1000 * scale))
    X_tr, y_tr, g_tr = _split(train_seq, n_train, columns, coef, n_features, cuts)
    X_te, y_te, g_te = _split(test_seq, n_test, columns, coef, n_features, cuts)
    return finish(X_tr, y_tr, X_te, y_te, [f"x{j}" for j in range(n_features)], columns, "ranking",
                  group_train=g_tr, group_test=g_te)
