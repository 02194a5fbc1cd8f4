"""runners.paper.reproduction.jobs: a reproduction's datasets and parts in worker processes at once --
the workers' command lines, their scheduling, failures and SIGTERM with stand-in workers, and a
whole tiny reproduction in two jobs giving the tables of one job."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest
from harness_utils import CONF
from hydra import compose, initialize_config_dir
from mlflow.tracking import MlflowClient

from runners import reproduce as rp
from runners.paper.reproduction import jobs as rj

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("restore_mlflow")


def test_items_are_the_datasets_the_mvs_tables_and_the_parts():
    got = rj.items(["gisette_like", "flight_like"], True, ["gbfs"])
    assert [i.name for i in got] == ["gisette_like", "flight_like", "mvs", "gbfs"]
    assert got[1].overrides == ("reproduce.papers=[gtgbm]", "reproduce.datasets=[flight_like]")
    assert got[2].overrides == ("reproduce.papers=[mvs]", "reproduce.datasets=[mvs]")
    assert got[3].overrides == ("reproduce.papers=[gbfs]",)
    assert [i.name for i in rj.items([], False, [])] == []


def test_a_worker_sets_its_own_keys_and_takes_its_share_of_the_cores(tmp_path, monkeypatch):
    monkeypatch.setattr(rj, "cores", lambda: 4)
    workers = rj.Workers(["paths.root_dir=/r", "reproduce.datasets=[a,b]", "+reproduce.jobs=3",
                          "seed=1", "hydra.run.dir=/elsewhere"])
    item = rj.items(["a"], False, [])[0]
    argv = workers.argv(item, 2, tmp_path)
    assert argv[:3] == [sys.executable, "-m", "runners.reproduce"]
    assert argv[3:] == ["paths.root_dir=/r", "seed=1", "reproduce.papers=[gtgbm]", "reproduce.datasets=[a]",
                        "reproduce.jobs=1", "n_threads=2", f"hydra.run.dir={tmp_path / 'a'}"]
    # threads the command line sets are kept; never fewer than one per worker
    assert "n_threads=3" in rj.Workers(["n_threads=3"]).argv(item, 2, tmp_path)
    monkeypatch.setattr(rj, "cores", lambda: 1)
    assert "n_threads=1" in workers.argv(item, 2, tmp_path)


@pytest.mark.parametrize("jobs", [0, -1, 1.5, True, "2"])
def test_bad_jobs_fail_naming_the_key(jobs):
    with pytest.raises(ValueError, match=r"reproduce\.jobs must be a positive integer"):
        rj.check_jobs(jobs)


def test_bad_jobs_fail_before_any_run(tmp_path):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="reproduce", overrides=[f"paths.root_dir={tmp_path}", "reproduce.jobs=0"])
        with pytest.raises(ValueError, match=r"reproduce\.jobs"):
            rp.run(cfg, lambda ov: cfg, rj.Workers([]))
    assert not (tmp_path / "mlflow.db").exists()


# a stand-in worker: prints its arguments, then sleeps or exits as its item's name says; on SIGTERM
# it writes a file and exits 143, as the runners do
FAKE = textwrap.dedent("""
    import os, signal, sys, time
    args = sys.argv[1:]
    item = next(a.split("[")[1].rstrip("]") for a in args if a.startswith(("reproduce.datasets=",
                                                                             "reproduce.papers=[gbfs")))
    def term(*_):
        open(os.path.join(os.environ["FAKE_DIR"], item + ".terminated"), "w").close()
        sys.exit(143)
    signal.signal(signal.SIGTERM, term)
    print("parent", os.environ["GBFS_REPRODUCTION_PARENT"], "threads", [a for a in args if "threads" in a],
          "made by", os.environ["GBFS_REPRODUCTION_COMMAND"])
    sys.stdout.flush()
    open(os.path.join(os.environ["FAKE_DIR"], item + ".started"), "w").close()
    if item.startswith("fail"):
        sys.exit(3)
    time.sleep(float(item.split("_")[1]) if "_" in item else 0)
