"""The core benchmark's extra shapes: the text-like generator, the Flight encodings, real-data skips."""

import json

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression

from gbfs.booster.losses.metrics import roc_auc
from gbfs.data.synthetic.flight import flight_like
from gbfs.data.synthetic.text import make_text_like
from runners import bench
from runners.bench.speed import shapes as bench_shapes


@pytest.fixture(scope="module")
def text():
    return make_text_like(3000, 2000, random_state=3)


def test_text_like_statistics(text):
    X, y, informative = text
    assert sp.isspmatrix_csr(X) and X.dtype == np.float64 and X.shape == (3000, 2000)
    assert X.has_sorted_indices and np.all(X.data != 0)
    assert 0.009 <= X.nnz / (3000 * 2000) <= 0.011
    assert set(np.unique(X.data)) == {1.0, 2.0, 3.0, 4.0, 5.0}
    assert np.bincount(X.data.astype(int))[1] > np.bincount(X.data.astype(int))[5]   # ones most frequent
    # Zipf-like: a few common words, most rare
    share = np.sort(X.getnnz(axis=0) / 3000)[::-1]
    assert share[0] > 0.3 and np.median(share) < 0.005
    assert informative.dtype == np.int64 and informative.size == 30
    assert np.array_equal(informative, np.unique(informative))
    assert set(np.unique(y)) == {0, 1} and 0.35 < y.mean() < 0.65


def test_text_like_informative_words_predict(text):
    X, y, informative = text
    L = X.log1p().tocsc()
    others = np.setdiff1d(np.arange(X.shape[1]), informative)[: informative.size]
    auc = {}
    for label, cols in (("informative", informative), ("others", others)):
        model = LogisticRegression(max_iter=1000).fit(L[:2000, cols], y[:2000])
        auc[label] = roc_auc(y[2000:], model.decision_function(L[2000:, cols]))
    assert auc["informative"] > 0.75 and auc["others"] < 0.6


def test_text_like_seeded_and_extendable():
    a = make_text_like(300, 500, density=0.05, max_count=3, n_informative=5, random_state=7)
    b = make_text_like(300, 500, density=0.05, max_count=3, n_informative=5, random_state=7)
    assert (a[0] != b[0]).nnz == 0 and np.array_equal(a[1], b[1]) and np.array_equal(a[2], b[2])
    assert a[0].data.max() <= 3
    longer = make_text_like(900, 500, density=0.05, max_count=3, n_informative=5, random_state=7)
    assert (longer[0][:300] != a[0]).nnz == 0 and np.array_equal(longer[1][:300], a[1])
    other = make_text_like(300, 500, density=0.05, max_count=3, n_informative=5, random_state=8)
    assert (other[0] != a[0]).nnz > 0


@pytest.mark.parametrize("kwargs, name", [
    ({"n_samples": 0}, "n_samples"), ({"n_samples": 2.5}, "n_samples"), ({"n_samples": True}, "n_samples"),
    ({"n_features": 0}, "n_features"), ({"n_features": 10}, "n_features"),
    ({"density": 0.0}, "density"), ({"density": 0.7}, "density"), ({"density": float("nan")}, "density"),
    ({"density": "1%"}, "density"), ({"max_count": 0}, "max_count"), ({"n_informative": 0}, "n_informative"),
    ({"random_state": -1}, "random_state"), ({"random_state": None}, "random_state"),
])
def test_text_like_rejects_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        make_text_like(**{"n_samples": 10, "n_features": 100, **kwargs})


def test_flight_shapes_before_and_after_one_hot():
    onehot = bench_shapes.load_shape("flight_onehot", 0.005)
    raw = bench_shapes.load_shape("flight_raw", 0.005)
    ref = flight_like(scale=0.005, random_state=0)
    assert sp.isspmatrix_csr(onehot.X_train) and onehot.X_train.shape == (500, ref.X_train.shape[1])
    assert onehot.X_train.shape[1] <= 634 and onehot.X_test.shape == (125, ref.X_train.shape[1])
    assert np.array_equal(onehot.X_train.toarray(), ref.X_train)
    assert np.array_equal(onehot.X_test.toarray(), ref.X_test[:125])
    assert isinstance(raw.X_train, np.ndarray)
    assert raw.X_train.shape == (500, 8) and raw.X_test.shape == (125, 8)
    assert np.array_equal(raw.y_train, onehot.y_train) and np.array_equal(raw.y_test, onehot.y_test)
    # code k of a categorical column is its k-th one-hot column, in train and in test
    starts = {name.split("=")[0]: j for j, name in reversed(list(enumerate(ref.feature_names)))}
    for split in ("train", "test"):
        dense, codes = getattr(onehot, f"X_{split}").toarray(), getattr(raw, f"X_{split}")
        for k, col in ((0, "Month"), (4, "UniqueCarrier"), (6, "Dest")):
            rows = np.arange(len(codes))
            assert np.all(dense[rows, starts[col] + codes[:, k].astype(int)] == 1.0)
        assert np.array_equal(codes[:, 3], dense[:, starts["DepTime"]])        # numeric kept


