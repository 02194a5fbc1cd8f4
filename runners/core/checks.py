"""The checks of a runner's config, made before any data is loaded and before any fit, trial or
MLflow run exists: each refuses a setting with a ``ValueError`` naming its key, so that a typo
leaves nothing behind (and nothing a user gave is silently dropped or reinterpreted).

:func:`check_run` (``runners.run``) gathers them: the command line's overrides
(:func:`check_overrides`), the data (:func:`runners.core.experiment.check_dataset`), the tracking keys
(:func:`check_tracking`) and the method's feature budget (:func:`check_budgets`); the tuning keys and
the search space are :mod:`runners.tuning.checks`'s.
Reaching the stores themselves (a server that does not answer, a damaged SQLite file, a parent
run that does not exist) is :mod:`runners.tracking.stores`'s, when a runner opens them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from gbfs.data import DownloadError, list_datasets, missing_raw_files, read_dataset_manifest
from gbfs.data.fetching.download import fetch_dataset
from runners.core import experiment
from runners.tracking import stores


def check_run(cfg: DictConfig, overrides: Sequence[str] | None = None) -> None:
    """Every setting ``runners.run`` reads: overrides, dataset, ``seed``, tracking, feature budget,
    feature bags; then a real dataset's files (:func:`ensure_real_data`)."""
    check_overrides(cfg, overrides)
    experiment.check_dataset(cfg)
    check_tracking(cfg.tracking)
    check_budgets(cfg.method)
    experiment.check_bags(cfg.method, cfg.get("bags"))
    ensure_real_data(cfg)


def ensure_real_data(cfg: DictConfig) -> None:
    """A real dataset's raw files on disk before any run or study exists: fetched now when
    ``dataset.download`` is true, else refused; either way a failure is a ``ValueError`` naming the
    command that fetches them, so a missing download leaves no FAILED run or empty study behind."""
    d = cfg.dataset
    name, root = str(d.name), cfg.paths.get("data_dir")
    if name not in list_datasets(root)["real"] or not missing_raw_files(name, root):
        return
    how = (f"`python -m gbfs.data download {name}` fetches it (dataset.mirror or $GBFS_DATA_MIRROR "
           "names a mirror)")
    if not d.get("download"):
        raise ValueError(f"dataset={name}: the real data is not on disk and dataset.download is false; {how}")
    try:
        fetch_dataset(read_dataset_manifest(name, root), root, mirror=d.get("mirror"))
    except (DownloadError, OSError) as err:
        raise ValueError(f"dataset={name}: the real data is not on disk and could not be downloaded "
                         f"({str(err).splitlines()[0]}); {how}, then run this again") from err


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

def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_count(key: str, value: object, minimum: int, what: str, allow_none: bool = True) -> None:
    """Raise ``ValueError`` naming ``key`` unless ``value`` is a whole number >= ``minimum`` (or
    None with ``allow_none``); ``what`` says what it counts.  (``int("ten")`` would only say
    "invalid literal for int()", and a float would be truncated silently.)"""
    if value is None and allow_none:
        return
    if not is_int(value) or value < minimum:
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
