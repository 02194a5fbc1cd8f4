"""``hydra/launcher=ray`` (runners.tuning.ray_launcher) against real Ray clusters on this machine: one
the tests start with ``ray start --head`` (2 CPUs, token authentication with a token of their own)
and the local one a sweep starts itself.  The sweeps are the joblib launcher's, with its guarantees:
every job's run in the MLflow store and one sweep-summary run, a study shared by several jobs
finishing exactly ``tune.n_trials`` counted trials, and a job killed by SIGTERM or cancelled leaving
no RUNNING run and no finished trial lost; bad launcher settings stop the sweep before anything
exists."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from harness_utils import TINY, compose_cfg, stored_study, study_runs, tiny_study_cfg, tune_argv, wait_for
from mlflow.tracking import MlflowClient
from optuna.trial import TrialState

from runners.tuning import study as study_module
from runners.tuning.hydra_callbacks import CheckLauncher

REPO = Path(__file__).resolve().parents[2]
#: 128 + SIGTERM: what a runner or the sweep exits with after SIGTERM
EXIT_SIGTERM = 143

pytestmark = pytest.mark.usefixtures("restore_mlflow")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def _ray_env(folder: Path) -> dict[str, str]:
    """The environment of a cluster and its drivers: token authentication (Ray's default for a
    cluster) with a token of the test's own, not the user's ``~/.ray/auth_token``."""
    token = folder / "auth_token"
    if not token.exists():
        token.write_text(secrets.token_hex(32))
    return {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}


@pytest.fixture(scope="module")
def ray_cluster():
    """A Ray cluster of 2 CPUs, its head on 127.0.0.1: ``(address, environment of its drivers)``.
    Stopped by ending the ``ray start --block`` process, which stops the processes it started; any
    left in its session are killed by pid (``ray stop`` would stop every Ray cluster of the machine)."""
    pytest.importorskip("ray", reason='Ray is not installed (pip install -e ".[ray]")')
    # a short folder: Ray's socket paths inside it must fit in 107 characters
    folder = Path(tempfile.mkdtemp(prefix="gbfs-ray-"))
    env, port = _ray_env(folder), _free_port()
    ports = [f"--{name}-port={_free_port()}" for name in ("ray-client-server", "dashboard-agent-listen",
                                                            "dashboard", "metrics-export")]
    argv = [str(Path(sys.executable).parent / "ray"), "start", "--head", "--block",
            "--node-ip-address=127.0.0.1", f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
            "--disable-usage-stats",
            f"--temp-dir={folder / 'ray'}", f"--object-store-memory={100 * 2**20}", *ports]
    with open(folder / "head.log", "w") as out:
        head = subprocess.Popen(argv, env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        wait_for(lambda: head.poll() is not None or _answers(port), "the Ray head to listen", timeout=180)
        assert head.poll() is None, (folder / "head.log").read_text()[-3000:]
        yield f"127.0.0.1:{port}", env
    finally:
        head.terminate()
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            head.kill()
        found = subprocess.run(["ps", "-s", str(head.pid), "-o", "pid="], capture_output=True, text=True)
        for pid in map(int, found.stdout.split()):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(folder, ignore_errors=True)


def _runs(uri: str, role: str | None = None) -> list:
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("gbfs")
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    return [r for r in runs if role is None or r.data.tags.get("role") == role]


def _multirun(module: str, root: Path, overrides: list[str]) -> list[str]:
    """The command line of a multirun of ``module`` on the TINY data under ``root``."""
    argv = tune_argv(root, overrides) if module == "runners.tune" else \
        [sys.executable, "-m", module, f"paths.root_dir={root}", *TINY, *overrides]
    argv.insert(argv.index(module) + 1, "-m")
    return argv


# ------------------------------------------------------------------------------- settings

def test_the_ray_launcher_composes():
    launcher = compose_cfg(Path("/tmp/unused"), ["hydra/launcher=ray"], hydra_cfg=True).hydra.launcher
    assert launcher._target_ == "hydra_plugins.gbfs_ray_launcher.ray_launcher.RayLauncher"
    assert launcher.address is None and launcher.num_cpus == 1 and dict(launcher.init) == {}


@pytest.mark.parametrize("override, message", [
    ("hydra.launcher.num_cpus=0", r"hydra.launcher.num_cpus must be a positive whole number"),
    ("hydra.launcher.num_cpus=1.5", r"hydra.launcher.num_cpus must be a positive whole number"),
    ("+hydra.launcher.init.address=x:1", r"hydra.launcher.init.address: give the cluster as hydra.launcher"),
    ("hydra.launcher.address=nohost", r"hydra.launcher.address=nohost: not host:port"),
])
def test_bad_ray_settings_name_the_key(tmp_path, override, message):
    cfg = compose_cfg(tmp_path, ["hydra/launcher=ray", override], hydra_cfg=True)
    with pytest.raises(SystemExit, match=message):
        CheckLauncher().on_multirun_start(cfg)


def test_a_sweep_without_ray_installed_names_the_extra(tmp_path, monkeypatch):
    cfg = compose_cfg(tmp_path, ["hydra/launcher=ray"], hydra_cfg=True)
    monkeypatch.setitem(sys.modules, "ray", None)   # every import of it fails, as without Ray
    with pytest.raises(SystemExit, match=r'hydra.launcher=ray needs Ray .*pip install -e "\.\[ray\]"'):
        CheckLauncher().on_multirun_start(cfg)


def test_an_unreachable_ray_address_names_the_key_at_once(tmp_path):
    pytest.importorskip("ray", reason='Ray is not installed (pip install -e ".[ray]")')
    address = f"127.0.0.1:{_free_port()}"   # nothing listens there
    cfg = compose_cfg(tmp_path, ["hydra/launcher=ray", f"hydra.launcher.address={address}"], hydra_cfg=True)
    with pytest.raises(SystemExit, match=rf"hydra.launcher.address={address}: no Ray cluster answers there "
                                         r".*Connection refused"):
        CheckLauncher().on_multirun_start(cfg)


@pytest.mark.slow
@pytest.mark.parametrize("override, message", [
    ("hydra.launcher.num_cpus=0", "hydra.launcher.num_cpus must be a positive whole number"),
    ("hydra.launcher.address=127.0.0.1:PORT", "hydra.launcher.address=127.0.0.1:PORT: no Ray cluster"),
])
def test_a_sweep_with_bad_ray_settings_stops_before_anything_exists(tmp_path, override, message):
    pytest.importorskip("ray", reason='Ray is not installed (pip install -e ".[ray]")')
    port = str(_free_port())
    argv = _multirun("runners.tune", tmp_path, ["hydra/launcher=ray", override.replace("PORT", port),
                                                "seed=0,1"])
    res = subprocess.run(argv, cwd=REPO, env=_ray_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert res.returncode == 1 and message.replace("PORT", port) in res.stderr, res.stderr[-3000:]
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "optuna.db").exists()
    assert not (tmp_path / "outputs").exists()


# ------------------------------------------------------------------------------- sweeps

@pytest.mark.slow
def test_a_sweep_without_the_clusters_token_names_the_address(tmp_path, ray_cluster):
    """The cluster authenticates by token: a sweep connecting without it stops, naming the key and
    Ray's reason, before any store exists."""
    address, env = ray_cluster
    env = {k: v for k, v in env.items() if not k.startswith("RAY_AUTH")}
    argv = _multirun("runners.run", tmp_path, ["hydra/launcher=ray", f"hydra.launcher.address={address}",
                                               "method=agbm,gbfs"])
    res = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 1, res.stderr[-3000:]
    assert f"hydra.launcher.address={address}: could not connect to a Ray cluster" in res.stderr
    assert "InvalidAuthToken" in res.stderr, res.stderr[-3000:]
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "outputs").exists()



