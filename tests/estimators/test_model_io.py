"""Model files: exact JSON round trip, strict JSON, determinism, tamper and corruption refusal, no pickle."""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import pickle

import numpy as np
import pandas as pd
import pytest

import gbfs.estimators.model_io
from gbfs import GBFSClassifier, GBFSRegressor, load_model


def _strict_loads(text):
    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def _canonical_checksum(body):
    """The documented checksum: sha256 of json.dumps(body without checksum, sort_keys, compact)."""
    rest = {k: v for k, v in body.items() if k != "checksum"}
    blob = json.dumps(rest, sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()


def _write(path, body, reseal=False):
    if reseal:
        body["checksum"] = _canonical_checksum(body)
    path.write_text(json.dumps(body))
    return path


def _data_with_nans(seed=0, n=300, d=8):
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    y01 = ((X[:, 0] + X[:, 1] > 1.0) ^ (rng.random(n) < 0.1)).astype(np.int64)
    miss2 = (y01 == 1) & (rng.random(n) < 0.33)
    yr = 3 * X[:, 1] - X[:, 0] + 2 * miss2 + 0.1 * rng.standard_normal(n)
    X[rng.random((n, d)) < 0.05] = np.nan
    # x2 is missing exactly on a third of the positives: the split "non-missing left, NaN right"
    # has an infinite raw threshold, which the file must encode as strict JSON
    X[:, 2] = rng.random(n)
    X[miss2, 2] = np.nan
    return X, y01, yr


PARAMS = dict(n_estimators=12, max_leaves=10, min_samples_leaf=3, mu=0.005, random_state=0)


@pytest.fixture(scope="module")
def data():
    return _data_with_nans()


def _assert_same_model(a, b, X):
    if hasattr(a, "classes_"):
        np.testing.assert_array_equal(a.classes_, b.classes_)
        assert a.classes_.dtype == b.classes_.dtype
        assert np.array_equal(a.decision_function(X), b.decision_function(X))
        assert np.array_equal(a.predict_proba(X), b.predict_proba(X))
    assert np.array_equal(a.predict(X), b.predict(X))
    np.testing.assert_array_equal(a.selected_features_, b.selected_features_)
    assert a.selected_feature_names_ == b.selected_feature_names_
    np.testing.assert_array_equal(a.feature_importances_, b.feature_importances_)
    np.testing.assert_array_equal(a.get_support(), b.get_support())
    assert a.n_iter_ == b.n_iter_
    assert a.best_iteration_ == b.best_iteration_
    assert a.n_features_in_ == b.n_features_in_
    assert a.init_score_ == b.init_score_


@pytest.mark.parametrize("Est", [GBFSClassifier, GBFSRegressor])
def test_round_trip_exact_with_nans(tmp_path, data, Est):
    X, y01, yr = data
    est = Est(**PARAMS).fit(X, y01 if Est is GBFSClassifier else yr)
    path = tmp_path / "model.json"
    est.save_model(path)
    loaded = load_model(path)
    assert type(loaded) is Est
    _assert_same_model(est, loaded, X)
    # unseen rows, including all-NaN rows and values outside the training range
    rng = np.random.default_rng(9)
    Xn = rng.normal(0.5, 1.0, (50, X.shape[1]))
    Xn[:5] = np.nan
    _assert_same_model(est, loaded, Xn)
    # the loaded model has the estimator's parameters
    assert loaded.get_params() == est.get_params()
    # the missing-value split made an infinite threshold, and the file is still strict JSON
    text = path.read_text()
    body = _strict_loads(text)
    assert any("Infinity" in t["threshold"] for t in body["trees"])


def test_round_trip_dataframe_names_and_string_labels(tmp_path, data):
    X, y01, _ = data
    cols = [f"col {c}" for c in "abcdefgh"]  # spaces: names are arbitrary strings
    df = pd.DataFrame(X, columns=cols)
    y = np.where(y01 == 1, "spam", "ham")
    costs = np.linspace(0.5, 2.0, X.shape[1])
    est = GBFSClassifier(feature_costs=costs, feature_bags=[0, 0, 1, 1, 2, 2, 3, 3], **PARAMS).fit(df, y)
    path = tmp_path / "m.json"
    est.save_model(path)
    loaded = load_model(path)
    _assert_same_model(est, loaded, df)
    assert list(loaded.feature_names_in_) == cols
    assert loaded.selected_feature_names_ == [cols[f] for f in est.selected_features_]
    assert set(loaded.predict(df)) <= {"spam", "ham"}
    np.testing.assert_array_equal(loaded.get_params()["feature_costs"], costs)
    np.testing.assert_array_equal(loaded.get_params()["feature_bags"], [0, 0, 1, 1, 2, 2, 3, 3])
    # pandas input with other column names is refused by the loaded model too
    with pytest.raises(ValueError, match="feature names"):
        loaded.predict(df.rename(columns={"col a": "other"}))


@pytest.mark.parametrize("labels", [(-1, 1), (3, 7), (0.25, 4.5), (False, True)])
def test_round_trip_label_dtypes(tmp_path, data, labels):
    X, y01, _ = data
    y = np.where(y01 == 1, labels[1], labels[0])
    est = GBFSClassifier(**PARAMS).fit(X, y)
    est.save_model(tmp_path / "m.json")
    loaded = load_model(tmp_path / "m.json")
    _assert_same_model(est, loaded, X)
    assert loaded.predict(X).dtype == est.predict(X).dtype


def test_round_trip_after_early_stopping(tmp_path, data):
    X, _, yr = data
    est = GBFSRegressor(n_estimators=300, learning_rate=0.5, max_leaves=31, min_samples_leaf=1, mu=0.0,
                        early_stopping_rounds=5, random_state=0)
    est.fit(X[:200], yr[:200], eval_set=(X[200:], yr[200:]))
    assert est.best_iteration_ is not None
    est.save_model(tmp_path / "m.json")
    loaded = load_model(tmp_path / "m.json")
    _assert_same_model(est, loaded, X)


def test_save_load_save_is_byte_identical(tmp_path, data):
    X, y01, _ = data
    est = GBFSClassifier(feature_costs=[1.0] * X.shape[1], **PARAMS).fit(X, y01)
    est.save_model(tmp_path / "a.json")
    load_model(tmp_path / "a.json").save_model(tmp_path / "b.json")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def test_loaded_model_can_be_refit(tmp_path, data):
    X, _, yr = data
    est = GBFSRegressor(**PARAMS).fit(X, yr)
    est.save_model(tmp_path / "m.json")
    loaded = load_model(tmp_path / "m.json").fit(X, yr)
    assert np.array_equal(loaded.predict(X), est.predict(X))


def test_checksum_is_the_documented_canonical_form(tmp_path, data):
    X, y01, _ = data
    GBFSClassifier(**PARAMS).fit(X, y01).save_model(tmp_path / "m.json")
    body = _strict_loads((tmp_path / "m.json").read_text())
    assert body["format"] == "gbfs-model"
    assert body["format_version"] == 1
    assert body["checksum"] == _canonical_checksum(body)


# -- determinism ------------------------------------------------------------------------------------

def _big_data():
    # more rows than bin_subsample (>= 1000), so the bin edges depend on the subsample's seed
    rng = np.random.default_rng(5)
    X = rng.random((1500, 5))
    y = X[:, 0] - 2 * X[:, 1] + 0.1 * rng.standard_normal(1500)
    return X, y


DET = dict(n_estimators=5, max_leaves=8, min_samples_leaf=5, bin_subsample=1000)


def test_same_seed_gives_byte_identical_files(tmp_path):
    X, y = _big_data()
    for k in range(2):
        GBFSRegressor(random_state=42, **DET).fit(X, y).save_model(tmp_path / f"{k}.json")
        GBFSClassifier(random_state=42, **DET).fit(X, y > 0).save_model(tmp_path / f"c{k}.json")
    assert (tmp_path / "0.json").read_bytes() == (tmp_path / "1.json").read_bytes()
    assert (tmp_path / "c0.json").read_bytes() == (tmp_path / "c1.json").read_bytes()


def test_same_seed_without_subsampling_is_deterministic(tmp_path, data):
    X, y01, _ = data
    for k in range(2):
        GBFSClassifier(**PARAMS).fit(X, y01).save_model(tmp_path / f"{k}.json")
    assert (tmp_path / "0.json").read_bytes() == (tmp_path / "1.json").read_bytes()


def test_different_seeds_change_the_model_when_binning_subsamples(tmp_path):
    X, y = _big_data()
    bodies = []
    for seed in (1, 2):
        GBFSRegressor(random_state=seed, **DET).fit(X, y).save_model(tmp_path / f"{seed}.json")
        bodies.append(_strict_loads((tmp_path / f"{seed}.json").read_text()))
    # not only the stored random_state: the subsample changed the bin edges and split thresholds
    assert bodies[0]["bin_edges"] != bodies[1]["bin_edges"]
    assert [t["threshold"] for t in bodies[0]["trees"]] != [t["threshold"] for t in bodies[1]["trees"]]
    # with the whole sample used for binning the seed has nothing to change but the stored param
    full = {}
    for seed in (1, 2):
        est = GBFSRegressor(random_state=seed, **{**DET, "bin_subsample": None}).fit(X, y)
        full[seed] = model = gbfs.estimators.model_io.model_to_dict(est)
        del model["params"]["random_state"], model["checksum"]
    assert full[1] == full[2]


# -- refusal ------------------------------------------------------------------------------------------

@pytest.fixture
def saved(tmp_path, data):
    X, y01, _ = data
    path = tmp_path / "model.json"
    GBFSClassifier(**PARAMS).fit(X, y01).save_model(path)
    return path, json.loads(path.read_text())


def test_tampered_leaf_value_is_refused(saved):
    path, body = saved
    tree = body["trees"][0]
    leaf = tree["feature"].index(-1)
    tree["value"][leaf] += 0.001
    _write(path, body)  # keep the old checksum
    with pytest.raises(ValueError, match="checksum"):
        load_model(path)


def test_tampered_text_is_refused(saved):
    path, _ = saved
    text = path.read_text()
    i = text.index('"init_score":') + len('"init_score":')
    j = i + 1 if text[i] == "-" else i
    digit = text[j]
    path.write_text(text[:j] + ("1" if digit != "1" else "2") + text[j + 1:])
    with pytest.raises(ValueError, match="checksum"):
        load_model(path)


def test_missing_checksum_is_refused(saved):
    path, body = saved
    del body["checksum"]
    _write(path, body)
    with pytest.raises(ValueError, match="checksum"):
        load_model(path)


@pytest.mark.parametrize("cut", [0.5, 0.99])
def test_truncated_file_is_refused(saved, cut):
    path, _ = saved
    text = path.read_text()
    path.write_text(text[: int(len(text) * cut)])
    with pytest.raises(ValueError, match="JSON"):
        load_model(path)


@pytest.mark.parametrize("content", ["", "not json", "[1, 2, 3]", '{"format": "xgboost"}', "null"])
def test_not_a_model_file_is_refused(tmp_path, content):
    path = tmp_path / "m.json"
    path.write_text(content)
    with pytest.raises(ValueError, match="gbfs model file"):
        load_model(path)


@pytest.mark.parametrize("version", [2, 0, "1", None])
def test_wrong_format_version_is_refused(saved, version):
    path, body = saved
    body["format_version"] = version
    _write(path, body, reseal=True)
    with pytest.raises(ValueError, match="format_version"):
        load_model(path)


def test_invalid_child_id_with_consistent_checksum_is_refused(saved):
    path, body = saved
    tree = body["trees"][0]
    assert tree["feature"][0] >= 0
    tree["left"][0] = 0  # the root as its own child: a cycle
    _write(path, body, reseal=True)
    with pytest.raises(ValueError, match="child"):
        load_model(path)


@pytest.mark.parametrize("field, node, value, match", [
    ("right", 0, 10_000, "child"),  # past the end of the node arrays
    ("left", "leaf", 1, "child"),  # a leaf with a child
    ("feature", 0, 99, "feature"),  # a feature the model does not have
    ("feature", 0, -2, "feature"),
    ("value", "leaf", "NaN", "NaN"),
    ("value", "leaf", "abc", "non-number"),
    ("count", 0, 1.5, "integers"),
])
def test_inconsistent_tree_with_consistent_checksum_is_refused(saved, field, node, value, match):
    path, body = saved
    tree = body["trees"][-1]
    i = tree["feature"].index(-1) if node == "leaf" else node
    tree[field][i] = value
    _write(path, body, reseal=True)
    with pytest.raises(ValueError, match=match):
        load_model(path)


def test_tree_arrays_of_unequal_length_are_refused(saved):
    path, body = saved
    body["trees"][0]["gain"].append(0.0)
    _write(path, body, reseal=True)
    with pytest.raises(ValueError, match="equal length"):
        load_model(path)


def test_unknown_estimator_is_refused(saved):
    path, body = saved
    body["estimator"] = "GBFSRanker"
    _write(path, body, reseal=True)
    with pytest.raises(ValueError, match="estimator"):
        load_model(path)


def test_missing_key_is_refused_as_value_error(saved):
    path, body = saved
    del body["bin_edges"]
    _write(path, body, reseal=True)
    with pytest.raises(ValueError, match="malformed"):
        load_model(path)


def test_wrong_number_of_bin_edge_lists_is_refused(saved):
    path, body = saved
    body["bin_edges"] = body["bin_edges"][:-1]
    _write(path, body, reseal=True)
    with pytest.raises(ValueError, match="bin_edges"):
        load_model(path)


# -- no pickle ---------------------------------------------------------------------------------------

def test_model_io_never_uses_pickle(saved, monkeypatch):
    tree = ast.parse(inspect.getsource(gbfs.estimators.model_io))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & {"pickle", "cPickle", "dill", "cloudpickle", "joblib", "marshal", "shelve"}
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert "pickle" not in names
    # and at run time: loading works with pickle disabled
    def refuse(*args, **kwargs):
        raise AssertionError("pickle used")

    for fn in ("load", "loads", "dump", "dumps"):
        monkeypatch.setattr(pickle, fn, refuse)
    path, _ = saved
    load_model(path).save_model(path)


def test_a_file_without_min_data_in_bin_was_fitted_with_one_bin_per_value(tmp_path, saved):
    """A file written before ``min_data_in_bin`` existed lacks the key: that gbfs gave every distinct
    value its own bin, so the loaded model says 1 (and a clone refits as it was fitted), not today's
    default 3.  A file that has the key keeps its own value."""
    path, body = saved
    assert body["params"]["min_data_in_bin"] == 3
    loaded = load_model(path)
    assert loaded.min_data_in_bin == 3
    del body["params"]["min_data_in_bin"]
    older = load_model(_write(tmp_path / "older.json", body, reseal=True))
    assert older.min_data_in_bin == 1
    assert older.get_params()["mu"] == PARAMS["mu"]
