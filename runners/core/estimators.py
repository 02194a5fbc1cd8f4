"""What a method config builds: the estimator of ``method.estimator`` (:data:`ESTIMATORS`), the task
it fits (:data:`TASKS`), its parameters, and its row sampler (``conf/sampler/``: the sampler group's
arguments, its search space, and how they map to LightGBM's own sampling).

:func:`with_sampler` merges the sampler's arguments into an estimator's; a ``GBFSClassifier`` (or
``GBFSRanker``) takes them as they are, ``LightGBMBaseline`` through :func:`lightgbm_sampling`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import hydra.utils
from omegaconf import DictConfig, OmegaConf

from gbfs import GBFSClassifier, GBFSRanker, GBFSRegressor
from gbfs.criteria import bags as gbfs_bags
from gbfs.sampling import samplers as sampling
from runners.core import multitask_variants, ranking_eval, tasks

#: the estimator arguments of row sampling (``GBFSClassifier``); ``conf/sampler/*.yaml`` params
SAMPLER_ARGS = ("sampler", *sampling.ARGUMENTS)
NO_MVS = "LightGBM has no MVS (its MVS pull request was never merged); use a gbfs method"


def _sampler_uses() -> dict[str, dict]:
    """The arguments each registered sampler uses, with their defaults (the others must stay None),
    read from the registry at every call: a sampler registered after this module was imported is one
    too.  ``goss_style`` is GOSS's with default None here (LightGBM's own GOSS is its style)."""
    uses = {kind: {arg: sampling.DEFAULTS[arg] for arg, users in sampling.USED_BY.items() if kind in users}
            for kind in sampling.SAMPLERS}
    if "goss" in uses:
        uses["goss"]["goss_style"] = None
    return uses


def sampler_space(sampler: DictConfig | None) -> dict:
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
    extra = sampler_space(sampler)
    clash = set(space) & set(extra)
    if clash:
        raise ValueError(f"method {method.name!r} and sampler {sampler.name!r} both tune {sorted(clash)}")
    return {**space, **extra}


def _check_unused(kind: str | None, args: Mapping) -> None:
    uses = _sampler_uses().get(kind, {})
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
    known = _sampler_uses()
    if kind is not None and kind not in known:
        raise ValueError(f"sampler must be one of {sorted(known)} or None, got {kind!r}")
    _check_unused(kind, args)
    if kind is None:
        return {}
    if kind not in LIGHTGBM_SAMPLERS:
        raise ValueError(f"sampler={kind!r} has no LightGBM equivalent (LightGBM samples rows as "
                         f"{sorted(LIGHTGBM_SAMPLERS)}); use a gbfs method")
    use = {**known[kind], **{k: v for k, v in args.items() if v is not None}}
    new = LIGHTGBM_SAMPLERS[kind](use)
    extra = dict(lgb_params or {})
    clash = sorted(k for k in extra if _lgb_canonical(k) in new)
    if clash:
        raise ValueError(f"lgb_params {clash} clash with sampler={kind!r}'s {sorted(new)}")
    return {"lgb_params": {**extra, **new}}


def _lgb_bagging(use: Mapping) -> dict:
    return {"bagging_fraction": float(use["subsample"]), "bagging_freq": 1}


def _lgb_goss(use: Mapping) -> dict:
    if use["goss_style"] not in (None, "lightgbm"):
        raise ValueError(f"goss_style={use['goss_style']!r}: LightGBM's GOSS ranks rows by |g h| and "
                         f"does not sample the first 1/learning_rate trees; set goss_style='lightgbm' "
                         f"(or leave it unset) on a LightGBM method")
    return {"data_sample_strategy": "goss", "top_rate": float(use["top_rate"]),
            "other_rate": float(use["other_rate"])}


#: our samplers LightGBM has, and its parameters for their arguments (every other registered sampler
#: is refused on a LightGBM method, naming it)
LIGHTGBM_SAMPLERS = {"sgb": _lgb_bagging, "goss": _lgb_goss}


def _lgb_canonical(key: str) -> str:
    try:  # LightGBM's alias table (subsample is an alias of bagging_fraction)
        from lightgbm.basic import _ConfigAliases

        return next((c for c in ("bagging_fraction", "bagging_freq") if key in _ConfigAliases.get(c)), key)
    except (ImportError, AttributeError):
        return key


# ---------------------------------------------------------------- estimators (method.estimator)

def method_params(method: DictConfig, overrides: Mapping | None = None,
                  sampler: DictConfig | None = None) -> dict:
    """The estimator's parameters: ``method.params`` updated by ``overrides`` (an Optuna trial's).

    With ``sampler``, ``overrides`` may also set the names of ``sampler.params`` and
    ``sampler.search_space``; they are returned with the method's and win over ``sampler.params``
    in :func:`with_sampler` (which :func:`build_estimator` applies).
    """
    # a mandatory value left unset (``???``) fails here, naming its key, not in the estimator
    params = OmegaConf.to_container(method.params, resolve=True, throw_on_missing=True)
    allowed = set(params) | set(sampler_params(sampler)) | set(sampler_space(sampler))
    unknown = set(overrides or {}) - allowed
    if unknown:
        raise ValueError(f"method {method.name!r}: search space parameters {sorted(unknown)} are not in "
                         f"method.params ({sorted(params)}) nor in sampler.params")
    params.update(overrides or {})
    return params


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


# ---------------------------------------------------------------- estimators (method.estimator)

def _gbfs(**kwargs) -> GBFSClassifier:
    return GBFSClassifier(**kwargs)


def _ranker(**kwargs) -> GBFSRanker:
    return GBFSRanker(**kwargs)


def _regressor(**kwargs) -> GBFSRegressor:
    return GBFSRegressor(**kwargs)


def _lightgbm_task(name: str) -> Callable[..., object]:
    """The builder of ``gbfs.baselines.lightgbm_tasks.<name>`` (imports LightGBM when called)."""
    def build(**kwargs):
        from gbfs.baselines import lightgbm_tasks

        return getattr(lightgbm_tasks, name)(**kwargs)
    return build


def _lightgbm(**kwargs):
    from gbfs.baselines.lightgbm_baseline import (
        LightGBMBaseline,  # imports LightGBM, which only its methods need
    )

    return LightGBMBaseline(**kwargs)


@dataclass(frozen=True)
class EstimatorKind:
    """How a ``method.estimator`` is built: its class from keyword arguments, and how the row
    sampler's arguments (``SAMPLER_ARGS``) map to its own, given the method's params.

    ``multitask``: fitted and scored with the task of every row (:mod:`runners.core.multitask_eval`);
    ``callbacks``: whether ``fit`` gets the runners' per-round callbacks (progress, pruning), which
    assume one model's rounds (independent per-task models have several); ``task``: the
    ``Dataset.task`` it fits, a key of :data:`TASKS` (how it is fitted, scored and tuned); ``bags``:
    whether it takes ``feature_bags`` (:func:`feature_bags_of`)."""

    build: Callable[..., object]
    sampling: Callable[[dict, dict], dict]
    multitask: bool = False
    callbacks: bool = True
    task: str = tasks.BINARY.name
    bags: bool = False  # takes ``feature_bags`` (the ``bags`` config group's)


def _as_is(args: dict, params: dict) -> dict:
    return args


def _lgb_sampling(args: dict, params: dict) -> dict:
    return lightgbm_sampling(args, params.get("lgb_params"))


_GBFS = EstimatorKind(_gbfs, _as_is, bags=True)
#: a class named by ``method._target_`` alone: a binary task, the sampler's arguments as they are
_EXTERNAL = EstimatorKind(_gbfs, _as_is, callbacks=False)
#: ``method.estimator`` -> its kind.  A new baseline library needs no entry: its method yaml names
#: its class with ``_target_`` (:func:`estimator_kind`).
#: ``gbfs_path`` is the template ``GBFSClassifier`` of a selection path (``runners.core.path_run``);
#: the multitask ones are in :mod:`runners.core.multitask_variants`; ``gbfs_ranker`` is ``GBFSRanker``.
ESTIMATORS: dict[str, EstimatorKind] = {
    "gbfs": _GBFS,
    "gbfs_path": _GBFS,
    "gbfs_ranker": EstimatorKind(_ranker, _as_is, task=ranking_eval.TASK, bags=True),
    "lightgbm": EstimatorKind(_lightgbm, _lgb_sampling),
    # the other tasks' kinds (runners.core.tasks.with_task maps gbfs and lightgbm to them)
    "gbfs_multiclass": EstimatorKind(_gbfs, _as_is, task=tasks.MULTICLASS.name, bags=True),
    "gbfs_regressor": EstimatorKind(_regressor, _as_is, task=tasks.REGRESSION.name, bags=True),
    "lightgbm_multiclass": EstimatorKind(_lightgbm_task("LightGBMMulticlassBaseline"), _lgb_sampling,
                                         task=tasks.MULTICLASS.name),
    "lightgbm_regression": EstimatorKind(_lightgbm_task("LightGBMRegressionBaseline"), _lgb_sampling,
                                         task=tasks.REGRESSION.name),
    "lightgbm_lambdarank": EstimatorKind(_lightgbm_task("LightGBMRankerBaseline"), _lgb_sampling,
                                         task=ranking_eval.TASK),
    "gbfs_multitask": EstimatorKind(multitask_variants.multitask, _as_is, multitask=True, bags=True),
    "pooled_tasks": EstimatorKind(multitask_variants.pooled, _as_is, multitask=True),
    "independent_tasks": EstimatorKind(multitask_variants.independent, _as_is, multitask=True,
                                       callbacks=False),
}


def estimator_kind(method: DictConfig) -> EstimatorKind:
    """The :class:`EstimatorKind` of a method config.

    ``_target_`` (a dotted path, as Hydra's ``instantiate`` reads it) names the estimator class, or
    a function that builds one; ``method.estimator`` names its kind in :data:`ESTIMATORS` (task, row
    sampler mapping, callbacks), or is null for a class of another library.  A new baseline library
    is one class and one method yaml: the class is built from ``method.params`` with
    ``random_state`` and ``n_threads``; it fits a binary task with
    ``fit(X, y, eval_set=(X_val, y_val))``, predicts ``predict_proba`` and has ``selected_features_``,
    ``history_`` (a list of per-iteration records, may be empty) and ``timings_`` (a dict, may be
    empty); ``save_model(path)`` is optional.  Without ``_target_``, ``method.estimator``'s kind
    builds the estimator.

    Raises
    ------
    ValueError
        Naming ``method.estimator`` when it is no known kind (nor null), or ``method._target_``
        when it is no importable class.
    """
    target, name = method.get("_target_"), method.get("estimator")
    if name is not None and name not in ESTIMATORS:
        raise ValueError(f"method.estimator must be one of {sorted(ESTIMATORS)} (or null, with the class "
                         f"named by method._target_), got {name!r}")
    if target is not None:
        try:
            cls = hydra.utils.get_object(str(target))
        except Exception as e:   # Hydra raises ImportError, ValueError or its own errors
            raise ValueError(f"method._target_: {target!r} is no importable class ({e})") from None
        if not callable(cls):
            raise ValueError(f"method._target_: {target!r} is no class (a {type(cls).__name__})")
        return replace(ESTIMATORS.get(name, _EXTERNAL), build=cls)
    if name is None:
        raise ValueError("method.estimator is null and method._target_ names no class: name one of them")
    return ESTIMATORS[name]


#: ``EstimatorKind.task`` -> how its models are fitted, scored and tuned
TASKS: dict[str, tasks.Task] = {t.name: t for t in (tasks.BINARY, tasks.MULTICLASS, tasks.REGRESSION,
                                                     ranking_eval.RANKING)}


def with_task(cfg: DictConfig) -> DictConfig:
    """``cfg`` with its data's task and the method's estimator of it
    (:func:`runners.core.tasks.with_task`)."""
    return tasks.with_task(cfg, {k: v.task for k, v in ESTIMATORS.items()}, TASKS)


def task_of(method: DictConfig) -> tasks.Task:
    """The :class:`runners.core.tasks.Task` of ``method``: its validation score (``task_of(m).score``),
    the metrics a trial keeps and the curves a run logs."""
    return TASKS[estimator_kind(method).task]


def bag_rule(bags: DictConfig | None):
    """The :mod:`gbfs.criteria.bags` rule of the ``bags`` config group (``conf/bags/``), its
    arguments checked; None for ``bags=none``.  Errors name ``bags.rule`` / ``bags.args``."""
    if bags is None or bags.get("rule") is None:
        return None
    missing = [k for k in (bags.get("args") or {}) if OmegaConf.is_missing(bags.args, k)]
    if missing:
        raise ValueError(f"bags={bags.get('name')}: set bags.args.{missing[0]} (e.g. on the command line)")
    args = OmegaConf.to_container(bags.get("args") or {}, resolve=True)
    try:
        return gbfs_bags.bag_rule(str(bags.rule), **args)
    except (TypeError, ValueError) as e:
        raise ValueError(f"bags={bags.get('name')} (bags.rule, bags.args): {e}") from None


def check_bags(method: DictConfig, bags: DictConfig | None) -> None:
    """A ``bags`` rule only for a method whose estimator takes ``feature_bags``, and not next to
    ``method.params.feature_bags``: bags are never dropped or overridden unsaid."""
    if bag_rule(bags) is None:
        return
    if not estimator_kind(method).bags:
        raise ValueError(f"bags={bags.get('name')}: method {method.name!r} (method.estimator: "
                         f"{method.get('estimator')}) takes no feature bags; use a gbfs method or bags=none")
    if (method.get("params") or {}).get("feature_bags") is not None:
        raise ValueError(f"bags={bags.get('name')} and method.params.feature_bags both give the bags: "
                         "keep one")


def feature_bags_of(bags: DictConfig | None, X, feature_names: Sequence[str]):
    """The ``feature_bags`` the ``bags`` config gives the columns of ``X`` (the training rows;
    the labels are never read), or None for ``bags=none``."""
    rule = bag_rule(bags)
    return None if rule is None else rule.bags(X, feature_names)


def build_estimator(method: DictConfig, seed: int, n_threads: int | None, params: dict,
                    sampler: DictConfig | None = None, categorical: Sequence[int] = (),
                    feature_bags=None):
    """The estimator of a method config (``method.estimator``, :data:`ESTIMATORS`: ``GBFSClassifier``,
    ``GBFSRanker``, ``LightGBMBaseline``, ...), with the row sampler of ``sampler`` (``cfg.sampler``)
    merged by :func:`with_sampler`, the dataset's ``categorical`` columns (``Dataset.categorical``)
    split on category sets and the ``feature_bags`` of :func:`feature_bags_of`."""
    params = with_sampler(method, params, sampler)
    if categorical:
        params["categorical_features"] = [int(j) for j in categorical]
    if feature_bags is not None:
        params["feature_bags"] = feature_bags
    return estimator_kind(method).build(random_state=seed, n_threads=n_threads, **params)
