"""End to end: the committed manifests' URLs served (through a mirror) by a real HTTP server on
127.0.0.1 with tiny files in the exact upstream formats; prepare, cache, split, CLI."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest
from http_fixture import FileServer
from test_data_formats import (
    FLIGHT_TEST,
    FLIGHT_TRAIN,
    tiny_epsilon,
    tiny_gisette,
    write_flight_csv,
    write_gisette,
    write_libsvm_bz2,
)

import gbfs.data.prepare as P
from gbfs.data import ChecksumError, DownloadError, ManifestError, load, load_dataset
from gbfs.data.__main__ import main as cli
from gbfs.data.fetching.manifest import REPO_DATASETS

REPO = Path(__file__).resolve().parents[2]


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _publish(server, manifest, root, contents: dict[str, bytes], zip_members=None, **changes):
    """Copy a committed manifest into ``root`` with the tiny files' checksums and serve the files
    at the paths of the manifest's real URLs (the tests reach them through ``mirror``)."""
    for fname, meta in manifest["files"].items():
        if meta["sha256"] is not None:
            meta["sha256"] = _sha(contents[fname])
    manifest.update(changes)
    for src in manifest["sources"]:
        if src["type"] == "zip" and zip_members is not None:
            buf = io.BytesIO()
            with zipfile.ZipFile(buf, "w") as zf:
                for fname, member in zip_members.items():
                    zf.writestr(member, contents[fname])
            server.files[urlsplit(src["url"]).path] = buf.getvalue()
        elif src["type"] == "files" and zip_members is None:
            for fname, url in src["urls"].items():
                server.files[urlsplit(url).path] = contents[fname]
    (root / f"{manifest['name']}.json").write_text(json.dumps(manifest))
    return manifest


def _committed(name):
    return json.loads((REPO_DATASETS / f"{name}.json").read_text())


@pytest.fixture
def server():
    with FileServer() as srv:
        yield srv


def _gisette_contents(tmp_path, **kw):
    X_tr, y_tr, X_va, y_va = tiny_gisette(**kw)
    src = tmp_path / "src"
    write_gisette(src, X_tr, y_tr, X_va, y_va)
    return {p.name: p.read_bytes() for p in src.iterdir()}, (X_tr, y_tr, X_va, y_va)


@pytest.fixture
def gisette(server, tmp_path):
    """The committed Gisette manifest, its UCI zip layout (GISETTE/ folder, valid labels one up)."""
    root = tmp_path / "root"
    root.mkdir()
    contents, arrays = _gisette_contents(tmp_path)
    m = _committed("gisette")
    members = m["sources"][0]["members"]
    _publish(server, m, root, contents, zip_members=members, n_features=7,
             splits={"train": {"n_rows": 40}, "test": {"n_rows": 10}})
    return root, arrays


def _load(root, server, name="gisette", **kw):
    return load_dataset(name, root=root, mirror=server.base, progress=False, **kw)


def test_gisette_zip_download_prepare_and_split(gisette, server):
    root, (X_tr, y_tr, X_va, y_va) = gisette
    ds = _load(root, server)
    assert [p for p, _ in server.requests] == ["/static/public/170/gisette.zip"]
    assert (ds.X_train.shape, ds.X_val.shape, ds.X_test.shape) == ((32, 7), (8, 7), (10, 7))
    assert ds.checksum == "verified against published sha256" and ds.relevant is None
    np.testing.assert_array_equal(ds.X_test, X_va)
    np.testing.assert_array_equal(ds.y_test, (y_va == 1).astype(int))
    # train + val are exactly the train rows, stratified 80/20 by label
    both = np.vstack([ds.X_train, ds.X_val])
    assert sorted(map(tuple, both)) == sorted(map(tuple, X_tr.astype(np.float32)))
    assert ds.y_val.sum() == 4 and ds.y_train.sum() == 16
    # the same seed gives the same split, another seed another one
    again = _load(root, server)
    np.testing.assert_array_equal(again.X_val, ds.X_val)
    assert not np.array_equal(_load(root, server, seed=1).X_val, ds.X_val)
    X, y, names = load("gisette", split="val", root=root, mirror=server.base, progress=False)
    np.testing.assert_array_equal(X, ds.X_val)
    assert names == [f"f{j}" for j in range(7)]


def test_second_load_uses_the_cache(gisette, server, monkeypatch):
    root, _ = gisette
    _load(root, server)
    n_requests = len(server.requests)

    def boom(*a):
        raise AssertionError("parsed again")

    monkeypatch.setitem(P.PREPARERS, "gisette", boom)
    _load(root, server)
    assert len(server.requests) == n_requests


