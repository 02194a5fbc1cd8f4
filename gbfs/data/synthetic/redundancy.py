"""Redundant columns of the stand-ins: noisy copies of the relevant ones.

Real Gisette and Epsilon hold many columns that carry the same information (Gisette's pixel
products, Epsilon's dense features); importance rankings then pick several copies of one signal,
which the GT-GBM paper's Figure 3 shows and its group tests avoid.  A stand-in reproduces this
with a few noisy copies of every relevant column, placed at random positions among the other
columns: the shape and the marginal distribution of every column stay those of the stand-in, and
the label still depends on the relevant columns only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: noisy copies of each relevant column at full width (fewer when the width leaves no room)
COPIES_PER_SOURCE = 8
#: each copy's correlation with its source is drawn uniformly from this range
RHO_RANGE = (0.6, 0.95)


@dataclass(frozen=True)
class Copies:
    """Column ``columns[i]`` is a noisy copy of column ``sources[i]`` with correlation ``rho[i]``."""

    columns: np.ndarray
    sources: np.ndarray
    rho: np.ndarray

    def copy_of(self, n_features: int) -> np.ndarray:
        """Per column, the column it copies, -1 for a column that copies none (int64)."""
        out = np.full(n_features, -1, dtype=np.int64)
        out[self.columns] = self.sources
        return out


def draw_copies(rng: np.random.Generator, n_features: int, relevant: np.ndarray,
                per_source: int = COPIES_PER_SOURCE) -> Copies:
    """Positions and correlations of ``per_source`` copies of each column of ``relevant``.

    Fewer copies per source when the width is small: at least as many pure-noise columns as
    relevant ones remain, so that narrow test widths keep irrelevant columns to compare with.
    """
    relevant = np.asarray(relevant, dtype=np.int64)
    free = np.setdiff1d(np.arange(n_features, dtype=np.int64), relevant)
    k = len(relevant)
    n_per = max(0, min(per_source, (len(free) - k) // max(k, 1)))
    columns = rng.choice(free, size=n_per * k, replace=False).astype(np.int64)
    sources = np.repeat(relevant, n_per)
    return Copies(columns, sources, rng.uniform(*RHO_RANGE, size=len(columns)))


def gaussian_copies(G: np.ndarray, copies: Copies) -> None:
    """Make standard Gaussian columns copies in place: ``rho * source + sqrt(1 - rho^2) * own``.

    The column's own independent draw is the noise, so a copy is again standard Gaussian and no
    further random numbers are needed.
    """
    rho = copies.rho.astype(G.dtype)
    G[:, copies.columns] = rho * G[:, copies.sources] + np.sqrt(1 - rho * rho) * G[:, copies.columns]


def mixture_copies(X: np.ndarray, copies: Copies, rng: np.random.Generator) -> None:
    """Make columns copies in place: each cell takes its source's value with probability ``rho``,
    else keeps its own draw.

    When a copy's own draw has its source's distribution, the copy has it too and its
    correlation with the source is ``rho``; values stay in the source's set (integers, zeros).
    """
    take = rng.random((len(X), len(copies.columns))) < copies.rho
    X[:, copies.columns] = np.where(take, X[:, copies.sources], X[:, copies.columns])
