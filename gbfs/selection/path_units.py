"""What the selection path's budgets count: features (or bags), or their cost.

A unit says how large a feature set is, which first features of a ranking fit in a budget, and
when a set fills a budget (no further feature fits).  The path's probes, candidates and choice
are written against it, so budgets of features and budgets in cost units share one search.
"""

from __future__ import annotations

import numpy as np

from ..criteria.refit import within_cost


class Count:
    """Budgets count features, or bags of features with ``feature_bags``: a bag is paid once."""

    exact = True  # a budget of K can be hit exactly (smaller selections serve smaller budgets)

    def __init__(self, bag_of: np.ndarray, bags: bool):
        self.bag_of = bag_of
        self.name = "bags" if bags else "features"

    def size(self, features) -> float:
        return float(len({int(self.bag_of[f]) for f in features}))

    def prefix(self, order, budget: float) -> np.ndarray:
        """The first features of ``order`` that use at most ``budget`` bags."""
        out, bags = [], set()
        for f in order:
            b = int(self.bag_of[f])
            if b not in bags and len(bags) == budget:
                break
            bags.add(b)
            out.append(int(f))
        return np.asarray(out, dtype=np.int64)

    def fills(self, features, budget: float) -> bool:
        return self.size(features) >= budget

    def probe_params(self, budget: float) -> dict:
        """A probe stops as soon as it has selected this budget (``max_features``)."""
        return {"max_features": int(budget)}


class Cost:
    """Budgets in cost units: a set's size is the sum of its features' ``feature_costs``."""

    exact = False  # costs rarely add up to a budget: every answer is "at most"
    name = "cost"

    def __init__(self, costs: np.ndarray):
        self.costs = np.asarray(costs, dtype=np.float64)

    def size(self, features) -> float:
        total = 0.0
        for f in features:  # in the order given, as FeatureUsage spends the budget
            total += float(self.costs[f])
        return total

    def prefix(self, order, budget: float) -> np.ndarray:
        """The features of ``order`` taken while their cost fits in what is left of ``budget``; one
        that does not fit is passed over for later ones that do (:func:`gbfs.criteria.refit.within_cost`)."""
        return within_cost(np.asarray(order, dtype=np.int64), self.costs, budget)

    def fills(self, features, budget: float) -> bool:
        """``features`` fill ``budget`` when no other feature fits in what is left of it."""
        spent = self.size(features)
        rest = np.delete(self.costs, np.asarray(list(features), dtype=np.int64))
        return spent >= budget or rest.size == 0 or spent + float(rest.min()) > budget

    def probe_params(self, budget: float) -> dict:
        """A probe stops as soon as no further feature fits in the budget (``max_cost``)."""
        return {"max_cost": float(budget), "max_features": None}
