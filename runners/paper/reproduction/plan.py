"""What a reproduction runs (``conf/reproduce.yaml``): its rows, its scale, its datasets, and the
rules that connect them -- GBDT-topK's K, the overrides of a unit, the digest its runs are found by.

Every check raises ``ValueError`` naming the key, before :mod:`runners.reproduce` creates any run.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

from omegaconf import DictConfig, OmegaConf

from gbfs.data import list_datasets, missing_raw_files
from runners.tracking import runs as tracking

#: the name of the MVS paper's part in ``reproduce.datasets``
MVS = "mvs"
#: the papers a reproduction can make (``reproduce.papers``): the GT-GBM paper's tables of tuned rows
#: (its datasets), the MVS paper's tables, the GBFS and the Koepke-Bilenko papers' experiments
PAPERS = ("gtgbm", MVS, "gbfs", "utility")
#: ``dataset.task`` -> the key of ``reproduce`` holding its rows: the GT-GBM paper's Table 3 for
#: binary data, its Table 4 for ranking data (``dataset.task: ranking``)
ROWS = {"binary": "rows", "ranking": "ranking_rows"}


@dataclass(frozen=True)
class Row:
    """One row of the tables: a method config plus overrides (``conf/reproduce.yaml``)."""

    name: str
    label: str
    overrides: tuple[str, ...]
    selector: bool = False  # its feature count gives GBDT-topK's K
    k_param: str | None = None  # held to that K through this parameter
    paper: str | None = None  # its row in results/reference/
    # not tuned: every seed fits the tuned parameters of this row (its twin), with its own overrides
    tuned_as: str | None = None


def rows_of(cfg: DictConfig, key: str = "rows") -> list[Row]:
    """The rows of ``reproduce.<key>`` (``rows``; ``ranking_rows`` for ranking data), the K-rows
    last (their K comes from the selectors)."""
    rows = []
    for name, spec in (cfg.reproduce.get(key) or {}).items():
        unknown = set(spec) - {"label", "overrides", "selector", "k_param", "paper", "tuned_as"}
        if unknown or not spec.get("overrides"):
            raise ValueError(
                f"reproduce.{key}.{name}: needs overrides (a method=...), and only label, "
                f"overrides, selector, k_param, paper, tuned_as; got {sorted(spec)}"
            )
        rows.append(
            Row(
                str(name),
                str(spec.get("label", name)),
                tuple(spec.overrides),
                bool(spec.get("selector", False)),
                spec.get("k_param"),
                spec.get("paper"),
                spec.get("tuned_as"),
            )
        )
    if any(r.k_param for r in rows) and not any(r.selector for r in rows):
        raise ValueError(f"reproduce.{key}: a row with k_param needs at least one row with selector: true")
    tuned = {r.name for r in rows if not r.tuned_as and not r.k_param}
    for r in rows:
        if r.tuned_as and (r.tuned_as not in tuned or r.k_param or r.selector):
            raise ValueError(f"reproduce.{key}.{r.name}.tuned_as: {r.tuned_as!r} must name a tuned row "
                             f"without k_param or tuned_as (one of {sorted(tuned)}), and the row itself "
                             "can have neither k_param nor selector")
    # K-rows after the selectors that give their K, twins after the rows they take parameters from
    return sorted(rows, key=lambda r: 2 if r.tuned_as else int(r.k_param is not None))


def rows_by_task(cfg: DictConfig, tasks: Mapping[str, str]) -> dict[str, list[Row]]:
    """The rows of each dataset's task (``tasks``: dataset -> ``dataset.task``), checked: every task
    has rows (:data:`ROWS`) and each of them at least one."""
    out = {}
    for dataset, task in tasks.items():
        if task not in ROWS:
            raise ValueError(f"reproduce: dataset {dataset!r} has dataset.task {task!r}; the reproduction "
                             f"has tables for {sorted(ROWS)}")
        if task not in out:
            out[task] = rows_of(cfg, ROWS[task])
        if not out[task]:
            raise ValueError(f"reproduce.{ROWS[task]} is empty: the {task} dataset {dataset!r} needs rows")
    return out


def scale_of(cfg: DictConfig) -> DictConfig:
    """``reproduce.scales[reproduce.scale]``, checked: seeds, n_trials, the datasets' names and
    ``reproduce.papers``."""
    scales, scale = cfg.reproduce.scales, cfg.reproduce.scale
    if scale not in scales:
        raise ValueError(f"reproduce.scale must be one of {sorted(scales)}, got {scale!r}")
    s = scales[scale]
    seeds = list(s.get("seeds") or [])
    if (
        not seeds
        or any(not isinstance(x, int) or isinstance(x, bool) or x < 0 for x in seeds)
        or len(set(seeds)) != len(seeds)
    ):
        raise ValueError(
            f"reproduce.scales.{scale}.seeds must be distinct non-negative integers, got {seeds}"
        )
    if not isinstance(s.get("n_trials"), int) or s.n_trials < 1:
        raise ValueError(
            f"reproduce.scales.{scale}.n_trials must be a positive integer, got {s.get('n_trials')}"
        )
    startup = s.get("n_startup_trials")
    if startup is not None and (not isinstance(startup, int) or isinstance(startup, bool) or startup < 1):
        raise ValueError(
            f"reproduce.scales.{scale}.n_startup_trials must be a positive integer (fewer than n_trials: "
            f"TPE then chooses the rest) or absent (tune.n_startup_trials), got {startup!r}"
        )
    known = {n for names in list_datasets().values() for n in names}
    unknown = sorted(set(s.datasets) - known)
    if unknown:
        raise ValueError(f"reproduce.scales.{scale}.datasets: unknown {unknown}; known: {sorted(known)}")
    subset = cfg.reproduce.get("datasets")
    if subset is not None and set(subset) - {*s.datasets, MVS}:
        raise ValueError(
            f"reproduce.datasets: {sorted(set(subset) - {*s.datasets, MVS})} not in "
            f"reproduce.scales.{scale}.datasets ({list(s.datasets)}) nor {MVS!r} (the MVS paper's tables)"
        )
    papers_of(cfg)
    return s


def sampler_seed(seed: int, dataset: str, row: str) -> int:
    """TPE's seed of the study of ``row`` on ``dataset`` (tuned on seed ``seed``): a stable digest of
    the three (CRC-32, below 2**31 so that a rerun's ``+ invocation - 1`` stays a numpy seed), so that
    the studies of the rows and data sets draw different start-up points."""
    return zlib.crc32(f"{seed}/{dataset}/{row}".encode()) % 2**31


def papers_of(cfg: DictConfig) -> list[str]:
    """``reproduce.papers`` checked (null: every paper of :data:`PAPERS`)."""
    papers = cfg.reproduce.get("papers")
    if papers is None:
        return list(PAPERS)
    if isinstance(papers, str) or not all(isinstance(p, str) for p in papers):
        raise ValueError(f"reproduce.papers must be a list of names from {list(PAPERS)}, got {papers!r}")
    unknown = sorted(set(papers) - set(PAPERS))
    if unknown:
        raise ValueError(f"reproduce.papers: unknown {unknown}; known: {list(PAPERS)}")
    return [p for p in PAPERS if p in papers]


def runs_mvs(cfg: DictConfig) -> bool:
    """Whether the MVS paper's tables are made: ``reproduce.papers`` has ``mvs``, the scale has ``mvs``
    settings and ``reproduce.datasets`` is null (everything) or lists ``mvs``."""
    subset = cfg.reproduce.get("datasets")
    return (MVS in papers_of(cfg) and bool(scale_of(cfg).get("mvs"))
            and (subset is None or MVS in subset))


def datasets_of(cfg: DictConfig) -> dict[str, dict]:
    """The datasets of the GT-GBM paper's tables to run and their settings: the scale's, or the subset
    ``reproduce.datasets``; none when ``reproduce.papers`` leaves ``gtgbm`` out."""
    if "gtgbm" not in papers_of(cfg):
        return {}
    every = OmegaConf.to_container(scale_of(cfg).datasets, resolve=True)
    subset = cfg.reproduce.get("datasets")
    return {str(k): v or {} for k, v in every.items() if subset is None or k in subset}


def topk_k(selected: Mapping[str, float]) -> int:
    """GBDT-topK's K (GT-GBM paper, Section 5.1): the largest number of features selected by the
    selectors (GBFS, A-GBM, GT-GBM) at the same seed; at least 1."""
    if not selected:
        raise ValueError("GBDT-topK's K needs the feature counts of the selectors (none finished)")
    return max(1, int(round(max(selected.values()))))


def missing_data(name: str, data_dir: str | None) -> str | None:
    """Why the real dataset ``name`` cannot run offline (its raw files not on disk), or None."""
    if name not in list_datasets(data_dir)["real"]:
        return None
    missing = missing_raw_files(name, data_dir)
    if not missing:
        return None
    return (
        f"{name}: skipped, the real data is not on disk ({len(missing)} file(s) missing, e.g. "
        f"{missing[0]}); `python -m gbfs.data download {name}` fetches it"
    )


def data_overrides(dataset: str, settings: Mapping | DictConfig) -> list[str]:
    """The overrides selecting ``dataset`` with its ``reproduce.scales.<scale>.datasets`` settings
    (nested ones as dotted keys: ``{kwargs: {feature_scale: 0.1}}``)."""
    if isinstance(settings, DictConfig):
        settings = OmegaConf.to_container(settings, resolve=True)
    return [
        f"dataset={dataset}",
        *(f"{k}={v}" for k, v in tracking.flatten(settings or {}, "dataset.").items()),
    ]


def digest(*parts: object) -> str:
    """A short stable digest of the settings that make a unit (its runs are found by it)."""
    return hashlib.sha1(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:10]
