"""The submitit launcher (``hydra/launcher=slurm``) on a real single-node SLURM cluster started here
(``tests/slurm_fixture.py``): the README's sweep, one Optuna study shared by several jobs, a job
cancelled with ``scancel`` and the resubmission that resumes its study -- the guarantees of the
joblib sweeps (``test_run.py``, ``test_tune_workers.py``), on SQLite files under ``tmp_path`` (a disk
the jobs share with the launching process, as a cluster's shared file system)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from harness_utils import TINY, stored_study, study_runs, tiny_study_cfg, wait_for
from mlflow.tracking import MlflowClient
from optuna.trial import TrialState
from slurm_fixture import INSTALL, PARTITION, SlurmCluster, missing_programs

from runners.tuning import study as study_module

REPO = Path(__file__).resolve().parents[2]
#: the launcher's settings for this cluster: one CPU and a little memory per job
LAUNCHER = ["hydra/launcher=slurm", f"hydra.launcher.partition={PARTITION}", "hydra.launcher.cpus_per_task=1",
            "hydra.launcher.mem_gb=1", "hydra.launcher.timeout_min=30", "n_threads=1"]
#: seconds a sweep may take; only reached when something is wrong
BOUND = 900

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("restore_mlflow")]


@pytest.fixture(scope="module")
def slurm():
    """A running single-node SLURM cluster (stopped and deleted after the module's tests)."""
    missing = missing_programs()
    if missing:
        pytest.skip(f"no SLURM cluster to start ({', '.join(missing)} missing): {INSTALL}")
    cluster = SlurmCluster().start()
    try:
        yield cluster
    finally:
        cluster.stop()


def sweep_argv(module: str, overrides: list[str]) -> list[str]:
    return [sys.executable, "-m", module, "-m", *LAUNCHER, *TINY, *overrides]


def run_sweep(slurm: SlurmCluster, root: Path, module: str, overrides: list[str]) -> subprocess.CompletedProcess:
    """``python -m <module> -m hydra/launcher=slurm ...`` from the repository, every path under ``root``."""
    return subprocess.run(sweep_argv(module, overrides), cwd=REPO, env={**slurm.env, "GBFS_ROOT": str(root)},
                          capture_output=True, text=True, timeout=BOUND)


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
    (array_job,) = {p.name.split("_")[0] for p in (Path(sweep_dir) / ".submitit").glob("*_*")}
    states = slurm.run("sacct", "-n", "-X", "-P", "-o", "JobID,State", "-j", array_job).stdout.split()
    assert sorted(states) == [f"{array_job}_{i}|COMPLETED" for i in range(3)]
    assert res.stdout.count("| gisette_like |") == 3   # the comparison table at the end


def test_jobs_sharing_a_study_run_exactly_n_trials(slurm, tmp_path):
    """``python -m runners.tune -m hydra/launcher=slurm seed=0,0,0``: three jobs of one study."""
    res = run_sweep(slurm, tmp_path, "runners.tune", ["seed=0,0,0", "tune.n_trials=6", "tune.n_startup_trials=2",
                                                      "tune.pruner=null"])
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
SLOW_TRIALS = ["seed=0,0", "tune.n_trials=8", "tune.n_startup_trials=2", "tune.pruner=null",
               "method.params.n_estimators=1500", "method.params.early_stopping_rounds=null"]


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
        slurm.run("scancel", *{job.split("_")[0] for job in slurm.jobs()})
        assert launcher.wait(timeout=BOUND) != 0   # submitit reports the cancelled jobs
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
    killed = [r for r in runs if r.info.status == "KILLED" and r.data.tags.get("role") == "trial"]
    assert killed and all(r.data.tags["trial_state"] == "FAIL" for r in killed)
    assert all(client.get_run(study.trials[n].user_attrs["mlflow_run_id"]).info.status == "FINISHED"
               for n in finished)

    res = subprocess.run(sweep_argv("runners.tune", SLOW_TRIALS), cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=BOUND)
    assert res.returncode == 0, res.stderr[-3000:]
    study = stored_study(cfg)
    assert study_module.n_done(study) == 8
    assert {t.number: t.value for t in study.trials if t.number in finished} == finished   # kept as they were
    new = [t for t in study.trials if t.number > max(n for n, _ in [(t.number, 0) for t in study.trials
                                                                     if t.number in finished])]
    assert new
