"""Parsers on tiny files written here in each exact upstream format."""

from __future__ import annotations

import bz2

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_svmlight_file

from gbfs.data.formats import (
    FLIGHT_COLUMNS,
    FormatError,
    encode_flight,
    read_flight_csv,
    read_gisette,
    read_gisette_data,
    read_libsvm_bz2,
    read_pm1_labels,
)

# ----------------------------------------------------------------------------- Gisette


def write_gisette(folder, X_train, y_train, X_valid, y_valid):
    """Gisette's layout: integers separated by single spaces, every line ending in a space; +1/-1 labels."""
    folder.mkdir(parents=True, exist_ok=True)
    for stem, X, y in (("train", X_train, y_train), ("valid", X_valid, y_valid)):
        (folder / f"gisette_{stem}.data").write_text(
            "".join("".join(f"{v} " for v in row) + "\n" for row in X.astype(int)))
        (folder / f"gisette_{stem}.labels").write_text("".join(f"{v}\n" for v in y))


def tiny_gisette(seed=0, n_train=40, n_valid=10, d=7):
    rng = np.random.default_rng(seed)
    X_tr = np.where(rng.random((n_train, d)) < 0.6, 0, rng.integers(1, 1000, (n_train, d)))
    X_va = np.where(rng.random((n_valid, d)) < 0.6, 0, rng.integers(1, 1000, (n_valid, d)))
    y_tr = np.where(np.arange(n_train) % 2 == 0, 1, -1)
    y_va = np.where(np.arange(n_valid) % 3 == 0, 1, -1)
    return X_tr, y_tr, X_va, y_va


def test_gisette_trailing_space_and_labels(tmp_path):
    X_tr, y_tr, X_va, y_va = tiny_gisette()
    write_gisette(tmp_path, X_tr, y_tr, X_va, y_va)
    assert (tmp_path / "gisette_train.data").read_text().split("\n")[0].endswith(" ")
    out = read_gisette(tmp_path, n_features=7)
    assert out["X_train"].shape == (40, 7) and out["X_test"].shape == (10, 7)
    assert out["X_train"].dtype == np.float32
    np.testing.assert_array_equal(out["X_train"], X_tr)
    np.testing.assert_array_equal(out["y_train"], (y_tr == 1).astype(int))      # +1 -> 1, -1 -> 0
    np.testing.assert_array_equal(out["y_test"], (y_va == 1).astype(int))
    assert out["feature_names"].tolist() == [f"f{j}" for j in range(7)]


def test_gisette_malformed_files_are_refused(tmp_path):
    (tmp_path / "ragged.data").write_text("1 2 3 \n4 5 \n")
    with pytest.raises(FormatError, match="ragged.data"):
        read_gisette_data(tmp_path / "ragged.data", n_features=3)
    (tmp_path / "wide.data").write_text("1 2 3 \n4 5 6 \n")
    with pytest.raises(FormatError, match="expected 2 values per line, found 3"):
        read_gisette_data(tmp_path / "wide.data", n_features=2)
    (tmp_path / "range.data").write_text("1 2 1000 \n")
    with pytest.raises(FormatError, match="integers in 0..999"):
        read_gisette_data(tmp_path / "range.data", n_features=3)
    (tmp_path / "bad.labels").write_text("1\n-1\n0\n")
    with pytest.raises(FormatError, match=r"\+1 or -1, found 0 \(line 3\)"):
        read_pm1_labels(tmp_path / "bad.labels")


def test_gisette_label_count_must_match(tmp_path):
    X_tr, y_tr, X_va, y_va = tiny_gisette()
    write_gisette(tmp_path, X_tr, y_tr[:-1], X_va, y_va)
    with pytest.raises(FormatError, match="40 data rows but 39 labels"):
        read_gisette(tmp_path, n_features=7)


# ----------------------------------------------------------------------------- LIBSVM bz2 (Epsilon)


def write_libsvm_bz2(path, X, y):
    """Epsilon's layout: ``label idx:val`` with 1-based indices; zeros are simply absent."""
    lines = []
    for row, label in zip(X, y):
        pairs = " ".join(f"{j + 1}:{v:.6g}" for j, v in enumerate(row) if v != 0)
        lines.append(f"{label:d} {pairs}\n")
    path.write_bytes(bz2.compress("".join(lines).encode()))


def tiny_epsilon(seed=0, n=60, d=9):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * (rng.random((n, d)) < 0.8)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = np.where(rng.random(n) < 0.5, 1, -1)
    return X.astype(np.float32), y


def test_libsvm_bz2_matches_sklearn_reader(tmp_path):
    X, y = tiny_epsilon()
    path = tmp_path / "eps.bz2"
    write_libsvm_bz2(path, X, y)
    X_ref, y_ref = load_svmlight_file(str(path), n_features=9)      # an independent reader
    Xa, ya = read_libsvm_bz2(path, n_rows=60, n_features=9, n_keep=None, seed=0, progress=False)
    np.testing.assert_allclose(Xa, X_ref.toarray(), rtol=1e-6)
    np.testing.assert_array_equal(ya, (y_ref > 0).astype(int))


def test_libsvm_subsample_is_the_documented_draw(tmp_path):
    X, y = tiny_epsilon()
    path = tmp_path / "eps.bz2"
    write_libsvm_bz2(path, X, y)
    Xs, ys = read_libsvm_bz2(path, n_rows=60, n_features=9, n_keep=15, seed=3, progress=False)
    keep = np.sort(np.random.default_rng(3).choice(60, size=15, replace=False))
    X_ref, y_ref = load_svmlight_file(str(path), n_features=9)
    np.testing.assert_allclose(Xs, X_ref.toarray()[keep], rtol=1e-6)
    np.testing.assert_array_equal(ys, (y_ref[keep] > 0).astype(int))
    Xs2, _ = read_libsvm_bz2(path, n_rows=60, n_features=9, n_keep=15, seed=4, progress=False)
    assert not np.array_equal(Xs, Xs2)


