"""Hostile model files and save targets: forged files that still pass the checksum, read-only
targets and symbolic links.

The loader accepts exactly what ``fit`` + ``save_model`` can write; anything else is a ValueError
naming the file and the field.  ``save_model`` writes as ``open(path, "w")`` would (through a
link, never over a read-only file), atomically.
"""

from __future__ import annotations

import json
import os
import stat

import numpy as np
import pandas as pd
import pytest
from estimator_cases import FAST

from gbfs import GBFSClassifier, GBFSMultitaskClassifier, load_model
from gbfs.io.envelope import checksum

rng = np.random.default_rng(11)
X = rng.random((120, 4))
Y = (X[:, 0] + 0.3 * rng.random(120) > 0.6).astype(np.int64)
LABELS = np.where(Y == 1, "pos", "neg")


@pytest.fixture(scope="module")
def text_clf():
    return GBFSClassifier(**FAST).fit(X, LABELS)


def _forge(path, edit):
    """Edit the saved file and re-sign it with the documented checksum."""
    body = json.loads(path.read_text())
    edit(body)
    body["checksum"] = checksum({k: v for k, v in body.items() if k != "checksum"})
    path.write_text(json.dumps(body))
    return path


def _refused(path, match):
    with pytest.raises(ValueError, match=rf"^{path}: .*{match}"):
        load_model(path)


# -- forged files ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["<U1", "<U2", "|S3", "<i8", "|b1"])
def test_classes_whose_dtype_alters_the_labels_are_refused(tmp_path, text_clf, dtype):
    path = tmp_path / "m.json"
    text_clf.save_model(path)
    assert json.loads(path.read_text())["classes"]["values"] == ["neg", "pos"]
    _forge(path, lambda b: b["classes"].__setitem__("dtype", dtype))
    _refused(path, r"classes")


@pytest.mark.parametrize("values, dtype", [([0, 1], "|b1"), ([0, 1], "<f8"), ([0.0, 1.0], "<i8")])
def test_numeric_classes_of_another_type_than_their_dtype_are_refused(tmp_path, clf, values, dtype):
    path = tmp_path / "m.json"
    clf.save_model(path)
    _forge(path, lambda b: b.__setitem__("classes", {"dtype": dtype, "values": values}))
    _refused(path, r"classes")


def test_string_labels_round_trip_exactly(tmp_path, text_clf):
    path = tmp_path / "m.json"
    text_clf.save_model(path)
    loaded = load_model(path)
    assert loaded.classes_.tolist() == ["neg", "pos"]
    np.testing.assert_array_equal(loaded.predict(X), text_clf.predict(X))


def test_categories_whose_dtype_alters_them_are_refused(tmp_path):
    df = pd.DataFrame({"x": X[:, 0], "city": pd.Categorical(np.where(X[:, 1] > 0.5, "Paris", "Rome"))})
    path = tmp_path / "m.json"
    GBFSClassifier(**FAST).fit(df, Y).save_model(path)
    _forge(path, lambda b: b["categorical"]["categories"][0].__setitem__("dtype", "<U1"))
    _refused(path, r"categories of feature 1")


def test_edges_of_a_categorical_feature_are_refused(tmp_path):
    df = pd.DataFrame({"x": X[:, 0], "city": pd.Categorical(np.where(X[:, 1] > 0.5, "Paris", "Rome"))})
    path = tmp_path / "m.json"
    GBFSClassifier(**FAST).fit(df, Y).save_model(path)
    _forge(path, lambda b: b["bin_edges"].__setitem__(1, [0.5]))
    _refused(path, r"bin_edges\[1\] must be empty: feature 1 is categorical")


def test_file_without_trees_is_refused(tmp_path, clf):
    # fit grows at least one tree (n_estimators >= 1; early stopping keeps up to the best, >= 1)
    path = tmp_path / "m.json"
    clf.save_model(path)
    _forge(path, lambda b: (b.__setitem__("trees", []), b.__setitem__("best_iteration", None)))
    _refused(path, r"trees must hold at least one tree")


