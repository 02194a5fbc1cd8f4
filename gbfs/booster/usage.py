"""What the booster needs of the papers' criteria: a penalty vector and a gain divisor.

The booster grows trees against two small protocols and nothing else of the selection methods
(:mod:`gbfs.criteria` implements them): :class:`Usage`, Omega with its first-use prices
(:class:`gbfs.criteria.penalty.FeatureUsage`, the multitask views of
:class:`gbfs.criteria.multitask_usage.MultitaskUsage`), and :class:`GainScale`, what a tree's split
gains are divided by before the penalty is subtracted (:class:`gbfs.criteria.methods.Method`).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np


class Usage(Protocol):
    """What the tree grower needs of Omega.

    ``penalty()`` prices each feature's next split (0 for a free one, ``+inf`` for one a full
    budget forbids); ``version`` changes whenever that vector does (pending leaves are then
    re-scored); ``free_features()`` are the features every node scans in GT-GBM (those with no
    first-use charge left to pay for the ensemble); ``allowed_features()`` the only ones a split
    may still use (None: all); ``mark_used(j)`` records a split on ``j``; ``begin_round(it)`` is
    called before each boosting round (a price that changes with the round bumps ``version``).
    """

    version: int

    def begin_round(self, it: int) -> None: ...

    @property
    def full(self) -> bool: ...

    def penalty(self) -> np.ndarray: ...

    def free_features(self) -> np.ndarray: ...

    def allowed_features(self) -> np.ndarray | None: ...

    def mark_used(self, feature: int) -> bool: ...


class GainScale(Protocol):
    """How a tree's split gains are scaled before the penalty is subtracted: GBFS compares raw gains
    with ``mu`` (GT-GBM paper, Eq. 1); A-GBM and GT-GBM divide them by the tree's gain normaliser
    (Section 2), which makes ``mu`` scale-free."""

    def divisor(self, normaliser: float) -> float: ...