@pytest.mark.slow
def test_a_multirun_on_a_local_ray_cluster_logs_every_job_and_a_summary(tmp_path):
    """No address: the sweep starts a local cluster (2 CPUs here) and stops it at its end."""
    pytest.importorskip("ray", reason='Ray is not installed (pip install -e ".[ray]")')
    folder = Path(tempfile.mkdtemp(prefix="gbfs-ray-"))   # Ray's sockets: a short path
    try:
        argv = _multirun("runners.run", tmp_path, [
            "hydra/launcher=ray", "+hydra.launcher.init.num_cpus=2",
            f"+hydra.launcher.init._temp_dir={folder}", "method=agbm,gbfs", "seed=0,1", "n_threads=1"])
        res = subprocess.run(argv, cwd=REPO, env=_ray_env(folder), capture_output=True, text=True,
                             timeout=900)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert res.returncode == 0, res.stderr[-3000:]
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    runs = [r for r in _runs(uri) if r.data.tags.get("role") != "sweep_summary"]
    assert sorted((r.data.tags["method"], r.data.tags["seed"]) for r in runs) == [
        ("agbm", "0"), ("agbm", "1"), ("gbfs", "0"), ("gbfs", "1")]
    assert all(r.info.status == "FINISHED" for r in runs)
    assert len({r.data.tags["sweep_dir"] for r in runs}) == 1
    assert len({r.data.tags["worker"] for r in runs}) >= 2   # jobs ran in several Ray workers at once
    (summary,) = _runs(uri, role="sweep_summary")
    assert summary.info.status == "FINISHED"
    assert max(r.info.end_time for r in runs) <= summary.info.start_time
    assert res.stdout.count("| gisette_like | - | 2 |") == 2   # the table: one row per method, 2 seeds


