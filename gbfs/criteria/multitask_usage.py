"""Omega of multitask boosting: the group set Omega_G and one set Omega_t per task.

The GT-GBM paper's Eq. 2 charges a split of task ``t``'s tree on feature ``j``
``mu_G * 1{j not in Omega_G} + mu_t * 1{j not in Omega_t}``: a feature no task uses yet costs
both, one another task already uses costs only ``mu_t``, one this task uses is free.  Algorithm 1
adds every feature a task's tree uses to both sets.  Costs ``c_j`` multiply both terms and bags
apply to both sets, as in the single-task :class:`~gbfs.criteria.penalty.FeatureUsage`; the budget
``max_features`` and ``max_cost`` cap Omega_G (the features of the whole model).

``mu_t = 0`` is GroupSparse (one set of features for all tasks); ``mu_G = 0`` selects features
for each task independently; with one task the sets coincide and the charge is ``mu_G + mu_t``.
"""

from __future__ import annotations

import numpy as np

from .penalty import FeatureUsage


class MultitaskUsage:
    """Omega_G and Omega_1..Omega_T; :meth:`task` gives the :class:`~gbfs.booster.usage.Usage` a task's
    tree grows against.

    Parameters
    ----------
    n_features, n_tasks : int
    mu_group, mu_task : float
        ``mu_G`` and ``mu_t`` of Eq. 2.
    costs, bags, max_features, max_cost
        As for :class:`~gbfs.criteria.penalty.FeatureUsage` (the budgets bound Omega_G).
    """

    def __init__(self, n_features: int, n_tasks: int, mu_group: float, mu_task: float,
                 costs: np.ndarray | None = None, bags: np.ndarray | None = None,
                 max_features: int | None = None, max_cost: float | None = None):
        self.group = FeatureUsage(n_features, mu_group, costs, bags, max_features, max_cost)
        self.mu_task = float(mu_task)
        self.task_price = self.mu_task * self.group.costs
        n_bags = self.group.bag_used.shape[0]
        self.task_bag_used = np.zeros((n_tasks, n_bags), dtype=bool)
        self.task_used = np.zeros((n_tasks, n_features), dtype=bool)
        self.task_order: list[list[int]] = [[] for _ in range(n_tasks)]
        self.version = 0  # bumped whenever any task's penalty vector changes
        self._views = [TaskUsage(self, t) for t in range(n_tasks)]

    @property
    def order(self) -> list[int]:
        """Omega_G in order of first use."""
        return self.group.order

    def task(self, t: int) -> TaskUsage:
        return self._views[t]

    def mark_used(self, task: int, feature: int) -> bool:
        """Add ``feature`` to Omega_G and Omega_task (Algorithm 1, lines 9-10); True if a penalty
        changed."""
        changed = self.group.mark_used(feature)
        if not self.task_used[task, feature]:
            self.task_used[task, feature] = True
            self.task_order[task].append(int(feature))
            bag = self.group.bag_of[feature]
            if not self.task_bag_used[task, bag]:
                self.task_bag_used[task, bag] = True
                changed = True
        if changed:
            self.version += 1
        return changed


class TaskUsage:
    """Task ``t``'s view of a :class:`MultitaskUsage`: the Eq. 2 penalty vector of its trees."""

    def __init__(self, parent: MultitaskUsage, t: int):
        self.parent, self.t = parent, t
        self._penalty = None
        self._penalty_version = -1

    @property
    def version(self) -> int:
        return self.parent.version

    @property
    def full(self) -> bool:
        return self.parent.group.full

    @property
    def order(self) -> list[int]:
        return self.parent.group.order

    def penalty(self) -> np.ndarray:
        """``mu_G c_j 1{bag(j) not in Omega_G} + mu_t c_j 1{bag(j) not in Omega_t}`` (``+inf`` for
        a bag outside a full budget); shared, do not modify."""
        p = self.parent
        if self._penalty_version != p.version:
            group = p.group.penalty()
            if p.mu_task == 0.0:  # GroupSparse: exactly the single-task vector
                self._penalty = group
            else:
                self._penalty = group + np.where(p.task_bag_used[self.t][p.group.bag_of], 0.0, p.task_price)
            self._penalty_version = p.version
        return self._penalty

    def free_features(self) -> np.ndarray:
        """Omega_G (with bags: the features of its bags), which GT-GBM scans at every node: the
        features of Omega_t are all in it."""
        return self.parent.group.free_features()

    def allowed_features(self) -> np.ndarray | None:
        return self.parent.group.allowed_features()

    def mark_used(self, feature: int) -> bool:
        return self.parent.mark_used(self.t, feature)

    def begin_round(self, it: int) -> None:
        """Nothing: a multitask round begins on Omega_G (``MultitaskUsage.group``), the plan's usage."""
