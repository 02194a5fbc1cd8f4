"""What every runner does with a config: load the data, build the method, fit, evaluate.

Shared by :mod:`runners.run` (one fit) and :mod:`runners.tune` (one fit per trial, then a refit).
Nothing here talks to MLflow except :func:`log_outcome`, which logs one fitted model under the
metric names every method shares, its data and its model, through the run's
:class:`runners.tracking.run_log.RunLog`.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import hydra.utils
from omegaconf import DictConfig, OmegaConf

from gbfs.booster.callbacks import progress_bar
from gbfs.data import Dataset, load_dataset
from gbfs.data.reading import files, table_encoding
from gbfs.data.synthetic.generators import GENERATORS
from runners.core import multitask_eval, ranking_eval, tasks
from runners.core.estimators import (  # noqa: F401 (runners and tests import them from here too)
    ESTIMATORS,
    NO_MVS,
    SAMPLER_ARGS,
    TASKS,
    EstimatorKind,
    build_estimator,
    check_bags,
    estimator_kind,
    feature_bags_of,
    lightgbm_sampling,
    method_params,
    sampler_params,
    sampler_space,
    search_space,
    task_of,
    with_sampler,
    with_task,
)
from runners.tracking import mlflow_native, run_figures
from runners.tracking.figures import correlation_heatmap
from runners.tracking.run_log import RunLog


@dataclass
class Outcome:
    """A fitted method and what the runners log about it."""

    model: object
    metrics: dict[str, float]
    history: list[dict]
    selected: list[int]
    selected_names: list[str] = field(default_factory=list)
    #: a multitask model's per-task names, scores and features (:mod:`runners.core.multitask_eval`)
    tasks: dict | None = None


@dataclass
class Logged:
    """What one ``runners.run`` run logged: the metrics it returns, and one row of the summary table
    per model it fitted (the model's metrics and ``budget``, the K it was held to, or None)."""

    metrics: dict[str, float]
    rows: list[dict]


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_dataset(cfg: DictConfig, contents: bool = True) -> None:
    """Raise ``ValueError`` naming the key on a bad ``dataset.scale``, ``dataset.val_fraction`` or
    ``seed`` (e.g. the override ``dataset.scale=abc``), or a multitask method on data without task
    ids (``dataset.multitask``), a ranking method on binary data or a binary one on ranking data
    (``dataset.task``) or a setting its task refuses (``Task.check``: :mod:`runners.core.ranking_eval`'s
    ``eval_at``, GBDT-topK's K, a ranking file), or ``dataset=file`` without ``dataset.path``, a
    missing file or target column (:func:`gbfs.data.reading.files.check_file`) and, with ``contents``, what
    its contents hold that loading refuses (duplicate columns, infinity, a target of other than two
    values, a truncated file: parsed once, then read from the cache); the runners call it before
    any MLflow run exists, so a typo leaves no FAILED run behind."""
    d = cfg.dataset
    scale, share, seed = d.get("scale"), d.get("val_fraction"), cfg.get("seed")
    kind = estimator_kind(cfg.method)
    if kind.multitask:
        multitask_eval.check_config(cfg)
    TASKS[kind.task].check(cfg)
    real = str(d.name) not in GENERATORS
    if not _number(scale) or not scale > 0 or (real and scale > 1):
        what = "in (0, 1], the share of the real data's rows kept" if real else \
            "a positive number, the multiplier of the stand-in's rows"
        raise ValueError(f"dataset.scale must be {what}; got {scale!r}")
    if not _number(share) or not 0 < share < 1:
        raise ValueError(f"dataset.val_fraction must be a number in (0, 1), the share of train held out "
                         f"for validation; got {share!r}")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer; got {seed!r}")
    data_task = tasks.data_task(cfg)
    if kind.task != data_task and data_task != "auto":   # auto: no file to read yet (its error below)
        raise ValueError(ranking_eval.task_mismatch(cfg, kind.task, data_task) if ranking_eval.TASK in
                         (kind.task, data_task) else tasks.task_mismatch(cfg, kind.task, data_task, TASKS))
    if d.name == files.NAME:       # the file and its columns too (its header only: cheap)
        if OmegaConf.is_missing(d, "path") or d.get("path") is None:
            raise ValueError("dataset.path must name your data file, e.g. dataset.path=my.csv "
                             "dataset.target=label (a relative path is taken from where you run)")
        args = _file_args(d)
        files.check_file(args["path"], args["target"], args["test_path"],
                         *(_absolute(d.get(k)) for k in ("query_path", "test_query_path")))
        table_encoding.check_categorical(args["categorical"])
        if contents and data_task != ranking_eval.TASK:   # load_data parses it right after (contents=False)
            files.load(**args, test_fraction=d.get("test_fraction"), seed=seed, root=cfg.paths.data_dir,
                       task=data_task, argument="dataset.task")


def _absolute(path) -> str | None:
    """A path of the config as the user meant it: relative to where the command runs."""
    return None if path is None else hydra.utils.to_absolute_path(str(path))


def _file_args(d: DictConfig) -> dict:
    """``dataset=file``'s files (relative to where the command runs) and target column."""
    cat = d.get("categorical", "auto")
    return {"path": _absolute(d.path), "target": d.get("target"), "test_path": _absolute(d.get("test_path")),
            "categorical": cat if isinstance(cat, str) else [str(c) for c in cat]}


def load_data(cfg: DictConfig) -> Dataset:
    """The dataset of ``cfg.dataset`` (synthetic stand-ins offline, real data downloaded once,
    ``dataset=file`` parsed once, ``dataset=ranking_file`` read with its query groups); ``ValueError``
    on a bad setting (:func:`check_dataset`) or data of another task than the method's (binary
    classification; ranking for the ranking methods, whose every split keeps whole queries)."""
    check_dataset(cfg, contents=False)
    d = cfg.dataset
    if d.name == ranking_eval.FILE or (d.name == files.NAME and tasks.data_task(cfg) == ranking_eval.TASK):
        return _of_task(cfg, ranking_eval.load_file(d, int(cfg.seed)))
    kwargs = OmegaConf.to_container(d.kwargs, resolve=True) if d.get("kwargs") else {}
    if kwargs.get("path") is not None:   # a file of the dataset: relative to where the command runs
        kwargs["path"] = hydra.utils.to_absolute_path(str(kwargs["path"]))
    if d.name == files.NAME:
        kwargs.update(_file_args(d), test_fraction=float(d.test_fraction), task=tasks.data_task(cfg))
    extra = {} if d.name.endswith("_like") else {"download": bool(d.download), "mirror": d.mirror,
                                                 "root": cfg.paths.data_dir}
    # progress bars only appear while real data downloads or is parsed (once; later loads read the cache)
    ds = load_dataset(d.name, val_fraction=float(d.val_fraction), seed=int(cfg.seed), scale=float(d.scale),
                      progress=True, **extra, **kwargs)
    return _of_task(cfg, ds)


def _of_task(cfg: DictConfig, ds: Dataset) -> Dataset:
    """``ds`` if its task is the method's, else ``ValueError`` naming both."""
    want = estimator_kind(cfg.method).task
    if ds.task != want:
        raise ValueError(f"dataset {cfg.dataset.name!r} is a {ds.task} task; method {cfg.method.name!r} "
                         f"(method.estimator: {cfg.method.estimator}) fits {want} data")
    return ds


def _task_score(score: str, record: dict) -> dict:
    return {score: tasks.named(record).get(score)}


def fit_progress(label: str, score: str = tasks.BINARY.score):
    """The library's progress bar over a fit's trees (stderr), with the task's validation ``score``
    of the latest one, cleared when the fit ends."""
    return progress_bar(label, show=partial(_task_score, score), leave=False)


def fit_evaluate(cfg: DictConfig, ds: Dataset, params: dict, callbacks: Sequence = (),
                 evaluate_test: bool = True) -> Outcome:
    """Fit on train (validation as eval set), score validation and, unless told not to, test.

    Metrics: ``val_auc``, ``val_rmse`` and, on test, ``test_auc``, ``test_rmse`` (RMSE of the
    predicted probabilities, as the GT-GBM paper's Table 3), ``test_logloss`` (a ranking method:
    ``val_ndcg_at_10``, ``val_mrr``, ``test_ndcg_at_10``, ``test_mrr``,
    :mod:`runners.core.ranking_eval`); plus
    ``n_selected_features``, ``precompute_seconds``, ``fit_seconds``, ``predict_seconds``; on a
    synthetic stand-in ``relevant_selected``; for GBDT-topK ``ranking_seconds`` (its ranking fit,
    part of ``fit_seconds``); in refit mode (``refit=True``, ``method="topk"``) ``refit_seconds``
    (the unpenalised refit on the selected features, part of ``fit_seconds``).
    """
    est = build_estimator(cfg.method, int(cfg.seed), cfg.n_threads, params, cfg.get("sampler"),
                          ds.categorical, feature_bags_of(cfg.get("bags"), ds.X_train, ds.feature_names))
    kind = estimator_kind(cfg.method)
    t0 = time.perf_counter()
    if kind.multitask:     # the metrics of runners.core.multitask_eval: Total and per task
        multitask_eval.fit(est, ds, callbacks if kind.callbacks else ())
        return Outcome(est, **multitask_eval.evaluate(est, ds, time.perf_counter() - t0, evaluate_test,
                                                       label=cfg.method.name))
    task = TASKS[kind.task]
    task.fit(est, ds, callbacks if kind.callbacks else ())
    return evaluate(est, ds, time.perf_counter() - t0, evaluate_test, task)


def evaluate(est, ds: Dataset, fit_seconds: float, evaluate_test: bool = True,
             task: tasks.Task = tasks.BINARY) -> Outcome:
    """The :class:`Outcome` of a fitted estimator: the metrics of :func:`fit_evaluate` (with the
    given ``fit_seconds``; the scores of ``task``), its per-iteration history and its selected
    features."""
    metrics = {f"val_{k}": v for k, v in task.scores(ds, "val", task.predict(est, ds.X_val)).items()}
    metrics.update({"n_selected_features": float(len(est.selected_features_)),
                    "precompute_seconds": float(est.timings_.get("precompute_seconds", 0.0)),
                    "fit_seconds": fit_seconds})
    if "ranking_seconds" in est.timings_:      # GBDT-topK: the all-feature fit that ranks (in fit_seconds)
        metrics["ranking_seconds"] = float(est.timings_["ranking_seconds"])
    if hasattr(est, "selection_history_"):     # refit mode (or topk): the unpenalised refit's share
        metrics["refit_seconds"] = float(est.timings_["refit_seconds"])
    if evaluate_test:
        t0 = time.perf_counter()
        prediction = task.predict(est, ds.X_test)
        metrics["predict_seconds"] = time.perf_counter() - t0
        metrics.update({f"test_{k}": v for k, v in task.scores(ds, "test", prediction).items()})
    selected = [int(j) for j in est.selected_features_]
    if ds.relevant is not None:    # a stand-in: how many of its truly relevant columns were found
        metrics["relevant_selected"] = float(len(set(selected) & set(ds.relevant.tolist())))
    return Outcome(est, metrics, list(est.history_), selected, [ds.feature_names[j] for j in selected])


def log_outcome(out: Outcome, ds: Dataset, run_log: RunLog, heatmap: bool = True, *, cfg: DictConfig) -> None:
    """Log metrics, per-iteration curves and artifacts of one fitted model to its run (the active
    run); its data splits as dataset inputs and the model as an MLflow model
    (:mod:`runners.tracking.mlflow_native`)."""
    run_log.inputs(cfg, ds)
    if ds.relevant is not None:
        run_log.tags({"n_relevant": str(len(ds.relevant))})
    run_log.curves([tasks.named(r) for r in out.history], keys=task_of(cfg.method).curves)
    # the final model's metrics come after the last iteration, so the curves of val_auc and
    # val_rmse (val_ndcg_at_10, val_mrr) end with the returned model (the best iteration) and
    # MLflow's latest value of each metric is the final one
    run_log.metrics(out.metrics, step=len(out.history))
    features = [{"rank": r, "index": j, "name": n}
                for r, (j, n) in enumerate(zip(out.selected, out.selected_names))]
    run_log.text({"n_selected_features": len(out.selected), "features": features}, "selected_features.json")
    if out.tasks is not None:
        multitask_eval.log_tasks(out.tasks, ds.feature_names, out.history, run_log)
    with tempfile.TemporaryDirectory() as tmp:
        if hasattr(out.model, "save_model"):     # the multitask baselines have no model file
            model_path = Path(tmp) / "model.json"
            out.model.save_model(model_path)
            run_log.artifact(model_path)
            run_log.model(cfg, out.model, ds, model_path, step=len(out.history))
        if heatmap:
            png = correlation_heatmap(ds.X_train, out.selected, ds.feature_names,
                                      Path(tmp) / "correlations.png")
            run_log.artifact(png)
        if out.tasks is None and cfg.tracking.get("log_figures", True):
            _log_figures(out, ds, run_log, Path(tmp), cfg)


def _log_figures(out: Outcome, ds: Dataset, run_log: RunLog, tmp: Path, cfg: DictConfig) -> None:
    """The model's feature importance (JSON and bar chart) and, for a binary model scored on test,
    its ROC and precision-recall curves (:mod:`runners.tracking.run_figures`)."""
    title = f"{cfg.method.name} on {mlflow_native.dataset_label(cfg.dataset)}"
    if hasattr(out.model, "feature_importance"):
        run_log.text(run_figures.importance_record(out.model, ds.feature_names), run_figures.IMPORTANCE_JSON)
        run_log.artifact(run_figures.importance_figure(out.model, ds.feature_names,
                                                       tmp / run_figures.IMPORTANCE_PNG, title))
    task = task_of(cfg.method)
    if task is tasks.BINARY and "test_auc" in out.metrics:
        score = task.predict(out.model, ds.X_test)
        run_log.artifact(run_figures.roc_pr_figure(ds.y_test, score, tmp / run_figures.ROC_PR_PNG, title))
