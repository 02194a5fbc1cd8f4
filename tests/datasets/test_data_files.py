"""A user's own data file as a dataset (gbfs.data.reading.files): formats, labels, splits, errors, the
cache, ``python -m gbfs.data info --path`` and ``dataset=file`` in the harness."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from harness_utils import compose_cfg
from sklearn.datasets import dump_svmlight_file

from gbfs.data import load_dataset
from gbfs.data.__main__ import main as cli
from gbfs.data.reading import files

SHARED = Path("/work/shared/data")
N, D = 200, 4


def table(n: int = N, seed: int = 0, labels=("no", "yes")) -> pd.DataFrame:
    """Features without zeros (LIBSVM leaves zeros out) and a label driven by the first one.

    The values are multiples of 1/64: the same number as float32, float64 and decimal text, so every
    format holds exactly the same values (a data file's features load as float64, exactly as the
    file holds them, and CSV text of other float32 values is not their float64 widening)."""
    rng = np.random.default_rng(seed)
    X = (np.round(rng.uniform(0.5, 2.0, (n, D)) * 64) / 64 * rng.choice([-1, 1], (n, D))).astype(np.float32)
    df = pd.DataFrame(X, columns=[f"x{j}" for j in range(D)])
    df["label"] = np.where(X[:, 0] > 0, labels[1], labels[0])
    return df


def write(df: pd.DataFrame, path: Path, target: str = "label") -> Path:
    """``df`` in the format of ``path``'s extension (labels ``no``/``yes`` as -1/+1 in LIBSVM)."""
    name = path.name
    if name.endswith((".csv", ".csv.gz")):
        df.to_csv(path, index=False)
    elif name.endswith(".parquet"):
        df.to_parquet(path, index=False)
    elif name.endswith(".npz"):
        X, y = df.drop(columns=target).to_numpy(np.float32), df[target].to_numpy()
        np.savez(path, X=X, y=y.astype(str), feature_names=np.array(df.columns.drop(target), dtype=str))
    else:
        X, y = df.drop(columns=target).to_numpy(np.float32), df[target].to_numpy()
        dump_svmlight_file(X, np.where(y == "yes", 1, -1), str(path), zero_based=False)
    return path


@pytest.fixture
def root(tmp_path):
    return tmp_path / "data-root"


@pytest.fixture
def csv(tmp_path):
    return write(table(), tmp_path / "my.csv")


def test_every_format_loads_the_same_arrays(tmp_path, root):
    df = table()
    got = {ext: files.load(write(df, tmp_path / f"d{ext}"), "label" if ext in (".csv", ".csv.gz", ".parquet")
                           else None, seed=3, root=root)
           for ext in (".csv", ".csv.gz", ".parquet", ".npz", ".svm")}
    ref = got[".csv"]
    assert ref.feature_names == ["x0", "x1", "x2", "x3"] and ref.class_names == ("no", "yes")
    assert ref.X_train.dtype == np.float64 and ref.y_train.dtype == np.int64
    assert len(ref.y_train) + len(ref.y_test) == N and len(ref.y_test) == N // 4
    for ext, data in got.items():
        for field in ("X_train", "y_train", "X_test", "y_test"):
            np.testing.assert_array_equal(getattr(data, field), getattr(ref, field), err_msg=f"{ext} {field}")
        if ext != ".svm":
            assert data.feature_names == ref.feature_names
    assert got[".svm"].feature_names == ["f0", "f1", "f2", "f3"] and got[".svm"].class_names == ("-1", "1")
    assert got[".csv"].checksum.startswith("sha256 ") and "(a local file)" in got[".csv"].checksum


def test_load_dataset_file_labels_splits_and_scale(csv, root):
    ds = load_dataset("file", path=csv, target="label", root=root, seed=1)
    assert ds.name == "file" and ds.task == "binary" and ds.source == str(csv.resolve())
    assert ds.class_names == ("no", "yes")              # "yes" is the positive class 1
    assert len(ds.y_test) == 50 and len(ds.y_train) + len(ds.y_val) == 150 and len(ds.y_val) == 30
    X, y = table().drop(columns="label").to_numpy(np.float32), (table()["label"] == "yes").to_numpy()
    rows = {tuple(r): int(t) for r, t in zip(X, y)}
    assert all(rows[tuple(r)] == t for r, t in zip(ds.X_train, ds.y_train))   # labels follow their rows
    # seeded: the same seed gives the same split, another seed another; stratified by label
    again = load_dataset("file", path=csv, target="label", root=root, seed=1)
    np.testing.assert_array_equal(again.X_test, ds.X_test)
    other = load_dataset("file", path=csv, target="label", root=root, seed=2)
    assert not np.array_equal(other.X_test, ds.X_test)
    assert abs(ds.y_test.mean() - y.mean()) < 0.02 and abs(ds.y_val.mean() - y.mean()) < 0.04
    half = load_dataset("file", path=csv, target="label", root=root, seed=1, scale=0.5)
    assert len(half.y_test) == 25 and len(half.y_train) + len(half.y_val) == 75
    with pytest.raises(ValueError, match=r"scale must be in \(0, 1\]"):
        load_dataset("file", path=csv, target="label", root=root, scale=2.0)


