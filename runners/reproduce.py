"""The papers' tables and figures in one command: ``python -m runners.reproduce``.

    python -m runners.reproduce                              # quick: the stand-ins, few trials
    python -m runners.reproduce reproduce.scale=standard     # the stand-ins at full size
    python -m runners.reproduce reproduce.scale=paper        # the real data on disk (the paper's protocol)

For every dataset of the scale (``conf/reproduce.yaml``) and every row of the GT-GBM paper's
Table 3 (GBDT-Full, GBFS, A-GBM, GT-GBM, GBDT-topK, and our peers), as the paper's Section 5.1 and
Appendix C do: the method is tuned by :mod:`runners.tune` on the 80/20 validation split of the
first seed's training rows (Table 5's search: mu, shrinkage, alpha), its best parameters are refitted
and scored once on test; every further seed fits the tuned parameters on its own draw of the data
(a stand-in's generator, the validation split, the model's random choices) with
:mod:`runners.run`.  GBDT-topK runs last, with K = the largest number of features GBFS, A-GBM and
GT-GBM selected at that seed (the paper's rule, :func:`topk_k`).  A real dataset whose files are not
on disk is skipped with one line.  A ranking dataset (``dataset.task: ranking``, e.g. the stand-in
``ranking_like``) runs the rows of ``reproduce.ranking_rows`` the same way and gives the paper's
Table 4 (:mod:`runners.paper.reproduce_ranking`).  The MVS paper's Tables 2-4 come from
:mod:`runners.paper.reproduce_mvs`.

MLflow: one parent run per reproduction (``role=reproduction``, found again by ``reproduce.name``),
every study and fit nested under it and tagged ``reproduction`` (the parent's id),
``repro_dataset``, ``repro_row``, ``repro_config`` (a digest of the settings that made it).  The
tables are built by reading those runs back (:mod:`runners.paper.tables`), never from memory, so
a second invocation resumes: a unit whose FINISHED run exists is reused, an interrupted study
continues from its counted trials.  The parent is ended FINISHED, FAILED on an error, KILLED on
Ctrl-C or SIGTERM (exit status 143).  One process at a time runs a reproduction: a second one of
the same name stops before any run, naming the first (:mod:`runners.paper.reproduce_lock`).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import hydra
import mlflow
import pandas as pd
from hydra.core.hydra_config import HydraConfig
from mlflow.entities import Run
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf, open_dict

from runners import run as single_run
from runners import tune as tuning
from runners.core import summaries
from runners.paper import reproduce_lock, reproduce_mvs, reproduce_ranking, sampling_report
from runners.paper import tables as paper_tables
from runners.paper.reproduce_plan import (
    Row,
    data_overrides,
    datasets_of,
    digest,
    missing_data,
    rows_by_task,
    runs_mvs,
    scale_of,
    topk_k,
)
from runners.tracking import runs as tracking
from runners.tuning import checks as tuning_checks

log = logging.getLogger(__name__)

#: ``overrides -> config``: the reproduction's own config composed with a unit's overrides
Compose = Callable[[Sequence[str]], DictConfig]
ROLE = "reproduction"
#: ``dataset.task`` -> what writes a dataset's tables from its runs (the same arguments)
WRITERS = {"binary": paper_tables.write_dataset, "ranking": reproduce_ranking.write_dataset}


@dataclass
class Reproduction:
    """The parent run and the units under it; ``compose`` builds a unit's config."""

    cfg: DictConfig
    compose: Compose
    client: MlflowClient = field(init=False)
    parent_id: str = ""
    exp_id: str = ""

    def start(self) -> None:
        """Find this reproduction's parent run (by ``reproduce.name``) and reopen it, or create it."""
        self.exp_id = tracking.configure(self.cfg.tracking)
        self.client = MlflowClient()  # of the store just configured
        name = str(self.cfg.reproduce.name)
        found = self.client.search_runs(
            [self.exp_id],
            max_results=1,
            order_by=["attributes.start_time DESC"],
            filter_string=f"tags.role = '{ROLE}' and tags.reproduction_name = '{name}'",
        )
        tags = {
            "role": ROLE,
            "reproduction_name": name,
            "scale": str(self.cfg.reproduce.scale),
            "worker": tracking.worker_id(),
            "git_commit": tracking.git_commit(),
        }
        if found:
            reproduce_lock.check_not_running(found[0], str(self.cfg.tracking.uri))
            self.parent_id = found[0].info.run_id
            self.client.update_run(self.parent_id, status="RUNNING")
            for k, v in tags.items():
                self.client.set_tag(self.parent_id, k, v)
            log.info("resuming reproduction %r (MLflow run %s)", name, self.parent_id)
        else:
            run = self.client.create_run(self.exp_id, run_name=f"reproduce-{name}", tags=tags)
            self.parent_id = run.info.run_id
            scale = OmegaConf.to_container(scale_of(self.cfg), resolve=True)
            self.client.log_batch(
                self.parent_id,
                params=[
                    mlflow.entities.Param(k, v[:6000]) for k, v in tracking.flatten(scale, "scale.").items()
                ],
            )

    def find(self, dataset: str, row: str, seed: int, role: str, config: str) -> Run | None:
        """The latest FINISHED run of a unit (``role``: ``refit`` or ``evaluation``), or None."""
        query = (
            f"tags.reproduction = '{self.parent_id}' and tags.repro_dataset = '{dataset}' and "
            f"tags.repro_row = '{row}' and tags.seed = '{seed}' and tags.repro_config = '{config}' and "
            f"tags.role = '{role}' and attributes.status = 'FINISHED'"
        )
        runs = self.client.search_runs(
            [self.exp_id], filter_string=query, max_results=1, order_by=["attributes.start_time DESC"]
        )
        return runs[0] if runs else None

    def unit_cfg(self, overrides: Sequence[str]) -> DictConfig:
        """A unit's config: the reproduction's with the unit's ``overrides``, its top-level runs
        nested under the parent run."""
        cfg = self.compose(list(overrides))
        with open_dict(cfg):
            del cfg["reproduce"]
            cfg.tracking.parent_run_id = self.parent_id
        return cfg

    def unit(
        self,
        dataset: str,
        settings: Mapping,
        row: Row,
        seed: int,
        first: bool,
        k: int | None,
        best: Mapping[str, str] | None,
    ) -> Run:
        """The final run of one row at one seed: the study's refit (first seed) or a fit of the
        tuned parameters; reused if it exists."""
        overrides = [*row.overrides, *data_overrides(dataset, settings), f"seed={seed}"]
        if k is not None:
            overrides.append(f"{row.k_param}={k}")
        if first:
            overrides.append(f"tune.n_trials={int(scale_of(self.cfg).n_trials)}")
        else:
            overrides += [
                "tune=off",
                *(f"method.params.{key}={value}" for key, value in (best or {}).items()),
            ]
        cfg = self.unit_cfg(overrides)
        # what made the unit, as resolved (the command line's overrides included), but not the seed
        # or where things are stored: a changed setting makes a new unit, a rerun finds the old one
        tune = {
            k: v
            for k, v in OmegaConf.to_container(cfg.tune, resolve=True).items()
            if k not in ("study_name", "storage", "progress", "sampler_seed")
        }
        config = digest(
            str(self.cfg.reproduce.name),
            row.name,
            tune,
            *(OmegaConf.to_container(cfg[key], resolve=True) for key in ("method", "dataset", "sampler")),
        )
        role = "refit" if first else "evaluation"
        found = self.find(dataset, row.name, seed, role, config)
        if found is not None:
            return found
        tags = {
            "reproduction": self.parent_id,
            "repro_dataset": dataset,
            "repro_row": row.name,
            "repro_config": config,
            "role": "evaluation",
        }
        with open_dict(cfg):
            cfg.tracking.tags = {**tracking.user_tags(cfg.tracking), **tags}
            if first:
                cfg.tune.study_name = f"reproduce-{self.cfg.reproduce.name}-{row.name}-{dataset}-{config}"
        if first:
            log.info(
                "%s on %s: tuning (%d trials), then refit on seed %d",
                row.label,
                dataset,
                cfg.tune.n_trials,
                seed,
            )
            tuning.run(cfg)
        else:
            log.info("%s on %s: the tuned parameters on seed %d", row.label, dataset, seed)
            single_run.run(cfg)
        found = self.find(dataset, row.name, seed, role, config)
        if found is None:
            raise RuntimeError(f"{row.label} on {dataset}, seed {seed}: no FINISHED run was logged")
        return found

    def dataset(self, name: str, settings: Mapping, rows: list[Row], seeds: Sequence[int]) -> dict[str, Run]:
        """Every row at every seed on ``name``; returns ``{"<row>/<seed>": run}``."""
        runs: dict[str, Run] = {}
        for row in rows:
            best = None
            for i, seed in enumerate(seeds):
                k = None
                if row.k_param:
                    k = topk_k(
                        {
                            r.name: runs[f"{r.name}/{seed}"].data.metrics["n_selected_features"]
                            for r in rows
                            if r.selector
                        }
                    )
                run = self.unit(name, settings, row, seed, i == 0, k, best)
                runs[f"{row.name}/{seed}"] = run
                if i == 0:
                    best = tuned_params(self.compose, row, run)
        return runs

    def finish(self, status: str, seconds: float) -> None:
        tracking.log_metrics(self.parent_id, {"invocation_seconds": seconds})
        self.client.set_terminated(self.parent_id, status)


