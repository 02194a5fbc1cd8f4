"""Fit and score one ranking model: what :mod:`runners.core.experiment` does for the ``rank_*`` methods.

A ranking method (``EstimatorKind.task == "ranking"``, :class:`gbfs.GBFSRanker`) is fitted on whole
query groups, ``fit(X, y, group, eval_set=(X_val, y_val, group_val))`` with the query sizes the
:class:`gbfs.data.Dataset` carries for every split, and scored per query by the library's own
NDCG@10, MRR and precision@2 (:func:`gbfs.booster.losses.ranking.ndcg_at`,
:func:`gbfs.booster.losses.ranking.mrr`, :func:`gbfs.booster.losses.ranking.precision_at`; no other
implementation).
Its runs log, besides the metrics every run logs (``n_selected_features``, ``fit_seconds``,
``predict_seconds``, ``precompute_seconds``, ``relevant_selected`` on the stand-in, ...):

* ``val_ndcg_at_10`` (the score tuning maximises and pruning reads), ``val_mrr``,
  ``val_precision_at_2``, ``test_ndcg_at_10``, ``test_mrr``, ``test_precision_at_2``;
* the curves ``val_ndcg_at_10``, ``val_mrr``, ``root_variance`` and ``elapsed_seconds`` by iteration
  (``GBFSRanker.history_``'s ``val_ndcg@10``: MLflow's metric names allow no ``@``, so the harness
  says ``_at_``, :func:`runners.core.tasks.metric_name`).

Ranking data has ``dataset.task: ranking`` in its config: ``dataset=ranking_like`` (the stand-in,
:mod:`gbfs.data.synthetic.ranking`) or ``dataset=ranking_file`` (a LIBSVM file with ``qid:`` or a
LightGBM ``.query`` file of group sizes, :mod:`gbfs.data.reading.ranking_files`; whole queries go to test,
validation and train, and ``dataset.scale`` keeps a seeded share of each split's queries).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

import hydra.utils
import numpy as np
from omegaconf import DictConfig, OmegaConf

from gbfs.booster.losses.ranking import group_offsets, mrr, ndcg_at, precision_at
from gbfs.data import Dataset, split_queries
from gbfs.data.reading import ranking_files
from runners.core import budget
from runners.core.tasks import Task

#: ``Dataset.task`` and ``dataset.task`` of ranking data
TASK = "ranking"
#: the k of the logged NDCG@k and of the tuning score (``method.params.eval_at`` must agree)
EVAL_AT = 10
#: NDCG@k's name in metrics (``val_ndcg_at_10``): MLflow's metric names allow no ``@``
NDCG = f"ndcg_at_{EVAL_AT}"
#: the k of precision@k (the GT-GBM paper's Table 7: "prec@k=2") and its metric name
PRECISION_AT = 2
PRECISION = f"precision_at_{PRECISION_AT}"
#: ``dataset.name`` of a ranking file of one's own (conf/dataset/ranking_file.yaml)
FILE = "ranking_file"
#: the ranking methods, for the error that a binary method met ranking data
METHODS = ("rank_gbdt_full, rank_gbfs, rank_agbm, rank_gtgbm or rank_gbdt_topk (and LightGBM's lambdarank: "
           "gbdt_full, gbdt_topk or lgbm_cegb)")
#: the files of ``dataset=ranking_file`` besides ``path`` (each optional)
_FILE_KEYS = ("query_path", "test_path", "test_query_path")


def task_mismatch(cfg: DictConfig, method_task: str, data_task: str) -> str:
    """The error of a method of one task on data of another, naming the settings."""
    m, d = cfg.method, cfg.dataset
    if method_task == TASK:
        return (f"method {m.name!r} is a ranking method (method.estimator: {m.estimator}): it needs ranking "
                f"data (dataset.task: ranking, e.g. dataset=ranking_like or dataset=ranking_file), got "
                f"dataset={d.name} (dataset.task: {data_task})")
    return (f"dataset {d.name!r} is ranking data (dataset.task: {data_task}): method {m.name!r} "
            f"(method.estimator: {m.estimator}) fits {method_task} labels; use a ranking method: "
            f"method={METHODS}")


def check_config(cfg: DictConfig) -> None:
    """``ValueError`` naming the key, before any run exists: ``method.params.eval_at`` other than
    :data:`EVAL_AT`, GBDT-topK (``method: topk``) without its K (``method.params.max_features``,
    unless ``tune.budget_mode=hard`` gives it), ``stability.enabled`` (its subsamples of rows would
    split queries), and for ``dataset=ranking_file`` a missing ``dataset.path`` or a file that does
    not exist."""
    params = cfg.method.params
    eval_at = params.get("eval_at", EVAL_AT)
    if eval_at != EVAL_AT:
        raise ValueError(f"method.params.eval_at must be {EVAL_AT}: the runs log NDCG@{EVAL_AT} and tuning "
                         f"maximises it (val_{NDCG}); got {eval_at!r}")
    if params.get("method") == "topk" and params.get("max_features") is None \
            and not budget.is_hard(cfg.get("tune") or {}):
        raise ValueError(f"method.params.max_features must be set: {cfg.method.name} keeps the top K "
                         f"features (e.g. method.params.max_features=6), or give K by "
                         f"tune.budget_mode=hard tune.feature_budget=K")
    if cfg.get("stability") and cfg.stability.get("enabled"):
        raise ValueError(f"stability.enabled: the selection stability of a ranking method "
                         f"({cfg.method.name!r}) is not measured (its row subsamples would split queries); "
                         f"set stability.enabled=false")
    d = cfg.dataset
    if d.name not in (FILE, "file"):
        return
    if OmegaConf.is_missing(d, "path") or d.get("path") is None:
        raise ValueError("dataset.path must name your ranking file, e.g. dataset=ranking_file "
                         "dataset.path=train.txt (LIBSVM with qid:, or with a train.txt.query file)")
    for key, path in file_args(d).items():
        if isinstance(path, str) and not os.path.isfile(path):
            raise ValueError(f"dataset.{key}: no such file {path!r} (a relative path is taken from where "
                             f"you run)")


def file_args(d: DictConfig) -> dict[str, str | None]:
    """``dataset=ranking_file``'s files, absolute (relative ones are taken from where the command runs)."""
    out = {"path": hydra.utils.to_absolute_path(str(d.path))}
    for key in _FILE_KEYS:
        value = d.get(key)
        if key == "test_query_path" and value is None and d.get("test_path") is not None \
                and os.path.isfile(f"{hydra.utils.to_absolute_path(str(d.test_path))}.query"):
            value = f"{d.test_path}.query"   # LightGBM's layout: the test file's sizes next to it
        out[key] = None if value is None else hydra.utils.to_absolute_path(str(value))
    return out


