"""Which features a node's split search scans: an input of the tree grower.

As scikit-learn's histogram grower receives its ``allowed_features``,
:class:`~gbfs.booster.growing.grower.TreeGrower` receives a :class:`FeatureSearch` and asks it, node
by node, which features to scan:

- :class:`AllFeatures` -- every feature (GBFS, A-GBM: Algorithm 3 of the GT-GBM paper); once the
  feature budget is full, only Omega;
- :class:`GroupTestsPerNode` -- GT-GBM (Algorithm 2): Omega and the candidate set C found by group
  tests on each node's rows;
- :class:`GroupTestsPerTree` -- the group tests run once per tree at the root, every node of that
  tree then scans Omega u C (an extension of the paper: one precompute pass per tree).

A search declares what the grower may assume: ``restricted`` (features it does not return keep gain
``-inf``), ``per_node`` (a node's set depends on its own rows, so a child cannot be found by
histogram subtraction from its parent), ``completes`` (a pending node must also scan the
features that joined Omega after its search: Algorithm 2 checks every used feature, line 1) and
``reads_rows`` (it reads per-row data of the full binned matrix by row id, so a row sample cannot
be grown on a compact copy of its rows).
"""

from __future__ import annotations

import numpy as np

from ..kernels._types import ROW_DTYPE
from ..kernels.portable import total


class FeatureSearch:
    """Every feature, or only Omega once the budget is full (``usage.allowed_features()``)."""

    restricted = False
    per_node = False
    completes = False
    reads_rows = False

    def begin_tree(self, grower, root, usage) -> None:
        """Called once per tree before the root's search."""

    def node_features(self, grower, node, usage, rows, r_ord, h_ord) -> np.ndarray:
        """Features ``node`` scans; ``rows``, ``r_ord``, ``h_ord`` are its gathered rows."""
        allowed = usage.allowed_features()
        return grower.features if allowed is None else allowed

    def child_features(self, grower, usage) -> np.ndarray | None:
        """The set a child will scan if it is known without the child's rows (which permits the
        subtraction trick), else None."""
        allowed = usage.allowed_features()
        return grower.features if allowed is None else allowed


AllFeatures = FeatureSearch


class _GroupTests(FeatureSearch):
    """GT-GBM's search: Omega u C, with C from :class:`~gbfs.criteria.group_testing.GroupTester`.

    Parameters
    ----------
    tester : GroupTester
        The precompute over the binned matrix the grower reads (row ids are the matrix's rows).
    rows_cap : int or None
        Group tests of a node with more rows use a uniform sample of this many of them (drawn from
        ``rng``); candidates are still evaluated exactly on all rows.  None: all rows.
    rng : numpy Generator, required with ``rows_cap``
    """

    restricted = True
    completes = True
    reads_rows = True

    def __init__(self, tester, rows_cap: int | None = None, rng: np.random.Generator | None = None):
        self.tester, self.rows_cap, self.rng = tester, rows_cap, rng

    def row_sample(self, count: int) -> np.ndarray | None:
        """Positions (sorted, so that the kernels read the columns in order) of the uniform row
        sample a node of ``count`` rows runs its group tests on; None: all its rows."""
        cap = self.rows_cap
        if cap is None or count <= cap:
            return None
        return np.sort(self.rng.choice(count, cap, replace=False))

    @staticmethod
    def sample_limits(params, n_sample: int, count: int) -> tuple[float, float]:
        """``min_samples_leaf`` and ``min_child_weight`` of group tests on ``n_sample`` of a
        node's ``count`` rows: a leaf of min_samples_leaf rows holds about that fraction of the
        sample."""
        return (max(1.0, params.min_samples_leaf * n_sample / count),
                params.min_child_weight * n_sample / count)

    def candidates(self, grower, node, rows, r_ord, h_ord) -> np.ndarray:
        """Candidate set C of ``node`` (Algorithm 2, lines 2-10)."""
        p = grower.params
        pick = self.row_sample(node.count)
        if pick is None:
            return self.tester.candidates(rows, r_ord, h_ord, node.sum_g, node.sum_h, node.count,
                                          p.min_samples_leaf, p.min_child_weight, p.reg_lambda)
        cap = pick.shape[0]
        rows_s = rows[pick] if rows.shape[0] else pick.astype(ROW_DTYPE)
        r_s = r_ord[pick]
        h_s = h_ord[pick] if h_ord.shape[0] else h_ord
        sum_h = total(h_s) if h_s.shape[0] else float(cap)
        msl, mcw = self.sample_limits(p, cap, node.count)
        return self.tester.candidates(rows_s, r_s, h_s, total(r_s), sum_h, cap, msl, mcw, p.reg_lambda)


class GroupTestsPerNode(_GroupTests):
    """Algorithm 2 of the GT-GBM paper: group tests at every node."""

    per_node = True

    def node_features(self, grower, node, usage, rows, r_ord, h_ord) -> np.ndarray:
        allowed = usage.allowed_features()
        if allowed is not None:
            return allowed
        return np.union1d(usage.free_features(), self.candidates(grower, node, rows, r_ord, h_ord))

    def child_features(self, grower, usage) -> np.ndarray | None:
        return usage.allowed_features()


class GroupTestsPerTree(_GroupTests):
    """Group tests once per tree, on the root's rows; every node then scans Omega u C."""

    def begin_tree(self, grower, root, usage) -> None:
        self._tree = None
        self._scanned, self._version = None, None
        if grower.splittable(root) and not usage.full:
            self._tree = self.candidates(grower, root, *grower.gathered(root))

    def _tree_features(self, usage) -> np.ndarray:
        """Omega u C of this tree, formed again only when Omega changes (its ``version``)."""
        if self._version != usage.version:
            self._scanned, self._version = np.union1d(usage.free_features(), self._tree), usage.version
        return self._scanned

    def node_features(self, grower, node, usage, rows, r_ord, h_ord) -> np.ndarray:
        allowed = usage.allowed_features()
        if allowed is not None:
            return allowed
        if self._tree is not None:
            return self._tree_features(usage)
        return np.union1d(usage.free_features(), self.candidates(grower, node, rows, r_ord, h_ord))

    def child_features(self, grower, usage) -> np.ndarray | None:
        allowed = usage.allowed_features()
        if allowed is not None:
            return allowed
        return None if self._tree is None else self._tree_features(usage)


SCOPES = {"node": GroupTestsPerNode, "tree": GroupTestsPerTree}


def group_tests(tester, scope: str = "node", rows_cap: int | None = None,
                rng: np.random.Generator | None = None) -> _GroupTests:
    """GT-GBM's feature search of ``scope`` (``"node"``: Algorithm 2; ``"tree"``: once per tree)."""
    return SCOPES[scope](tester, rows_cap, rng)
