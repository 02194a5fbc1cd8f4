"""The Ray launcher of a multirun (``hydra/launcher=ray``): each job a Ray task on a cluster.

``conf/hydra/launcher/ray.yaml`` names :class:`hydra_plugins.gbfs_ray_launcher.ray_launcher.RayLauncher`
(Hydra instantiates launchers only from the ``hydra_plugins`` namespace), which calls :func:`launch`.
A job runs as Hydra's joblib launcher runs one in its worker processes: ``hydra.core.utils.run_job``
with the job's sweep config, in a Ray task reserving ``hydra.launcher.num_cpus`` CPUs on the cluster
at ``hydra.launcher.address`` (null: a local one); the jobs' returns come back in the sweep's order.

What Hydra's own ``hydra-ray-launcher`` does not give (it pins ``cloudpickle<3``, which the
installed ``dask``/``distributed`` exclude, and waits on its jobs one ``ray.get`` after the other):

* the settings are checked, and the cluster reached, before the multirun creates any store or run
  (:func:`check_settings`, called by :class:`runners.tuning.hydra_callbacks.CheckLauncher`);
* a job is never retried by Ray (``max_retries=0``): a job killed on its way would otherwise be
  run again and log its runs twice;
* every job is waited for before a failed one is reported (Hydra raises the first failure);
* Ctrl-C or SIGTERM to the sweep cancels its jobs (``ray.cancel``, which a running job turns into
  a SIGTERM to itself: its MLflow runs end KILLED and its Optuna trial FAIL) and waits up to
  :data:`CANCEL_GRACE` seconds for them before killing their workers; SIGTERM then exits with
  status 143.  A worker killed outright leaves RUNNING runs that the next run on its host marks
  FAILED (:func:`runners.tracking.runs.fail_dead_runs`).
"""

from __future__ import annotations

import logging
import signal
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, run_job, setup_globals
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict

from runners.core.checks import check_count
from runners.tracking import runs as tracking

log = logging.getLogger(__name__)

#: seconds the cancelled jobs of an interrupted sweep have to end their runs before their workers are
#: killed (a job notices the interrupt between two trees of a fit)
CANCEL_GRACE = 60.0
#: seconds the head of the cluster at ``hydra.launcher.address`` has to accept a connection
CONNECT_TIMEOUT = 10.0
#: how often the launcher wakes while it waits for the jobs, so that Ctrl-C and SIGTERM are handled
POLL_SECONDS = 0.5
#: ``ray.init`` arguments of a local cluster unless ``hydra.launcher.init`` says otherwise: no
#: dashboard (a web server on a fixed port, which a second sweep on the machine would find taken)
LOCAL_DEFAULTS = {"include_dashboard": False}
INSTALL = 'install Ray with pip install -e ".[ray]"'


def _settings(launcher: Mapping | DictConfig) -> dict[str, Any]:
    if isinstance(launcher, DictConfig):
        launcher = OmegaConf.to_container(launcher, resolve=True)
    return {"address": launcher.get("address"), "num_cpus": launcher.get("num_cpus"),
            "init": launcher.get("init") or {}}


def check_settings(launcher: Mapping | DictConfig) -> None:
    """Check the ``hydra.launcher`` settings of ``hydra/launcher=ray`` and connect to the cluster.

    Raises
    ------
    ValueError
        Naming the key: ``num_cpus`` not a whole number >= 1, ``init`` not a mapping (or naming the
        address), ``address`` not a string, Ray not installed, or no Ray cluster reached at
        ``address`` (a local one that could not start).
    """
    settings = _settings(launcher)
    check_count("hydra.launcher.num_cpus", settings["num_cpus"], 1, "the CPUs Ray reserves for each job",
                allow_none=False)
    init = settings["init"]
    if not isinstance(init, Mapping):
        raise ValueError(f"hydra.launcher.init must be a mapping of ray.init arguments, got {init!r}")
    if "address" in init:
        raise ValueError("hydra.launcher.init.address: give the cluster as hydra.launcher.address")
    address = settings["address"]
    if address is not None and (not isinstance(address, str) or not address.strip()):
        raise ValueError(f"hydra.launcher.address must be a Ray cluster's address (host:port of its head, "
                         f"ray://host:port or auto), or null for a local cluster; got {address!r}")
    connect(settings)


def connect(settings: Mapping[str, Any]) -> None:
    """Connect this process to the Ray cluster of ``settings`` (:func:`check_settings`'s keys), or
    start a local one; nothing when it is connected already.  ``ValueError`` naming
    ``hydra.launcher.address`` when no cluster answers there or it refuses this process."""
    try:
        import ray
    except ImportError as err:
        raise ValueError(f"hydra.launcher=ray needs Ray ({err}); {INSTALL}") from err
    if ray.is_initialized():
        return
    address, init = settings["address"], dict(settings["init"])
    if address not in (None, "auto", "local"):
        _probe(address)
    else:
        init = {**LOCAL_DEFAULTS, **init}
    try:
        ray.init(address=address, **init)
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as err:
        # the reason (a cluster with token authentication, say) is often only in the cause
        reasons = [str(e).strip().splitlines()[0] for e in (err, err.__cause__) if e and str(e).strip()]
        raise ValueError(f"hydra.launcher.address={address}: could not connect to a Ray cluster "
                         f"({': '.join(reasons)}); a cluster with token authentication (Ray's default) "
                         f"also needs RAY_AUTH_MODE=token and its token (RAY_AUTH_TOKEN or "
                         f"RAY_AUTH_TOKEN_PATH) in this environment") from err


