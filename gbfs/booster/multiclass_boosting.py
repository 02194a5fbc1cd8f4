"""Multiclass boosting: one tree per class per round on the softmax gradient, one Omega.

Each round fixes every row's softmax normaliser (:class:`gbfs.booster.losses.softmax.RoundScores`), then grows
the classes' trees in class order, each a :class:`~gbfs.booster.tree_step.TreeStep` on its class's
residuals ``1{y = k} - p_k`` (Friedman's multiclass boosting; LightGBM's ``multiclass``).  All
trees are grown against one :class:`~gbfs.booster.usage.Usage`: a feature is paid for once for the whole
model, as the multitask penalty of the GT-GBM paper's Eq. 2 pays once for all tasks
(``mu_t = 0``), and the next class's tree already sees it as free.  The classes share one grower
(its histogram pool and feature search), so memory does not grow with the number of classes.

The trees come back round-major (tree ``i`` belongs to class ``i % K``, LightGBM's order) and
``history`` has one record per round: ``{set}_loss`` (multiclass log-loss), ``{set}_auc`` (macro
one-vs-rest AUC) and ``{set}_accuracy``, and the trees' statistics (:func:`_round_stats`).
"""

from __future__ import annotations

import functools

import numpy as np

from .growing.feature_search import FeatureSearch
from .growing.grower import TreeGrower
from .losses.softmax import ClassGradient, RoundScores, SoftmaxLoss
from .rounds import BoostingParams, BoostingResult, Slot, records, run_rounds
from .tree import PackedEnsemble, Tree
from .tree_step import TreeStep
from .usage import Usage


class SoftmaxEvaluator:
    """Running ``(n, K)`` raw scores of one data set and its multiclass metrics."""

    def __init__(self, name: str, X_binned: np.ndarray, codes: np.ndarray, init: np.ndarray,
                 loss: SoftmaxLoss, metrics: str = "all"):
        self.name, self.X_binned, self.codes, self.loss, self.metrics = name, X_binned, codes, loss, metrics
        self.raw = np.tile(init, (codes.shape[0], 1))
        self._col = np.empty(codes.shape[0])

    def add_tree(self, tree: Tree, k: int) -> None:
        self._col[:] = 0.0
        PackedEnsemble.of_tree(tree).predict_binned(self.X_binned, self._col)
        self.raw[:, k] += self._col

    def record(self, rec: dict) -> None:
        if not records(self.metrics, "loss"):
            return
        rec[f"{self.name}_loss"] = self.loss.loss(self.codes, self.raw)
        if records(self.metrics, "all"):
            rec.update({f"{self.name}_{k}": v for k, v in self.loss.metrics(self.codes, self.raw).items()})


def boost_softmax(X_binned, y, bin_mapper, params: BoostingParams, usage: Usage, evals=(), callbacks=(),
                  model=None, search: FeatureSearch | None = None, sample_rng=None) -> BoostingResult:
    """Fit ``params.n_estimators`` rounds of one tree per class of ``params.loss`` (a :class:`SoftmaxLoss`).

    Parameters are those of :func:`gbfs.booster.boosting.boost`, with ``y`` (and every eval set's labels)
    the class codes ``0 .. K-1`` as floats.  The result's ``init_score`` is the array of the
    classes' initial scores and its ``trees`` are round-major.
    """
    loss = params.loss
    K = loss.n_classes
    codes = y.astype(np.int64)
    shared = RoundScores(loss, codes)
    grower = TreeGrower(X_binned, bin_mapper, params.growth, search)
    steps = [TreeStep(X_binned, (codes == k).astype(np.float64), bin_mapper, params, search, sample_rng,
                      loss=ClassGradient(shared, k), grower=grower) for k in range(K)]
    train = SoftmaxEvaluator("train", X_binned, codes, shared.init, loss, params.train_metrics)
    evaluators = [SoftmaxEvaluator(name, Xb, yv.astype(np.int64), shared.init, loss)
                  for name, Xb, yv in evals]
    plan = Softmax(steps, usage, shared, grower, train, evaluators)
    per_class, history, best_iteration = run_rounds(plan, params, callbacks, model)
    trees = [tree for round_trees in zip(*per_class) for tree in round_trees]  # round-major
    return BoostingResult(trees, shared.init.copy(), history, best_iteration)


class Softmax:
    """The plan of multiclass boosting: one slot per class against the one Omega, the softmax
    normalisers fixed at each round's start."""

    def __init__(self, steps: list[TreeStep], usage: Usage, shared: RoundScores, grower: TreeGrower,
                 train: SoftmaxEvaluator, evaluators: list[SoftmaxEvaluator]):
        self.steps, self.usage, self.shared, self.grower = steps, usage, shared, grower
        self.train, self._evals = train, evaluators
        self.slots = [Slot(step, usage, functools.partial(self._add_tree, k)) for k, step in enumerate(steps)]
        self.evaluators = [train, *evaluators]

    def _add_tree(self, k: int, tree: Tree) -> None:
        for ev in self._evals:
            ev.add_tree(tree, k)
        self.train.raw[:, k] = self.steps[k].raw

    def start_round(self) -> None:
        self.shared.start_round([s.raw for s in self.steps])

    def record(self, it: int, seconds: float, stats: list[dict]) -> dict:
        return {"iteration": it, "elapsed_seconds": seconds, **_round_stats(stats),
                "n_features_used": len(self.usage.order)}

    def release(self) -> None:
        self.grower.release_buffers()


def _round_stats(per_class: list[dict]) -> dict:
    """A round's tree statistics: the classes' mean root variance and gain normaliser, each
    class's gain normaliser (``gain_normaliser_class{k}``: A-GBM divides class ``k``'s gains by
    it, so a normalised gain of its tree needs it), their total number of leaves (and of sampled
    rows)."""
    out = {"root_variance": float(np.mean([s["root_variance"] for s in per_class])),
           "gain_normaliser": float(np.mean([s["gain_normaliser"] for s in per_class])),
           **{f"gain_normaliser_class{k}": float(s["gain_normaliser"]) for k, s in enumerate(per_class)},
           "n_leaves": int(sum(s["n_leaves"] for s in per_class))}
    if "n_rows_sampled" in per_class[0]:
        out["n_rows_sampled"] = int(sum(s["n_rows_sampled"] for s in per_class))
    return out