def test_multitask_file_without_trees_is_refused(tmp_path):
    task = np.arange(120) % 2
    path = tmp_path / "m.json"
    GBFSMultitaskClassifier(**FAST).fit(X, Y, task).save_model(path)
    _forge(path, lambda b: (b.__setitem__("task_trees", [[], []]), b.__setitem__("best_iteration", None)))
    _refused(path, r"task_trees\[0\] must hold at least one tree")


@pytest.mark.parametrize("edit, match", [
    (lambda e: e.reverse(), r"bin_edges\[2\] must be sorted"),
    (lambda e: e.__setitem__(0, "NaN"), r"bin_edges\[2\] holds a non-finite edge"),
    (lambda e: e.extend([2.0 + k for k in range(300)]),
     r"bin_edges\[2\] holds \d+ edges, more than max_bins - 1 = 254"),
], ids=["unsorted", "nan", "too_many"])
def test_bin_edges_fit_cannot_write_are_refused_naming_the_feature(tmp_path, clf, edit, match):
    path = tmp_path / "m.json"
    clf.save_model(path)
    _forge(path, lambda b: edit(b["bin_edges"][2]))
    _refused(path, match)


@pytest.mark.parametrize("Est, extra", [(GBFSClassifier, {}),
                                        (GBFSMultitaskClassifier, {"task": np.arange(120) % 2})])
def test_unknown_top_level_key_is_refused_naming_it(tmp_path, Est, extra):
    path = tmp_path / "m.json"
    Est(**FAST).fit(X, Y, **extra).save_model(path)
    _forge(path, lambda b: b.__setitem__("backdoor", {"evil": 1}))
    _refused(path, r"unknown key 'backdoor'")


def test_every_key_fit_writes_is_accepted(tmp_path):
    # a refitted multiclass model with categorical columns: every optional key at once
    df = pd.DataFrame({"x": X[:, 0], "y": X[:, 2],
                       "city": pd.Categorical(np.where(X[:, 1] > 0.5, "Paris", "Rome"))})
    y3 = np.digitize(X[:, 0] + 0.3 * X[:, 1], [0.5, 0.9])
    est = GBFSClassifier(**FAST, max_features=2, refit=True).fit(df, y3, eval_set=(df, y3))
    path = tmp_path / "m.json"
    est.save_model(path)
    assert {"selected_features", "categorical", "classes"} <= set(json.loads(path.read_text()))
    np.testing.assert_array_equal(load_model(path).predict_proba(df), est.predict_proba(df))


# -- save targets ---------------------------------------------------------------------------------

@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
def test_save_over_a_read_only_file_is_refused_naming_it(tmp_path, clf):
    path = tmp_path / "m.json"
    path.write_text("precious")
    path.chmod(0o444)
    with pytest.raises(PermissionError, match=rf"{path}"):
        clf.save_model(path)
    assert path.read_text() == "precious"
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    assert [p.name for p in tmp_path.iterdir()] == ["m.json"]  # no temporary file left


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
def test_save_over_an_existing_file_keeps_its_mode(tmp_path, clf):
    path = tmp_path / "m.json"
    path.write_text("old")
    path.chmod(0o600)
    clf.save_model(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    np.testing.assert_array_equal(load_model(path).predict(X), clf.predict(X))


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="symbolic links")
@pytest.mark.parametrize("dangling", [False, True])
def test_save_through_a_symlink_writes_its_target_and_keeps_the_link(tmp_path, clf, dangling):
    store = tmp_path / "store"
    store.mkdir()
    target = store / "model.json"
    if not dangling:
        target.write_text("old")
    link = tmp_path / "current.json"
    link.symlink_to(target)
    clf.save_model(link)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert json.loads(target.read_text())["estimator"] == "GBFSClassifier"
    np.testing.assert_array_equal(load_model(link).predict(X), clf.predict(X))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["current.json", "store"]
    assert [p.name for p in store.iterdir()] == ["model.json"]