def mvs_tables(rep: Reproduction, settings: dict, folder: Path) -> Path:
    """The MVS paper's Tables 2-4 (:mod:`runners.paper.reproduce_mvs`): the comparison's MLflow run under
    the parent (``role=sampling``; reused when finished), its CSV and settings read back from that
    run, the tables written into ``folder`` next to the paper's numbers."""
    config = digest(settings, str(rep.cfg.reproduce.name))
    found = rep.client.search_runs(
        [rep.exp_id],
        max_results=1,
        order_by=["attributes.start_time DESC"],
        filter_string=f"tags.reproduction = '{rep.parent_id}' and tags.role = 'sampling' "
        f"and tags.repro_config = '{config}' and attributes.status = 'FINISHED'",
    )
    if found:
        run_id = found[0].info.run_id
    else:
        log.info("MVS paper: comparing the row samplers on %s", settings.get("dataset"))
        df, meta = reproduce_mvs.compute(settings)
        with tempfile.TemporaryDirectory() as tmp:
            paths = sampling_report.write(df, Path(tmp), meta)
            (Path(tmp) / "meta.json").write_text(json.dumps(meta, default=str))
            tags = {
                "mlflow.parentRunId": rep.parent_id,
                "reproduction": rep.parent_id,
                "repro_config": config,
                "worker": tracking.worker_id(),
            }
            run_id = sampling_report.log_mlflow(
                df,
                [*paths, Path(tmp) / "meta.json"],
                meta,
                rep.cfg.tracking.uri,
                rep.cfg.tracking.experiment,
                tags=tags,
            )
    with tempfile.TemporaryDirectory() as tmp:
        local = Path(mlflow.artifacts.download_artifacts(run_id=run_id, dst_path=tmp))
        df, meta = pd.read_csv(local / "sampling.csv"), json.loads((local / "meta.json").read_text())
    for path in reproduce_mvs.write(df, meta, folder):
        if path.suffix == ".md":  # every number traces to the comparison's run
            with path.open("a") as f:
                f.write(
                    f"\nFrom MLflow run `{run_id}` (role=sampling) under the reproduction's run "
                    f"`{rep.parent_id}`.\n"
                )
    return folder