def load_file(d: DictConfig, seed: int) -> Dataset:
    """``dataset=ranking_file`` (:func:`gbfs.data.reading.ranking_files.load`: whole queries to test,
    validation
    and train, seeded), then a seeded ``dataset.scale`` share of each split's queries."""
    ds = ranking_files.load(**file_args(d), test_fraction=float(d.test_fraction),
                            val_fraction=float(d.val_fraction), seed=seed)
    share = float(d.scale)
    if share >= 1.0:
        return ds
    kept = {}
    for k, split in enumerate(("train", "val", "test")):
        X, y, group = keep_queries(getattr(ds, f"X_{split}"), getattr(ds, f"y_{split}"),
                                   getattr(ds, f"group_{split}"), share, seed + k)
        kept.update({f"X_{split}": X, f"y_{split}": y, f"group_{split}": group})
    return dataclasses.replace(ds, **kept)


def keep_queries(X: np.ndarray, y: np.ndarray, group: np.ndarray, share: float,
                 seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A seeded ``share`` of the queries (at least one), whole and in their order: ``(X, y, group)``."""
    if len(group) < 2:
        return X, y, group
    rows, _, sizes, _ = split_queries(group, min(1.0 - share, 1.0 - 1.0 / len(group)), seed)
    return X[rows], y[rows], sizes


def _check_groups(ds: Dataset) -> None:
    missing = [s for s in ("train", "val", "test") if getattr(ds, f"group_{s}") is None]
    if missing:
        raise ValueError(f"dataset {ds.name!r} has no query groups for {missing}; a ranking method needs "
                         f"ranking data (dataset=ranking_like or dataset=ranking_file)")


def _fit(est, ds: Dataset, callbacks: Sequence) -> None:
    """Fit on train's query groups, validation's as the eval set."""
    _check_groups(ds)
    est.fit(ds.X_train, ds.y_train, ds.group_train, eval_set=(ds.X_val, ds.y_val, ds.group_val),
            callbacks=list(callbacks))


def _predict(est, X: np.ndarray) -> np.ndarray:
    return est.predict(X)


def scores(ds: Dataset, split: str, score: np.ndarray) -> dict[str, float]:
    """NDCG@:data:`EVAL_AT`, MRR and precision@:data:`PRECISION_AT` of the ranking scores ``score`` of
    ``split``'s rows, over its queries (:mod:`gbfs.booster.losses.ranking`)."""
    y = getattr(ds, f"y_{split}")
    offsets = group_offsets(getattr(ds, f"group_{split}"), len(y), f"group_{split}")
    return {NDCG: ndcg_at(y, score, offsets, EVAL_AT), "mrr": mrr(y, score, offsets),
            PRECISION: precision_at(y, score, offsets, PRECISION_AT)}


#: learning to rank: ranking scores, scored by NDCG@10 and MRR over the queries
RANKING = Task(TASK, _fit, _predict, scores, (f"val_{NDCG}", "val_mrr"),
               (f"val_{NDCG}", "val_mrr", "root_variance", "elapsed_seconds"), check_config,
               serves={"lightgbm": ("lightgbm_lambdarank",
                                    "gbfs.baselines.lightgbm_tasks.LightGBMRankerBaseline")}, methods=METHODS)
