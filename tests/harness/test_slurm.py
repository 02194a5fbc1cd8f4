"""The submitit launcher (``hydra/launcher=slurm``) on a real single-node SLURM cluster started here
(``tests/slurm_fixture.py``): the README's sweep, one Optuna study shared by several jobs, a job
cancelled with ``scancel`` and the resubmission that resumes its study -- the guarantees of the
joblib sweeps (``test_run.py``, ``test_tune_workers.py``), on SQLite files under ``tmp_path`` (a disk
the jobs share with the launching process, as a cluster's shared file system), and a job at its
time limit.  Each sweep submits real jobs: about a minute each on a loaded 2-core machine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from harness_utils import TINY, compose_cfg, stored_study, study_runs, tiny_study_cfg, wait_for
from mlflow.tracking import MlflowClient
from optuna.trial import TrialState
from slurm_fixture import PARTITION, SlurmCluster, why_not

from runners.tuning import study as study_module

REPO = Path(__file__).resolve().parents[2]
#: the launcher's settings for this cluster: one CPU and a little memory per job
LAUNCHER = ["hydra/launcher=slurm", f"hydra.launcher.partition={PARTITION}", "hydra.launcher.cpus_per_task=1",
            "hydra.launcher.mem_gb=1", "n_threads=1"]
#: a job's time limit in minutes, unless a test sets its own
TIME_LIMIT = "hydra.launcher.timeout_min=30"
#: a fit of ten million trees without early stopping: ended only by a signal
ENDLESS = ["method.params.n_estimators=10000000", "method.params.early_stopping_rounds=null"]
#: seconds a sweep may take; only reached when something is wrong
BOUND = 900

pytestmark = pytest.mark.usefixtures("restore_mlflow")


def test_the_launcher_has_slurm_send_sigterm_before_the_time_limit(tmp_path):
    """``slurm.yaml`` replaces submitit's ``--signal=USR2@<signal_delay_s>`` by SIGTERM, which the
    runners handle (the sbatch script of a real job: test_the_readmes_sweep_runs_as_slurm_jobs)."""
    launcher = compose_cfg(tmp_path, ["hydra/launcher=slurm", "hydra.launcher.signal_delay_s=90"],
                           hydra_cfg=True).hydra.launcher
    assert launcher.additional_parameters == {"signal": "TERM@90"}
    assert (launcher.timeout_min, launcher.cpus_per_task, launcher.max_num_timeout) == (240, 8, 0)


def test_jobs_of_one_sweep_refit_a_study_once_and_a_rerun_refits_anew(tmp_path):
    """A job of the sweep that begins after the refit (it waited in the queue) leaves it to the job
    that refitted; a later sweep, or a rerun outside one, refits again."""
    cfg = tiny_study_cfg(tmp_path)
    storage = study_module.open_storage(cfg.tune.storage)
    study = study_module.load_study(cfg.tune, storage)
    first = study_module.claim_invocation(storage, study, first=1)
    assert study_module.claim_refit(storage, study, "6:5", first, sweep="outputs/multiruns/a") is None
    # the same process (not a live worker for the claims: an earlier study of this process), later
    later = study_module.claim_invocation(storage, study, first=1)
    holder = study_module.claim_refit(storage, study, "6:5", later, sweep="outputs/multiruns/a")
    assert later > first and holder == study_module.worker()
    rerun = study_module.claim_invocation(storage, study, first=1)
    assert study_module.claim_refit(storage, study, "6:5", rerun, sweep="outputs/multiruns/b") is None
    rerun = study_module.claim_invocation(storage, study, first=1)
    assert study_module.claim_refit(storage, study, "6:5", rerun) is None


# ---------------------------------------------------------------- sweeps on the cluster


@pytest.fixture(scope="module")
def slurm():
    """A running single-node SLURM cluster (stopped and deleted after the module's tests)."""
    reason = why_not()
    if reason:
        pytest.skip(reason)
    cluster = SlurmCluster().start()
    try:
        yield cluster
    finally:
        cluster.stop()


def sweep_argv(module: str, overrides: list[str]) -> list[str]:
    """``python -m <module> -m hydra/launcher=slurm ...`` on the TINY data (30 minutes per job unless
    ``overrides`` set ``hydra.launcher.timeout_min``)."""
    limit = [] if any(o.startswith("hydra.launcher.timeout_min=") for o in overrides) else [TIME_LIMIT]
    return [sys.executable, "-m", module, "-m", *LAUNCHER, *limit, *TINY, *overrides]


def run_sweep(slurm: SlurmCluster, root: Path, module: str,
              overrides: list[str]) -> subprocess.CompletedProcess:
    """Run :func:`sweep_argv` from the repository on ``slurm``, every path under ``root``."""
    return subprocess.run(sweep_argv(module, overrides), cwd=REPO, env={**slurm.env, "GBFS_ROOT": str(root)},
                          capture_output=True, text=True, timeout=BOUND)


def job_logs(root: Path, array_job: str) -> list[Path]:
    """The error streams of the tasks of ``array_job`` (submitit's, in the sweep folder)."""
    return sorted(root.glob(f"outputs/multiruns/*/.submitit/{array_job}_*/*_log.err"))


@pytest.mark.slow
def test_the_readmes_sweep_runs_as_slurm_jobs(slurm, tmp_path):
    res = run_sweep(slurm, tmp_path, "runners.run", ["method=gbfs,agbm,gtgbm"])
    assert res.returncode == 0, res.stderr[-3000:]
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    exp = client.get_experiment_by_name("gbfs")
    runs = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("role") != "sweep_summary"]
    assert sorted(r.data.tags["method"] for r in runs) == ["agbm", "gbfs", "gtgbm"]
    assert all(r.info.status == "FINISHED" for r in runs)
    # each in a job of the cluster: its array job's tasks, as the accounting recorded them
    (sweep_dir,) = {r.data.tags["sweep_dir"] for r in runs}
    (array_job,) = {p.name.split("_")[0] for p in (Path(sweep_dir) / ".submitit").glob("[0-9]*_[0-9]*")}
    states = slurm.run("sacct", "-n", "-X", "-P", "-o", "JobID,State", "-j", array_job).stdout.split()
    assert sorted(states) == [f"{array_job}_{i}|COMPLETED" for i in range(3)]
    assert res.stdout.count("| gisette_like |") == 3   # the comparison table at the end
    # SIGTERM before the time limit, not submitit's USR2 (conf/hydra/launcher/slurm.yaml)
    (script,) = (Path(sweep_dir) / ".submitit").glob("*/*_submission.sh")
    assert "#SBATCH --signal=TERM@120\n" in script.read_text() and "USR2" not in script.read_text()


