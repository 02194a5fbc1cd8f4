"""Hydra callbacks of the harness (configured in ``conf/hydra/default.yaml``)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig

from runners.tracking import mlflow_native
from runners.tracking import runs as tracking

#: the launcher plugins that ``conf/hydra/launcher`` configs name without requiring them to compose:
#: the package of each, the modules it needs, and the extra of pyproject.toml that installs them
LAUNCHER_PLUGINS = {
    "hydra_plugins.hydra_submitit_launcher": (("submitit",), "slurm"),
}


#: the harness's own launchers, by ``_target_``: the function (``module:name``) that checks their
#: ``hydra.launcher`` settings (and reaches their cluster) before any job, raising ``ValueError``
#: naming the key
LAUNCHER_CHECKS = {
    "hydra_plugins.gbfs_ray_launcher.ray_launcher.RayLauncher": "runners.tuning.ray_launcher:check_settings",
}


def check_launcher(launcher: DictConfig | None) -> None:
    """Raise ``SystemExit`` saying which extra to install when the plugin of ``hydra.launcher``
    cannot be imported, or naming the key of a bad setting of one of :data:`LAUNCHER_CHECKS`.

    Without the plugin Hydra only says it "could not load" the launcher's config or class;
    ``conf/hydra/launcher/slurm.yaml`` includes the plugin's settings optionally so that it still
    composes and this check can name the extra.
    """
    target = str((launcher or {}).get("_target_") or "")
    for package, (needs, extra) in LAUNCHER_PLUGINS.items():
        if not target.startswith(package + "."):
            continue
        for module in (target.rpartition(".")[0], *needs):
            try:
                importlib.import_module(module)
            except ImportError as err:
                raise SystemExit(f"hydra.launcher: the launcher {target.rpartition('.')[2]} needs "
                                 f"{package.rpartition('.')[2].replace('_', '-')} ({err}); install it with "
                                 f'pip install -e ".[{extra}]"') from err
    if target in LAUNCHER_CHECKS:
        module, _, name = LAUNCHER_CHECKS[target].partition(":")
        try:
            getattr(importlib.import_module(module), name)(launcher)
        except ValueError as err:
            raise SystemExit(str(err)) from err


class CheckLauncher(Callback):
    """Stop a multirun whose launcher plugin is not installed, naming the extra to install, before
    any job or MLflow run (a callback's ``Exception`` would only be a warning to Hydra, hence
    ``SystemExit``)."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        check_launcher(config.hydra.get("launcher"))


class InitMLflowStore(Callback):
    """Create the MLflow store and experiment once, in the launching process, before the jobs.

    Parallel jobs (joblib, SLURM) on a fresh SQLite store otherwise race to create its schema
    ("table _alembic_tmp_runs already exists") and the experiment.  A ``tracking.uri`` that is no
    tracking store, or whose server does not answer within ``tracking.timeout``, stops the multirun
    here (``SystemExit``: Hydra turns a callback's exceptions into warnings) rather than failing
    every job.
    """

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:   # a bad URI or SQLite file, or a server that does not answer within tracking.timeout
            exp_id = tracking.init_store(config.tracking.uri, config.tracking.experiment,
                                         config.tracking.get("artifact_location"),
                                         config.tracking.get("timeout"), config.tracking.get("max_retries"))
        except (ValueError, ConnectionError) as err:
            raise SystemExit(str(err)) from err
        # its UI tags too, so that parallel jobs find them set and write none
        mlflow_native.configure_ui(exp_id, MlflowClient(tracking_uri=config.tracking.uri))


class InitOptunaStorage(Callback):
    """Create the Optuna storage once (an RDB schema, or a journal file), before the jobs, when
    the sweep tunes (``tune=optuna``).

    Parallel ``runners.tune`` jobs on a fresh SQLite storage otherwise race to create it ("table
    trial_system_attributes already exists", "UNIQUE constraint failed: alembic_version").
    """

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        if config.get("tune") is not None and config.tune.get("enabled"):
            from runners.tracking import stores
            from runners.tuning.storages import check_storage, open_storage

            try:   # a bad URL, driver, SQLite or journal file, or a server that does not answer in time
                check_storage(config.tune.get("storage"), "tune.storage")
                open_storage(config.tune.storage, config.tune.get("storage_timeout", stores.DEFAULT_TIMEOUT))
            except (ValueError, ConnectionError) as err:
                raise SystemExit(str(err)) from err


#: tags every run has, checked for a column even when the sweep does not name them
ALWAYS_CHECKED = ("sampler", "seed")


def swept_keys(config: DictConfig) -> list[str]:
    """The config keys a multirun sweeps: the sweep overrides of the command line
    (``method.params.mu=0.1,1``) and the sweeper's ``params`` (an experiment's), in that order."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    given = list(config.hydra.overrides.task)
    given += [f"{k}={v}" for k, v in (config.hydra.sweeper.get("params") or {}).items()]
    keys = [o.key_or_group for o in OverridesParser.create().parse_overrides(given) if o.is_sweep_override()]
    return list(dict.fromkeys(keys))


def job_overrides(run) -> dict[str, str]:
    """The command-line overrides of the multirun job that logged ``run`` (its tag
    ``sweep_overrides``), by key or group: ``{"experiment": "table3_gisette", ...}``."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        given = json.loads(run.data.tags.get("sweep_overrides", "[]"))
        parsed = OverridesParser.create().parse_overrides([str(o) for o in given])
    except Exception:   # noqa: BLE001 -- a tag edited by hand: the table goes on without it
        return {}
    return {o.key_or_group: o.get_value_element_as_str() for o in parsed}


