"""What every runner does with a config: load the data, build the method, fit, evaluate.

Shared by :mod:`runners.run` (one fit) and :mod:`runners.tune` (one fit per trial, then a refit).
Nothing here talks to MLflow except :func:`log_outcome`, which logs one fitted model under the
metric names every method shares (and through :mod:`runners.mlflow_native` its data and model).
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import hydra.utils
import mlflow
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from gbfs import GBFSClassifier, sampling
from gbfs.data import Dataset, files, load_dataset, table_encoding
from gbfs.data.synthetic import GENERATORS
from gbfs.metrics import log_loss, rmse, roc_auc
from runners import mlflow_native, multitask_eval, multitask_variants, tracking
from runners.figures import correlation_heatmap


@dataclass
class Outcome:
    """A fitted method and what the runners log about it."""

    model: object
    metrics: dict[str, float]
    history: list[dict]
    selected: list[int]
    selected_names: list[str] = field(default_factory=list)
    #: a multitask model's per-task names, scores and features (:mod:`runners.multitask_eval`)
    tasks: dict | None = None


@dataclass
class Logged:
    """What one ``runners.run`` run logged: the metrics it returns, and one row of the summary table
    per model it fitted (the model's metrics and ``budget``, the K it was held to, or None)."""

    metrics: dict[str, float]
    rows: list[dict]


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_dataset(cfg: DictConfig) -> None:
    """Raise ``ValueError`` naming the key on a bad ``dataset.scale``, ``dataset.val_fraction`` or
    ``seed`` (e.g. the override ``dataset.scale=abc``), or a multitask method on data without task
    ids (``dataset.multitask``), or ``dataset=file`` without ``dataset.path``, a missing file or
    target column (:func:`gbfs.data.files.check_file`); the runners call it before any MLflow run
    exists, so a typo leaves no FAILED run behind."""
    d = cfg.dataset
    scale, share, seed = d.get("scale"), d.get("val_fraction"), cfg.get("seed")
    if estimator_kind(cfg.method).multitask:
        multitask_eval.check_config(cfg)
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
    if d.name == files.NAME:       # the file and its columns too (its header only: cheap)
        if OmegaConf.is_missing(d, "path") or d.get("path") is None:
            raise ValueError("dataset.path must name your data file, e.g. dataset.path=my.csv "
                             "dataset.target=label (a relative path is taken from where you run)")
        args = _file_args(d)
        files.check_file(args["path"], args["target"], args["test_path"])
        table_encoding.check_categorical(args["categorical"])


def _file_args(d: DictConfig) -> dict:
    """``dataset=file``'s files (relative to where the command runs) and target column."""
    test, cat = d.get("test_path"), d.get("categorical", "auto")
    return {"path": hydra.utils.to_absolute_path(str(d.path)), "target": d.get("target"),
            "test_path": None if test is None else hydra.utils.to_absolute_path(str(test)),
            "categorical": cat if isinstance(cat, str) else [str(c) for c in cat]}


def load_data(cfg: DictConfig) -> Dataset:
    """The dataset of ``cfg.dataset`` (synthetic stand-ins offline, real data downloaded once,
    ``dataset=file`` parsed once); ``ValueError`` on a bad setting (:func:`check_dataset`) or data
    that is not a binary classification."""
    check_dataset(cfg)
    d = cfg.dataset
    kwargs = OmegaConf.to_container(d.kwargs, resolve=True) if d.get("kwargs") else {}
    if kwargs.get("path") is not None:   # a file of the dataset: relative to where the command runs
        kwargs["path"] = hydra.utils.to_absolute_path(str(kwargs["path"]))
    if d.name == files.NAME:
        kwargs.update(_file_args(d), test_fraction=float(d.test_fraction))
    extra = {} if d.name.endswith("_like") else {"download": bool(d.download), "mirror": d.mirror,
                                                 "root": cfg.paths.data_dir}
    # progress bars only appear while real data downloads or is parsed (once; later loads read the cache)
    ds = load_dataset(d.name, val_fraction=float(d.val_fraction), seed=int(cfg.seed), scale=float(d.scale),
                      progress=True, **extra, **kwargs)
    if ds.task != "binary":
        raise ValueError(f"dataset {d.name!r} is a {ds.task} task; the harness methods are binary "
                         f"classifiers")
    return ds


def method_params(method: DictConfig, overrides: Mapping | None = None,
                  sampler: DictConfig | None = None) -> dict:
    """The estimator's parameters: ``method.params`` updated by ``overrides`` (an Optuna trial's).

    With ``sampler``, ``overrides`` may also set the names of ``sampler.params`` and
    ``sampler.search_space``; they are returned with the method's and win over ``sampler.params``
    in :func:`with_sampler` (which :func:`build_estimator` applies).
    """
    # a mandatory value left unset (``???``) fails here, naming its key, not in the estimator
    params = OmegaConf.to_container(method.params, resolve=True, throw_on_missing=True)
    allowed = set(params) | set(sampler_params(sampler)) | set(_space(sampler))
    unknown = set(overrides or {}) - allowed
    if unknown:
        raise ValueError(f"method {method.name!r}: search space parameters {sorted(unknown)} are not in "
                         f"method.params ({sorted(params)}) nor in sampler.params")
    params.update(overrides or {})
    return params


# ---------------------------------------------------------------- row sampling (conf/sampler/)

#: the estimator arguments of row sampling (``GBFSClassifier``); ``conf/sampler/*.yaml`` params
SAMPLER_ARGS = ("sampler", "subsample", "top_rate", "other_rate", "mvs_lambda", "goss_style")
#: the arguments each sampler uses and their defaults, from gbfs.sampling (the others must stay None);
#: goss_style is GOSS's too (default None here: LightGBM's own GOSS is its style)
_SAMPLER_USES = {kind: {arg: sampling.DEFAULTS[arg] for arg, users in sampling.USED_BY.items()
                        if kind in users} for kind in sampling.SAMPLERS}
_SAMPLER_USES["goss"]["goss_style"] = None
NO_MVS = "LightGBM has no MVS (its MVS pull request was never merged); use a gbfs method"


def _space(sampler: DictConfig | None) -> dict:
    if sampler is None or not sampler.get("search_space"):
        return {}
    return OmegaConf.to_container(sampler.search_space, resolve=True)


def sampler_params(sampler: DictConfig | None) -> dict:
    """``sampler.params`` as a dict (``{}`` for ``sampler=none`` or no sampler group)."""
    if sampler is None or not sampler.get("params"):
        return {}
    params = OmegaConf.to_container(sampler.params, resolve=True)
    unknown = set(params) - set(SAMPLER_ARGS)
    if unknown:
        raise ValueError(f"sampler {sampler.get('name')!r}: params {sorted(unknown)} are not sampler "
                         f"arguments {SAMPLER_ARGS}")
    return params


def search_space(method: DictConfig, sampler: DictConfig | None = None) -> dict:
    """``method.search_space`` merged with ``sampler.search_space`` (what Optuna tunes)."""
    space = OmegaConf.to_container(method.search_space, resolve=True) if method.get("search_space") else {}
    extra = _space(sampler)
    clash = set(space) & set(extra)
    if clash:
        raise ValueError(f"method {method.name!r} and sampler {sampler.name!r} both tune {sorted(clash)}")
    return {**space, **extra}


def with_sampler(method: DictConfig, params: Mapping, sampler: DictConfig | None = None) -> dict:
    """The estimator's keyword arguments: ``params`` with the row sampler's merged in.

    Sampler arguments already in ``params`` (an Optuna trial's, or a refit's best values) win over
    ``sampler.params``.  ``estimator: gbfs`` takes them as they are (``GBFSClassifier`` validates
    them); ``estimator: lightgbm`` maps them to LightGBM's own sampling (:func:`lightgbm_sampling`).

    Raises
    ------
    ValueError
        On a ``sampler`` named twice differently, or a sampler LightGBM cannot run.
    """
    params = dict(params)
    given = {k: params.pop(k) for k in SAMPLER_ARGS if k in params}
    merged = sampler_params(sampler)
    if "sampler" in given and merged.get("sampler") not in (None, given["sampler"]):
        raise ValueError(f"sampler {merged['sampler']!r} (sampler group) and {given['sampler']!r} "
                         f"(method.params) disagree")
    merged.update(given)
    return {**params, **estimator_kind(method).sampling(merged, params)}


def _check_unused(kind: str | None, args: Mapping) -> None:
    uses = _SAMPLER_USES.get(kind, {})
    unused = sorted(k for k, v in args.items() if k != "sampler" and k not in uses and v is not None)
    if unused:
        raise ValueError(f"sampler={kind!r} does not use {unused} (they must be None)")


def lightgbm_sampling(args: Mapping, lgb_params: Mapping | None = None) -> dict:
    """Map sampler arguments to LightGBM's: ``{"lgb_params": ...}`` (``{}`` without a sampler).

    ``sgb`` is LightGBM's bagging (``bagging_fraction = subsample``, ``bagging_freq = 1``);
    ``goss`` its GOSS (``data_sample_strategy = "goss"``, ``top_rate``, ``other_rate``), which
    always ranks by |g h| and skips the first 1/learning_rate trees, so ``goss_style="paper"``
    is refused; ``mvs`` and ``mvs_adaptive`` do not exist in LightGBM (:data:`NO_MVS`).
    """
    kind = args.get("sampler")
    if kind in ("mvs", "mvs_adaptive"):
        raise ValueError(NO_MVS)
    if kind is not None and kind not in _SAMPLER_USES:
        raise ValueError(f"sampler must be one of {sorted(_SAMPLER_USES)} or None, got {kind!r}")
    _check_unused(kind, args)
    if kind is None:
        return {}
    use = {**_SAMPLER_USES[kind], **{k: v for k, v in args.items() if v is not None}}
    if kind == "sgb":
        new = {"bagging_fraction": float(use["subsample"]), "bagging_freq": 1}
    else:
        if use["goss_style"] not in (None, "lightgbm"):
            raise ValueError(f"goss_style={use['goss_style']!r}: LightGBM's GOSS ranks rows by |g h| and "
                             f"does not sample the first 1/learning_rate trees; set goss_style='lightgbm' "
                             f"(or leave it unset) on a LightGBM method")
        new = {"data_sample_strategy": "goss", "top_rate": float(use["top_rate"]),
               "other_rate": float(use["other_rate"])}
    extra = dict(lgb_params or {})
    clash = sorted(k for k in extra if _lgb_canonical(k) in new)
    if clash:
        raise ValueError(f"lgb_params {clash} clash with sampler={kind!r}'s {sorted(new)}")
    return {"lgb_params": {**extra, **new}}


def _lgb_canonical(key: str) -> str:
    try:  # LightGBM's alias table (subsample is an alias of bagging_fraction)
        from lightgbm.basic import _ConfigAliases

        return next((c for c in ("bagging_fraction", "bagging_freq") if key in _ConfigAliases.get(c)), key)
    except (ImportError, AttributeError):
        return key


# ---------------------------------------------------------------- estimators (method.estimator)

def _gbfs(**kwargs) -> GBFSClassifier:
    return GBFSClassifier(**kwargs)


def _lightgbm(**kwargs):
    from gbfs.baselines import LightGBMBaseline  # imports LightGBM, which only its methods need

    return LightGBMBaseline(**kwargs)


@dataclass(frozen=True)
class EstimatorKind:
    """How a ``method.estimator`` is built: its class from keyword arguments, and how the row
    sampler's arguments (``SAMPLER_ARGS``) map to its own, given the method's params.

    ``multitask``: fitted and scored with the task of every row (:mod:`runners.multitask_eval`);
    ``callbacks``: whether ``fit`` gets the runners' per-round callbacks (progress, pruning), which
    assume one model's rounds (independent per-task models have several)."""

    build: Callable[..., object]
    sampling: Callable[[dict, dict], dict]
    multitask: bool = False
    callbacks: bool = True


def _as_is(args: dict, params: dict) -> dict:
    return args


_GBFS = EstimatorKind(_gbfs, _as_is)
#: ``method.estimator`` -> its kind; a new estimator is one entry here and a method yaml.
#: ``gbfs_path`` is the template ``GBFSClassifier`` of a selection path (``runners.path_run``);
#: the multitask ones are in :mod:`runners.multitask_variants`.
ESTIMATORS: dict[str, EstimatorKind] = {
    "gbfs": _GBFS,
    "gbfs_path": _GBFS,
    "lightgbm": EstimatorKind(_lightgbm,
                              lambda args, params: lightgbm_sampling(args, params.get("lgb_params"))),
    "gbfs_multitask": EstimatorKind(multitask_variants.multitask, _as_is, multitask=True),
    "pooled_tasks": EstimatorKind(multitask_variants.pooled, _as_is, multitask=True),
    "independent_tasks": EstimatorKind(multitask_variants.independent, _as_is, multitask=True,
                                       callbacks=False),
}


def estimator_kind(method: DictConfig) -> EstimatorKind:
    """The :class:`EstimatorKind` of ``method.estimator``; ``ValueError`` naming the known ones."""
    try:
        return ESTIMATORS[method.estimator]
    except KeyError:
        raise ValueError(f"method.estimator must be one of {sorted(ESTIMATORS)}, got "
                         f"{method.estimator!r}") from None


def build_estimator(method: DictConfig, seed: int, n_threads: int | None, params: dict,
                    sampler: DictConfig | None = None, categorical: Sequence[int] = ()):
    """``GBFSClassifier`` or ``LightGBMBaseline`` from a method config (``method.estimator``), with the
    row sampler of ``sampler`` (``cfg.sampler``) merged by :func:`with_sampler` and the dataset's
    ``categorical`` columns (``Dataset.categorical``) split on category sets."""
    params = with_sampler(method, params, sampler)
    if categorical:
        params["categorical_features"] = [int(j) for j in categorical]
    return estimator_kind(method).build(random_state=seed, n_threads=n_threads, **params)


class FitProgress:
    """A gbfs-style callback drawing a progress bar over the boosting iterations (stderr)."""

    def __init__(self, label: str):
        self.label, self.bar = label, None

    def reset(self) -> None:
        self.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __call__(self, env) -> None:
        if self.bar is None:
            self.bar = tqdm(total=env.end_iteration or None, desc=self.label, unit="tree", leave=False)
        self.bar.update(1)
        if "val_auc" in env.record:
            self.bar.set_postfix(val_auc=f"{env.record['val_auc']:.4f}", refresh=False)


def fit_evaluate(cfg: DictConfig, ds: Dataset, params: dict, callbacks: Sequence = (),
                 evaluate_test: bool = True) -> Outcome:
    """Fit on train (validation as eval set), score validation and, unless told not to, test.

    Metrics: ``val_auc``, ``val_rmse`` and, on test, ``test_auc``, ``test_rmse`` (RMSE of the
    predicted probabilities, as the GT-GBM paper's Table 3), ``test_logloss``; plus
    ``n_selected_features``, ``precompute_seconds``, ``fit_seconds``, ``predict_seconds``; on a
    synthetic stand-in ``relevant_selected``; for GBDT-topK ``ranking_seconds`` (its ranking fit,
    part of ``fit_seconds``); in refit mode (``refit=True``, ``method="topk"``) ``refit_seconds``
    (the unpenalised refit on the selected features, part of ``fit_seconds``).
    """
    est = build_estimator(cfg.method, int(cfg.seed), cfg.n_threads, params, cfg.get("sampler"),
                          ds.categorical)
    kind = estimator_kind(cfg.method)
    t0 = time.perf_counter()
    if kind.multitask:     # the metrics of runners.multitask_eval: Total and per task
        multitask_eval.fit(est, ds, callbacks if kind.callbacks else ())
        return Outcome(est, **multitask_eval.evaluate(est, ds, time.perf_counter() - t0, evaluate_test,
                                                       label=cfg.method.name))
    est.fit(ds.X_train, ds.y_train, eval_set=(ds.X_val, ds.y_val), callbacks=list(callbacks))
    return evaluate(est, ds, time.perf_counter() - t0, evaluate_test)


def evaluate(est, ds: Dataset, fit_seconds: float, evaluate_test: bool = True) -> Outcome:
    """The :class:`Outcome` of a fitted estimator: the metrics of :func:`fit_evaluate` (with the
    given ``fit_seconds``), its per-iteration history and its selected features."""
    p_val = est.predict_proba(ds.X_val)[:, 1]
    metrics = {"val_auc": roc_auc(ds.y_val, p_val), "val_rmse": rmse(ds.y_val, p_val),
               "n_selected_features": float(len(est.selected_features_)),
               "precompute_seconds": float(est.timings_.get("precompute_seconds", 0.0)),
               "fit_seconds": fit_seconds}
    if "ranking_seconds" in est.timings_:      # GBDT-topK: the all-feature fit that ranks (in fit_seconds)
        metrics["ranking_seconds"] = float(est.timings_["ranking_seconds"])
    if hasattr(est, "selection_history_"):     # refit mode (or topk): the unpenalised refit's share
        metrics["refit_seconds"] = float(est.timings_["refit_seconds"])
    if evaluate_test:
        t0 = time.perf_counter()
        p_test = est.predict_proba(ds.X_test)[:, 1]
        metrics["predict_seconds"] = time.perf_counter() - t0
        metrics.update(test_auc=roc_auc(ds.y_test, p_test), test_rmse=rmse(ds.y_test, p_test),
                       test_logloss=log_loss(ds.y_test, p_test))
    selected = [int(j) for j in est.selected_features_]
    if ds.relevant is not None:    # a stand-in: how many of its truly relevant columns were found
        metrics["relevant_selected"] = float(len(set(selected) & set(ds.relevant.tolist())))
    return Outcome(est, metrics, list(est.history_), selected, [ds.feature_names[j] for j in selected])


def log_outcome(out: Outcome, ds: Dataset, run_id: str, heatmap: bool = True, *, cfg: DictConfig) -> None:
    """Log metrics, per-iteration curves and artifacts of one fitted model to the active run; its
    data splits as dataset inputs and the model as an MLflow model (:mod:`runners.mlflow_native`)."""
    mlflow_native.log_inputs(run_id, cfg, ds)
    if ds.relevant is not None:
        mlflow.set_tag("n_relevant", str(len(ds.relevant)))
    tracking.log_curves(run_id, out.history)
    # the final model's metrics come after the last iteration, so the curves of val_auc and
    # val_rmse end with the returned model (the best iteration under early stopping) and
    # MLflow's latest value of each metric is the final one
    tracking.log_metrics(run_id, out.metrics, step=len(out.history))
    features = [{"rank": r, "index": j, "name": n}
                for r, (j, n) in enumerate(zip(out.selected, out.selected_names))]
    mlflow.log_text(json.dumps({"n_selected_features": len(out.selected), "features": features}, indent=1),
                    "selected_features.json")
    if out.tasks is not None:
        multitask_eval.log_tasks(out.tasks, ds.feature_names, out.history, run_id)
    with tempfile.TemporaryDirectory() as tmp:
        if hasattr(out.model, "save_model"):     # the multitask baselines have no model file
            model_path = Path(tmp) / "model.json"
            out.model.save_model(model_path)
            mlflow.log_artifact(str(model_path))
            mlflow_native.log_model(cfg, out.model, ds, model_path, step=len(out.history))
        if heatmap:
            png = correlation_heatmap(ds.X_train, out.selected, ds.feature_names,
                                      Path(tmp) / "correlations.png")
            mlflow.log_artifact(str(png))
