"""Bag-of-words-like sparse count data with labels carried by a few words.

Vocabulary: column ``j`` holds word ``j``; the words get random frequency ranks, and the
probability that a document contains the word of rank ``r`` is ``min(c (r + 10)^-1.1, 0.5)``
with ``c`` set so that the expected share of non-zero cells is ``density``: a few words
appear in many documents, most in a handful.  A present word occurs ``k`` times,
``k = 1..max_count`` with probability proportional to ``2^-k`` (a truncated geometric).

Labels: ``P(y = 1) = sigmoid(b + sum_j w_j log1p(x_j))`` over ``n_informative`` words drawn
among the ``10 n_informative`` most frequent ones (so each occurs often enough to be learnt),
with ``|w_j|`` in [1, 2] and random signs; the score is rescaled to a standard deviation of 2.5
and centred (``b``) on a calibration sample, so the classes are about balanced.

Seeding: ``SeedSequence(random_state)`` has two children, the model (frequencies, informative
words, weights, calibration) and the rows.  Rows are drawn in blocks of a fixed number of rows
(a function of ``n_features`` only), block ``b`` from its own seed, so a larger ``n_samples``
extends a smaller one: row ``i`` depends only on ``(random_state, i)`` and extra rows from the
same generator make a test set.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .base import block_rows, check_int, check_positive, child

__all__ = ["make_text_like"]

ZIPF_EXPONENT, ZIPF_OFFSET = 1.1, 10.0
MAX_PRESENCE = 0.5          # no word is in more than half of the documents
SIGNAL_STD = 2.5            # standard deviation of the label score (logistic noise: about 1.8)
N_CALIBRATION = 4096
CANDIDATES_PER_INFORMATIVE = 10


def _presence(n_features: int, density: float, rng: np.random.Generator) -> np.ndarray:
    """Per column, the probability that a document contains its word (mean ``density``)."""
    weights = (np.arange(n_features) + ZIPF_OFFSET) ** -ZIPF_EXPONENT
    lo, hi = 0.0, MAX_PRESENCE / weights[-1]   # at ``hi`` every column is at the cap
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if np.minimum(mid * weights, MAX_PRESENCE).mean() < density else (lo, mid)
    by_rank = np.minimum((lo + hi) / 2 * weights, MAX_PRESENCE)
    out = np.empty(n_features)
    out[rng.permutation(n_features)] = by_rank   # column ``perm[r]`` holds the word of rank r
    return out


def _block(rng: np.random.Generator, rows: int, presence: np.ndarray, count_p: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``rows`` documents as CSR parts ``(counts, columns, row_nnz)`` and label uniforms."""
    present = rng.random((rows, presence.size)) < presence
    r, c = np.nonzero(present)               # row-major: sorted by row, then column
    counts = rng.choice(count_p.size, size=r.size, p=count_p) + 1.0
    return counts, c, np.bincount(r, minlength=rows), rng.random(rows)


def _score(X: sp.csr_matrix, informative: np.ndarray, weights: np.ndarray) -> np.ndarray:
    return np.asarray(X[:, informative].log1p() @ weights).ravel()


def _check_density(density: object) -> float:
    value = check_positive("density", density)
    if value > MAX_PRESENCE:
        raise ValueError(f"density must be in (0, {MAX_PRESENCE}], got {density!r}")
    return value


def make_text_like(n_samples: int, n_features: int, density: float = 0.01, max_count: int = 5,
                   n_informative: int = 30, random_state: int = 0
                   ) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """Sparse word counts of ``n_samples`` documents and binary labels carried by a few words.

    Parameters
    ----------
    n_samples : int
        Documents (rows), at least 1.
    n_features : int
        Vocabulary size (columns), at least ``n_informative``.
    density : float in (0, 0.5]
        Expected share of non-zero cells; word frequencies are Zipf-like (see the module).
    max_count : int
        Counts are integers in ``1..max_count`` (at least 1).
    n_informative : int
        Words the label depends on, at least 1.
    random_state : int
        Non-negative seed; the same seed gives the same data, and more rows extend fewer.

    Returns
    -------
    X : scipy.sparse.csr_matrix of float64, shape (n_samples, n_features)
        Counts, no explicit zeros, sorted column indices.
    y : ndarray of int64, shape (n_samples,)
        Labels in {0, 1}, about balanced.
    informative : ndarray of int64, shape (n_informative,)
        Sorted columns of the words the label depends on.

    Raises
    ------
    ValueError
        Naming the argument that is out of range or of the wrong type.

    Examples
    --------
    >>> X, y, informative = make_text_like(200, 1000, random_state=0)
    >>> X.shape, informative.size
    ((200, 1000), 30)
    """
    n_samples = check_int("n_samples", n_samples, 1)
    n_informative = check_int("n_informative", n_informative, 1)
    n_features = check_int("n_features", n_features, 1)
    if n_features < n_informative:
        raise ValueError(f"n_features must be at least n_informative={n_informative}, got {n_features}")
    density = _check_density(density)
    max_count = check_int("max_count", max_count, 1)
    root = np.random.SeedSequence(check_int("random_state", random_state, 0))
    model, rows_seq = np.random.default_rng(child(root, 0)), child(root, 1)

    presence = _presence(n_features, density, model)
    count_p = 0.5 ** np.arange(1, max_count + 1)
    count_p /= count_p.sum()
    n_candidates = min(n_features, CANDIDATES_PER_INFORMATIVE * n_informative)
    candidates = np.argsort(-presence, kind="stable")[:n_candidates]
    informative = np.sort(model.choice(candidates, n_informative, replace=False)).astype(np.int64)
    weights = model.uniform(1.0, 2.0, n_informative) * model.choice([-1.0, 1.0], n_informative)
    calib = _csr([_block(model, N_CALIBRATION, presence, count_p)], N_CALIBRATION, n_features)
    s = _score(calib, informative, weights)
    scale = SIGNAL_STD / max(float(s.std()), 1e-12)
    weights *= scale
    bias = -scale * float(np.median(s))

    step = block_rows(n_features)
    blocks = [_block(np.random.default_rng(child(rows_seq, b)), step, presence, count_p)
              for b in range((n_samples + step - 1) // step)]
    X = _csr(blocks, n_samples, n_features)
    u = np.concatenate([blk[3] for blk in blocks])[:n_samples]
    y = (u < 1.0 / (1.0 + np.exp(-(bias + _score(X, informative, weights))))).astype(np.int64)
    return X, y, informative


def _csr(blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]], n_rows: int,
         n_features: int) -> sp.csr_matrix:
    """The first ``n_rows`` rows of the stacked blocks as one CSR matrix."""
    row_nnz = np.concatenate([b[2] for b in blocks])[:n_rows]
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(row_nnz, out=indptr[1:])
    nnz = int(indptr[-1])
    data = np.concatenate([b[0] for b in blocks])[:nnz]
    indices = np.concatenate([b[1] for b in blocks])[:nnz]
    index = np.int32 if max(nnz, n_features) < np.iinfo(np.int32).max else np.int64
    X = sp.csr_matrix((data, indices.astype(index), indptr.astype(index)), shape=(n_rows, n_features))
    X.has_sorted_indices = True
    return X