def test_cache_rebuilt_when_a_raw_file_changes(gisette, server, tmp_path):
    root, _ = gisette
    first = _load(root, server)
    old = sorted((root / "gisette" / "prepared").glob("*.npz"))
    # a new release of the validation data (and its manifest checksum)
    contents, (_, _, X_va2, _) = _gisette_contents(tmp_path / "v2", seed=5)
    raw = root / "gisette" / "raw" / "gisette_valid.data"
    raw.write_bytes(contents["gisette_valid.data"])
    m = json.loads((root / "gisette.json").read_text())
    m["files"]["gisette_valid.data"]["sha256"] = _sha(contents["gisette_valid.data"])
    (root / "gisette.json").write_text(json.dumps(m))
    second = _load(root, server)
    np.testing.assert_array_equal(second.X_test, X_va2)
    assert not np.array_equal(second.X_test, first.X_test)
    new = sorted((root / "gisette" / "prepared").glob("*.npz"))
    assert len(new) == 1 and new != old                       # the stale cache is gone


def test_changed_raw_file_against_the_manifest_is_refused(gisette, server):
    root, _ = gisette
    _load(root, server)
    raw = root / "gisette" / "raw" / "gisette_train.labels"
    raw.write_text(raw.read_text().replace("-1", "1", 1))
    with pytest.raises(ChecksumError, match="delete them to download again"):
        _load(root, server)
    with pytest.raises(ChecksumError, match="does not match the published checksum"):
        _load(root, server, download=False)


def test_crash_mid_write_leaves_no_prepared_file(gisette, server, monkeypatch):
    root, _ = gisette

    def crash(f, **arrays):
        f.write(b"PK\x03\x04 half an archive")
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(P.np, "savez_compressed", crash)
    with pytest.raises(KeyboardInterrupt):
        _load(root, server)
    assert list((root / "gisette" / "prepared").iterdir()) == []
    monkeypatch.undo()
    assert _load(root, server).X_test.shape == (10, 7)


def test_orphan_of_a_killed_writer_is_removed_at_the_next_prepare(gisette, server):
    root, _ = gisette
    folder = root / "gisette" / "prepared"
    folder.mkdir(parents=True)
    (folder / ".tmp-abc123.npz").write_bytes(b"PK half an archive of a process killed with -9")
    path = Path(_load(root, server).source)
    assert sorted(p.name for p in folder.iterdir()) == [path.name, path.name + ".sha256"]


def test_data_root_and_mirror_from_the_environment(gisette, server, monkeypatch):
    root, _ = gisette
    monkeypatch.setenv("GBFS_DATA_DIR", str(root))
    monkeypatch.setenv("GBFS_DATA_MIRROR", server.base)
    ds = load_dataset("gisette", progress=False)                # neither root nor mirror given
    assert ds.X_test.shape == (10, 7) and ds.source.startswith(str(root))
    assert server.requests and server.requests[0][0] == "/static/public/170/gisette.zip"


def test_missing_files_offline(gisette, server, tmp_path):
    root, _ = gisette
    with pytest.raises(DownloadError, match=r"gisette_train.data is missing; run `python -m gbfs.data"):
        load_dataset("gisette", root=root, download=False)
    server.files.clear()                                       # the hosts answer 404 from now on
    with pytest.raises(DownloadError) as err:
        _load(root, server)
    msg = str(err.value)
    assert "/static/public/170/gisette.zip: HTTP 404" in msg
    assert "/ml/machine-learning-databases/gisette/gisette_valid.labels: HTTP 404" in msg
    assert f"place it by hand at: {root / 'gisette' / 'raw' / 'gisette_valid.labels'}" in msg