def test_real_data_shapes():
    data_dir = bench_shapes.default_data_dir()
    if not (data_dir / "tox171.npz").is_file():
        pytest.skip(f"no {data_dir / 'tox171.npz'}")
    tox = bench_shapes.load_shape("tox171", data_dir=data_dir)
    assert tox.X_train.shape == (119, 5748) and tox.X_test.shape == (52, 5748)
    assert abs(tox.y_train.mean() - tox.y_test.mean()) < 0.05   # stratified
    four = bench_shapes.load_shape("tox171_4class", data_dir=data_dir)
    assert four.X_train.shape == (119, 5748) and set(four.y_train) == set(four.y_test) == {0, 1, 2, 3}


def test_zipf_text_shape_is_dense_float32_counts_with_a_long_tail():
    data = bench_shapes.load_shape("text_zipf", row_scale=0.25)
    X = data.X_train
    assert isinstance(X, np.ndarray) and X.dtype == np.float32 and X.shape == (498, 4862)
    df = np.count_nonzero(X, axis=0)
    assert 0.008 < np.count_nonzero(X) / X.size < 0.016
    assert np.mean(df < 5) > 0.5 and df.max() > 0.3 * X.shape[0]   # most words rare, a few in a third


def test_missing_data_dir_skips_with_one_line(tmp_path, capsys, monkeypatch):
    from runners.bench.speed import core

    warmed = []
    monkeypatch.setattr(core, "warm_up", lambda *a, **k: warmed.append(a))
    missing = tmp_path / "nowhere"
    assert bench_shapes.load_shape("isolet", data_dir=missing) is None
    lines = [line for line in capsys.readouterr().out.splitlines() if line]
    assert len(lines) == 1 and str(missing / "isolet.npz") in lines[0]

    out = tmp_path / "core.json"
    assert bench.main(["core", "--shapes", "tox171", "--data-dir", str(missing), "--trees", "2", "--no-jit",
                       "--out", str(out)]) == 0
    # one line for the shape, one for the selection path's cost (on Isolet by default)
    assert sum(str(missing) in line for line in capsys.readouterr().out.splitlines()) == 2
    result = json.loads(out.read_text())
    assert result["rows"] == [] and result["skipped"] == ["tox171"] and result["path_cost"] is None
    assert warmed == []  # nothing to time: nothing compiled


@pytest.mark.slow  # a whole core benchmark on one shape: ~5 s
def test_bench_core_text_like_end_to_end(tmp_path, capsys):
    out = tmp_path / "core.json"
    assert bench.main(["core", "--shapes", "text_like", "--row-scale", "0.05", "--trees", "2", "--no-jit",
                       "--path-data", "breast_cancer", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    path = result["path_cost"]
    assert path["dataset"] == "breast_cancer" and path["budgets"] == [5, 10, 20, 30]
    assert path["path_cpu_s"] > 0 and path["lgb_topk_cpu_s"] > 0
    # the median of the paired runs, and that pair's own seconds
    assert len(path["path_cpu_ratios"]) == 3
    assert path["path_cpu_ratio"] == sorted(path["path_cpu_ratios"])[1]
    assert path["path_cpu_ratio"] == path["path_cpu_s"] / path["lgb_topk_cpu_s"]
    assert result["verdicts"]["path_cpu_ratio"]["worst"] == path["path_cpu_ratio"]
    assert result["command"] and result["git_commit"]
    (row,) = result["rows"]
    assert row["sparse"] and row["n_train"] == 200 and row["n_features"] == 5000
    for key in ("per_tree_ratio", "fit_ratio", "binning_ratio", "auc_gap_pt", "memory_ratio"):
        assert np.isfinite(row[key])
    assert {"per_tree_ratio", "fit_ratio", "auc_gap_pt"} <= set(result["verdicts"])
    printed = capsys.readouterr().out
    assert "fit ours" in printed and "text_like" in printed and "MET" in printed