@pytest.mark.slow
def test_jobs_sharing_a_study_run_exactly_n_trials(slurm, tmp_path):
    """``python -m runners.tune -m hydra/launcher=slurm seed=0,0,0``: three jobs of one study."""
    res = run_sweep(slurm, tmp_path, "runners.tune",
                    ["seed=0,0,0", "tune.n_trials=6", "tune.n_startup_trials=2", "tune.pruner=null"])
    assert res.returncode == 0, res.stderr[-3000:]
    cfg = tiny_study_cfg(tmp_path)
    study = stored_study(cfg)
    ran = [t for t in study.trials if study_module.NOT_RUN not in t.user_attrs]
    assert study_module.n_done(study) == 6 and [t.state for t in ran] == [TrialState.COMPLETE] * 6
    assert len({t.user_attrs["worker"] for t in ran}) >= 2   # several jobs ran its trials
    roles = study_runs(cfg.tracking.uri)
    (parent,) = roles["study"]
    assert parent.info.status == "FINISHED" and int(parent.data.tags["n_invocations"]) == 3
    assert sorted(int(r.data.tags["trial_number"]) for r in roles["trial"]) == sorted(t.number for t in ran)
    (refit,) = roles["refit"]
    assert refit.info.status == "FINISHED" and refit.data.tags["counts_for_topk"] == "true"
    assert res.stdout.count("| gisette_like |") == 1


#: trials of a few seconds each (no early stopping), so that a cancellation finds some running
SLOW_TRIALS = ["seed=0,0", "tune.n_trials=6", "tune.n_startup_trials=2", "tune.pruner=null",
               "method.params.n_estimators=400", "method.params.early_stopping_rounds=null"]