def dataset_task(compose: Compose, name: str, settings: Mapping) -> str:
    """``dataset.task`` of a dataset of the scale (``binary`` unless its config says ``ranking``)."""
    return str(compose(data_overrides(name, settings)).dataset.get("task", "binary"))


def tuned_params(compose: Compose, row: Row, refit: Run) -> dict[str, str]:
    """The study's best parameters as the refit logged them (``method.params.<name>`` of the
    method's search space), to fit on the other seeds."""
    method = compose(list(row.overrides)).method
    return {
        key: refit.data.params[f"method.params.{key}"]
        for key in (method.get("search_space") or {})
        if f"method.params.{key}" in refit.data.params
    }


def run(cfg: DictConfig, compose: Compose) -> dict[str, Path]:
    """Run (or resume) the reproduction of ``cfg.reproduce``; return the folders written, by dataset.

    Raises
    ------
    ValueError
        On a bad ``reproduce`` setting or one its units share
        (:func:`runners.tuning.checks.check_reproduction`), before any run is created.
    RuntimeError
        When the same reproduction already runs in another process (:mod:`runners.paper.reproduce_lock`),
        before any run is created.
    """
    tuning_checks.check_reproduction(cfg)   # the settings its units share, naming the key
    scale = scale_of(cfg)
    tasks = {name: dataset_task(compose, name, settings) for name, settings in datasets_of(cfg).items()}
    rows = rows_by_task(cfg, tasks)
    rep = Reproduction(cfg, compose)
    with reproduce_lock.hold(cfg):   # a second reproduction of this name stops here, naming the first
        rep.start()
        t0, status = time.perf_counter(), "FAILED"
        try:
            written = _units_and_tables(rep, tasks, rows, [int(s) for s in scale.seeds])
            status = "FINISHED"
        except BaseException as err:
            status = tracking.run_status(err)
            raise
        finally:
            rep.finish(status, time.perf_counter() - t0)
    print(
        f"reproduction {cfg.reproduce.name!r}: MLflow run {rep.parent_id}; "
        + summaries.ui_hint(cfg.tracking.uri)
    )
    return written


