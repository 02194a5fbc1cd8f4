"""A tree's row partition: the nodes of best-first growth and the stable in-place split of their rows.

Each node owns a contiguous range ``partition[start:end]`` of the grower's row array; a split
reorders that range so the left child's rows come first (stable, so rows stay sorted for the
histogram kernels' sequential reads), and the leaves of a grown tree are ranges of it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from ..kernels._types import MISSING_BIN
from ..kernels.categorical import in_set
from ..tree import TreeBuilder


@njit(cache=True, nogil=True)
def split_partition(partition, start, end, col, bin_threshold, missing_left, bits, buffer):
    """Stable in-place split of ``partition[start:end]``; returns the left child's size.

    A numeric split sends bins ``<= bin_threshold`` left (the missing bin by ``missing_left``); a
    categorical one (``bits`` not empty) the bins of the left set ``bits``
    (:mod:`gbfs.booster.kernels.categorical`; the missing bin is never in it).
    """
    n_left = 0
    n_right = 0
    if bits.shape[0] > 0:
        for i in range(start, end):
            row = partition[i]
            if in_set(bits, np.int64(col[np.uint32(row)])):
                partition[start + n_left] = row  # never overtakes i: safe in place
                n_left += 1
            else:
                buffer[n_right] = row
                n_right += 1
    else:
        # without a branch on the side: a split sends rows left at random, and a mispredicted
        # branch per row costs more than writing each row to both places
        for i in range(start, end):
            row = partition[i]
            b = col[np.uint32(row)]
            missing = b == MISSING_BIN
            go_left = np.int64(((b <= bin_threshold) & ~missing) | (missing & missing_left))
            partition[start + n_left] = row  # never overtakes i: safe in place
            buffer[n_right] = row
            n_left += go_left
            n_right += 1 - go_left
    for k in range(n_right):
        partition[start + n_left + k] = buffer[k]
    return n_left


class Node:
    __slots__ = ("id", "start", "end", "depth", "sum_g", "sum_h", "hist", "splits", "cat_bits", "cat_hist",
                 "feature", "score", "version", "searched", "dead")

    def __init__(self, node_id, start, end, depth, sum_g, sum_h):
        self.id = node_id
        self.start = start
        self.end = end
        self.depth = depth
        self.sum_g = sum_g
        self.sum_h = sum_h
        self.hist = None
        self.splits = None  # its best split of every feature once searched (kernels.splitting.Splits)
        self.cat_bits = None  # categorical features' best left sets (gbfs.booster.kernels.categorical)
        # their histograms, or (parent, sibling) whose difference they are once the sibling has its own
        self.cat_hist = None
        self.feature = -1
        self.score = -np.inf
        self.version = -1
        self.searched = None  # GT-GBM: the features whose gains (and histogram) are valid
        self.dead = None  # features that cannot split it or its descendants (growing.pruning)

    @property
    def count(self) -> int:
        return self.end - self.start


@dataclass
class GrownTree:
    """A grown tree's structure and the row partition that produced it."""

    builder: TreeBuilder
    partition: np.ndarray  # rows, grouped by leaf
    leaf_ids: np.ndarray  # node id of each leaf
    leaf_starts: np.ndarray
    leaf_ends: np.ndarray