""")


@pytest.fixture
def fake_workers(tmp_path, monkeypatch):
    (tmp_path / "fake_reproduce.py").write_text(FAKE)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("FAKE_DIR", str(tmp_path))
    return rj.Workers([], module="fake_reproduce")


def test_workers_run_every_item_under_the_parent_and_prefix_their_lines(fake_workers, tmp_path, capsys,
                                                                       monkeypatch):
    monkeypatch.delenv(rj.COMMAND_ENV, raising=False)
    monkeypatch.setattr(sys, "argv", ["runners/reproduce.py", "reproduce.scale=quick", "x=a b"])
    todo = rj.items(["a", "b", "c"], False, [])
    fake_workers.run(todo, 2, "p123", tmp_path / "logs")
    out = capsys.readouterr().out
    for name in "abc":
        assert (tmp_path / f"{name}.started").exists()
        # every worker's results record the reproduction's command, not the worker's own
        assert re.search(rf"^\[{name}\] parent p123 threads \['n_threads=\d+'\] made by python -m "
                         rf"runners.reproduce reproduce.scale=quick 'x=a b'$", out, re.M), out


def test_the_command_a_worker_records_is_the_reproductions(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["runners/reproduce.py", "reproduce.papers=[gbfs]", "n_threads=1"])
    monkeypatch.setenv(rj.COMMAND_ENV, "python -m runners.reproduce")
    assert rj.command() == "python -m runners.reproduce"
    monkeypatch.delenv(rj.COMMAND_ENV)
    assert rj.command() == "python -m runners.reproduce 'reproduce.papers=[gbfs]' n_threads=1"


def test_a_failing_worker_stops_the_rest_and_is_named(fake_workers, tmp_path):
    # two jobs: "fail" and "x_1" start; "fail" ends at once, so "later" is never started
    todo = rj.items(["fail", "x_1", "later"], False, [])
    with pytest.raises(RuntimeError, match=r"workers failed: fail \(exit status 3\).*resumes"):
        fake_workers.run(todo, 2, "p", tmp_path / "logs")
    assert (tmp_path / "x_1.started").exists()   # the running one ended on its own
    assert not (tmp_path / "later.started").exists()


def test_sigterm_of_the_reproduction_terminates_its_workers(fake_workers, tmp_path):
    driver = tmp_path / "driver.py"
    driver.write_text(textwrap.dedent(f"""
        from runners.paper.reproduction import jobs as rj
        from runners.tracking import runs as tracking
        with tracking.sigterm_as_interrupt():
            rj.Workers([], module="fake_reproduce").run(rj.items(["s_60", "t_60"], False, []), 2, "p",
                                                        __import__("pathlib").Path({str(tmp_path)!r}))
    """))
    env = {"PYTHONPATH": f"{tmp_path}:{ROOT}"}
    proc = subprocess.Popen([sys.executable, str(driver)], cwd=ROOT,
                            env={**__import__("os").environ, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while not all((tmp_path / f"{n}.started").exists() for n in ("s_60", "t_60")):
            assert time.monotonic() < deadline and proc.poll() is None, proc.stdout.read()
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 143, proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert (tmp_path / "s_60.terminated").exists() and (tmp_path / "t_60.terminated").exists()


ROWS = ["~reproduce.rows.gtgbm", "~reproduce.rows.gtgbm_exact", "~reproduce.rows.lgbm_cegb",
        "~reproduce.rows.agbm_refit", "~reproduce.rows.gbfs_topk", "~reproduce.rows.agbm_budget",
        "method.params.n_estimators=10", "method.params.early_stopping_rounds=5", "reproduce.scale=tiny",
        "+reproduce.scales.tiny={seeds: [0, 1], n_trials: 2, n_startup_trials: 1, mvs: null, datasets: "
        "{gisette_like: {scale: 0.05, kwargs: {feature_scale: 0.02}}, flight_like: {scale: 0.005}}}"]


def _runs(root: Path):
    client = MlflowClient(tracking_uri=f"sqlite:///{root}/mlflow.db")
    exp = client.get_experiment_by_name("reproduction")
    return client.search_runs([exp.experiment_id], max_results=5000)


def _table(root: Path, dataset: str) -> pd.DataFrame:
    df = pd.read_csv(root / "results" / "reproduction" / dataset / "table3.csv")
    return df.drop(columns=["run_ids", "fit_seconds"])   # all but the runs' ids and timings


@pytest.mark.slow
def test_two_jobs_make_the_tables_of_one_and_a_rerun_reuses_them(tmp_path):
    argv = [sys.executable, "-m", "runners.reproduce", *ROWS]
    one, two = tmp_path / "one", tmp_path / "two"
    for root, jobs in ((one, "reproduce.jobs=1"), (two, "reproduce.jobs=2")):
        done = subprocess.run([*argv, f"paths.root_dir={root}", jobs], cwd=ROOT, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout + done.stderr
    assert "[gisette_like]" in out and "[flight_like]" in out
    for dataset in ("gisette_like", "flight_like"):
        pd.testing.assert_frame_equal(_table(one, dataset), _table(two, dataset))
    runs = _runs(two)
    assert not [r for r in runs if r.info.status != "FINISHED"]
    (parent,) = [r for r in runs if r.data.tags.get("role") == "reproduction"]
    units = [r for r in runs if r.data.tags.get("role") in ("refit", "evaluation")]
    assert len(units) == 2 * 5 * 2   # datasets x rows (the paper's four and A-GBM's exact twin) x seeds
    # every unit ran in a worker, under the one parent run
    assert {r.data.tags["repro_dataset"] for r in units} == {"gisette_like", "flight_like"}
    assert all(r.data.tags["worker"] != parent.data.tags["worker"] for r in units)
    assert {r.data.tags["reproduction"] for r in units} == {parent.info.run_id}
    # the same command again: every unit reused, no worker needed beyond finding them
    again = subprocess.run([*argv, f"paths.root_dir={two}", "reproduce.jobs=2"], cwd=ROOT,
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert len(_runs(two)) == len(runs)
