"""Adversarial inputs on the "bring your own data" path (``dataset=file``, :mod:`gbfs.data.reading.files`,
``python -m gbfs.data info --path``) and on downloads without a checkable manifest: every refusal
names the file and the column, field or key, nothing the user gave is altered, nothing is left
half-written, and the harness refuses before any MLflow run."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from harness_utils import compose_cfg
from http_fixture import FileServer
from test_adversarial_data import FAST, URL_PATH, _csv, _raw, _write_manifest, compressed
from test_data_files import root, table, write  # noqa: F401 (root: a fixture, used as data_root)
from test_data_formats import FLIGHT_TEST

from gbfs.data import DownloadError, load_dataset
from gbfs.data.__main__ import main as cli
from gbfs.data.fetching.download import fetch_dataset, read_lock
from gbfs.data.fetching.manifest import read_manifest
from gbfs.data.reading import files

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def data_root(root):  # noqa: F811 (the imported fixture, by another name: `root` is a local below)
    return root


def _info(path: Path, data_root: Path, target: str | None = "label") -> tuple[int, str]:
    """``python -m gbfs.data info --path`` in process: (exit status, stderr)."""
    args = ["info", "--path", str(path), "--root", str(data_root)] + (["--target", target] if target else [])
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = cli(args)
    return status, err.getvalue()


# ----------------------------------------------------------------------------- 1. duplicate headers

def _header_csv(path: Path, header: str, n: int = 40) -> Path:
    rng = np.random.default_rng(0)
    names = header.split(",")
    rows = [",".join(str(int(rng.integers(0, 2))) if c == "label" else f"{rng.normal():.3f}" for c in names)
            for _ in range(n)]
    path.write_text(header + "\n" + "\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("header, duplicated", [("label,a,label", "'label'"), ("label,a,a,b", "'a'")])
def test_duplicate_csv_headers_are_refused(tmp_path, data_root, header, duplicated):
    path = _header_csv(tmp_path / "dup.csv", header)
    for call in (lambda: files.check_file(path, "label"), lambda: files.load(path, "label", root=data_root)):
        with pytest.raises(ValueError, match=rf"dup\.csv.*duplicate column names.*{duplicated}"):
            call()
    status, err = _info(path, data_root)
    assert status == 1 and "duplicate column names" in err and str(path) in err
    assert not data_root.exists()


def test_a_genuine_column_named_like_a_pandas_duplicate_is_accepted(tmp_path, data_root):
    path = _header_csv(tmp_path / "ok.csv", "label,a,a.1")
    assert files.load(path, "label", root=data_root).feature_names == ["a", "a.1"]


def test_duplicate_headers_of_the_test_file_are_refused(tmp_path, data_root):
    path = _header_csv(tmp_path / "train.csv", "label,a,b")
    test = _header_csv(tmp_path / "test.csv", "label,a,b,b")
    with pytest.raises(ValueError, match=r"test\.csv.*duplicate column names.*'b'"):
        files.load(path, "label", test_path=test, root=data_root)


def test_duplicate_parquet_and_npz_names_are_refused(tmp_path, data_root):
    table_ = pa.table([pa.array([0.5, 1.5] * 10), pa.array([1.0, 2.0] * 10), pa.array([0, 1] * 10)],
                      names=["a", "a", "label"])
    pq.write_table(table_, tmp_path / "dup.parquet")
    with pytest.raises(ValueError, match=r"dup\.parquet.*duplicate column names.*'a'"):
        files.check_file(tmp_path / "dup.parquet", "label")
    np.savez(tmp_path / "dup.npz", X=np.ones((20, 3)), y=np.arange(20) % 2,
             feature_names=np.array(["a", "b", "a"]))
    with pytest.raises(ValueError, match=r"dup\.npz.*feature_names.*duplicate.*'a'"):
        files.load(tmp_path / "dup.npz", root=data_root)
    np.savez(tmp_path / "short.npz", X=np.ones((20, 3)), y=np.arange(20) % 2, feature_names=np.array(["a"]))
    with pytest.raises(ValueError, match=r"short\.npz.*feature_names.*1 names.*3 columns"):
        files.load(tmp_path / "short.npz", root=data_root)   # not silently replaced by f0, f1, f2


# ----------------------------------------------------------------------------- 2. exact values, no inf

def test_values_are_kept_exactly(tmp_path, data_root):
    df = table()
    df["epoch"] = 1_700_000_001 + 2 * np.arange(len(df))     # odd seconds: float32 rounds them to 128 s
    df["huge"] = 1e39 * (1 + np.arange(len(df)))              # beyond float32's range
    df["fine"] = np.linspace(0.1, 0.9, len(df))
    path = write(df, tmp_path / "exact.csv")
    data = files.load(path, "label", root=data_root, test_fraction=0.25)
    X = np.concatenate([data.X_train, data.X_test])
    assert X.dtype == np.float64
    for name in ("epoch", "huge", "fine"):
        got = np.sort(X[:, data.feature_names.index(name)])
        np.testing.assert_array_equal(got, np.sort(pd.read_csv(path)[name].to_numpy(np.float64)))
    again = files.load(path, "label", root=data_root, test_fraction=0.25)     # from the cache: the same
    np.testing.assert_array_equal(again.X_train, data.X_train)
    ds = load_dataset("file", path=path, target="label", root=data_root)
    assert ds.X_train.dtype == np.float64


def test_a_float32_cache_of_an_older_version_is_rebuilt(tmp_path, data_root):
    df = table()
    df["epoch"] = 1_700_000_001 + 2 * np.arange(len(df))
    path = write(df, tmp_path / "old.csv")
    exact = files.load(path, "label", root=data_root)
    cache = files.cache_path(path, "label", None, data_root)
    with np.load(cache) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["X"] = arrays["X"].astype(np.float32)     # what a cache of CACHE_FORMAT 2 held
    from gbfs.data.prepare import write_npz_atomic

    write_npz_atomic(cache, arrays)
    with pytest.warns(RuntimeWarning, match="rebuilding"):
        again = files.load(path, "label", root=data_root)
    np.testing.assert_array_equal(again.X_train, exact.X_train)


@pytest.mark.parametrize("text", ["inf", "-inf", "Infinity", "1e400"])
def test_infinity_in_a_csv_is_refused_naming_file_column_and_row(tmp_path, data_root, text):
    df = table().astype({"x2": object})
    df.loc[6, "x2"] = text
    path = write(df, tmp_path / "inf.csv")
    with pytest.raises(ValueError, match=r"inf\.csv.*column 'x2'.*infinite.*data row 7"):
        files.load(path, "label", root=data_root)
    status, err = _info(path, data_root)
    assert status == 1 and "'x2'" in err and "data row 7" in err
    assert not list(data_root.glob("file/prepared/*.npz"))


def test_infinity_in_the_test_file_npz_and_parquet_is_refused(tmp_path, data_root):
    df = table()
    test = table(n=40, seed=1)
    test.loc[3, "x1"] = np.inf
    with pytest.raises(ValueError, match=r"te\.parquet.*column 'x1'.*infinite.*data row 4"):
        files.load(write(df, tmp_path / "tr.parquet"), "label", root=data_root,
                   test_path=write(test, tmp_path / "te.parquet"))
    X = np.ones((20, 2))
    X[5, 1] = -np.inf
    np.savez(tmp_path / "i.npz", X=X, y=np.arange(20) % 2, feature_names=np.array(["p", "q"]))
    with pytest.raises(ValueError, match=r"i\.npz.*column 'q'.*infinite.*data row 6"):
        files.load(tmp_path / "i.npz", root=data_root)


def test_integers_float64_would_round_are_refused(tmp_path, data_root):
    df = table()
    df["ns"] = 1_700_000_000_000_000_001 + np.arange(len(df))      # epoch nanoseconds: > 2^53
    path = write(df, tmp_path / "ns.csv")
    with pytest.raises(ValueError, match=r"ns\.csv.*column 'ns'.*2\^53.*data row 1"):
        files.load(path, "label", root=data_root)


def test_infinite_data_is_refused_before_any_mlflow_run(tmp_path):
    from runners import run

    df = table()
    df.loc[2, "x0"] = np.inf
    path = write(df, tmp_path / "inf.csv")
    cfg = compose_cfg(tmp_path, ["dataset=file", f"dataset.path={path}", "dataset.target=label",
                                 "method=agbm", "method.params.n_estimators=3",
                                 f"paths.data_dir={tmp_path / 'data-root'}"])
    with pytest.raises(ValueError, match=r"inf\.csv.*column 'x0'.*infinite"):
        run.run(cfg)
    assert not (tmp_path / "mlflow.db").exists()


# ----------------------------------------------------------------------------- 3. truncated files

@pytest.mark.parametrize("kind", ["gz", "bz2", "xz", "zip"])
def test_compressed_csv_loads_and_a_truncated_one_is_refused(tmp_path, data_root, kind):
    df = table(n=2000)
    text = df.to_csv(index=False).encode()
    good = tmp_path / f"good.csv.{kind}"
    good.write_bytes(compressed(kind, text, "good.csv"))
    data = files.load(good, "label", root=data_root)
    assert data.feature_names == ["x0", "x1", "x2", "x3"] and len(data.y_train) + len(data.y_test) == 2000
    cut = tmp_path / f"cut.csv.{kind}"
    whole = compressed(kind, text, "cut.csv")
    cut.write_bytes(whole[: len(whole) * 2 // 3])
    with pytest.raises(ValueError, match=rf"cut\.csv\.{kind}.*truncated or corrupt"):
        files.load(cut, "label", root=data_root)
    status, err = _info(cut, data_root)
    assert status == 1 and "truncated or corrupt" in err and "Traceback" not in err


@pytest.mark.parametrize("ext", [".parquet", ".npz"])
def test_truncated_parquet_and_npz_are_refused(tmp_path, data_root, ext):
    path = write(table(), tmp_path / f"cut{ext}")
    path.write_bytes(path.read_bytes()[:-60])
    target = "label" if ext == ".parquet" else None
    with pytest.raises(ValueError, match=rf"cut\{ext}.*truncated or corrupt"):
        files.load(path, target, root=data_root)
    assert not list(data_root.glob("file/prepared/*.npz"))


# ----------------------------------------------------------------------------- 4. downloads without checks

@pytest.fixture
def flight_server():
    body = _csv(FLIGHT_TEST * 40)                      # 400 rows, as in the report
    with FileServer() as srv:
        srv.files[URL_PATH["test.csv"]] = body
        srv.files[URL_PATH["train-0.1m.csv"]] = _csv(FLIGHT_TEST * 4)
        yield srv, body


def test_a_download_cut_at_a_line_end_is_refused_when_the_manifest_checks_nothing(tmp_path, flight_server):
    server, body = flight_server
    froot = tmp_path / "root"
    _write_manifest(froot, n_rows=(None, None))
    cut = body.index(b"\n", len(body) // 2) + 1        # 198 of 400 rows, a whole last line
    server.faults[URL_PATH["test.csv"]] = [("truncate", cut)] * 2
    with pytest.raises(DownloadError, match=r"no Content-Length.*n_rows.*size") as err:
        fetch_dataset(read_manifest("flight", froot), froot, mirror=server.base, policy=FAST, progress=False,
                      sleep=lambda s: None)
    assert "test.csv" in str(err.value)
    assert "test.csv" not in read_lock(_raw(froot)) and not (_raw(froot) / "test.csv").exists()
    assert not list(_raw(froot).glob("*.part*"))
    # a server that says how long the file is: the transfer proves its own end, and is accepted
    statuses = fetch_dataset(read_manifest("flight", froot), froot, mirror=server.base, policy=FAST,
                             progress=False, sleep=lambda s: None)
    assert statuses["test.csv"] == "locked" and (_raw(froot) / "test.csv").read_bytes() == body


# ----------------------------------------------------------------------------- 5. paths with spaces

def _runner(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "HYDRA_FULL_ERROR": "0"})


@pytest.mark.parametrize("module", ["runners.run", "runners.tune"])
def test_a_path_split_by_the_shell_says_how_to_quote_it(module):
    res = _runner(module, "dataset=file", "dataset.path=/tmp/my", "big", "data.csv", "dataset.target=label")
    assert res.returncode != 0
    assert "dataset.path" in res.stderr and "\"dataset.path='/tmp/my big data.csv'\"" in res.stderr
    assert "Traceback" not in res.stderr


def test_a_path_hydra_cannot_parse_says_how_to_quote_it():
    res = _runner("runners.run", "dataset=file", "dataset.path=/tmp/my data (1).csv", "dataset.target=label")
    assert res.returncode != 0
    assert "\"dataset.path='/tmp/my data (1).csv'\"" in res.stderr and "Traceback" not in res.stderr
    res = _runner("runners.run", "dataset=file", "dataset.path=/tmp/it's here.csv", "dataset.target=label")
    assert res.returncode != 0 and '"dataset.path=\\"/tmp/it\'s here.csv\\""' in res.stderr


def test_overrides_hydra_reads_as_given_pass():
    from runners.core.command_line import override_problem

    assert override_problem(["dataset=file", "dataset.path=/tmp/my data.csv", "dataset.target=label"]) is None
    assert override_problem(["-m", "method=agbm,gbfs", "dataset.path='/tmp/a (1).csv'"]) is None
    assert override_problem(["--cfg", "job", "seed=1"]) is None


# ----------------------------------------------------------------------------- 6. honest target messages

def test_a_many_class_target_is_multiclass_and_binary_refuses_it_honestly(tmp_path, data_root):
    df = table()
    df["label"] = np.arange(len(df)) % 20
    path = write(df, tmp_path / "twenty.csv")
    data = files.load(path, "label", root=data_root)
    assert data.task == "multiclass" and len(data.class_names) == 20
    with pytest.raises(ValueError) as err:
        files.load(path, "label", root=data_root, task="binary")
    message = str(err.value)
    assert "target column 'label'" in message and "twenty.csv" in message and "20 classes" in message
    assert "task=multiclass" in message and "not built yet" not in message


def test_a_real_valued_target_is_a_regression_and_binary_refuses_it(tmp_path, data_root):
    df = table()
    df["label"] = np.random.default_rng(0).normal(size=len(df))
    path = write(df, tmp_path / "reg.csv")
    assert files.load(path, "label", root=data_root).task == "regression"
    with pytest.raises(ValueError) as err:
        files.load(path, "label", root=data_root, task="binary")
    message = str(err.value)
    assert "target column 'label'" in message and f"{len(df)} distinct values" in message
    assert "task=regression" in message and "classes" not in message
    status, out_err = _info(path, data_root)
    assert status == 0


def test_the_hydra_entry_points_are_those_checked():
    from runners.core.command_line import HYDRA_ENTRY_POINTS

    found = sorted(p.stem for p in (REPO / "runners").glob("*.py") if "@hydra.main(" in p.read_text())
    assert found == sorted(HYDRA_ENTRY_POINTS)