def run_value(run, key: str) -> str | None:
    """A run's value of config key ``key``: its tag, its param, for a config group (``sampler``)
    the param ``<group>.name``, else what its job's overrides chose (a group that leaves no name in
    the config, such as ``experiment``)."""
    data = run.data
    for found in (data.tags.get(key), data.params.get(key), data.params.get(f"{key}.name")):
        if found is not None:
            return found
    return job_overrides(run).get(key)


def dataset_of(run) -> str:
    """A run's dataset in the table: its tag ``dataset`` (for ``dataset=file`` the file's name, as
    :func:`runners.tracking.mlflow_native.dataset_label` names it; runs of older stores, tagged
    ``file``, by their param ``dataset.path``)."""
    name, path = run.data.tags.get("dataset", "?"), run.data.params.get("dataset.path")
    if name == mlflow_native.files.NAME and path not in (None, "", "None", "???"):
        return Path(path).name
    return name


def varying_columns(runs: list, keys: list[str], shown: set[str]) -> list[str]:
    """The ``keys`` whose values differ between ``runs`` and that are not ``shown`` already."""
    return [k for k in dict.fromkeys(keys) if k not in shown and len({run_value(r, k) for r in runs}) > 1]


class PrintComparison(Callback):
    """At the end of a multirun, print the sweep's runs as a table and how to open the MLflow UI.

    One row per fitted model: a tuning study's refit, a selection path's budgets.  Besides method,
    dataset (a data file by its name, :func:`dataset_of`) and budget, the table shows every swept
    parameter (and the sampler and seed) whose value differs between its rows, so a sweep over e.g.
    samplers does not print identical-looking rows.  A sweep over seeds prints one row per
    configuration instead, mean ± sd over its seeds
    (:func:`runners.core.summaries.aggregate_seeds`); ``+print_per_seed=true`` adds the runs' rows.

    The table and the sweep's chart -- the test score against the number of selected features, one
    point per configuration, mean ± sd over its seeds -- are also logged to a run of their own in the
    experiment (``best ... · sweep summary``, tag ``role=sweep_summary``; :func:`log_summary`), which the
    comparisons leave out.
    """

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from runners.core.summaries import aggregate_seeds, format_table, ui_hint

        client = MlflowClient(tracking_uri=config.tracking.uri)
        exp = client.get_experiment_by_name(config.tracking.experiment)
        if exp is None:
            return
        sweep = str(config.hydra.sweep.dir).replace("'", "\\'")
        found = client.search_runs([exp.experiment_id], filter_string=f"tags.sweep_dir = '{sweep}'",
                                   order_by=["attributes.start_time ASC"], max_results=5000)
        runs = [r for r in found if r.data.tags.get("role") not in tracking.NOT_A_RESULT]
        columns = varying_columns(runs, [*ALWAYS_CHECKED, *swept_keys(config)],
                                  shown={"method", "dataset", "budget"})
        rows = [{**r.data.metrics, **{k: run_value(r, k) for k in columns},
                 "method": r.data.tags.get("method", "?") + ("" if r.info.status == "FINISHED"
                                                             else f" ({r.info.status})"),
                 "dataset": dataset_of(r), "budget": r.data.tags.get("budget")}
                for r in runs]
        pooled, pooled_columns = aggregate_seeds(rows, columns)
        if "seed" in columns and len(pooled) < len(rows):
            # the seeds of one configuration pooled: the spread over seeds is as large as many method
            # differences; ``+print_per_seed=true`` prints every run's row as well
            table = (format_table(pooled, pooled_columns) + "\n\n(mean ± sd over the seeds of each "
                     "configuration; +print_per_seed=true adds one row per run)")
            print("\n" + table)
            if config.get("print_per_seed"):
                print("\n" + format_table(rows, columns))
        else:
            table = format_table(rows, columns)
            print("\n" + table)
        if runs:
            log_summary(client, exp.experiment_id, str(config.hydra.sweep.dir), table, rows, columns)
        print(ui_hint(config.tracking.uri, exp.experiment_id))


def log_summary(client: MlflowClient, exp_id: str, sweep: str, table: str, rows: list[dict],
                columns: list[str]) -> str:
    """A FINISHED run ``best ... · sweep summary`` (:func:`runners.core.summaries.summary_name`; tags
    ``role=sweep_summary``, ``sweep_dir``) holding the sweep's
    table (``comparison.md``) and chart (``auc_vs_features.png``; the score is the task's,
    :func:`runners.core.summaries.chart_points`); returns its id.  It ends FAILED if logging fails."""
    import tempfile

    from runners.core.summaries import chart_points, summary_name
    from runners.tracking import run_figures

    tags = {"role": "sweep_summary", "sweep_dir": sweep, "worker": tracking.worker_id()}
    score, points = chart_points(rows, columns)
    run = client.create_run(exp_id, run_name=summary_name(score, points), tags=tags)
    status = "FAILED"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "comparison.md").write_text(table + "\n")
            client.log_artifact(run.info.run_id, str(Path(tmp) / "comparison.md"))
            if points:
                png = run_figures.sweep_figure(points, score, Path(tmp) / "auc_vs_features.png",
                                               f"{score} against selected features, this sweep")
                client.log_artifact(run.info.run_id, str(png))
        status = "FINISHED"
    finally:
        client.set_terminated(run.info.run_id, status)
    return run.info.run_id
