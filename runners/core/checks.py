"""The checks of a runner's config, made before any data is loaded and before any fit, trial or
MLflow run exists: each refuses a setting with a ``ValueError`` naming its key, so that a typo
leaves nothing behind (and nothing a user gave is silently dropped or reinterpreted).

:func:`check_run` (``runners.run``), :func:`check_tuning` (``runners.tune``) and
:func:`check_reproduction` (``runners.reproduce``) gather them: the command line's overrides
(:func:`check_overrides`), the data (:func:`runners.core.experiment.check_dataset`), the tracking keys
(:func:`check_tracking`), the method's feature budget (:func:`check_budgets`), the tuning keys
(:func:`check_tune`) and the search space (:func:`runners.tuning.search_space.check_search_space`).
Reaching the stores themselves (a server that does not answer, a damaged SQLite file, a parent
run that does not exist) is :mod:`runners.tracking.stores`'s, when a runner opens them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from runners.core import experiment
from runners.tracking import stores
from runners.tuning import study as studies
from runners.tuning.objective import constrained, objective_value
from runners.tuning.search_space import check_search_space

#: the largest seed numpy's generators (and so TPE) take, plus one
SEED_BOUND = 2**32


def check_run(cfg: DictConfig, overrides: Sequence[str] | None = None) -> None:
    """Every setting ``runners.run`` reads: overrides, dataset, ``seed``, tracking, feature budget."""
    check_overrides(cfg, overrides)
    experiment.check_dataset(cfg)
    check_tracking(cfg.tracking)
    check_budgets(cfg.method)


def check_tuning(cfg: DictConfig, overrides: Sequence[str] | None = None) -> None:
    """:func:`check_run`, the ``tune`` keys (:func:`check_tune`) and the search space."""
    if not cfg.tune.get("enabled") or "n_trials" not in cfg.tune:
        raise ValueError("runners.tune needs the Optuna settings: pass tune=optuna (conf/tune/optuna.yaml)")
    check_run(cfg, overrides)
    check_tune(cfg.tune, experiment.task_of(cfg.method).score)
    check_search_space(cfg.method, cfg.get("sampler"))


def check_reproduction(cfg: DictConfig, overrides: Sequence[str] | None = None) -> None:
    """What a reproduction's units share: the overrides (``reproduce.rows={}``), tracking and the
    tuning keys but its objective and study name, which each unit sets (:func:`check_tune_values`)."""
    check_overrides(cfg, overrides)
    check_tracking(cfg.tracking)
    check_tune_values(cfg.tune)


# ------------------------------------------------------------------------- command-line overrides

def check_overrides(cfg: DictConfig, overrides: Sequence[str] | None = None) -> None:
    """Refuse an override that sets a mapping to ``{}`` where the composed config holds a non-empty
    one (``method.search_space={}``, ``reproduce.rows={}``, or ``{}`` inside a mapping given).

    Hydra merges a mapping given on the command line into the config's, so such an override
    changes nothing while it reads as "none": entries are removed with ``~key.entry``.
    ``overrides`` defaults to the running Hydra app's (``hydra.overrides.task``), none outside one.
    """
    if overrides is None:
        overrides = list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []
    from hydra.core.override_parser.overrides_parser import OverridesParser

    for override in OverridesParser.create().parse_overrides([str(o) for o in overrides]):
        if override.is_delete() or override.is_sweep_override():
            continue   # a sweep reaches each job as one value, checked there
        for key in _empty_mappings(override.key_or_group, override.value()):
            kept = OmegaConf.select(cfg, key, default=None, throw_on_resolution_failure=False)
            if isinstance(kept, DictConfig) and len(kept):
                names = list(kept)
                raise ValueError(
                    f"{key}={{}} does not empty {key}: Hydra merges a mapping given on the command line "
                    f"into the config's, so {key} keeps {names}. Remove entries with ~{key}.{names[0]} "
                    f"(one per entry), or the whole key with ~{key}")


def _empty_mappings(key: str, value: object) -> Iterator[str]:
    """The dotted keys at which ``value`` (an override's, set at ``key``) holds an empty mapping."""
    if isinstance(value, Mapping):
        if not value:
            yield key
        for name, inner in value.items():
            yield from _empty_mappings(f"{key}.{name}", inner)


# ------------------------------------------------------------------------------------- values

def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_count(key: str, value: object, minimum: int, what: str, allow_none: bool = True) -> None:
    """Raise ``ValueError`` naming ``key`` unless ``value`` is a whole number >= ``minimum`` (or
    None with ``allow_none``); ``what`` says what it counts.  (``int("ten")`` would only say
    "invalid literal for int()", and a float would be truncated silently.)"""
    if value is None and allow_none:
        return
    if not _is_int(value) or value < minimum:
        bound = "a positive" if minimum == 1 else "a non-negative" if minimum == 0 else f">= {minimum}"
        raise ValueError(f"{key} must be {bound} whole number{' or null' if allow_none else ''} "
                         f"({what}), got {value!r}")


def check_tracking(tracking: DictConfig | Mapping) -> None:
    """``tracking.uri`` (:func:`runners.tracking.stores.check_uri`), ``tracking.tags`` (a mapping of single
    values), ``tracking.parent_run_id`` (an id or null; that it exists is checked once the store is
    open, :func:`runners.tracking.stores.check_parent_run`), ``tracking.timeout`` and ``max_retries``."""
    stores.check_uri(tracking.get("uri"))
    stores.check_tags(tracking.get("tags"))
    parent = tracking.get("parent_run_id")
    if parent is not None and (not isinstance(parent, (str, int)) or isinstance(parent, bool)
                               or not str(parent).strip()):
        raise ValueError(f"tracking.parent_run_id must be an MLflow run id, or null for no parent run; "
                         f"got {parent!r}")
    stores.check_timeouts(
        tracking.get("timeout", stores.env_default("MLFLOW_HTTP_REQUEST_TIMEOUT", stores.DEFAULT_TIMEOUT)),
        tracking.get("max_retries",
                     stores.env_default("MLFLOW_HTTP_REQUEST_MAX_RETRIES", stores.DEFAULT_RETRIES)))


def check_budgets(method: DictConfig) -> None:
    """The method's feature budgets: ``method.params.<budget_param>`` (``max_features``, GBDT-topK's
    ``k``) and ``method.params.max_features`` a positive whole number or null, a path's
    ``method.budgets`` a list of them."""
    params = method.get("params") or {}
    for name in dict.fromkeys([method.get("budget_param"), "max_features"]):
        if name and name in params and not OmegaConf.is_missing(params, name):
            check_count(f"method.params.{name}", params[name], 1, "a number of features")
    budgets = method.get("budgets")
    if budgets is not None:
        if isinstance(budgets, (str, Mapping)) or not isinstance(budgets, Sequence) or not len(budgets):
            raise ValueError(f"method.budgets must be a non-empty list of numbers of features, e.g. "
                             f"'method.budgets=[5,10,20]', got {budgets!r}")
        for i, k in enumerate(budgets):
            check_count(f"method.budgets[{i}]", k, 1, "a number of features", allow_none=False)


def check_tune_values(tune: DictConfig | Mapping) -> None:
    """The ``tune`` keys every study of a command shares: the budget (``feature_budget`` >= 0,
    ``budget_penalty`` >= 0: a negative one rewards features over the budget), the integers
    (``sampler_seed``, ``n_startup_trials``, ``pruner_warmup_steps``), the storage's URL, driver
    and SQLite file (:func:`runners.tracking.stores.check_sqlalchemy_url`) and ``storage_timeout``."""
    check_count("tune.feature_budget", tune.get("feature_budget"), 0, "a number of features")
    penalty = tune.get("budget_penalty", 0.0)
    if not isinstance(penalty, (int, float)) or isinstance(penalty, bool) or not math.isfinite(penalty) \
            or penalty < 0:
        raise ValueError(f"tune.budget_penalty must be a number >= 0 (subtracted per feature over "
                         f"tune.feature_budget; a negative one would reward them), got {penalty!r}")
    seed = tune.get("sampler_seed")
    check_count("tune.sampler_seed", seed, 0, "TPE's seed")
    if seed is not None and seed >= SEED_BOUND:
        raise ValueError(f"tune.sampler_seed must be below 2**32 (numpy's seeds), got {seed}")
    for key in ("n_startup_trials", "pruner_warmup_steps"):
        if key in tune:
            check_count(f"tune.{key}", tune[key], 0, "a number of trials or iterations", allow_none=False)
    if "storage" in tune:
        stores.check_sqlalchemy_url(tune["storage"], "tune.storage")
    check_count("tune.storage_timeout", tune.get("storage_timeout"), 1, "seconds to connect")


def check_tune(tune: DictConfig, score: str = "val_auc") -> None:
    """Raise ``ValueError`` naming the key on a bad ``tune`` setting: :func:`check_tune_values`,
    ``n_trials``, ``timeout``, ``study_name`` (a non-empty string: Optuna would store the study
    under ``''`` and a blank name resumes nothing meaningful), the objective, budget mode and
    pruner; ``score`` is the method's validation score the objective is named after (``val_auc``;
    ``val_ndcg_at_10`` for a ranking method)."""
    if not _is_int(tune.n_trials) or tune.n_trials < 1:
        raise ValueError(f"tune.n_trials must be a positive integer, got {tune.n_trials!r}")
    timeout = tune.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or timeout <= 0):
        raise ValueError(f"tune.timeout must be a positive number of seconds or null, got {timeout!r}")
    name = tune.get("study_name")
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"tune.study_name must be a non-empty string (the study is resumed by it; "
                         f"quote a number: \"tune.study_name='2024'\"), got {name!r}")
    check_tune_values(tune)
    objective_value(0.5, 0, tune, score)   # the objective and the budget's keys
    constrained(tune)
    studies._pruner(tune)
