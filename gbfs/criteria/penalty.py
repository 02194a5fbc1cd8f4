"""The ensemble-wide used-feature state Omega and the penalty vector it induces.

GBFS (Eq. 1 of the GT-GBM paper; Eq. 11/14 of the GBFS paper) charges
``mu * c_j`` the first time feature ``j`` is used; with feature bags (GBFS paper,
Section 4.2) the charge is per bag: once any feature of a bag is used, every
feature of that bag is free.  The split search receives the resulting vector; it
never sees mu, costs or bags.

A hard budget ``max_features = K`` caps Omega: once K bags (features, without bags) are used,
every unused one is priced at ``+inf``, so no split may use it, and the split search may skip
it altogether (:meth:`FeatureUsage.allowed_features`).  Below the budget mu still prices first
uses.  Because the budget changes the penalty vector, filling it bumps ``version`` like any new
use, which makes the grower re-score every pending leaf.

A cost budget ``max_cost = B`` caps what Omega costs: opening a bag through feature ``j`` spends
``c_j`` (what the penalty charges ``mu`` for), and a feature whose bag is unused is priced at
``+inf`` as soon as ``spent + c_j > B``.  The budget is full when no unused bag is affordable any
more.  Without costs every feature costs 1 and ``max_cost = K`` is ``max_features = K``.

Annealing (``anneal=(factor, rounds)``, off by default: the papers price every tree alike) starts
the price at ``factor * mu`` and lowers it geometrically to ``mu`` over the first ``rounds`` boosting
rounds (:meth:`FeatureUsage.begin_round`): the first trees admit only features whose gain pays a
dearer price, the later ones the rest of what ``mu`` admits.

Omega is a small protocol the grower reads and updates (:class:`gbfs.booster.usage.Usage`, the
booster's side of the boundary); :class:`FeatureUsage` is the single-task set,
:class:`~gbfs.criteria.multitask_usage.MultitaskUsage` the multitask pair (Omega_G, Omega_t) of the
GT-GBM paper's Eq. 2.
"""

from __future__ import annotations

import numpy as np


class FeatureUsage:
    """Omega, the features used so far by the ensemble (and the tree being grown).

    Parameters
    ----------
    n_features : int
    mu : float
        Penalty weight (in gain units for GBFS, in normalised-gain units for A-GBM).
    costs : ndarray of shape (n_features,) or None
        Per-feature multipliers ``c_j`` (default 1).
    bags : ndarray of int, shape (n_features,) or None
        Bag id of every feature (default: each feature its own bag).
    max_features : int or None
        Budget: at most this many bags (features, without bags) ever enter Omega.
    max_cost : float or None
        Budget in cost units: the features that open the used bags cost at most this in all.
    anneal : (float, int)
        ``(factor, rounds)``: round ``r`` prices a first use at ``mu * factor ** max(0, 1 - r /
        rounds)``; ``(1.0, 1)`` (the default) keeps ``mu`` throughout.
    """

    def __init__(self, n_features: int, mu: float, costs: np.ndarray | None = None,
                 bags: np.ndarray | None = None, max_features: int | None = None,
                 max_cost: float | None = None, anneal: tuple[float, int] = (1.0, 1)):
        self.mu = float(mu)
        self.anneal = (float(anneal[0]), int(anneal[1]))
        self._mu_now = self.mu  # the price of the current round (mu once annealing is over)
        self.costs = np.ones(n_features) if costs is None else np.asarray(costs, dtype=np.float64)
        if bags is None:
            self.bag_of = np.arange(n_features, dtype=np.int64)
        else:
            # relabel arbitrary ids to 0..n_bags-1
            _, self.bag_of = np.unique(np.asarray(bags), return_inverse=True)
        self.bag_used = np.zeros(int(self.bag_of.max()) + 1 if n_features else 0, dtype=bool)
        self.used = np.zeros(n_features, dtype=bool)
        self.order: list[int] = []  # features in order of first use
        self.max_features = max_features
        self.max_cost = max_cost
        self.n_bags_used = 0
        self._unaffordable = False  # max_cost: no unused bag fits what is left of it
        self.spent = 0.0  # cost of the features that opened the used bags, summed in order of use
        self._penalty = self._prices()
        self.version = 0  # bumped whenever the penalty vector changes
        self._free = np.empty(0, dtype=np.int64)
        self._free_version = -1

    def begin_round(self, it: int) -> None:
        """Round ``it`` (0-based) begins: its price under annealing; a change bumps ``version``."""
        factor, rounds = self.anneal
        mu_now = self.mu * factor ** max(0.0, 1.0 - it / rounds) if factor != 1.0 else self.mu
        if mu_now != self._mu_now:
            self._mu_now = mu_now
            self._penalty = self._prices()
            self.version += 1

    def penalty(self) -> np.ndarray:
        """``mu * c_j * 1{bag(j) has no used feature}``, ``+inf`` where a budget forbids the first
        use (shared, do not modify)."""
        return self._penalty

    @property
    def full(self) -> bool:
        """Whether the budget is exhausted: no unused bag may enter Omega any more."""
        if self.max_features is not None and self.n_bags_used >= self.max_features:
            return True
        return self._unaffordable

    def _prices(self) -> np.ndarray:
        """The penalty vector of the current Omega (see :meth:`penalty`)."""
        used = self.bag_used[self.bag_of]
        if self.max_features is not None and self.n_bags_used >= self.max_features:
            return np.where(used, 0.0, np.inf)
        price = self._mu_now * self.costs
        if self.max_cost is not None:
            over = self.spent + self.costs > self.max_cost
            self._unaffordable = bool(np.all(used | over))
            price = np.where(over, np.inf, price)
        return np.where(used, 0.0, price)

    def allowed_features(self) -> np.ndarray | None:
        """Features a split may still use: None (all of them) or, once the budget is full, Omega.

        The split search scans only these, so a fit costs per tree ~K/d of a full scan after
        its budget fills.
        """
        return self.free_features() if self.full else None

    def free_features(self) -> np.ndarray:
        """Features of the used bags, i.e. GT-GBM's Omega (sorted; shared, do not modify).

        Without bags these are exactly the used features; with bags, once a bag is used all
        its features are "old" features (no penalty) and are searched at every node.
        """
        if self._free_version != self.version:
            self._free = np.flatnonzero(self.bag_used[self.bag_of]).astype(np.int64)
            self._free_version = self.version
        return self._free

    def mark_used(self, feature: int) -> bool:
        """Add ``feature`` to Omega; return True if its bag became used (its penalties drop to 0)."""
        if self.used[feature]:
            return False
        self.used[feature] = True
        self.order.append(int(feature))
        bag = self.bag_of[feature]
        if self.bag_used[bag]:
            return False
        self.bag_used[bag] = True
        self.n_bags_used += 1
        self.spent += float(self.costs[feature])
        self._penalty = self._prices()
        self.version += 1
        return True


def anneal_of(est) -> tuple[float, int]:
    """The ``anneal`` of :class:`FeatureUsage` an estimator asks for (``anneal_factor``,
    ``anneal_rounds``); none for an estimator without them."""
    return float(getattr(est, "anneal_factor", 1.0)), int(getattr(est, "anneal_rounds", 1))
