"""Hostile inputs to the library: thread counts in model files, float64 overflow, concurrent and
misdirected saves, forged model files, mixed labels, integers beyond float64 and warning locations.

Every refusal must be a clear error naming the argument (or the file and the field), raised before
any training; no model with non-finite scores may be returned, saved or loaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import threading
import warnings
from pathlib import Path

import numba
import numpy as np
import pandas as pd
import pytest
from estimator_cases import FAST

import gbfs
import gbfs.estimators.fitting
import gbfs.estimators.model_io
from gbfs import GBFSClassifier, GBFSRegressor, load_model

rng = np.random.default_rng(0)
X = rng.random((120, 4))
Y = (X[:, 0] + 0.3 * rng.random(120) > 0.6).astype(np.int64)
YR = 2 * X[:, 0] - X[:, 1] + 0.1 * rng.standard_normal(120)
POOL = numba.config.NUMBA_NUM_THREADS


def _reseal(body):
    """The documented checksum: sha256 of the canonical JSON of every other key."""
    rest = {k: v for k, v in body.items() if k != "checksum"}
    blob = json.dumps(rest, sort_keys=True, separators=(",", ":")).encode()
    body["checksum"] = "sha256:" + hashlib.sha256(blob).hexdigest()
    return body


def _save(est, path):
    est.save_model(path)
    return json.loads(path.read_text())


@pytest.fixture
def no_training(monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("boost() was called: the input was not validated before training")

    monkeypatch.setattr(gbfs.estimators.fitting, "boost", boom)


@pytest.fixture(scope="module")
def reg():
    return GBFSRegressor(**FAST).fit(X, YR)


# -- the thread count is a run-time choice, not part of the model --------------------------------

@pytest.mark.parametrize("Est", [GBFSClassifier, GBFSRegressor])
def test_model_saved_with_more_threads_than_numba_has_predicts(tmp_path, Est):
    est = Est(**FAST).fit(X, Y if Est is GBFSClassifier else YR)
    path = tmp_path / "m.json"
    body = _save(est, path)
    body["params"]["n_threads"] = POOL + 2  # saved on a larger machine
    path.write_text(json.dumps(_reseal(body)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the file's thread count is ignored silently, as LightGBM does
        loaded = load_model(path)
        np.testing.assert_array_equal(loaded.predict(X), est.predict(X))
        loaded.transform(X)
    assert loaded.get_params()["n_threads"] == POOL + 2  # restored as saved
    # a fit on this machine still refuses the thread count, naming it
    with pytest.raises(ValueError, match=rf"n_threads={POOL + 2} exceeds"):
        loaded.fit(X, Y if Est is GBFSClassifier else YR)


def test_thread_count_set_after_fit_is_capped_with_a_warning(clf):
    est = GBFSClassifier(**FAST).fit(X, Y)
    est.set_params(n_threads=POOL + 1)
    with pytest.warns(UserWarning, match=rf"n_threads={POOL + 1} exceeds the {POOL} threads") as rec:
        proba = est.predict_proba(X)
    np.testing.assert_array_equal(proba, clf.predict_proba(X))
    assert rec[0].filename == __file__
    assert numba.get_num_threads() == POOL  # restored


# -- float64 overflow -----------------------------------------------------------------------------

@pytest.mark.parametrize("y", [np.where(YR > 0.5, 1e308, -1e308), np.full(120, 1e149) * np.sign(YR - 0.5),
                               np.where(YR > 0.5, 1e300, 0.0)])
def test_regression_target_beyond_float64_sums_is_refused_before_training(no_training, y):
    est = GBFSRegressor(**FAST)
    with pytest.raises(ValueError, match=r"^y is too large for float64.*rescale y"):
        est.fit(X, y)
    assert not hasattr(est, "_trees")


def test_eval_set_target_beyond_float64_sums_is_refused(no_training):
    with pytest.raises(ValueError, match=r"eval_set\[0\] y is too large"):
        GBFSRegressor(**FAST).fit(X, YR, eval_set=(X, np.full(120, 1e300)))


def test_large_but_safe_regression_target_fits_to_a_finite_model(tmp_path):
    y = YR * 1e140  # n_rows * max|y| stays below the documented 1e150
    est = GBFSRegressor(**FAST).fit(X, y)
    pred = est.predict(X)
    assert np.all(np.isfinite(pred))
    est.save_model(tmp_path / "m.json")
    np.testing.assert_array_equal(load_model(tmp_path / "m.json").predict(X), pred)


@pytest.mark.parametrize("lr", [1e300, 101.0, float("inf")])
def test_absurd_learning_rate_is_refused_before_training(no_training, lr):
    with pytest.raises(ValueError, match=r"learning_rate"):
        GBFSRegressor(**{**FAST, "learning_rate": lr}).fit(X, YR)


@pytest.mark.parametrize("Est, y, params", [
    (GBFSRegressor, YR * 1e100, dict(learning_rate=10.0)),  # overshoots 9x per tree
    (GBFSRegressor, YR, dict(learning_rate=100.0, leaf_estimate="newton", criterion="newton")),
])
def test_diverging_fit_raises_instead_of_returning_a_nan_model(Est, y, params):
    est = Est(**{**FAST, "n_estimators": 400, "min_samples_leaf": 2, **params})
    with pytest.raises(ValueError, match=r"boosting diverged at tree \d+.*learning_rate="):
        est.fit(X, y)
    assert not hasattr(est, "_trees") and not hasattr(est, "init_score_")


def test_huge_class_labels_are_only_labels():
    y = np.where(Y == 1, 1e308, -1e308)
    est = GBFSClassifier(**FAST).fit(X, y)
    assert list(est.classes_) == [-1e308, 1e308]
    assert set(est.predict(X)) <= {-1e308, 1e308}
    assert np.all(np.isfinite(est.decision_function(X)))


@pytest.mark.parametrize("what", ["leaf", "init"])
def test_save_refuses_a_non_finite_model_and_writes_nothing(tmp_path, what):
    est = GBFSRegressor(**FAST).fit(X, YR)
    if what == "leaf":
        tree = est._trees[-1]
        tree.value[np.flatnonzero(tree.feature < 0)[0]] = np.nan
    else:
        est.init_score_ = float("inf")
    with pytest.raises(ValueError, match="non-finite leaf values" if what == "leaf" else "init_score_"):
        est.save_model(tmp_path / "m.json")
    assert list(tmp_path.iterdir()) == []


# -- model files: concurrent, misdirected and failed saves ----------------------------------------

def test_concurrent_saves_to_one_path_all_succeed(tmp_path, clf, reg):
    path = tmp_path / "m.json"
    errors = []

    def work(est):
        for _ in range(15):
            try:
                est.save_model(path)
            except Exception as e:  # noqa: BLE001 -- every failure is the finding
                errors.append(e)

    threads = [threading.Thread(target=work, args=(clf if k % 2 else reg,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert [p.name for p in tmp_path.iterdir()] == ["m.json"]  # no temporary file left
    assert type(load_model(path)) in (GBFSClassifier, GBFSRegressor)  # one whole file


def test_save_to_a_directory_is_refused_naming_it_and_leaves_nothing(tmp_path, clf):
    target = tmp_path / "models"
    target.mkdir()
    with pytest.raises(IsADirectoryError, match=rf"directory.*{target.name}"):
        clf.save_model(target)
    assert [p.name for p in tmp_path.iterdir()] == ["models"]
    assert list(target.iterdir()) == []


def test_failed_save_removes_its_temporary_file_and_keeps_the_old_file(tmp_path, clf, reg, monkeypatch):
    path = tmp_path / "m.json"
    reg.save_model(path)
    before = path.read_bytes()

    def fail(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(gbfs.estimators.model_io.os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        clf.save_model(path)
    assert [p.name for p in tmp_path.iterdir()] == ["m.json"] and path.read_bytes() == before
    assert path.read_bytes() == before


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_saved_file_permissions_follow_the_umask(tmp_path, clf, umask, mode):
    old = os.umask(umask)
    try:
        clf.save_model(tmp_path / "m.json")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "m.json").stat().st_mode) == mode


# -- model files: forged content with a valid checksum --------------------------------------------

def _forge(path, edit):
    body = json.loads(path.read_text())
    edit(body)
    path.write_text(json.dumps(_reseal(body)))
    return path


def _set_param(name, value):
    return lambda b: b["params"].__setitem__(name, value)


def _first_leaf(value):
    def edit(b):
        t = b["trees"][0]
        t["value"][t["feature"].index(-1)] = value
    return edit


FORGED = [
    ("mu_negative", _set_param("mu", -5), r"params: mu must be >= 0"),
    ("method_evil", _set_param("method", "evil"), r"params: method must be one of .*'evil'"),
    ("n_estimators_string", _set_param("n_estimators", "many"), r"params: n_estimators must be an int"),
    ("learning_rate_huge", _set_param("learning_rate", 1e300), r"params: learning_rate"),
    ("unknown_param", _set_param("evil", 1), r"params: .*evil"),
    ("params_list", lambda b: b.__setitem__("params", [1, 2]), r"params must be an object"),
    ("random_state_negative", _set_param("random_state", -1), r"params: random_state"),
    ("feature_costs_length", _set_param("feature_costs", [1.0]), r"params: feature_costs has 1 entries"),
    ("sampler_evil", _set_param("sampler", "evil"), r"params: sampler"),
    ("init_score_nan", lambda b: b.__setitem__("init_score", "NaN"), r"init_score must be finite"),
    ("init_score_inf", lambda b: b.__setitem__("init_score", "-Infinity"), r"init_score must be finite"),
    ("init_score_overflow", lambda b: b.__setitem__("init_score", 10 ** 400), r"init_score.*too large"),
    ("leaf_inf", _first_leaf("Infinity"), r"trees\[0\]\.value holds NaN or infinite"),
    ("classes_dicts", lambda b: b.__setitem__("classes", {"dtype": "|O", "values": [{"a": 1}, {"b": 2}]}),
     r"classes: Unknown label type"),
    ("classes_mixed", lambda b: b.__setitem__("classes", {"dtype": "|O", "values": [0, "1"]}),
     r"classes: Mix of label input types \(string and number\)"),
    ("classes_unsorted", lambda b: b["classes"].__setitem__("values", [1, 0]), r"classes must be .*sorted"),
    ("classes_equal", lambda b: b["classes"].__setitem__("values", [1, 1]), r"classes has only one class"),
    ("classes_three", lambda b: b["classes"].__setitem__("values", [0, 1, 2]),
     r"init_score must be a list of 3 floats"),
    ("classes_bad_dtype", lambda b: b["classes"].__setitem__("dtype", "evil"), r"classes: cannot read"),
    ("classes_missing", lambda b: b.pop("classes"), r"classes must be given for a classifier"),
    ("best_iteration_string", lambda b: b.__setitem__("best_iteration", "evil"), r"best_iteration"),
    ("best_iteration_too_large", lambda b: b.__setitem__("best_iteration", 10 ** 6), r"best_iteration"),
    ("feature_names_ints", lambda b: b.__setitem__("feature_names_in", [1, 2, 3, 4]), r"feature_names_in"),
    ("n_features_bool", lambda b: b.__setitem__("n_features_in", True), r"n_features_in"),
    ("trees_not_list", lambda b: b.__setitem__("trees", {"a": 1}), r"trees must be a list"),
    ("tree_int_overflow", lambda b: b["trees"][0]["count"].__setitem__(0, 10 ** 30), r"malformed"),
]


@pytest.mark.parametrize("edit, match", [c[1:] for c in FORGED], ids=[c[0] for c in FORGED])
def test_forged_model_file_with_valid_checksum_is_refused(tmp_path, clf, edit, match):
    path = tmp_path / "forged.json"
    clf.save_model(path)
    _forge(path, edit)
    with pytest.raises(ValueError, match=rf"^{path}: .*{match}|^{path}: {match}"):
        load_model(path)


def test_regressor_file_with_classes_is_refused(tmp_path, reg):
    path = tmp_path / "r.json"
    reg.save_model(path)
    _forge(path, lambda b: b.__setitem__("classes", {"dtype": "<i8", "values": [0, 1]}))
    with pytest.raises(ValueError, match=rf"^{path}: classes must be given .*only for a classifier"):
        load_model(path)


def test_file_of_an_older_gbfs_without_newer_params_still_loads(tmp_path, clf):
    path = tmp_path / "old.json"
    clf.save_model(path)
    later = ("max_features", "refit", "selection_patience", "importance_type", "sampler", "subsample",
             "top_rate", "other_rate", "mvs_lambda", "goss_style")
    _forge(path, lambda b: [b["params"].pop(k) for k in later])
    loaded = load_model(path)
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))


def test_load_does_not_repeat_fit_time_warnings(tmp_path):
    with pytest.warns(UserWarning):
        est = GBFSClassifier(**FAST, n_subsets=3, subsample=0.5).fit(X, Y)  # both ignored for agbm
    est.save_model(tmp_path / "m.json")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_model(tmp_path / "m.json")


@pytest.mark.parametrize("content, match", [
    (b"\xff\xfe{\x00", "not UTF-8"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b'{"format": "gbfs-model", "format_version": ' + b"1" * 5000 + b"}", "digits"),
    (b'{"format": "gbfs-model", "format_version": 1e999}', "format_version"),
])
def test_unparseable_file_is_a_value_error_naming_the_file(tmp_path, content, match):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=rf"^{path}: .*{match}"):
        load_model(path)


# -- labels ------------------------------------------------------------------------------------------

def _mixed(kind):
    labels = [0 if v == 0 else "1" for v in Y]
    if kind == "object":
        return np.asarray(labels, dtype=object)
    return labels if kind == "list" else pd.Series(labels, dtype=object)


@pytest.mark.parametrize("kind", ["object", "list", "series"])
def test_mixed_string_and_number_labels_are_refused(no_training, kind):
    with pytest.raises(ValueError, match=r"^y: Mix of label input types \(string and number\)"):
        GBFSClassifier(**FAST).fit(X, _mixed(kind))


def test_mixed_eval_set_labels_are_refused(no_training):
    with pytest.raises(ValueError, match=r"eval_set\[0\] y: Mix of label input types"):
        GBFSClassifier(**FAST).fit(X, Y, eval_set=(X, _mixed("object")))


@pytest.mark.parametrize("labels", [[{"a": 1}, {"b": 2}], [None, "a"], [b"a", b"b"]])
def test_labels_that_are_neither_strings_nor_numbers_are_refused(no_training, labels):
    y = np.empty(120, dtype=object)
    y[:] = [labels[v] for v in Y]
    with pytest.raises(ValueError, match=r"^y: (Unknown label type|Mix of label input types)"):
        GBFSClassifier(**FAST).fit(X, y)


@pytest.mark.parametrize("y", [np.where(Y == 1, "pos", "neg").astype(object).tolist(),
                               pd.Series(np.where(Y == 1, "pos", "neg"), dtype=object)])
def test_string_labels_as_objects_still_work(y):
    est = GBFSClassifier(**FAST).fit(X, y)
    assert list(est.classes_) == ["neg", "pos"]


@pytest.mark.parametrize("y", [[str(v) for v in YR], np.asarray([str(v) for v in YR], dtype=object)])
def test_regression_target_of_numeric_strings_is_refused(no_training, y):
    with pytest.raises(ValueError, match=r"^y must be numeric, got strings"):
        GBFSRegressor(**FAST).fit(X, y)


# -- integers beyond float64's exact range -----------------------------------------------------------

BIG = [2 ** 53 + 1, 2 ** 53 + 2, 2 ** 60, -(2 ** 63), 2 ** 63 - 1, -(2 ** 53) - 3]  # 1st, 5th, 6th round


def _int_X():
    Xi = rng.integers(0, 100, (120, 4)).astype(np.int64)
    Xi[:len(BIG), 2] = BIG
    return Xi


def test_int64_features_beyond_2_53_warn_with_count():
    Xi = _int_X()
    with pytest.warns(UserWarning, match=r"^X has 3 integer values beyond \+-2\*\*53") as rec:
        est = GBFSClassifier(**FAST).fit(Xi, Y)
    assert rec[0].filename == __file__
    with pytest.warns(UserWarning, match=r"^X has 3 integer values"):
        est.predict(Xi)
    with pytest.warns(UserWarning, match=r"^X has 3 integer values"):
        GBFSClassifier(**FAST).fit(pd.DataFrame(Xi, columns=list("abcd")), Y)


def test_uint64_and_eval_set_features_beyond_2_53_warn():
    Xu = rng.integers(0, 100, (120, 4)).astype(np.uint64)
    Xu[0, 1] = 2 ** 64 - 1
    with pytest.warns(UserWarning, match=r"^eval_set\[0\] X has 1 integer value beyond"):
        GBFSClassifier(**FAST).fit(X, Y, eval_set=(Xu, Y))


def test_small_or_exact_integers_do_not_warn():
    Xi = rng.integers(-(2 ** 53), 2 ** 53, (120, 4))
    Xi[0, 0] = 2 ** 62  # beyond 2**53 but a float64
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        GBFSClassifier(**FAST).fit(Xi, Y)


def test_int64_regression_target_beyond_2_53_warns():
    y = (YR * 1000).astype(np.int64) + 2 ** 55 + 1
    n = sum(int(float(v)) != v for v in y.tolist())  # Python's exact int/float round trip
    assert n > 50
    with pytest.warns(UserWarning, match=rf"^y has {n} integer values beyond"):
        GBFSRegressor(**FAST).fit(X, y)


# -- warnings point at the caller's line ------------------------------------------------------------

@pytest.mark.parametrize("params, match", [
    (dict(n_subsets=5), "only apply to method='gtgbm'"),
    (dict(subsample=0.5), "ignored with sampler=None"),
    (dict(sampler="sgb", top_rate=0.3), "ignored with sampler=\"sgb\""),
    (dict(max_features=10), "the budget never binds"),
])
def test_library_warnings_name_the_callers_file(params, match):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        GBFSClassifier(**FAST, **params).fit(X, Y)
    ours = [w for w in rec if match in str(w.message)]
    assert ours and all(w.filename == __file__ for w in ours), [(w.filename, w.lineno) for w in ours]


def test_warnings_through_gbfs_entry_points_name_the_callers_file():
    from gbfs.selection.stability import selection_stability

    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        selection_stability(GBFSClassifier(**FAST, n_subsets=5), X, Y, n_resamples=2, random_state=0)
    ours = [w for w in rec if "only apply to method='gtgbm'" in str(w.message)]
    assert ours and all(w.filename == __file__ for w in ours), [(w.filename, w.lineno) for w in ours]


def test_warnings_through_scikit_learn_point_outside_gbfs():
    from sklearn.model_selection import cross_val_score

    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        cross_val_score(GBFSClassifier(**FAST, n_subsets=5), X, Y, cv=2)
    ours = [w for w in rec if "only apply to method='gtgbm'" in str(w.message)]
    package = str(Path(gbfs.__file__).parent)
    assert ours and not any(w.filename.startswith(package) for w in ours)
