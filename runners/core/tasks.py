"""What a method's data is fitted and scored by: the :class:`Task` of its estimator kind.

Every estimator kind of :data:`runners.core.experiment.ESTIMATORS` names its task, the ``Dataset.task``
it fits.  The task says how a model is fitted on a dataset's train split (validation as its eval
set), what it predicts and how a split's predictions are scored, under the metric names every method
of the task shares (``val_<name>`` and ``test_<name>``); which validation score tuning maximises,
pruning reads and the progress bar shows (the first of ``val_metrics``); and which per-iteration
records of ``history_`` are logged as curves.  Binary classification is :data:`BINARY`, multiclass
:data:`MULTICLASS`, regression :data:`REGRESSION` (here), learning to rank
:data:`runners.core.ranking_eval.RANKING`.

A method serves a task through its ``method.estimator``: a kind of that task, or one the task maps
to its own (``Task.serves``: ``gbfs`` is ``GBFSRegressor`` on a regression, ``lightgbm`` LightGBM's
``multiclass``, ``regression`` or ``lambdarank`` objective).  :func:`data_task` is the task of a
config's data (``dataset=file``: detected from the file unless ``dataset.task`` names it) and
:func:`with_task` the config with the data's task and the method's estimator of that task.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import hydra.utils
import numpy as np
from omegaconf import DictConfig, OmegaConf, open_dict
from sklearn.metrics import r2_score

from gbfs.booster.losses.metrics import log_loss, rmse, roc_auc
from gbfs.booster.losses.softmax import proba_scores
from gbfs.data import Dataset
from gbfs.data.reading import files
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
    ``ValueError`` naming the key on a setting the task cannot run, before any run exists;
    ``serves`` the ``method.estimator`` of another task's kind -> ``(its kind for this task, its
    class)``; ``methods`` the method names that serve it, for the errors."""

    name: str
    fit: Callable[[object, Dataset, Sequence], None]
    predict: Callable[[object, np.ndarray], np.ndarray]
    scores: Callable[[Dataset, str, np.ndarray], dict[str, float]]
    val_metrics: tuple[str, ...]
    curves: tuple[str, ...]
    check: Callable[[DictConfig], None] = lambda cfg: None
    serves: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    methods: str = "agbm, gbfs, gtgbm, gbfs_topk, gbdt_full, gbdt_topk or lgbm_cegb"

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


def _proba(est, X: np.ndarray) -> np.ndarray:
    return est.predict_proba(X)


def _multiclass_scores(ds: Dataset, split: str, proba: np.ndarray) -> dict[str, float]:
    """Accuracy of the most probable class, macro one-vs-rest AUC and multiclass log-loss
    (:func:`gbfs.booster.losses.softmax.proba_scores`)."""
    s = proba_scores(ds.split(split)[1].astype(np.int64), proba)
    return {"accuracy": s["accuracy"], "macro_auc": s["auc"], "logloss": s["loss"]}


def _value(est, X: np.ndarray) -> np.ndarray:
    return est.predict(X)


def _regression_scores(ds: Dataset, split: str, pred: np.ndarray) -> dict[str, float]:
    """RMSE and R² of the predictions; R² orders models as RMSE does (on the same rows), so tuning
    maximises it."""
    y = ds.split(split)[1]
    return {"rmse": rmse(y, pred), "r2": float(r2_score(y, pred))}


_LGBM = "gbfs.baselines.lightgbm_tasks."
#: more than two classes: the class probabilities, scored by accuracy, macro AUC and log-loss
MULTICLASS = Task("multiclass", _fit_binary, _proba, _multiclass_scores, ("val_accuracy", "val_macro_auc"),
                  ("val_accuracy", "val_loss", "root_variance", "elapsed_seconds"),
                  serves={"gbfs": ("gbfs_multiclass", "gbfs.GBFSClassifier"),
                          "lightgbm": ("lightgbm_multiclass", _LGBM + "LightGBMMulticlassBaseline")})
#: a real-valued target: predictions scored by RMSE and R² (tuning maximises ``val_r2``)
REGRESSION = Task("regression", _fit_binary, _value, _regression_scores, ("val_r2", "val_rmse"),
                  ("val_rmse", "val_loss", "root_variance", "elapsed_seconds"),
                  serves={"gbfs": ("gbfs_regressor", "gbfs.GBFSRegressor"),
                          "lightgbm": ("lightgbm_regression", _LGBM + "LightGBMRegressionBaseline")})


def data_task(cfg: DictConfig) -> str:
    """The task of ``cfg.dataset``: its ``dataset.task`` (binary when it has none), or for
    ``dataset=file`` with ``task: auto`` the task of the file (:func:`gbfs.data.reading.files.file_task`,
    parsed once and cached); a given ``dataset.task`` is checked against the file.  A file that is
    missing is left to :func:`runners.core.experiment.check_dataset`'s error.

    Raises
    ------
    ValueError
        Naming ``dataset.task`` when the file cannot be read as the task given.
    """
    d = cfg.dataset
    task = str(d.get("task") or "binary")
    if d.name != files.NAME or OmegaConf.is_missing(d, "path") or d.get("path") is None:
        return task
    path = hydra.utils.to_absolute_path(str(d.path))
    if not os.path.isfile(path):
        return task
    query, test, cat = d.get("query_path"), d.get("test_path"), d.get("categorical", "auto")
    test = None if test is None else hydra.utils.to_absolute_path(str(test))
    return files.file_task(path, d.get("target"), test,
                           None if query is None else hydra.utils.to_absolute_path(str(query)), task,
                           root=cfg.paths.data_dir, argument="dataset.task",
                           categorical=cat if isinstance(cat, str) else [str(c) for c in cat])


def with_task(cfg: DictConfig, kind_tasks: Mapping[str, str], registry: Mapping[str, Task]) -> DictConfig:
    """``cfg`` with ``dataset.task`` the data's task (:func:`data_task`) and, when ``method.estimator``
    (whose task is ``kind_tasks[estimator]``) is of another task that ``registry[task].serves``, the
    method's estimator and class of that task; other mismatches are left to the checks' errors."""
    try:
        task = data_task(cfg)
    except (ValueError, FileNotFoundError):   # the checks raise it again, in their order
        return cfg
    estimator = cfg.method.get("estimator")
    cfg = cfg.copy()
    with open_dict(cfg):
        cfg.dataset.task = task
        served = registry[task].serves.get(str(estimator)) if task in registry else None
        if kind_tasks.get(str(estimator), task) != task and served is not None:
            cfg.method.estimator, cfg.method._target_ = served
    return cfg


def task_mismatch(cfg: DictConfig, method_task: str, data_task: str, registry: Mapping[str, Task]) -> str:
    """The error of a method that does not serve the data's task, naming the methods that do."""
    m, d = cfg.method, cfg.dataset
    served = registry[data_task].methods if data_task in registry else "none"
    return (f"dataset {d.name!r} is {data_task} data (dataset.task: {data_task}): method {m.name!r} "
            f"(method.estimator: {m.estimator}) fits {method_task} data and does not serve the "
            f"{data_task} task; the methods of the {data_task} task: method={served}")