def _units_and_tables(rep: Reproduction, tasks: Mapping[str, str], rows: Mapping[str, list[Row]],
                      seeds: list[int]) -> dict[str, Path]:
    """Every unit of every dataset on disk, then its tables (and the MVS paper's), logged to the
    parent run; returns the folders written, by dataset."""
    cfg, written = rep.cfg, {}
    out = Path(str(cfg.reproduce.out_dir))
    for name, settings in datasets_of(cfg).items():
        reason = missing_data(name, cfg.paths.data_dir)
        if reason is not None:
            print(reason)
            continue
        t1, task_rows = time.perf_counter(), rows[tasks[name]]
        runs = rep.dataset(name, settings, task_rows, seeds)
        data = rep.unit_cfg([*task_rows[0].overrides, *data_overrides(name, settings), f"seed={seeds[0]}"])
        written[name] = WRITERS[tasks[name]](
            rep.client, rep.parent_id, name, task_rows, runs, seeds, data, cfg.reproduce, out / name
        )
        tracking.log_metrics(rep.parent_id, {f"seconds_{name}": time.perf_counter() - t1})
        print(f"{name}: {written[name]} ({time.perf_counter() - t1:.0f} s in this invocation)")
    if runs_mvs(cfg):
        mvs = OmegaConf.to_container(scale_of(cfg).mvs, resolve=True)
        written["mvs"] = mvs_tables(rep, mvs, out / "mvs")
        print(f"mvs: {written['mvs']}")
    for key, folder in written.items():
        for path in sorted(folder.iterdir()):
            rep.client.log_artifact(rep.parent_id, str(path), artifact_path=key)
    return written


def hydra_compose(overrides: Sequence[str]) -> DictConfig:
    """The ``reproduce`` config with the command line's overrides, then a unit's."""
    task = list(HydraConfig.get().overrides.task)
    return hydra.compose(config_name="reproduce", overrides=[*task, *overrides])


@hydra.main(version_base="1.3", config_path="../conf", config_name="reproduce")
def main(cfg: DictConfig) -> None:
    # the tables read many small artifacts back: no progress bar for each
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    with tracking.sigterm_as_interrupt():  # SIGTERM ends every open run KILLED, exits with status 143
        run(cfg, hydra_compose)


if __name__ == "__main__":
    main()