def test_libsvm_errors(tmp_path):
    X, y = tiny_epsilon()
    path = tmp_path / "eps.bz2"
    write_libsvm_bz2(path, X, y)
    with pytest.raises(FormatError, match="expected 61 rows, found 60"):
        read_libsvm_bz2(path, n_rows=61, n_features=9, n_keep=None, seed=0, progress=False)
    with pytest.raises(FormatError, match="indices must be integers in 1..5"):
        read_libsvm_bz2(path, n_rows=60, n_features=5, n_keep=None, seed=0, progress=False)
    (tmp_path / "junk.bz2").write_bytes(bz2.compress(b"1 1:0.5 2:abc\n"))
    with pytest.raises(FormatError, match="line 1"):
        read_libsvm_bz2(tmp_path / "junk.bz2", n_rows=1, n_features=3, n_keep=None, seed=0, progress=False)
    (tmp_path / "cut.bz2").write_bytes(path.read_bytes()[:200])
    with pytest.raises(FormatError, match="bz2"):
        read_libsvm_bz2(tmp_path / "cut.bz2", n_rows=60, n_features=9, n_keep=None, seed=0, progress=False)


# ----------------------------------------------------------------------------- benchm-ml Flight

FLIGHT_HEADER = ",".join(f'"{c}"' for c in FLIGHT_COLUMNS)


def write_flight_csv(path, rows):
    """benchm-ml's layout: quoted header, quoted strings, bare numbers."""
    body = "".join(f'"{m}","{dm}","{dw}",{dep},"{car}","{o}","{d}",{dist},"{lab}"\n'
                   for m, dm, dw, dep, car, o, d, dist, lab in rows)
    path.write_text(FLIGHT_HEADER + "\n" + body)


FLIGHT_TRAIN = [("c-8", "c-21", "c-7", 1934, "AA", "ATL", "DFW", 732, "N"),
                ("c-4", "c-20", "c-3", 1548, "US", "PIT", "MCO", 834, "N"),
                ("c-9", "c-2", "c-5", 1422, "XE", "RDU", "CLE", 416, "N"),
                ("c-11", "c-25", "c-6", 1015, "OO", "DEN", "MEM", 872, "Y")]
FLIGHT_TEST = [("c-7", "c-25", "c-3", 615, "YV", "MRY", "PHX", 598, "N"),
               ("c-4", "c-17", "c-2", 739, "UA", "LAX", "ORD", 1745, "Y"),
               ("c-12", "c-2", "c-7", 1857, "AA", "ATL", "DFW", 732, "Y")]


def test_flight_csv_and_one_hot(tmp_path):
    write_flight_csv(tmp_path / "train.csv", FLIGHT_TRAIN)
    write_flight_csv(tmp_path / "test.csv", FLIGHT_TEST)
    train, test = read_flight_csv(tmp_path / "train.csv"), read_flight_csv(tmp_path / "test.csv")
    X_tr, y_tr, X_te, y_te, names = encode_flight(train, test)
    # reference: pandas.get_dummies on train and test together, every level kept
    both = pd.concat([train, test], ignore_index=True)
    cats = ["Month", "DayofMonth", "DayOfWeek", "UniqueCarrier", "Origin", "Dest"]
    ref = pd.get_dummies(both[cats], prefix_sep="=").astype(np.float32)
    assert len(names) == ref.shape[1] + 2 == X_tr.shape[1] == X_te.shape[1]
    assert sorted(names[:-2]) == sorted(ref.columns) and names[-2:] == ["DepTime", "Distance"]
    np.testing.assert_array_equal(np.vstack([X_tr, X_te])[:, :-2], ref[names[:-2]].to_numpy())
    np.testing.assert_array_equal(X_tr[:, -2:], train[["DepTime", "Distance"]].to_numpy(np.float32))
    assert (X_tr[:, :-2].sum(axis=1) == 6).all()
    assert y_tr.tolist() == [0, 0, 0, 1] and y_te.tolist() == [0, 1, 1]
    # levels seen only in test still get a column; natural order (c-2 before c-11)
    assert "Month=c-12" in names and X_tr[:, names.index("Month=c-12")].sum() == 0
    months = [n for n in names if n.startswith("Month=")]
    assert months == ["Month=c-4", "Month=c-7", "Month=c-8", "Month=c-9", "Month=c-11", "Month=c-12"]


def test_flight_bad_input(tmp_path):
    write_flight_csv(tmp_path / "t.csv", FLIGHT_TRAIN)
    (tmp_path / "cols.csv").write_text('"Month","Dest"\n"c-1","ATL"\n')
    with pytest.raises(FormatError, match="expected columns"):
        read_flight_csv(tmp_path / "cols.csv")
    train = read_flight_csv(tmp_path / "t.csv")
    bad = train.copy()
    bad.loc[2, "dep_delayed_15min"] = "maybe"
    with pytest.raises(FormatError, match="'Y' or 'N', found 'maybe' \\(row 3\\)"):
        encode_flight(bad, train)
    bad = train.copy()
    bad["DepTime"] = bad["DepTime"].astype(object)
    bad.loc[1, "DepTime"] = "NA"
    with pytest.raises(FormatError, match="DepTime must be numeric, found 'NA' \\(row 2\\)"):
        encode_flight(train, bad)
