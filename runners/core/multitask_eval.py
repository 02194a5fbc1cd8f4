"""Fit, score and log one multitask model: what :mod:`runners.core.experiment` does for the ``mt_*`` methods.

A multitask method (``EstimatorKind.multitask``) is fitted with the task of every row,
``fit(X, y, task, eval_set=(X_val, y_val, task_val))``, and scored per task.  Its metrics use the
names of the single-task runs for the GT-GBM paper's "Total" (the tasks' values weighted by their
numbers of rows, :func:`gbfs.booster.losses.metrics.task_weighted`), so runs of every method compare side by
side,
and add the per-task values:

* ``val_auc``, ``val_auprc``, ``val_rmse`` and ``test_auc``, ``test_auprc``, ``test_rmse``,
  ``test_logloss``: Total ROC AUC, area under the precision-recall curve (average precision),
  RMSE of the probabilities, log-loss;
* ``{split}_auc_task{k}``, ``{split}_auprc_task{k}``: task ``k`` (its position in the sorted task
  ids; ``tasks.json`` names it);
* ``n_selected_features`` (Omega_G, every feature any task uses), ``n_features_task{k}`` (Omega_t),
  ``relevant_selected`` and ``relevant_selected_task{k}`` on the synthetic data;
* ``fit_seconds``, ``predict_seconds``, ``precompute_seconds`` and the model's own timings
  (``binning_seconds``, ``boosting_seconds``), ``inner_max_features`` for a budgeted baseline.

:func:`log_tasks` adds the artifacts ``selected_features_per_task.json``, ``tasks.json`` and the
Figure 4/5 analogue of the run, ``tasks_auprc.png`` / ``tasks_auc.png`` (with their CSVs): the
test metric per task and Total (:func:`runners.tracking.multitask_figure.task_bars`).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from omegaconf import DictConfig

from gbfs.booster.losses.metrics import average_precision, log_loss, rmse, roc_auc, task_weighted
from gbfs.data import Dataset
from runners.tracking.multitask_figure import task_bars
from runners.tracking.run_log import RunLog

SPLITS = ("val", "test")
#: per-task scores, by name: ``f(y, probability)``
SCORES = {"auc": roc_auc, "auprc": average_precision, "rmse": rmse}
#: the Figure 4/5 analogue of a run: (metric, label)
FIGURES = (("auprc", "AUPRC"), ("auc", "AUC"))


def check_config(cfg: DictConfig) -> None:
    """``ValueError`` naming the key when a multitask method runs on data without task ids
    (``dataset.multitask`` unset) or with ``stability.enabled`` (not measured for multitask models)."""
    if not cfg.dataset.get("multitask"):
        raise ValueError(f"method {cfg.method.name!r} is multitask: it needs a dataset with task ids "
                         f"(dataset.multitask: dataset=multitask, isolet_ovr, tox171_ovr), got "
                         f"{cfg.dataset.name!r}")
    if cfg.get("stability") and cfg.stability.get("enabled"):
        raise ValueError(f"stability.enabled: the selection stability of a multitask method "
                         f"({cfg.method.name!r}) is not measured; set stability.enabled=false")


def check_task_data(ds: Dataset) -> None:
    """``ValueError`` unless ``ds`` carries the task id of every row."""
    if any(getattr(ds, f"task_{s}") is None for s in ("train", "val", "test")):
        raise ValueError(f"dataset {ds.name!r} has no task ids; a multitask method needs a multitask "
                         f"dataset (dataset=multitask, isolet_ovr, tox171_ovr)")


def task_names(ds: Dataset) -> list[str]:
    """The names of the tasks in task-id order (``T1``, ``T2``, ... when the data has none)."""
    n = len(np.unique(ds.task_train))
    return list(ds.task_names) if ds.task_names else [f"T{k + 1}" for k in range(n)]


def fit(est, ds: Dataset, callbacks: Sequence = ()) -> None:
    """Fit on train with the task ids, validation (with its task ids) as the eval set."""
    check_task_data(ds)
    kwargs = {"callbacks": list(callbacks)} if callbacks else {}
    est.fit(ds.X_train, ds.y_train, ds.task_train, eval_set=(ds.X_val, ds.y_val, ds.task_val), **kwargs)


def per_task(y: np.ndarray, proba: np.ndarray, task: np.ndarray, tasks: np.ndarray) -> dict[str, list]:
    """Each score of :data:`SCORES` and the number of rows, task by task (in the order of ``tasks``)."""
    rows = [task == t for t in tasks]
    out = {name: [f(y[r], proba[r]) for r in rows] for name, f in SCORES.items()}
    out["size"] = [int(r.sum()) for r in rows]
    return out


def evaluate(est, ds: Dataset, fit_seconds: float, evaluate_test: bool = True, label: str = "") -> dict:
    """The fields of a :class:`runners.core.experiment.Outcome` of a fitted multitask model: ``metrics``
    (module docstring), ``history``, ``selected`` (Omega_G in first-use order), ``selected_names``
    and ``tasks`` (names, sizes, per-task scores and features, what :func:`log_tasks` logs)."""
    tasks = np.unique(ds.task_train)
    names = task_names(ds)
    metrics: dict[str, float] = {}
    scores: dict[str, dict] = {}
    for split in SPLITS if evaluate_test else SPLITS[:1]:
        X, y, t = getattr(ds, f"X_{split}"), getattr(ds, f"y_{split}"), getattr(ds, f"task_{split}")
        t0 = time.perf_counter()
        proba = est.predict_proba(X, t)[:, 1]
        if split == "test":
            metrics["predict_seconds"] = time.perf_counter() - t0
            metrics["test_logloss"] = log_loss(y, proba)
        scores[split] = per_task(y, proba, t, tasks)
        for name in SCORES:
            metrics[f"{split}_{name}"] = task_weighted(scores[split][name], scores[split]["size"])
            if name != "rmse":
                metrics.update({f"{split}_{name}_task{k}": v for k, v in enumerate(scores[split][name])})
    selected = [int(j) for j in est.selected_features_]
    per_task_sel = [[int(j) for j in s] for s in est.selected_features_per_task_]
    metrics["n_selected_features"] = float(len(selected))
    metrics.update({f"n_features_task{k}": float(len(s)) for k, s in enumerate(per_task_sel)})
    if ds.relevant is not None:
        metrics["relevant_selected"] = float(len(set(selected) & set(ds.relevant.tolist())))
    for k, rel in enumerate(ds.relevant_per_task or ()):
        metrics[f"relevant_selected_task{k}"] = float(len(set(per_task_sel[k]) & set(rel.tolist())))
    timings = getattr(est, "timings_", {})
    metrics["precompute_seconds"] = 0.0     # GT-GBM's, as in a single-task run; the model's own below
    metrics.update({k: float(v) for k, v in timings.items() if k.endswith("_seconds")})
    metrics["fit_seconds"] = fit_seconds
    if getattr(est, "inner_max_features_", None) is not None:
        metrics["inner_max_features"] = float(est.inner_max_features_)
    return {"metrics": metrics, "history": list(getattr(est, "history_", [])), "selected": selected,
            "selected_names": [ds.feature_names[j] for j in selected],
            "tasks": {"label": label or type(est).__name__, "dataset": ds.name, "names": names,
                      "scores": scores, "selected": per_task_sel}}


def log_tasks(tasks: dict, feature_names: Sequence[str], history: list[dict], run_log: RunLog) -> None:
    """Log the per-task artifacts and curves of a multitask model (the module docstring) to its run."""
    names = tasks["names"]
    # the library records each task's validation AUC per round (history_ keys val_auc_task{k})
    run_log.curves(history, keys=[f"val_auc_task{k}" for k in range(len(names))])
    per_task_sel = [{"task": n, "n_selected_features": len(sel), "features": [
        {"rank": r, "index": j, "name": feature_names[j]} for r, j in enumerate(sel)]}
        for n, sel in zip(names, tasks["selected"])]
    summary = {"tasks": names}
    for split, s in tasks["scores"].items():
        summary[split] = {**s, **{f"total_{m}": task_weighted(s[m], s["size"]) for m in SCORES}}
    run_log.text({"tasks": per_task_sel}, "selected_features_per_task.json")
    run_log.text(_null_nan(summary), "tasks.json")
    test = tasks["scores"].get("test")
    if test is None:
        return
    with tempfile.TemporaryDirectory() as tmp:
        for metric, label in FIGURES:
            png = Path(tmp) / f"tasks_{metric}.png"
            task_bars({tasks["label"]: test[metric]}, names, test["size"], f"test {label}", png,
                      title=f"{tasks['label']} on {tasks['dataset']}: test {label} per task and Total")
            run_log.artifact(png)
            run_log.artifact(png.with_suffix(".csv"))


def _null_nan(obj):
    """``obj`` with NaN (a task's AUC on one class) as None, so the JSON is standard."""
    if isinstance(obj, dict):
        return {k: _null_nan(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_null_nan(v) for v in obj]
    return None if isinstance(obj, float) and not np.isfinite(obj) else obj
