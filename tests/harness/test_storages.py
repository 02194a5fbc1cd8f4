"""The Optuna storages of ``tune.storage`` (runners.tuning.storages): an SQLAlchemy URL or a journal
file, each refused naming the key before anything is written, and each claim atomic across
processes (the multi-worker studies on each kind are in test_tune_workers.py)."""

from __future__ import annotations

import json
import multiprocessing
import queue
import threading
from pathlib import Path

import optuna
import pytest
from harness_utils import compose_cfg, tiny_study_cfg

from runners import tune
from runners.tuning import storages
from runners.tuning import study as studies
from runners.tuning.hydra_callbacks import InitOptunaStorage

pytestmark = pytest.mark.usefixtures("restore_mlflow")

#: a storage URL of each kind in a folder
URLS = {"sqlite": lambda root: f"sqlite:///{root}/optuna.db",
        "journal": lambda root: f"journal:///{root}/optuna.log"}


@pytest.mark.parametrize("url, path, lock", [
    ("journal:///shared/optuna.log", "/shared/optuna.log", "symlink"),
    ("journal:////shared/optuna.log", "/shared/optuna.log", "symlink"),   # as journal:///${paths.root_dir}/...
    ("journal:///shared/my%20study.log?lock=open", "/shared/my study.log", "open"),
    ("journal://optuna.log", "optuna.log", "symlink")])                 # relative to the working directory
def test_a_journal_url_names_its_file_and_lock(url, path, lock):
    assert storages.kind_of(url) is storages.FileJournalStorage
    assert storages.FileJournalStorage.parse(url) == (Path(path), lock)


def test_the_kind_is_found_by_scheme():
    assert storages.kind_of("journal:///x.log") is storages.FileJournalStorage
    for url in ("sqlite:///x.db", "postgresql+psycopg2://u@h/db", "garbage://x", "not a url"):
        assert storages.kind_of(url) is storages.SqlStorage


@pytest.mark.parametrize("url, match", [
    ("journal:///{root}/missing/optuna.log", r"folder .*missing does not exist \(on a shared file system"),
    ("journal:///{root}", "is a directory"),
    ("journal://", "names no file"),
    ("journal:///{root}/optuna.log?lock=fcntl", "lock=symlink|open"),
    ("journal:///{root}/optuna.log?timeout=3", "lock=symlink|open"),
    ("garbage://x", r"unknown database 'garbage'.*journal:///<absolute path>"),
    ("not a url", r"not an SQLAlchemy URL.*journal:///<absolute path>")])
def test_a_bad_storage_is_refused_naming_tune_storage_before_any_study_or_run(tmp_path, url, match):
    url = url.format(root=tmp_path)
    with pytest.raises(ValueError, match="^tune.storage"):
        storages.check_storage(url)
    with pytest.raises(ValueError, match=match):
        tune.run(tiny_study_cfg(tmp_path, f"tune.storage='{url}'"))
    assert not list(tmp_path.iterdir())   # no MLflow store, no study, no lock file


def test_a_file_that_is_no_journal_is_refused(tmp_path):
    (tmp_path / "optuna.log").write_bytes(b"SQLite format 3\x00" + bytes(100))
    with pytest.raises(ValueError, match=r"tune.storage=.*optuna.log is not an Optuna journal"):
        tune.run(tiny_study_cfg(tmp_path, f"tune.storage='journal:///{tmp_path}/optuna.log'"))
    assert [p.name for p in tmp_path.iterdir()] == ["optuna.log"]


def test_a_multirun_refuses_a_journal_in_a_missing_folder_before_its_jobs(tmp_path):
    cfg = compose_cfg(tmp_path, ["tune=optuna", f"tune.storage='journal:///{tmp_path}/nfs/optuna.log'"])
    with pytest.raises(SystemExit, match="tune.storage=.*does not exist"):
        InitOptunaStorage().on_multirun_start(cfg)


@pytest.mark.parametrize("kind", sorted(URLS))
def test_a_claim_keeps_the_first_value_and_writes_once(tmp_path, kind):
    storage = studies.open_storage(URLS[kind](tmp_path))
    study = optuna.create_study(study_name="s", storage=storage)
    assert studies.claim_attr(storage, study, "k", "first") == "first"
    assert studies.claim_attr(storage, study, "k", "second") == "first"
    assert studies.claim_attr(storage, study, "k", {"a": 1}, system=True) == {"a": 1}
    if kind == "journal":   # a lost claim appends nothing
        ops = [json.loads(line) for line in (tmp_path / "optuna.log").read_text().splitlines()]
        assert [op.get("user_attr") for op in ops if "user_attr" in op] == [{"k": "first"}]


def _claim(url: str, value: str, barrier, results) -> None:
    """Open the storage of ``url`` anew (as another machine would), wait for the others, claim."""
    try:
        storage = studies.open_storage(url)
        study = optuna.load_study(study_name="s", storage=storage)
        barrier.wait()
        results.put(("ok", [studies.claim_attr(storage, study, f"key{i}", value, system=True)
                            for i in range(5)]))
    except BaseException as err:   # noqa: BLE001 -- reported to the test
        results.put(("error", repr(err)))


@pytest.mark.parametrize("kind", sorted(URLS))
def test_threads_racing_for_claims_agree(tmp_path, kind):
    """Eight storages opened apart (each its own journal lock objects or engine) claim five keys at
    the same instant: each key has one value, the one every claimer read back."""
    url = URLS[kind](tmp_path)
    optuna.create_study(study_name="s", storage=studies.open_storage(url))
    barrier, results = threading.Barrier(8), queue.Queue()
    threads = [threading.Thread(target=_claim, args=(url, f"claimer{i}", barrier, results)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    _check_agreement(url, [results.get() for _ in threads])


@pytest.mark.slow   # four interpreters importing the harness
@pytest.mark.parametrize("kind", sorted(URLS))
def test_processes_racing_for_claims_agree(tmp_path, kind):
    """Four processes (spawned, as on separate machines) claim five keys at the same instant."""
    url = URLS[kind](tmp_path)
    optuna.create_study(study_name="s", storage=studies.open_storage(url))
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_claim, args=(url, f"claimer{i}", barrier, results)) for i in range(4)]
    for p in procs:
        p.start()
    got = [results.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    _check_agreement(url, got)


def _check_agreement(url: str, got: list[tuple[str, list]]) -> None:
    assert all(status == "ok" for status, _ in got), got
    claims = [values for _, values in got]
    stored = studies.open_storage(url)
    attrs = stored.get_study_system_attrs(stored.get_study_id_from_name("s"))
    for i in range(5):
        assert {values[i] for values in claims} == {attrs[f"key{i}"]}
    if url.startswith("journal"):   # exactly one write per key: no claim overwrote another
        path = storages.FileJournalStorage.parse(url)[0]
        ops = [json.loads(line) for line in path.read_text().splitlines()]
        keys = [k for op in ops for k in op.get("system_attr", {})]
        assert sorted(keys) == [f"key{i}" for i in range(5)]