@pytest.mark.parametrize("labels, names", [((-1, 1), ("-1", "1")), ((0.0, 1.0), ("0", "1")),
                                           (("b", "a"), ("a", "b")), ((False, True), ("False", "True"))])
def test_two_label_values_map_to_0_1_in_sorted_order(tmp_path, root, labels, names):
    df = table(labels=labels)
    data = files.load(write(df, tmp_path / "l.parquet"), "label", root=root)
    assert data.class_names == names
    positive = df["label"] == sorted(labels)[1]
    assert data.y_train.sum() + data.y_test.sum() == positive.sum()


def test_test_path_is_the_test_set(tmp_path, root):
    train, test = table(), table(n=60, seed=1)
    path = write(train, tmp_path / "train.csv")
    test_path = write(test[["label", "x3", "x2", "x1", "x0"]], tmp_path / "test.csv")   # columns reordered
    ds = load_dataset("file", path=path, target="label", test_path=test_path, root=root)
    np.testing.assert_array_equal(ds.X_test, test.drop(columns="label").to_numpy(np.float32))
    np.testing.assert_array_equal(ds.y_test, (test["label"] == "yes").to_numpy())
    assert len(ds.y_train) + len(ds.y_val) == N and "(the test file)" in ds.checksum
    svm = files.load(write(train, tmp_path / "tr.svm"), test_path=write(test, tmp_path / "te.svm"), root=root)
    np.testing.assert_array_equal(svm.X_test, ds.X_test)


def test_nan_features_are_kept(tmp_path, root):
    df = table()
    df.loc[[3, 7], "x1"] = np.nan
    ds = load_dataset("file", path=write(df, tmp_path / "nan.csv"), target="label", root=root)
    assert sum(np.isnan(X[:, 1]).sum() for X in (ds.X_train, ds.X_val, ds.X_test)) == 2


def _error_cases(tmp_path):
    """(path, target, test_path, exception, message regex) of each refused input."""
    ok = write(table(), tmp_path / "ok.csv")
    wide = table()
    for j in range(D, 15):
        wide[f"x{j}"] = 1.0
    nan_target, one_class, three = table(), table(), table()
    nan_target.loc[[1, 5], "label"] = np.nan
    one_class["label"] = "yes"
    three.loc[:9, "label"] = "maybe"
    return [
        (tmp_path / "absent.csv", "label", None, FileNotFoundError, r"path=.*absent\.csv.*no such file"),
        (ok, "label", tmp_path / "absent.csv", FileNotFoundError, r"test_path=.*no such file"),
        (write(table(), tmp_path / "d.xlsx"), "label", None, ValueError,
         r"unknown file type.*\.csv\.gz.*\.npz"),
        (ok, None, None, ValueError, r"target is required.*label column"),
        (write(table(), tmp_path / "d.npz"), "label", None, ValueError, r"leave target unset"),
        (write(wide, tmp_path / "wide.csv"), "y", None, ValueError,
         r"target='y' is not a column.*'x0'.*\.\.\. \(16 in all\)"),
        (write(nan_target, tmp_path / "n.csv"), "label", None, ValueError, r"NaN\) in 2 of 200 rows"),
        (write(one_class, tmp_path / "o.csv"), "label", None, ValueError, r"one class only \('yes'\)"),
        (ok, "label", write(table().drop(columns="x1").assign(z=1.0), tmp_path / "te.csv"), ValueError,
         r"columns differ.*missing \['x1'\], extra \['z'\]"),
        (ok, "label", write(table(), tmp_path / "te.parquet"), ValueError, r"must have the format of path"),
    ]