def test_epsilon_subsample_end_to_end(server, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    X, y = tiny_epsilon(n=60)
    Xt, yt = tiny_epsilon(seed=1, n=20)
    write_libsvm_bz2(tmp_path / "a.bz2", X, y)
    write_libsvm_bz2(tmp_path / "b.bz2", Xt, yt)
    contents = {"epsilon_normalized.bz2": (tmp_path / "a.bz2").read_bytes(),
                "epsilon_normalized.t.bz2": (tmp_path / "b.bz2").read_bytes()}
    m = _committed("epsilon")
    seed = m["prepare"]["subsample_seed"]
    _publish(server, m, root, contents, n_features=9,
             splits={"train": {"file": "epsilon_normalized.bz2", "n_rows_raw": 60, "n_rows": 30},
                     "test": {"file": "epsilon_normalized.t.bz2", "n_rows_raw": 20, "n_rows": 10}})
    ds = _load(root, server, "epsilon", val_fraction=0.2)
    assert (len(ds.y_train), len(ds.y_val), ds.X_test.shape) == (24, 6, (10, 9))
    keep = np.sort(np.random.default_rng(seed).choice(20, size=10, replace=False))
    np.testing.assert_allclose(ds.X_test, Xt[keep], rtol=1e-5)
    np.testing.assert_array_equal(ds.y_test, (yt[keep] == 1).astype(int))


def test_flight_lock_file_end_to_end(server, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    write_flight_csv(tmp_path / "tr.csv", FLIGHT_TRAIN * 5)
    write_flight_csv(tmp_path / "te.csv", FLIGHT_TEST * 5)
    contents = {"train-0.1m.csv": (tmp_path / "tr.csv").read_bytes(),
                "test.csv": (tmp_path / "te.csv").read_bytes()}
    m = _committed("flight")
    _publish(server, m, root, contents, splits={"train": {"file": "train-0.1m.csv", "n_rows": 20},
                                                "test": {"file": "test.csv", "n_rows": 15}})
    ds = _load(root, server, "flight")
    assert ds.checksum.startswith("not verified against a published checksum")
    lock = json.loads((root / "flight" / "raw" / "checksums.lock.json").read_text())
    assert lock == {k: _sha(v) for k, v in contents.items()}
    assert ds.X_train.shape[1] == len(ds.feature_names) and ds.feature_names[-2:] == ["DepTime", "Distance"]
    assert ds.X_test.shape == (15, len(ds.feature_names))
    (root / "flight" / "raw" / "test.csv").write_bytes(contents["test.csv"].replace(b'"N"', b'"Y"', 1))
    with pytest.raises(ChecksumError, match="does not match the local lock"):
        _load(root, server, "flight", download=False)


def test_flight_placed_by_hand_is_locked_at_first_load(tmp_path):
    """Files put where the offline error says: the first load records their sha256 and later loads
    are verified against it, exactly as after a download."""
    root = tmp_path / "root"
    raw = root / "flight" / "raw"
    raw.mkdir(parents=True)
    write_flight_csv(raw / "train-0.1m.csv", FLIGHT_TRAIN * 5)
    write_flight_csv(raw / "test.csv", FLIGHT_TEST * 5)
    m = _committed("flight")
    m["splits"] = {"train": {"file": "train-0.1m.csv", "n_rows": 20},
                   "test": {"file": "test.csv", "n_rows": 15}}
    (root / "flight.json").write_text(json.dumps(m))
    ds = load_dataset("flight", root=root, download=False, progress=False)
    assert ds.checksum == "not verified against a published checksum (sha256 recorded locally at first use)"
    lock = json.loads((raw / "checksums.lock.json").read_text())
    assert lock == {f: _sha((raw / f).read_bytes()) for f in ("train-0.1m.csv", "test.csv")}
    (raw / "test.csv").write_bytes((raw / "test.csv").read_bytes().replace(b'"N"', b'"Y"', 1))
    with pytest.raises(ChecksumError, match="does not match the local lock"):
        load_dataset("flight", root=root, download=False, progress=False)


def test_scale_subsamples_real_data(gisette, server):
    root, _ = gisette
    ds = _load(root, server, scale=0.5)
    assert len(ds.y_train) + len(ds.y_val) == 20 and len(ds.y_test) == 5


def test_bad_arguments(gisette, server):
    root, _ = gisette
    with pytest.raises(ValueError, match="split must be one of"):
        load("gisette_like", split="validation")
    with pytest.raises(ValueError, match="val_fraction must be a number in \\(0, 1\\), got 1.5"):
        _load(root, server, val_fraction=1.5)
    with pytest.raises(ValueError, match="seed must be a non-negative integer"):
        _load(root, server, seed=-1)
    with pytest.raises(ValueError, match="scale must be in \\(0, 1\\] for the real dataset"):
        _load(root, server, scale=2.0)
    with pytest.raises(ManifestError, match="known datasets: .*epsilon.*flight.*gisette.*; bundled with "
                                            "scikit-learn: breast_cancer, digits; synthetic: .*gisette_like"):
        load_dataset("mnist", root=root)
    with pytest.raises(TypeError, match="n_features"):
        _load(root, server, n_features=3)


def test_synthetic_load_has_relevant_features():
    ds = load_dataset("gisette_like", scale=0.05, seed=0)
    assert ds.X_train.shape[1] == 5000 and ds.relevant is not None and len(ds.relevant) > 0
    assert len(ds.y_val) == pytest.approx(0.2 * (len(ds.y_train) + len(ds.y_val)), abs=1)


# ----------------------------------------------------------------------------- command line

def test_cli_download_verify_info_prepare(gisette, server, capsys):
    root, _ = gisette
    args = ["--root", str(root)]
    assert cli(["verify", "gisette", *args]) == 1
    assert "missing" in capsys.readouterr().out
    assert cli(["download", "gisette", *args, "--mirror", server.base, "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert out.count("ok, matches the published sha256") == 4
    assert cli(["verify", "gisette", *args]) == 0
    assert cli(["info", "gisette", *args]) == 0
    out = capsys.readouterr().out
    assert str(root / "gisette" / "raw" / "gisette_train.data") in out
    assert "https://archive.ics.uci.edu/static/public/170/gisette.zip" in out
    assert "prepared: none" in out
    assert cli(["prepare", "gisette", *args, "--mirror", server.base, "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "train: X (40, 7), y (40,)" in out and "test: X (10, 7), y (10,)" in out
    (root / "gisette" / "raw" / "gisette_valid.labels").unlink()
    assert cli(["verify", "gisette", *args]) == 1
    assert cli(["download", "gisette", *args, "--mirror", "http://127.0.0.1:9", "--retries", "0",
                "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: could not download dataset 'gisette'") and "place it by hand" in err


@pytest.mark.parametrize("name, shape, positives", [("breast_cancer", 30, 212), ("digits", 64, 896)])
def test_bundled_real_datasets(name, shape, positives):
    ds = load_dataset(name, seed=3)
    n = len(ds.y_train) + len(ds.y_val) + len(ds.y_test)
    assert ds.X_train.dtype == np.float32 and ds.X_train.shape[1] == len(ds.feature_names) == shape
    assert int(ds.y_train.sum() + ds.y_val.sum() + ds.y_test.sum()) == positives and ds.relevant is None
    assert len(ds.y_test) == round(0.25 * n) or len(ds.y_test) == int(np.ceil(0.25 * n))
    assert ds.checksum == "bundled with scikit-learn"
    again = load_dataset(name, seed=3)
    np.testing.assert_array_equal(again.X_test, ds.X_test)
    assert not np.array_equal(load_dataset(name, seed=4).y_test, ds.y_test)
    assert len(load_dataset(name, scale=0.5).y_test) == pytest.approx(len(ds.y_test) / 2, abs=1)


def test_cli_on_datasets_without_a_manifest(capsys):
    assert cli(["info", "digits"]) == 0
    out = capsys.readouterr().out
    assert "digits: bundled with scikit-learn" in out and "test: X (450, 64) float32" in out
    for command in ("download", "verify", "prepare"):
        assert cli([command, "gisette_like"]) == 0
        assert "synthetic stand-in, generated on load; nothing to " + command in capsys.readouterr().out
    assert cli(["info", "mnist"]) == 1
    assert "bundled with scikit-learn: breast_cancer, digits" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_runs_as_a_module():
    res = subprocess.run([sys.executable, "-m", "gbfs.data", "info", "figure1", "--scale", "0.05"],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "synthetic stand-in" in res.stdout and "[0, 1, 2]" in res.stdout
    res = subprocess.run([sys.executable, "-m", "gbfs.data", "list"], capture_output=True, text=True,
                         cwd=REPO, timeout=120)
    assert "epsilon, flight, gisette" in res.stdout and "gisette_like" in res.stdout


def test_multitask_load_keeps_task_ids_with_their_rows():
    ds = load_dataset("multitask", scale=0.25, n_tasks=3, n_features=40, seed=1)
    assert len(ds.task_train) == len(ds.y_train) and len(ds.task_val) == len(ds.y_val)
    assert len(ds.task_test) == len(ds.y_test) and len(ds.relevant_per_task) == 3
    # stratified by task: every task keeps its 20 % share in validation
    n_val = np.bincount(ds.task_val, minlength=3)
    n_all = n_val + np.bincount(ds.task_train, minlength=3)
    np.testing.assert_allclose(n_val / n_all, 0.2, atol=0.01)
    # every row keeps its own task id and label through the split
    from gbfs.data.synthetic.generators import multitask
    raw = multitask(scale=0.25, n_tasks=3, n_features=40, random_state=1)
    where = {row.tobytes(): i for i, row in enumerate(raw.X_train)}
    for X, y, task in ((ds.X_train, ds.y_train, ds.task_train), (ds.X_val, ds.y_val, ds.task_val)):
        idx = np.array([where[row.tobytes()] for row in X])
        np.testing.assert_array_equal(task, raw.task_train[idx])
        np.testing.assert_array_equal(y, raw.y_train[idx])


@pytest.mark.slow
def test_parallel_loads_download_and_prepare_once(gisette, server):
    """Jobs of a multirun loading the same dataset at once: one download, one cache, all succeed."""
    root, (_, _, X_va, _) = gisette
    code = ("import sys, numpy as np; from gbfs.data import load_dataset; "
            "ds = load_dataset('gisette', root=sys.argv[1], mirror=sys.argv[2], progress=False); "
            "print(float(np.asarray(ds.X_test, dtype=np.float64).sum()))")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(root), server.base], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
    assert {float(out) for out, _ in outs} == {float(X_va.sum())}
    assert [p for p, _ in server.requests] == ["/static/public/170/gisette.zip"]
    assert len(list((root / "gisette" / "prepared").glob("*.npz"))) == 1
