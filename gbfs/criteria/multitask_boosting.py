"""Multitask boosting: Algorithm 1 of the GT-GBM paper.

Every round grows one tree per task, in task order, each on that task's rows only and fitted to that
task's residuals (lines 5-8), with the Eq. 2 penalty ``mu_G 1{j not in Omega_G} + mu_t 1{j not in
Omega_t}`` on the method's criterion (A-GBM's normalised gain; GT-GBM's group-test candidates).
Omega_G and Omega_t (:class:`~gbfs.criteria.multitask_usage.MultitaskUsage`) are updated as each task's tree
uses features (lines 9-10) -- split by split, as in the single-task booster, so the next split of
the same tree already sees the lower price.

Each task is a :class:`~gbfs.booster.tree_step.TreeStep` over its own compact copy of its binned rows, so a
round costs what the independent per-task trees cost.  ``history`` has one record per round: the
task-size-weighted "Total" of every metric (the paper's Figures 4-5) and each task's own
(``{set}_{metric}_task{t}``, ``t`` the task's position in ``tasks_``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..booster.losses.metrics import task_weighted
from ..booster.rounds import BoostingParams, BoostingResult, Evaluator, Slot, run_rounds
from ..booster.tree_step import TreeStep
from .multitask_usage import MultitaskUsage


@dataclass
class TaskData:
    """One task's training rows (binned, Fortran-ordered) and labels, and its eval sets."""

    X_binned: np.ndarray
    y: np.ndarray
    evals: list  # (name, X_binned, y)
    search: object | None = None  # its FeatureSearch (GT-GBM: over its own precompute)
    sample_rng: np.random.Generator | None = None


def boost_multitask(tasks: list[TaskData], bin_mapper, params: BoostingParams, usage: MultitaskUsage,
                    callbacks=(), model=None) -> list[BoostingResult]:
    """Fit ``params.n_estimators`` rounds of one tree per task; returns one result per task (all
    sharing the round-level ``history`` and ``best_iteration``)."""
    plan = Multitask(tasks, [TreeStep(t.X_binned, t.y, bin_mapper, params, t.search, t.sample_rng)
                             for t in tasks], usage)
    trees, history, best_iteration = run_rounds(plan, params, callbacks, model)
    return [BoostingResult(tr, step.init_score, history, best_iteration)
            for tr, step in zip(trees, plan.steps)]


class Multitask:
    """The plan of multitask boosting: one slot per task, each on its own rows against its view of
    (Omega_G, Omega_t); a round's record holds every task's metrics and their weighted Total."""

    def __init__(self, tasks: list[TaskData], steps: list[TreeStep], usage: MultitaskUsage):
        self.tasks, self.steps, self.multitask = tasks, steps, usage
        self.usage = usage.group
        self.evaluators = ()  # every task's metrics are in its part of the record
        self._train = []
        for step, t in zip(steps, tasks):
            ev = Evaluator("train", t.X_binned, t.y, step.init_score, step.loss, step.params.train_metrics)
            ev.raw = step.raw  # updated through the partition, not re-predicted
            self._train.append(ev)
        self._evals = [[Evaluator(name, Xb, yv, step.init_score, step.loss) for name, Xb, yv in t.evals]
                       for step, t in zip(steps, tasks)]
        self.slots = [Slot(step, usage.task(t), functools.partial(self._add_tree, t))
                      for t, step in enumerate(steps)]

    def _add_tree(self, t: int, tree) -> None:
        for ev in self._evals[t]:
            ev.add_tree(tree)

    def start_round(self) -> None:
        pass

    def record(self, it: int, seconds: float, stats: list[dict]) -> dict:
        per_task = []
        for t, st in enumerate(stats):
            rec = dict(st)
            self._train[t].record(rec)
            for ev in self._evals[t]:
                ev.record(rec)
            per_task.append(rec)
        return _round_record(it, seconds, per_task, self.tasks, self.multitask)

    def release(self) -> None:
        for step in self.steps:
            step.release()


def _round_record(it: int, seconds: float, per_task: list[dict], tasks: list[TaskData],
                  usage: MultitaskUsage) -> dict:
    """A round's record: each task's metrics and statistics suffixed ``_task{t}``, and the Total of
    every metric weighted by the task's number of rows in that set."""
    rec = {"iteration": it, "elapsed_seconds": seconds, "n_features_used": len(usage.order),
           "n_leaves": sum(r["n_leaves"] for r in per_task)}
    sizes = {"train": [t.y.shape[0] for t in tasks]}
    for k, (name, _, _) in enumerate(tasks[0].evals):
        sizes[name] = [t.evals[k][2].shape[0] for t in tasks]
    for key in per_task[0]:
        values = [r[key] for r in per_task]
        set_name = key.split("_")[0]
        if set_name in sizes:
            rec[key] = task_weighted(values, sizes[set_name])
        for t, v in enumerate(values):
            rec[f"{key}_task{t}"] = v
    for t in range(len(tasks)):
        rec[f"n_features_used_task{t}"] = len(usage.task_order[t])
    return rec
