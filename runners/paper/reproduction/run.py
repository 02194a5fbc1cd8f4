"""Running a reproduction of the papers' tables and figures (``python -m runners.reproduce``): its
MLflow parent run, its units, and the tables written from their runs.

A unit is one row of a table (:class:`runners.paper.reproduction.plan.Row`) on one dataset at one seed:
on the first seed a tuning study and its refit, given to the command ``runners.tune``'s ``run``; on
every further seed a fit of the tuned parameters, given to ``runners.run``'s (the commands are
passed in by :mod:`runners.reproduce`, as ``tune`` and ``fit``). Each unit's top-level run is nested
under the parent run and tagged ``reproduction``, ``repro_dataset``, ``repro_row``, ``repro_config``
(a digest of the settings that made it, :func:`runners.paper.reproduction.plan.digest`): a unit whose
FINISHED run exists is found by those tags and reused. The tables are written from the runs read
back (:mod:`runners.paper.tables`, :mod:`runners.paper.reproduction.ranking`; the MVS paper's from the
row-sampling comparison's run, :func:`runners.paper.reproduction.parts.mvs_tables`) and logged to the
parent run as artifacts, one folder per dataset.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from mlflow.entities import Run
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf, open_dict

from runners.core import summaries
from runners.paper import tables as paper_tables
from runners.paper.reproduction import jobs as reproduce_jobs
from runners.paper.reproduction import lock as reproduce_lock
from runners.paper.reproduction import parts as reproduce_parts
from runners.paper.reproduction import ranking as reproduce_ranking
from runners.paper.reproduction.plan import (
    Row,
    data_overrides,
    datasets_of,
    digest,
    missing_data,
    papers_of,
    rows_by_task,
    runs_mvs,
    sampler_seed,
    scale_of,
    topk_k,
)
from runners.tracking import runs as tracking
from runners.tracking.run_log import RunLog
from runners.tuning import checks as tuning_checks

log = logging.getLogger(__name__)

#: ``overrides -> config``: the reproduction's own config composed with a unit's overrides
Compose = Callable[[Sequence[str]], DictConfig]
#: a command's ``run`` that a unit's config is given to: ``runners.tune.run`` (a study and its
#: refit) or ``runners.run.run`` (one fit)
Command = Callable[[DictConfig], Mapping[str, float]]
ROLE = "reproduction"
#: ``dataset.task`` -> what writes a dataset's tables from its runs (the same arguments)
WRITERS = {"binary": paper_tables.write_dataset, "ranking": reproduce_ranking.write_dataset}


@dataclass
class Reproduction:
    """The parent run and the units under it; ``compose`` builds a unit's config, ``tune`` runs a
    unit's study (first seed) and ``fit`` a unit's fit of the tuned parameters (further seeds)."""

    cfg: DictConfig
    compose: Compose
    tune: Command
    fit: Command
    client: MlflowClient = field(init=False)
    parent_id: str = ""
    exp_id: str = ""
    #: units of this invocation: how many in all, how many reached, how many ran and their seconds
    total: int = 0
    reached: int = 0
    ran: int = 0
    seconds: float = 0.0
    #: whether worker processes ran the units first (:mod:`runners.paper.reproduction.jobs`)
    in_workers: bool = False

    def progress(self) -> str:
        """``"unit k of N, ETA 12 min"``: the units left at the mean time of those run so far in this
        invocation (reused ones cost nothing and do not count)."""
        eta = ""
        if self.ran:
            left = (self.total - self.reached + 1) * self.seconds / self.ran
            eta = f", ETA {left / 60:.0f} min" if left >= 60 else f", ETA {left:.0f} s"
        return f"unit {self.reached} of {self.total}{eta}"

    def attach(self, parent_id: str) -> None:
        """Work under the parent run ``parent_id`` of the reproduction that started this process (a
        worker, :mod:`runners.paper.reproduction.jobs`), which holds its lock and ends it."""
        self.exp_id = tracking.configure(self.cfg.tracking)
        self.client = MlflowClient()
        self.parent_id = parent_id

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
            self.run_log.tags(tags)
            log.info("resuming reproduction %r (MLflow run %s)", name, self.parent_id)
        else:
            run = self.client.create_run(self.exp_id, run_name=f"reproduce-{name}", tags=tags)
            self.parent_id = run.info.run_id
            scale = OmegaConf.to_container(scale_of(self.cfg), resolve=True)
            self.run_log.params(tracking.flatten(scale, "scale."))

    @property
    def run_log(self) -> RunLog:
        """The log of the parent run."""
        return RunLog(self.parent_id, self.client)

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
            scale = scale_of(self.cfg)
            overrides += [f"tune.n_trials={int(scale.n_trials)}",
                          f"tune.sampler_seed={sampler_seed(seed, dataset, row.name)}"]
            if scale.get("n_startup_trials") is not None:
                overrides.append(f"tune.n_startup_trials={int(scale.n_startup_trials)}")
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
        self.reached += 1
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
        t0 = time.perf_counter()
        if first:
            log.info(
                "%s: %s on %s: tuning (%d trials: %d random start-up, then TPE; sampler seed %d), "
                "then refit on seed %d",
                self.progress(),
                row.label,
                dataset,
                cfg.tune.n_trials,
                min(cfg.tune.n_startup_trials, cfg.tune.n_trials),
                cfg.tune.sampler_seed,
                seed,
            )
            self.tune(cfg)
        else:
            log.info("%s: %s on %s: the tuned parameters on seed %d", self.progress(), row.label, dataset,
                     seed)
            self.fit(cfg)
        self.ran, self.seconds = self.ran + 1, self.seconds + time.perf_counter() - t0
        found = self.find(dataset, row.name, seed, role, config)
        if found is None:
            raise RuntimeError(f"{row.label} on {dataset}, seed {seed}: no FINISHED run was logged")
        return found

    def dataset(self, name: str, settings: Mapping, rows: list[Row], seeds: Sequence[int]) -> dict[str, Run]:
        """Every row at every seed on ``name``; returns ``{"<row>/<seed>": run}``."""
        runs: dict[str, Run] = {}
        by_name = {r.name: r for r in rows}
        for row in rows:
            best = None
            if row.tuned_as:  # a twin: its source's tuned parameters on every seed, no study
                best = tuned_params(self.compose, by_name[row.tuned_as], runs[f"{row.tuned_as}/{seeds[0]}"])
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
                run = self.unit(name, settings, row, seed, i == 0 and not row.tuned_as, k, best)
                runs[f"{row.name}/{seed}"] = run
                if i == 0 and not row.tuned_as:
                    best = tuned_params(self.compose, row, run)
        return runs

    def finish(self, status: str, seconds: float) -> None:
        """Log this invocation's ``seconds`` and end the parent run with ``status``."""
        self.run_log.metrics({"invocation_seconds": seconds})
        self.client.set_terminated(self.parent_id, status)


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


