"""Ranking data: LIBSVM files with query ids or LightGBM's .query files, the synthetic stand-in,
and splits that keep queries whole."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file

from gbfs.data import load_dataset
from gbfs.data.formats import FormatError
from gbfs.data.reading import ranking_files as RF


def _rows(seed=0, n_queries=12):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 9, n_queries)
    X = np.round(rng.random((sizes.sum(), 6)), 3)
    y = rng.integers(0, 5, sizes.sum())
    return X, y, sizes


def test_qid_and_query_files_read_the_same(tmp_path):
    X, y, sizes = _rows()
    qid = np.repeat(np.arange(len(sizes)) * 7 + 3, sizes)
    dump_svmlight_file(X, y, str(tmp_path / "q.svm"), query_id=qid)
    dump_svmlight_file(X, y, str(tmp_path / "plain.svm"))
    (tmp_path / "plain.svm.query").write_text("\n".join(map(str, sizes)) + "\n")
    for args in ((tmp_path / "q.svm",), (tmp_path / "plain.svm",)):
        Xr, yr, sr = RF.read(*args)
        np.testing.assert_allclose(Xr, X, rtol=1e-6)
        assert np.array_equal(yr, y) and np.array_equal(sr, sizes)


def test_bad_ranking_files_are_refused(tmp_path):
    X, y, sizes = _rows()
    dump_svmlight_file(X, y, str(tmp_path / "plain.svm"))
    with pytest.raises(FormatError, match="no query ids"):
        RF.read(tmp_path / "plain.svm")
    (tmp_path / "plain.svm.query").write_text("3\n4\n")
    with pytest.raises(FormatError, match="sum to the"):
        RF.read(tmp_path / "plain.svm")
    qid = np.repeat([1, 2, 1], [2, 3, len(y) - 5])
    dump_svmlight_file(X, y, str(tmp_path / "mixed.svm"), query_id=qid)
    with pytest.raises(FormatError, match="query 1 are not consecutive"):
        RF.read(tmp_path / "mixed.svm")
    one_each = np.repeat(np.arange(len(sizes)), sizes)
    dump_svmlight_file(X, y + 0.5, str(tmp_path / "frac.svm"), query_id=one_each)
    with pytest.raises(FormatError, match="integers in \\[0, 31\\]"):
        RF.read(tmp_path / "frac.svm")
    with pytest.raises(FileNotFoundError, match="query_path"):
        RF.read(tmp_path / "plain.svm", tmp_path / "absent.query")


def test_ranking_file_dataset_splits_whole_queries(tmp_path):
    X, y, sizes = _rows(n_queries=60)
    qid = np.repeat(np.arange(len(sizes)), sizes)
    dump_svmlight_file(X, y, str(tmp_path / "r.svm"), query_id=qid)
    ds = RF.load(tmp_path / "r.svm", seed=1)
    assert ds.task == "ranking"
    assert ds.group_train.sum() == len(ds.y_train) and ds.group_val.sum() == len(ds.y_val)
    assert ds.group_test.sum() == len(ds.y_test)
    assert len(ds.group_train) + len(ds.group_val) + len(ds.group_test) == len(sizes)
    # every split's rows are whole queries of the file: the multiset of rows is preserved
    both = np.concatenate([ds.X_train, ds.X_val, ds.X_test])
    assert sorted(map(tuple, both)) == sorted(map(tuple, X.astype(np.float32)))


def test_ranking_like_has_known_relevant_features():
    ds = load_dataset("ranking_like", scale=0.05, seed=3)
    again = load_dataset("ranking_like", scale=0.05, seed=3)
    assert np.array_equal(ds.X_train, again.X_train) and np.array_equal(ds.group_val, again.group_val)
    assert ds.task == "ranking" and len(ds.relevant) == 6 and set(np.unique(ds.y_test)) <= set(range(5))
    for X, g in ((ds.X_train, ds.group_train), (ds.X_val, ds.group_val), (ds.X_test, ds.group_test)):
        assert g.sum() == len(X) and g.min() >= 5
    from gbfs.estimators.ranker import GBFSRanker

    m = GBFSRanker(method="agbm", mu=0.05, n_estimators=30, random_state=0).fit(ds.X_train, ds.y_train,
                                                                                 ds.group_train)
    assert set(m.selected_features_) <= set(ds.relevant) and m.n_features_selected_ >= 3
