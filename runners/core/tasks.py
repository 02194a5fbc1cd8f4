"""What a method's data is fitted and scored by: the :class:`Task` of its estimator kind.

Every estimator kind of :data:`runners.core.experiment.ESTIMATORS` names its task, the ``Dataset.task``
it fits.  The task says how a model is fitted on a dataset's train split (validation as its eval
set), what it predicts and how a split's predictions are scored, under the metric names every method
of the task shares (``val_<name>`` and ``test_<name>``); which validation score tuning maximises,
pruning reads and the progress bar shows (the first of ``val_metrics``); and which per-iteration
records of ``history_`` are logged as curves.  Binary classification is :data:`BINARY` (here),
learning to rank :data:`runners.core.ranking_eval.RANKING`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from omegaconf import DictConfig

from gbfs.booster.losses.metrics import log_loss, rmse, roc_auc
from gbfs.data import Dataset
from runners.tracking.run_log import CURVES


@dataclass(frozen=True)
class Task:
    """How the models of one kind of data are fitted, predict and are scored.

    ``fit(est, ds, callbacks)`` fits on ``ds``'s train split with its validation split as the eval
    set; ``predict(est, X)`` is what a split is scored on; ``scores(ds, split, prediction)`` the
    split's scores by unprefixed name (``auc``; logged as ``val_auc``, ``test_auc``);
    ``val_metrics`` the validation metrics a tuning trial keeps, the first being the score it
    maximises; ``curves`` the records of ``history_`` logged by iteration, by metric name
    (:func:`named`: ``val_ndcg@10`` is ``val_ndcg_at_10``); ``check(cfg)`` raises
    ``ValueError`` naming the key on a setting the task cannot run, before any run exists."""

    name: str
    fit: Callable[[object, Dataset, Sequence], None]
    predict: Callable[[object, np.ndarray], np.ndarray]
    scores: Callable[[Dataset, str, np.ndarray], dict[str, float]]
    val_metrics: tuple[str, ...]
    curves: tuple[str, ...]
    check: Callable[[DictConfig], None] = lambda cfg: None

    @property
    def score(self) -> str:
        """The validation score tuning maximises (``val_auc``, ``val_ndcg_at_10``)."""
        return self.val_metrics[0]


def metric_name(key: str) -> str:
    """A key of a model's ``history_`` as an MLflow metric name, which allows no ``@``:
    ``val_ndcg@10`` (``GBFSRanker``'s) is ``val_ndcg_at_10``; other keys are unchanged."""
    return key.replace("@", "_at_")


def named(record: Mapping[str, float]) -> dict[str, float]:
    """A ``history_`` record (or a callback's ``env.record``) under the metric names (:func:`metric_name`)."""
    return {metric_name(k): v for k, v in record.items()}


def _fit_binary(est, ds: Dataset, callbacks: Sequence) -> None:
    extra = {"callbacks": list(callbacks)} if callbacks else {}   # an estimator may take none
    est.fit(ds.X_train, ds.y_train, eval_set=(ds.X_val, ds.y_val), **extra)


def _positive_proba(est, X: np.ndarray) -> np.ndarray:
    return est.predict_proba(X)[:, 1]


def _binary_scores(ds: Dataset, split: str, proba: np.ndarray) -> dict[str, float]:
    """ROC AUC and RMSE of the probabilities (the GT-GBM paper's Table 3), on test also log-loss."""
    y = ds.split(split)[1]
    out = {"auc": roc_auc(y, proba), "rmse": rmse(y, proba)}
    if split == "test":
        out["logloss"] = log_loss(y, proba)
    return out


#: binary classification: the probability of label 1, scored by AUC and RMSE
BINARY = Task("binary", _fit_binary, _positive_proba, _binary_scores, ("val_auc", "val_rmse"), CURVES)