def reproduce(cfg: DictConfig, compose: Compose, *, tune: Command, fit: Command,
              workers: reproduce_jobs.Workers | None = None) -> dict[str, Path]:
    """Run (or resume) the reproduction of ``cfg.reproduce``, its units' configs built by ``compose``,
    its studies run by ``tune`` and its further seeds' fits by ``fit``; return the folders written,
    by dataset.  With ``workers`` and ``reproduce.jobs`` above 1, its independent parts run first in
    that many worker processes at once (:mod:`runners.paper.reproduction.jobs`).  In a worker (the
    parent run's id in :data:`runners.paper.reproduction.jobs.PARENT_ENV`) it runs its part under that
    parent run, without the lock, and leaves the parent run to the process that started it.

    Raises
    ------
    ValueError
        On a bad ``reproduce`` setting or one its units share
        (:func:`runners.tuning.checks.check_reproduction`), before any run is created.
    RuntimeError
        When the same reproduction already runs in another process
        (:mod:`runners.paper.reproduction.lock`), before any run is created; when a worker fails,
        naming its part, once the running workers have ended (the parent run then ends FAILED).
    """
    tuning_checks.check_reproduction(cfg)   # the settings its units share, naming the key
    jobs = reproduce_jobs.check_jobs(cfg.reproduce.get("jobs", 1))
    scale = scale_of(cfg)
    tasks = {name: dataset_task(compose, name, settings) for name, settings in datasets_of(cfg).items()}
    rows = rows_by_task(cfg, tasks)
    rep = Reproduction(cfg, compose, tune, fit)
    parent = os.environ.get(reproduce_jobs.PARENT_ENV)
    if parent:
        rep.attach(parent)
        return _units_and_tables(rep, tasks, rows, [int(s) for s in scale.seeds], worker=True)
    with reproduce_lock.hold(cfg):   # a second reproduction of this name stops here, naming the first
        rep.start()
        t0, status = time.perf_counter(), "FAILED"
        try:
            if workers is not None and jobs > 1:
                todo = reproduce_jobs.items(_on_disk(cfg), runs_mvs(cfg), _parts(cfg))
                rep.in_workers = workers.run_all(cfg, todo, jobs, rep.parent_id)
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


