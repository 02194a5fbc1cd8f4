"""``history_`` records of :class:`gbfs.baselines.lightgbm_baseline.LightGBMBaseline` from LightGBM's
training loop.

Per-iteration metrics come from a LightGBM ``feval`` on the train and validation sets: LightGBM
hands it the probabilities it keeps up to date internally, so a record costs O(n), never a
re-prediction.  ``root_variance`` of tree ``it`` is the variance of the residuals (the negative
gradients) it was fitted to, i.e. at the train predictions after tree ``it - 1`` (for tree 0: at the
constant initial score); ``gain_normaliser`` A-GBM's divisor there.  Each task says which of these
:data:`ROOT_STATS` it has.
"""

from __future__ import annotations

import time

import lightgbm as lgb
import numpy as np

from ..booster.callbacks import CallbackEnv, EarlyStopException
from ..booster.losses.metrics import log_loss, roc_auc
from ..booster.normaliser import HESSIAN_FLOOR, gain_normaliser


def first_use_order(booster: lgb.Booster) -> list:
    """Booster feature indices in order of first use: trees in order, splits in pre-order."""
    order, seen = [], set()
    for tree in booster.dump_model()["tree_info"]:
        stack = [tree["tree_structure"]]
        while stack:
            node = stack.pop()
            if "split_feature" not in node:
                continue
            f = int(node["split_feature"])
            if f not in seen:
                seen.add(f)
                order.append(f)
            stack.extend((node["right_child"], node["left_child"]))  # left is popped first
    return order


#: the statistics of the residuals a tree is fitted to (``history_``'s ``root_variance`` and
#: ``gain_normaliser``, as the library's estimators record them): a task's ``feval`` reports them
#: on the training rows after tree ``it``, for tree ``it + 1``; a task records those that apply
ROOT_STATS = ("root_variance", "gain_normaliser")


def binary_root_stats(y: np.ndarray, p: np.ndarray, reg_lambda: float) -> dict:
    """The residuals' variance and A-GBM's Newton normaliser
    (:func:`gbfs.booster.normaliser.gain_normaliser`) at the probabilities ``p``: residuals ``y - p``,
    hessians ``p (1 - p)``."""
    g = y - p
    h = np.maximum(p * (1.0 - p), HESSIAN_FLOOR)
    return {"root_variance": float(np.var(g)),
            "gain_normaliser": gain_normaliser(float(g.sum()), float(h.sum()), float(np.sum(g * g / h)),
                                               reg_lambda)}


def root_metrics(stats: dict) -> list[tuple]:
    """``stats`` (:data:`ROOT_STATS`) as ``feval`` results (name, value, higher-is-better)."""
    return [(k, float(v), False) for k, v in stats.items()]


def history_feval(sets: list, reg_lambda: float):
    """Custom LightGBM metric of the binary baseline: loss, AUC, RMSE of probabilities and
    :func:`binary_root_stats` per data set."""

    def feval(preds, data):
        y = next(yv for ds, yv in sets if ds is data)
        resid = y - preds  # preds are probabilities: LightGBM converts them for built-in objectives
        return [("loss", log_loss(y, preds), False), ("auc", roc_auc(y, preds), True),
                ("rmse", float(np.sqrt(np.mean(resid ** 2))), False),
                *root_metrics(binary_root_stats(y, preds, reg_lambda))]

    return feval


class Recorder:
    """LightGBM callback that builds ``history_`` records and runs the gbfs-style callbacks."""

    order = 0

    def __init__(self, model, callbacks, end_iteration: int, root: dict):
        self.model, self.callbacks, self.end_iteration = model, callbacks, end_iteration
        self.history, self.best_iteration, self.n_splits = [], None, 0
        # the task's ROOT_STATS at LightGBM's constant initial score (boost_from_average), for tree 0
        self.root = dict(root)
        self.start = time.perf_counter()

    def __call__(self, env) -> None:
        it, booster = env.iteration, env.model
        if booster.current_iteration() <= it:
            # LightGBM found no split and dropped the tree: nothing more can be learned
            raise lgb.callback.EarlyStopException(it - 1, env.evaluation_result_list)
        imp = booster.feature_importance("split", iteration=it + 1)
        splits = int(imp.sum())
        rec = {"iteration": it, "elapsed_seconds": time.perf_counter() - self.start, **self.root,
               "n_features_used": int(np.count_nonzero(imp)),
               "n_leaves": splits - self.n_splits + 1}
        self.n_splits = splits
        for r in env.evaluation_result_list:
            if r.metric_name not in ROOT_STATS:
                rec[f"{r.dataset_name}_{r.metric_name}"] = float(r.metric_value)
            elif r.dataset_name == "train" and r.metric_name in self.root:  # what the next tree fits
                self.root[r.metric_name] = float(r.metric_value)
        self.history.append(rec)
        try:
            for cb in self.callbacks:
                cb(CallbackEnv(model=self.model, iteration=it, record=rec, history=self.history,
                               end_iteration=self.end_iteration))
        except EarlyStopException as stop:  # as GBFSClassifier: stop and keep trees 0..best
            self.best_iteration = min(max(int(stop.best_iteration), 0), it)
            raise lgb.callback.EarlyStopException(self.best_iteration, env.evaluation_result_list) from stop
