"""Feature budgets in the harness: a method's budget K, the ``budget`` tag and param, hard budgets.

A method config names the estimator argument holding its hard feature budget in ``budget_param``:
``max_features`` for the gbfs methods (never more than K features), ``k`` for GBDT-topK (exactly
its top K); the other methods have none.  Every run whose budget is set is tagged ``budget=K`` and
logs the param ``budget``, so the MLflow UI filters and groups runs by K whatever the method.

``tune.budget_mode=hard`` with ``tune.feature_budget=K`` sets that argument to K for every trial
(:func:`with_hard_budget`): each trial is within the budget by construction, where ``penalty``
and ``constraint`` only judge the trials after they have chosen their features.
"""

from __future__ import annotations

from collections.abc import Mapping

import mlflow
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf, open_dict

from runners.tracking import mlflow_native
from runners.tracking import runs as tracking

HARD = "hard"


def budget_of(method: DictConfig) -> int | None:
    """The hard feature budget K of ``method`` (``method.params[method.budget_param]``), or None
    (also for a mandatory value left unset, ``???``)."""
    name = method.get("budget_param")
    if not name or name not in method.params or OmegaConf.is_missing(method.params, name):
        return None
    value = method.params[name]
    return None if value is None else int(value)


def budget_tags(cfg: DictConfig) -> dict[str, str]:
    """``{"budget": "K"}`` when the method's budget is set, else ``{}`` (tags and params of a run)."""
    k = budget_of(cfg.method)
    return {} if k is None else {"budget": str(k)}


def is_hard(tune: DictConfig | Mapping) -> bool:
    """Whether ``tune.budget_mode`` is ``hard``: every trial gets ``max_features`` (or ``k``) = budget."""
    return tune.get("budget_mode") == HARD


def with_hard_budget(cfg: DictConfig) -> DictConfig:
    """``cfg`` with ``method.params[method.budget_param] = tune.feature_budget`` under
    ``tune.budget_mode=hard`` (``cfg`` itself otherwise).

    Raises
    ------
    ValueError
        Without ``tune.feature_budget``, on a method without a hard budget (``budget_param``), or
        when the method's params already hold another budget.
    """
    if not is_hard(cfg.tune):
        return cfg
    k, name = cfg.tune.get("feature_budget"), cfg.method.get("budget_param")
    if k is None or isinstance(k, bool) or int(k) != k or k < 1:
        raise ValueError(f"tune.budget_mode=hard needs tune.feature_budget, a positive number of features; "
                         f"got {k!r}")
    if not name:
        raise ValueError(f"tune.budget_mode=hard: method {cfg.method.name!r} has no hard feature budget "
                         f"(method.budget_param); use tune.budget_mode=penalty or constraint")
    given = budget_of(cfg.method)
    if given is not None and given != int(k):
        raise ValueError(f"tune.budget_mode=hard: method.params.{name}={given} disagrees with "
                         f"tune.feature_budget={k}; set only one of them")
    cfg = cfg.copy()
    with open_dict(cfg):
        cfg.method.params[name] = int(k)
    return cfg


#: the keys of ``dataset=file`` that say which data a run saw
FILE_KEYS = ("path", "target", "test_path", "test_fraction", "categorical")


def same_data(params: dict, cfg: DictConfig) -> bool:
    """Whether a run's logged params describe the same data as ``cfg.dataset``: the same scale (as a
    number: ``1`` is ``1.0``), validation share, generator arguments (e.g. ``feature_scale``) and,
    for a user's file, the same file, target and test split (as given)."""
    def number(value):
        try:
            return float(value)
        except (TypeError, ValueError):
            return value

    kwargs = cfg.dataset.get("kwargs")
    kwargs = OmegaConf.to_container(kwargs, resolve=True) if kwargs is not None else {}
    wanted = tracking.flatten(kwargs, "dataset.kwargs.")
    wanted.update({"dataset.scale": str(cfg.dataset.scale),
                   "dataset.val_fraction": str(cfg.dataset.val_fraction)})
    wanted.update({f"dataset.{key}": str(cfg.dataset.get(key)) for key in FILE_KEYS if key in cfg.dataset})
    got = {k: v for k, v in params.items() if k.startswith("dataset.kwargs.")}
    if set(got) != {k for k in wanted if k.startswith("dataset.kwargs.")}:
        return False
    return all(number(params.get(k)) == number(v) for k, v in wanted.items())


def resolve_topk_k(cfg: DictConfig) -> int:
    """GBDT-topK's K: the largest ``n_selected_features`` among the FINISHED runs of the methods that
    count for it (gbfs, agbm, gtgbm) on the same data (dataset, scale, validation share, generator
    arguments) in the same MLflow experiment, as the GT-GBM paper does (Section 5.1)."""
    exp = mlflow.get_experiment_by_name(cfg.tracking.experiment)
    query = "tags.counts_for_topk = 'true' and attributes.status = 'FINISHED'"
    runs = MlflowClient().search_runs([exp.experiment_id], filter_string=query, max_results=5000)
    # a data file's runs are tagged with the file's name (older stores: with "file"); the name is
    # compared here rather than in the filter string, which a quote in a file name would break
    names = {str(cfg.dataset.name), mlflow_native.dataset_label(cfg.dataset)}
    counts = [r.data.metrics["n_selected_features"] for r in runs
              if "n_selected_features" in r.data.metrics and r.data.tags.get("dataset") in names
              and same_data(r.data.params, cfg)]
    if not counts:
        raise ValueError(f"gbdt_topk: method.params.k is null and there is no FINISHED gbfs/agbm/gtgbm "
                         f"run on dataset {cfg.dataset.name!r} (scale {cfg.dataset.scale}) in MLflow "
                         f"experiment {cfg.tracking.experiment!r} to take K from; run those first or set "
                         f"method.params.k")
    return max(1, int(max(counts)))


def with_topk(cfg: DictConfig) -> DictConfig:
    """Fill ``method.params.k`` from sibling runs when it is null (logged as the resolved value)."""
    if cfg.method.estimator == "lightgbm" and cfg.method.params.get("kind") == "topk" \
            and cfg.method.params.get("k") is None:
        cfg = cfg.copy()
        with open_dict(cfg):
            cfg.method.params.k = resolve_topk_k(cfg)
    return cfg