def _on_disk(cfg: DictConfig) -> list[str]:
    """The datasets of the GT-GBM paper's tables this reproduction runs whose files are on disk."""
    return [name for name in datasets_of(cfg) if missing_data(name, cfg.paths.data_dir) is None]


def _parts(cfg: DictConfig) -> list[str]:
    """The parts of :mod:`runners.paper.reproduction.parts` this reproduction makes."""
    return [p for p in papers_of(cfg) if p in reproduce_parts.PARTS and scale_of(cfg).get(p)]


def _units_and_tables(rep: Reproduction, tasks: Mapping[str, str], rows: Mapping[str, list[Row]],
                      seeds: list[int], worker: bool = False) -> dict[str, Path]:
    """Every unit of every dataset on disk, then its tables (and the MVS paper's, and the parts of
    :mod:`runners.paper.reproduction.parts`), logged to the parent run; returns the folders written,
    by dataset or part.  A ``worker`` makes the runs only (and logs each dataset's seconds): the
    reproduction writes every table from them afterwards."""
    cfg, written = rep.cfg, {}
    out = Path(str(cfg.reproduce.out_dir))
    rep.total = sum(len(rows[tasks[name]]) * len(seeds) for name in _on_disk(cfg))
    for name, settings in datasets_of(cfg).items():
        reason = missing_data(name, cfg.paths.data_dir)
        if reason is not None:
            print(reason)
            continue
        t1, task_rows = time.perf_counter(), rows[tasks[name]]
        runs = rep.dataset(name, settings, task_rows, seeds)
        if worker:   # its units only: the reproduction writes the tables once every worker is done
            rep.run_log.metrics({f"seconds_{name}": time.perf_counter() - t1})
            print(f"{name}: {len(runs)} units ({time.perf_counter() - t1:.0f} s in this worker)")
            continue
        data = rep.unit_cfg([*task_rows[0].overrides, *data_overrides(name, settings), f"seed={seeds[0]}"])
        written[name] = WRITERS[tasks[name]](paper_tables.DatasetRuns(
            rep.client, rep.parent_id, name, task_rows, runs, seeds, data, cfg.reproduce, out / name))
        if not rep.in_workers:  # after workers, the dataset's seconds are the worker's
            rep.run_log.metrics({f"seconds_{name}": time.perf_counter() - t1})
        print(f"{name}: {written[name]} ({time.perf_counter() - t1:.0f} s in this invocation)")
    if runs_mvs(cfg):
        mvs = OmegaConf.to_container(scale_of(cfg).mvs, resolve=True)
        folder = reproduce_parts.mvs_tables(rep.client, rep.exp_id, rep.parent_id, rep.cfg, mvs,
                                            None if worker else out / "mvs")
        if folder is not None:
            written["mvs"] = folder
            print(f"mvs: {folder}")
    for name in _parts(cfg):
        settings = OmegaConf.to_container(scale_of(cfg)[name], resolve=True)
        folder = reproduce_parts.run_part(rep.client, rep.exp_id, rep.parent_id, name, settings,
                                          digest(settings, str(cfg.reproduce.name)),
                                          None if worker else out / name)
        if folder is not None:
            written[name] = folder
            print(f"{name}: {folder}")
    if worker:
        return written
    parent = rep.run_log
    for key, folder in written.items():
        for path in sorted(folder.iterdir()):
            parent.artifact(path, artifact_path=key)
    return written


def hydra_compose(overrides: Sequence[str]) -> DictConfig:
    """The ``reproduce`` config with the command line's overrides, then a unit's."""
    task = list(HydraConfig.get().overrides.task)
    return hydra.compose(config_name="reproduce", overrides=[*task, *overrides])