#: what to do when nothing answers at ``hydra.launcher.address``
START_HINT = ("start a cluster with `ray start --head --port 6379` and give hydra.launcher.address=<its "
              "host>:6379, or leave hydra.launcher.address null for a local cluster")


def _probe(address: str) -> None:
    """Fail at once, naming the key, when nothing accepts connections at ``address``: ``ray.init``
    retries such a head for minutes."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"hydra.launcher.address={address}: not host:port, ray://host:port or auto; "
                         f"{START_HINT}")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT).close()
    except OSError as err:
        raise ValueError(f"hydra.launcher.address={address}: no Ray cluster answers there ({err}); "
                         f"{START_HINT}") from err


def execute_job(idx: int, sweep_config: DictConfig, hydra_context: HydraContext,
                task_function: TaskFunction, singleton_state: dict[Any, Any]) -> JobReturn:
    """One job, in a Ray worker: Hydra's global state of the launching process, then ``run_job``
    (as Hydra's joblib launcher runs a job in its worker processes)."""
    setup_globals()
    Singleton.set_state(singleton_state)
    HydraConfig.instance().set_config(sweep_config)
    previous = signal.signal(signal.SIGINT, _cancel_as_sigterm)
    try:
        return run_job(hydra_context=hydra_context, config=sweep_config, task_function=task_function,
                       job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")
    finally:
        signal.signal(signal.SIGINT, previous)   # the worker runs other tasks after this one


def _cancel_as_sigterm(signum: int, frame: object) -> None:
    """``ray.cancel`` interrupts a running task as Ctrl-C would (``_thread.interrupt_main``).  A
    KeyboardInterrupt raised inside database code can leave a transaction open, so that the job cannot
    end its runs; as a SIGTERM it takes the runners' path instead (held back in database code, the
    runs ended KILLED, exit status 143: :func:`runners.tracking.runs.sigterm_as_interrupt`)."""
    signal.raise_signal(signal.SIGTERM)


def launch(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[JobReturn]:
    """Run the jobs ``job_overrides`` of ``launcher`` (a set-up
    :class:`~hydra_plugins.gbfs_ray_launcher.ray_launcher.RayLauncher`) as Ray tasks; return their
    :class:`~hydra.core.utils.JobReturn` in order, a job that ended without one (its worker died,
    its task was cancelled) as a FAILED one holding the Ray error."""
    import ray

    setup_globals()
    config, context = launcher.config, launcher.hydra_context
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    Path(str(config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
    settings = _settings(launcher.settings)
    connect(settings)   # already connected by the CheckLauncher callback, unless it is not configured
    task = ray.remote(num_cpus=settings["num_cpus"], max_retries=0)(execute_job)
    log.info(f"Ray launcher: {len(job_overrides)} jobs on {settings['address'] or 'a local cluster'}, "
             f"{settings['num_cpus']} CPU(s) each; sweep output dir: {config.hydra.sweep.dir}")
    state, jobs = Singleton.get_state(), []
    with tracking.sigterm_as_interrupt():   # SIGTERM cancels the jobs as Ctrl-C does, then exits 143
        try:
            for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
                log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
                sweep_config = context.config_loader.load_sweep_config(config, list(overrides))
                with open_dict(sweep_config):
                    sweep_config.hydra.job.id = f"{sweep_config.hydra.job.name}_{idx}"
                    sweep_config.hydra.job.num = idx
                jobs.append((overrides, sweep_config,
                             task.remote(idx, sweep_config, context, launcher.task_function, state)))
            _wait([ref for _, _, ref in jobs])
        except BaseException:
            _cancel([ref for _, _, ref in jobs])
            raise
    return [_job_return(ref, overrides, sweep_config) for overrides, sweep_config, ref in jobs]


def _wait(refs: list) -> None:
    """Block until every job has ended, waking every :data:`POLL_SECONDS` for the signal handlers."""
    import ray

    pending = list(refs)
    while pending:
        _, pending = ray.wait(pending, num_returns=len(pending), timeout=POLL_SECONDS)


def _cancel(refs: list) -> None:
    """Cancel the jobs: a SIGTERM inside the running ones (:func:`_cancel_as_sigterm`; their runs end KILLED),
    the queued ones never start; a job still running after :data:`CANCEL_GRACE` seconds has its
    worker killed."""
    import ray

    if not refs:
        return
    log.warning(f"interrupted: cancelling {len(refs)} Ray jobs; waiting up to {CANCEL_GRACE:.0f} s for them "
                f"to end their runs")
    for ref in refs:
        ray.cancel(ref)
    _, left = ray.wait(refs, num_returns=len(refs), timeout=CANCEL_GRACE)
    for ref in left:
        log.warning("a cancelled Ray job did not end in time: its worker is killed")
        ray.cancel(ref, force=True)


def _job_return(ref: Any, overrides: Sequence[str], sweep_config: DictConfig) -> JobReturn:
    import ray

    try:
        return ray.get(ref)
    except ray.exceptions.RayError as err:
        failed = JobReturn(overrides=list(overrides), cfg=sweep_config, status=JobStatus.FAILED)
        failed.return_value = RuntimeError(
            f"the Ray job of {' '.join(filter_overrides(overrides)) or 'the sweep'} ended without a "
            f"result ({type(err).__name__}): {str(err).strip().splitlines()[0]}")
        return failed
