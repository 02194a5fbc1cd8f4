"""The parts of a reproduction that are experiments rather than tables of tuned rows (the GBFS and the
Koepke-Bilenko papers' Sections 5, the MVS paper's Tables 2-4 in :func:`mvs_tables`): each is
computed once in one MLflow run under the reproduction's parent run, its tables logged there as CSV
with its settings, and its figures and claims written from the run read back -- so a rerun of the
same settings reuses the run, and every number traces to it.

A part is one :class:`Part` in :data:`PARTS`, keyed by its name in ``reproduce.papers``; its
settings are ``reproduce.scales.<scale>.<name>`` (a scale without them skips the part).
"""

from __future__ import annotations

import datetime
import json
import logging
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import mlflow
import pandas as pd
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig

from runners.paper.gbfs_kdd import experiments as gbfs_experiments
from runners.paper.gbfs_kdd import report as gbfs_report
from runners.paper.mvs import report as sampling_report
from runners.paper.mvs import tables as reproduce_mvs
from runners.paper.reproduction import jobs as reproduce_jobs
from runners.paper.reproduction.plan import digest
from runners.paper.utility_kb import experiments as utility_experiments
from runners.paper.utility_kb import report as utility_report
from runners.tracking import runs as tracking
from runners.tracking.run_log import RunLog

log = logging.getLogger(__name__)

Frames = dict[str, pd.DataFrame]


@dataclass(frozen=True)
class Part:
    """``compute(settings, data_dir) -> (tables, meta)`` fits everything; ``write(tables, meta, folder)``
    writes the files from the tables read back.  ``meta`` must be JSON."""

    title: str
    compute: Callable[[Mapping, Path], tuple[Frames, dict]]
    write: Callable[[Frames, Mapping, Path], list[Path]]


#: ``reproduce.papers`` name -> its part
PARTS: dict[str, Part] = {
    "gbfs": Part("the GBFS paper's Section 5", gbfs_experiments.compute, gbfs_report.write),
    "utility": Part("the Koepke-Bilenko paper's Section 5", utility_experiments.compute,
                    utility_report.write),
}


def _shared_data(data_dir: str | None) -> Path:
    """Where the real ``.npz`` sets are read: ``$GBFS_SHARED_DATA``, else ``../shared/data``."""
    from runners.bench.selection.data import default_data_dir

    return Path(data_dir) if data_dir else default_data_dir()


def finished_run(client: MlflowClient, exp_id: str, parent_id: str, role: str, config: str) -> str | None:
    """The id of the latest FINISHED run of ``role`` made with settings digest ``config`` under the
    reproduction's run ``parent_id``, or None."""
    found = client.search_runs(
        [exp_id], max_results=1, order_by=["attributes.start_time DESC"],
        filter_string=f"tags.reproduction = '{parent_id}' and tags.role = '{role}' "
        f"and tags.repro_config = '{config}' and attributes.status = 'FINISHED'")
    return found[0].info.run_id if found else None


def run_part(client: MlflowClient, exp_id: str, parent_id: str, name: str, settings: dict,
             config: str, folder: Path | None) -> Path | None:
    """Part ``name`` with ``settings`` (digest ``config``): its FINISHED run under ``parent_id`` reused,
    or computed and logged now; then its files written into ``folder`` (None: only the run, as a
    reproduction's worker makes it)."""
    part = PARTS[name]
    run_id = finished_run(client, exp_id, parent_id, f"{name}_paper", config)
    if run_id is None:
        print(f"{name}: {part.title} ...", flush=True)
        t0 = time.perf_counter()
        frames, meta = part.compute(settings, _shared_data(settings.get("data_dir")))
        meta = {**meta, "settings": settings, "seconds": time.perf_counter() - t0,
                "command": reproduce_jobs.command(),
                "commit": tracking.git_commit(), "date": datetime.date.today().isoformat()}
        tags = {"mlflow.parentRunId": parent_id, "reproduction": parent_id, "role": f"{name}_paper",
                "repro_config": config, "worker": tracking.worker_id()}
        with tracking.managed_run(run_name=f"{name}-paper", tags=tags,
                                  nested=mlflow.active_run() is not None) as active, \
                tempfile.TemporaryDirectory() as tmp:
            run_log = RunLog(active.info.run_id)
            run_log.params({k: str(v)[:500] for k, v in tracking.flatten(settings).items()})
            run_log.metrics({"seconds": meta["seconds"]})
            for key, df in frames.items():
                df.to_csv(Path(tmp) / f"{key}.csv", index=False)
                run_log.artifact(Path(tmp) / f"{key}.csv", artifact_path="tables")
            (Path(tmp) / "meta.json").write_text(json.dumps(meta, default=str))
            run_log.artifact(Path(tmp) / "meta.json", artifact_path="tables")
            run_id = active.info.run_id
    if folder is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        local = Path(mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path="tables", dst_path=tmp))
        meta = json.loads((local / "meta.json").read_text())
        frames = {p.stem: pd.read_csv(p, keep_default_na=True, dtype={"features": str})
                  for p in local.glob("*.csv")}
    for key, df in frames.items():
        if "features" in df:
            frames[key] = df.assign(features=df.features.fillna(""))
    paths = part.write(frames, meta, folder)
    with (folder / "README.md").open("a") as f:   # every number traces to the part's run
        f.write(f"\nFrom MLflow run `{run_id}` (role={name}_paper) under the reproduction's run "
                f"`{parent_id}`.\n")
    log.info("%s: %d files in %s", name, len(paths), folder)
    return folder


def mvs_tables(client: MlflowClient, exp_id: str, parent_id: str, cfg: DictConfig, settings: dict,
               folder: Path | None) -> Path | None:
    """The MVS paper's Tables 2-4 (:mod:`runners.paper.mvs.tables`) of the reproduction ``cfg``: the
    comparison's MLflow run under the parent (``role=sampling``; reused when finished), its CSV and
    settings read back from that run, the tables written into ``folder`` next to the paper's
    numbers (None: only the run)."""
    config = digest(settings, str(cfg.reproduce.name))
    run_id = finished_run(client, exp_id, parent_id, "sampling", config)
    if run_id is None:
        log.info("MVS paper: comparing the row samplers on %s", settings.get("dataset"))
        df, meta = reproduce_mvs.compute(settings)
        with tempfile.TemporaryDirectory() as tmp:
            paths = sampling_report.write(df, Path(tmp), meta)
            (Path(tmp) / "meta.json").write_text(json.dumps(meta, default=str))
            tags = {
                "mlflow.parentRunId": parent_id,
                "reproduction": parent_id,
                "repro_config": config,
                "worker": tracking.worker_id(),
            }
            run_id = sampling_report.log_mlflow(
                df,
                [*paths, Path(tmp) / "meta.json"],
                meta,
                cfg.tracking.uri,
                cfg.tracking.experiment,
                tags=tags,
            )
    if folder is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        local = Path(mlflow.artifacts.download_artifacts(run_id=run_id, dst_path=tmp))
        df, meta = pd.read_csv(local / "sampling.csv"), json.loads((local / "meta.json").read_text())
    for path in reproduce_mvs.write(df, meta, folder):
        if path.suffix == ".md":  # every number traces to the comparison's run
            with path.open("a") as f:
                f.write(
                    f"\nFrom MLflow run `{run_id}` (role=sampling) under the reproduction's run "
                    f"`{parent_id}`.\n"
                )
    return folder