@pytest.mark.slow
def test_a_cancelled_sweep_loses_no_trial_and_its_resubmission_resumes_it(slurm, tmp_path):
    """``scancel`` (SIGTERM, SIGKILL after KillWait) in the middle of a shared study: no MLflow run
    or trial is left RUNNING, the finished trials stay; the same sweep submitted again runs only the
    missing trials."""
    env = {**slurm.env, "GBFS_ROOT": str(tmp_path)}
    log = tmp_path / "launcher.log"
    with open(log, "wb") as out:
        launcher = subprocess.Popen(sweep_argv("runners.tune", SLOW_TRIALS), cwd=REPO, env=env, stdout=out,
                                    stderr=subprocess.STDOUT)
    cfg = tiny_study_cfg(tmp_path)

    def mid_study():
        if launcher.poll() is not None:
            raise AssertionError(f"the sweep ended before it was cancelled:\n{log.read_text()[-3000:]}")
        try:
            trials = stored_study(cfg).trials
        except KeyError:   # the study does not exist yet
            return False
        done = [t for t in trials if t.state == TrialState.COMPLETE]
        running = [t for t in trials if t.state == TrialState.RUNNING and "mlflow_run_id" in t.user_attrs]
        return len(done) >= 2 and running

    try:
        wait_for(mid_study, "two finished trials and a running one", timeout=BOUND, interval=0.2)
        (array_job,) = {job.split("_")[0] for job in slurm.jobs()}
        slurm.run("scancel", array_job)
        assert launcher.wait(timeout=BOUND) != 0   # submitit reports the cancelled jobs
        assert "has not produced any output (state: CANCELLED" in log.read_text()
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    wait_for(lambda: not slurm.jobs(), "the cancelled jobs to end", timeout=BOUND)
    study = stored_study(cfg)
    finished = {t.number: t.value for t in study.trials if t.state == TrialState.COMPLETE}
    assert len(finished) >= 2 and not study.get_trials(states=(TrialState.RUNNING,))
    client = MlflowClient(tracking_uri=cfg.tracking.uri)
    exp = client.get_experiment_by_name("gbfs")
    runs = client.search_runs([exp.experiment_id])
    assert not [r for r in runs if r.info.status == "RUNNING"]
    # the trials the cancel interrupted: told FAIL, their runs ended (FAIL's status), the study's KILLED
    interrupted = [t for t in study.trials if t.state == TrialState.FAIL]
    assert interrupted, [t.state for t in study.trials]
    for t in interrupted:
        run = client.get_run(t.user_attrs["mlflow_run_id"])
        assert run.info.status in ("FAILED", "KILLED") and run.data.tags["trial_state"] == "FAIL"
    assert {r.info.status for r in runs if r.data.tags.get("role") == "study"} == {"KILLED"}
    assert all(client.get_run(study.trials[n].user_attrs["mlflow_run_id"]).info.status == "FINISHED"
               for n in finished)
    # each job's process ended on its own, with the runners' status for SIGTERM, before SIGKILL
    logs = job_logs(tmp_path, array_job)
    assert len(logs) == 2 and all("task 0: Exited with exit code 143" in p.read_text() for p in logs)

    res = subprocess.run(sweep_argv("runners.tune", SLOW_TRIALS), cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=BOUND)
    assert res.returncode == 0, res.stderr[-3000:]
    study = stored_study(cfg)
    done = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert study_module.n_done(study) == 6 and not study.get_trials(states=(TrialState.RUNNING,))
    assert {t.number: t.value for t in done if t.number in finished} == finished   # kept as they were
    assert len([t for t in done if t.number not in finished]) == 6 - len(finished)   # only the missing ones
    roles = study_runs(cfg.tracking.uri)
    (parent,) = roles["study"]
    assert parent.info.status == "FINISHED"
    assert not [r for r in client.search_runs([exp.experiment_id]) if r.info.status == "RUNNING"]


@pytest.mark.slow
def test_a_job_at_its_time_limit_ends_its_run_killed_before_the_limit(slurm, tmp_path):
    """A fit that would outlast its job's 3 minutes: SLURM sends SIGTERM ``signal_delay_s`` = 60 s
    before the limit (give or take its 60 s resolution), the run ends KILLED and the job exits 143
    before SLURM would kill it at the limit."""
    res = run_sweep(slurm, tmp_path, "runners.run",
                    ["method=agbm", *ENDLESS, "hydra.launcher.timeout_min=3",
                     "hydra.launcher.signal_delay_s=60"])
    assert res.returncode != 0, res.stdout[-3000:]
    assert "has not produced any output (state: FAILED" in res.stderr, res.stderr[-3000:]
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("gbfs").experiment_id])
    assert run.info.status == "KILLED"
    (folder,) = tmp_path.glob("outputs/multiruns/*/.submitit/[0-9]*")   # one job: no array
    assert "task 0: Exited with exit code 143" in (folder / f"{folder.name}_0_log.err").read_text()
    # ended by the early SIGTERM: FAILED (the runners' status), not TIMEOUT
    (state,) = slurm.run("sacct", "-n", "-X", "-P", "-o", "State", "-j", folder.name).stdout.split()
    assert state == "FAILED"