def test_each_refused_input_has_its_message(tmp_path, root):
    for path, target, test_path, exc, message in _error_cases(tmp_path):
        with pytest.raises(exc, match=message):
            load_dataset("file", path=path, target=target, test_path=test_path, root=root)
    assert not root.exists()                             # nothing refused was cached


def test_text_columns_are_categorical(tmp_path, root):
    train, test = table(), table(seed=1)
    train["city"] = np.where(np.arange(len(train)) % 3 == 0, "Paris", "Oslo")
    test["city"] = np.where(np.arange(len(test)) % 4 == 0, "Rome", "Oslo")
    train.loc[3, "city"] = np.nan
    train["code"] = np.arange(len(train)) % 5
    test["code"] = np.arange(len(test)) % 7
    a, b = write(train, tmp_path / "a.csv"), write(test, tmp_path / "b.csv")
    ds = load_dataset("file", path=a, target="label", test_path=b, root=root)
    j = ds.feature_names.index("city")
    assert ds.categorical == (j,) and ds.categories == (("Oslo", "Paris", "Rome"),)   # train and test levels
    assert set(np.unique(ds.X_test[:, j])) == {0.0, 2.0}
    assert np.isnan(np.concatenate([ds.X_train[:, j], ds.X_val[:, j]])).sum() == 1
    named = files.load(a, "label", test_path=b, root=root, categorical=["city", "code"])
    assert named.categorical == (j, named.feature_names.index("code")) and named.categories[1] is None
    again = files.load(a, "label", test_path=b, root=root, categorical=["city", "code"])   # from the cache
    assert again.categories == named.categories and np.array_equal(again.X_test, named.X_test)
    with pytest.raises(ValueError, match=r"text \(non-numeric\) feature columns \['city'\].*declare them"):
        files.load(a, "label", root=root, categorical="none")
    with pytest.raises(ValueError, match="categorical column 'x0' must hold integer codes"):
        files.load(a, "label", root=root, categorical=["city", "x0"])
    with pytest.raises(ValueError, match=r"categorical names columns \['nope'\]"):
        files.load(a, "label", root=root, categorical=["nope"])
    with pytest.raises(ValueError, match="categorical must be 'auto', 'none'"):
        files.load(a, "label", root=root, categorical="some")


def test_header_errors_come_before_parsing(csv, root, monkeypatch):
    monkeypatch.setattr(files, "_read_table", lambda *a: pytest.fail("parsed the file"))
    with pytest.raises(ValueError, match="not a column"):
        files.load(csv, "nope", root=root)


def test_the_cache_is_reused_and_invalidated(tmp_path, csv, root, monkeypatch):
    first = files.load(csv, "label", root=root)
    cache = files.cache_path(csv, "label", None, root)
    assert cache.parent == root / "file" / "prepared" and cache.name.startswith("my-")
    assert cache.is_file() and cache.with_name(cache.name + ".sha256").is_file()
    parse = files._parse
    monkeypatch.setattr(files, "_parse", lambda *a: pytest.fail("parsed although cached"))
    np.testing.assert_array_equal(files.load(csv, "label", root=root).X_train, first.X_train)
    write(table(seed=5), csv)                            # a changed file: a new key, parsed again
    monkeypatch.setattr(files, "_parse", parse)
    changed = files.load(csv, "label", root=root)
    assert files.cache_path(csv, "label", None, root) != cache and not np.array_equal(changed.X_train,
                                                                                       first.X_train)
    current = files.cache_path(csv, "label", None, root)
    current.write_bytes(current.read_bytes()[:-20])     # truncated: rebuilt with a warning
    with pytest.warns(RuntimeWarning, match="truncated, corrupted or rewritten"):
        again = files.load(csv, "label", root=root)
    np.testing.assert_array_equal(again.X_train, changed.X_train)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        files.load(csv, "label", root=root)              # the rebuilt cache reads back


def test_an_unwritable_root_loads_without_caching(csv, root, monkeypatch):
    def refuse(*args):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(files, "write_npz_atomic", refuse)
    monkeypatch.setattr(files, "_warned_roots", set())
    with pytest.warns(RuntimeWarning, match="parsed on every load"):
        first = files.load(csv, "label", root=root)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                   # warned once
        np.testing.assert_array_equal(files.load(csv, "label", root=root).X_test, first.X_test)


