"""The checks of a tuning study's and a reproduction's config, before any study, trial or run exists:
each refuses a setting with a ``ValueError`` naming its key.

:func:`check_tuning` (``runners.tune``) is :func:`runners.core.checks.check_run`, the ``tune`` keys
(:func:`check_tune`) and the search space (:func:`runners.tuning.search_space.check_search_space`);
:func:`check_reproduction` (``runners.reproduce``) the settings a reproduction's units share.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from omegaconf import DictConfig

from runners.core import experiment
from runners.core.checks import check_count, check_overrides, check_run, check_tracking, is_int
from runners.tuning import study as studies
from runners.tuning.objective import constrained, objective_value
from runners.tuning.search_space import check_search_space
from runners.tuning.storages import check_storage

#: the largest seed numpy's generators (and so TPE) take, plus one
SEED_BOUND = 2**32


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


def check_tune_values(tune: DictConfig | Mapping) -> None:
    """The ``tune`` keys every study of a command shares: the budget (``feature_budget`` >= 0,
    ``budget_penalty`` >= 0: a negative one rewards features over the budget), the integers
    (``sampler_seed``, ``n_startup_trials``, ``pruner_warmup_steps``), the storage (an SQLAlchemy
    URL, its driver and SQLite file, or a journal file: :func:`runners.tuning.storages.check_storage`)
    and ``storage_timeout``."""
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
        check_storage(tune["storage"], "tune.storage")
    check_count("tune.storage_timeout", tune.get("storage_timeout"), 1, "seconds to connect")


def check_tune(tune: DictConfig, score: str = "val_auc") -> None:
    """Raise ``ValueError`` naming the key on a bad ``tune`` setting: :func:`check_tune_values`,
    ``n_trials``, ``timeout``, ``study_name`` (a non-empty string: Optuna would store the study
    under ``''`` and a blank name resumes nothing meaningful), the objective, budget mode and
    pruner; ``score`` is the method's validation score the objective is named after (``val_auc``;
    ``val_ndcg_at_10`` for a ranking method)."""
    if not is_int(tune.n_trials) or tune.n_trials < 1:
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
    studies.pruner(tune)
