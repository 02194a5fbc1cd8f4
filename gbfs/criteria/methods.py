"""The selection methods, as a registry: a new method is one class here plus one yaml in
``conf/method/``.

A method says how a tree's split gains are compared with the first-use penalty and which features
a node scans:

- ``gbfs`` -- gain minus ``mu c_j`` for an unused feature (GBFS paper, Eq. 14; GT-GBM paper, Eq. 1);
- ``agbm`` -- the gain divided by the tree's gain normaliser (SSE_root), minus ``mu``: A-GBM
  (GT-GBM paper, Section 2), so ``mu`` in [0, 1] is scale-free;
- ``gtgbm`` -- A-GBM's criterion over Omega and the candidates of group tests (Algorithm 2);
- ``topk`` -- GBDT-topK: an unpenalised fit ranks the features, the top K are refit (Section 5.1).
"""

from __future__ import annotations

from ..booster.growing.feature_search import FeatureSearch, group_tests


class Method:
    """A selection method.

    Attributes
    ----------
    name : str
    normalised : bool
        Gains are divided by the tree's gain normaliser before the penalty is subtracted.
    max_mu : float or None
        Largest admissible ``mu`` (normalised gains are at most 1).
    group_tests : bool
        Needs GT-GBM's precompute (:class:`~gbfs.criteria.group_testing.GroupTester`).
    ranks : bool
        Selects by ranking an unpenalised fit (no penalty, costs or bags).
    """

    name = ""
    normalised = False
    max_mu: float | None = None
    group_tests = False
    ranks = False

    def divisor(self, normaliser: float) -> float:
        """What a tree's gains are divided by."""
        return normaliser if self.normalised else 1.0

    def feature_search(self, tester=None, scope: str = "node", rows_cap: int | None = None,
                       rng=None) -> FeatureSearch:
        """The grower's :class:`~gbfs.booster.growing.feature_search.FeatureSearch` for this method."""
        return FeatureSearch()


METHODS: dict[str, Method] = {}


def register(cls: type[Method]) -> type[Method]:
    """Class decorator: make ``cls`` available as ``method=cls.name``."""
    METHODS[cls.name] = cls()
    return cls


@register
class GBFS(Method):
    name = "gbfs"


@register
class AGBM(Method):
    name = "agbm"
    normalised = True
    max_mu = 1.0


@register
class GTGBM(AGBM):
    name = "gtgbm"
    group_tests = True

    def feature_search(self, tester=None, scope="node", rows_cap=None, rng=None) -> FeatureSearch:
        return group_tests(tester, scope, rows_cap, rng)


@register
class TopK(Method):
    name = "topk"
    ranks = True