@pytest.mark.slow
def test_jobs_on_a_ray_cluster_share_one_study(tmp_path, ray_cluster):
    """``python -m runners.tune -m hydra/launcher=ray hydra.launcher.address=... seed=0,0``: two jobs
    of one study run exactly ``tune.n_trials`` counted trials between them."""
    address, env = ray_cluster
    argv = _multirun("runners.tune", tmp_path, [
        "hydra/launcher=ray", f"hydra.launcher.address={address}", "seed=0,0", "tune.n_trials=6",
        "tune.n_startup_trials=2", "tune.pruner=null", "n_threads=1",
        # trials of a second or more each: the second job starts before the first has run them all
        "method.params.n_estimators=150"])
    res = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    cfg = tiny_study_cfg(tmp_path, "tune.n_trials=6")
    study = stored_study(cfg)
    ran = [t for t in study.trials if study_module.NOT_RUN not in t.user_attrs]
    assert study_module.n_done(study) == 6 and [t.state for t in ran] == [TrialState.COMPLETE] * 6
    assert len({t.user_attrs["worker"] for t in ran}) == 2   # both jobs ran trials
    roles = study_runs(cfg.tracking.uri)
    assert len(roles["study"]) == 1 and len(roles["refit"]) == 1 and len(roles["trial"]) == 6
    assert all(r.info.status == "FINISHED" for rs in roles.values() for r in rs)
    assert res.stdout.count("| gisette_like |") == 1   # the comparison table: the one refit


def _running_trial(proc: subprocess.Popen, cfg, log: Path):
    """The study's trial running now, with its MLflow run, or None; fails if ``proc`` ended."""
    if proc.poll() is not None:
        raise AssertionError(f"the sweep ended before it was interrupted:\n{log.read_text()[-3000:]}")
    try:
        trials = stored_study(cfg).trials
    except KeyError:   # the study does not exist yet
        return None
    running = [t for t in trials if t.state == TrialState.RUNNING and "mlflow_run_id" in t.user_attrs]
    return running[0] if running else None


def _interrupt(argv: list[str], env: dict[str, str], cfg, kill) -> tuple[int, str, object]:
    """Start the sweep ``argv``, wait for its job to run a trial, call ``kill(proc, trial)``; return
    the sweep's exit status, its output (stdout and stderr, through a file: a pipe nobody reads
    while the sweep runs could fill and block it) and the trial."""
    log = Path(cfg.paths.root_dir) / f"sweep-{kill.__name__}.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        trial = wait_for(lambda: _running_trial(proc, cfg, log), "a job to run a trial", timeout=300)
        kill(proc, trial)
        proc.wait(timeout=300)
    finally:
        if proc.poll() is None:   # only after a failure above: do not leave it behind
            proc.kill()
            proc.wait()
    return proc.returncode, log.read_text(), trial


@pytest.mark.slow
def test_a_killed_or_cancelled_ray_job_ends_its_runs_and_a_rerun_resumes_the_study(tmp_path, ray_cluster):
    """SIGTERM to the Ray worker running a job, then SIGTERM to the sweep (which cancels its job with
    ``ray.cancel``): each time the running trial is FAIL and its runs are ended, nothing is left
    RUNNING; a rerun runs the trials still missing."""
    address, env = ray_cluster
    # a trial runs for minutes (no early stopping): it is interrupted in the middle
    slow = ["tune.n_trials=3", "method.params.n_estimators=100000",
            "method.params.early_stopping_rounds=null"]
    argv = _multirun("runners.tune", tmp_path, ["hydra/launcher=ray", f"hydra.launcher.address={address}",
                                                "seed=0", *slow])
    cfg = tiny_study_cfg(tmp_path, "tune.n_trials=3")
    client = MlflowClient(tracking_uri=cfg.tracking.uri)

    def sigterm_worker(proc, trial):
        os.kill(int(trial.user_attrs["worker"].split(":")[1]), signal.SIGTERM)

    def sigterm_sweep(proc, trial):
        proc.send_signal(signal.SIGTERM)

    killed = []
    for kill, status, says in ((sigterm_worker, 1, "ended without a result (WorkerCrashedError)"),
                               (sigterm_sweep, EXIT_SIGTERM, "cancelling 1 Ray jobs")):
        code, err, trial = _interrupt(argv, env, cfg, kill)
        assert code == status and says in err and "did not end in time" not in err, err[-3000:]
        killed.append(trial)
        # Optuna closed the trial FAIL (so it does not count) and its run was ended, as the runner's
        # SIGTERM and Ctrl-C do it (FAILED, the trial's state, or KILLED)
        assert stored_study(cfg).trials[trial.number].state == TrialState.FAIL
        assert client.get_run(trial.user_attrs["mlflow_run_id"]).info.status in ("KILLED", "FAILED")
        assert not [r for r in _runs(cfg.tracking.uri) if r.info.status == "RUNNING"]
    res = subprocess.run(_multirun("runners.tune", tmp_path, ["hydra/launcher=ray",
                                                              f"hydra.launcher.address={address}", "seed=0",
                                                              "tune.n_trials=3"]),
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    study = stored_study(cfg)
    assert study_module.n_done(study) == 3 and len(study.trials) == 5
    assert [study.trials[t.number].state for t in killed] == [TrialState.FAIL] * 2
    roles = study_runs(cfg.tracking.uri)
    (parent,) = roles["study"]   # the study's parent run, resumed by every invocation
    assert parent.info.status == "FINISHED" and len(roles["refit"]) == 1
    assert sorted(r.info.status == "FINISHED" for r in roles["trial"]) == [False] * 2 + [True] * 3