def test_info_path_prints_what_would_load(tmp_path, csv, root, capsys):
    args = ["info", "--path", str(csv), "--target", "label", "--root", str(root)]
    assert cli(args) == 0
    out = capsys.readouterr().out
    for text in ("csv, 200 rows, 5 columns", "features (4): x0, x1, x2, x3", "target 'label': 2 classes",
                 "'no' -> 0, 'yes' -> 1 (the positive class)", "text columns: none", "NaN in features: none",
                 "not yet written"):
        assert text in out
    files.load(csv, "label", root=root)
    assert cli(args) == 0 and "(exists)" in capsys.readouterr().out
    df = table()
    df["city"], df.loc[0, "x2"] = "Paris", np.nan
    bad = write(df, tmp_path / "bad.csv")
    assert cli(["info", "--path", str(bad), "--target", "label", "--root", str(root)]) == 0
    assert "categorical: city" in capsys.readouterr().out   # a text column is categorical
    assert cli(["info", "--path", str(bad), "--target", "label", "--root", str(root),
                "--categorical", "none"]) == 1
    captured = capsys.readouterr()
    assert "text columns: city" in captured.out and "NaN in features: x2 (1)" in captured.out
    assert captured.err.startswith("error: ") and "declare them categorical" in captured.err
    assert cli(["info", "--path", str(tmp_path / "absent.csv")]) == 1
    captured = capsys.readouterr()
    assert "no such file" in captured.err and "Traceback" not in captured.err
    assert cli(["info", "--path", str(csv), "--root", str(root)]) == 1
    assert "target is required" in capsys.readouterr().err


def test_harness_dataset_file(tmp_path, csv, monkeypatch):
    from runners import run
    from runners.core import experiment

    data = f"paths.data_dir={tmp_path / 'data-root'}"
    monkeypatch.chdir(tmp_path)                          # a relative path: from where the command runs
    cfg = compose_cfg(tmp_path, ["dataset=file", "dataset.path=my.csv", "dataset.target=label", data])
    assert cfg.dataset.test_fraction == 0.25 and cfg.dataset.test_path is None
    ds = experiment.load_data(cfg)
    assert ds.source == str(csv.resolve()) and len(ds.y_test) == 50 and ds.class_names == ("no", "yes")
    assert (tmp_path / "data-root" / "file" / "prepared").is_dir()
    missing = compose_cfg(tmp_path, ["dataset=file", data])
    with pytest.raises(ValueError, match="dataset.path must name your data file"):
        run.run(missing)
    with pytest.raises(ValueError, match="not a column"):
        run.run(compose_cfg(tmp_path, ["dataset=file", "dataset.path=my.csv", "dataset.target=y", data]))
    with pytest.raises(ValueError, match=r"dataset.scale must be in \(0, 1\]"):
        experiment.check_dataset(compose_cfg(tmp_path, ["dataset=file", "dataset.path=my.csv",
                                                        "dataset.scale=2", data]))
    assert not (tmp_path / "mlflow.db").exists()         # refused before any MLflow run


def test_harness_runs_a_method_on_a_file(tmp_path, csv):
    from runners import run

    cfg = compose_cfg(tmp_path, ["dataset=file", f"dataset.path={csv}", "dataset.target=label", "method=agbm",
                                 "method.params.n_estimators=10", "print_summary=false",
                                 f"paths.data_dir={tmp_path / 'data-root'}"])
    metrics = run.run(cfg)
    assert 0.5 < metrics["test_auc"] <= 1.0


@pytest.mark.parametrize("file, n_classes", [("isolet.npz", 26), ("tox171.npz", 4)])
def test_shared_multiclass_files_are_multiclass(root, file, n_classes):
    path = SHARED / file
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    assert len(load_dataset("file", path=path, root=root).class_names) == n_classes
    with pytest.raises(ValueError, match=rf"task='binary'.*has {n_classes} classes"):
        load_dataset("file", path=path, root=root, task="binary")


def test_two_files_of_one_name_get_their_own_studies(tmp_path, csv):
    from omegaconf import OmegaConf

    other = tmp_path / "elsewhere" / csv.name
    other.parent.mkdir()
    other.write_bytes(csv.read_bytes())
    names = set()
    for path in (csv, other):
        cfg = compose_cfg(tmp_path, ["dataset=file", f"dataset.path={path}", "dataset.target=label",
                                     "method=agbm", "tune=optuna"])
        names.add(OmegaConf.select(cfg, "tune.study_name"))
        assert csv.name in cfg.run_name
    assert len(names) == 2
