"""One model-file envelope for every estimator: registry, legacy baseline files, atomic writes,
no import cycle between the estimators and the file format."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import numpy as np
import pytest

from gbfs import GBFSClassifier, load_model
from gbfs.baselines.lightgbm_baseline import LightGBMBaseline
from gbfs.io import envelope


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.random((300, 6))
    y = (X[:, 0] + 0.3 * rng.standard_normal(300) > 0.5).astype(int)
    return X, y


def test_every_estimator_writes_the_same_envelope(tmp_path, data):
    X, y = data
    GBFSClassifier(n_estimators=3, random_state=0).fit(X, y).save_model(tmp_path / "g.json")
    LightGBMBaseline(n_estimators=3, random_state=0).fit(X, y).save_model(tmp_path / "b.json")
    for name, est in (("g", "GBFSClassifier"), ("b", "LightGBMBaseline")):
        body = json.loads((tmp_path / f"{name}.json").read_text())
        assert body["format"] == "gbfs-model" and body["format_version"] == 1 and "version" not in body
        assert body["estimator"] == est
        assert body["checksum"] == envelope.checksum({k: v for k, v in body.items() if k != "checksum"})
    assert isinstance(load_model(tmp_path / "b.json"), LightGBMBaseline)  # gbfs.load_model reads both
    with pytest.raises(ValueError, match="holds a GBFSClassifier model, not a LightGBMBaseline"):
        LightGBMBaseline.load_model(tmp_path / "g.json")


def test_legacy_baseline_file_still_loads(tmp_path, data):
    """Baseline files of an older gbfs: their own format name, ``version`` instead of ``format_version``."""
    X, y = data
    est = LightGBMBaseline(n_estimators=3, random_state=0).fit(X, y)
    est.save_model(tmp_path / "new.json")
    body = json.loads((tmp_path / "new.json").read_text())
    envelope_keys = ("format", "format_version", "estimator", "checksum")
    legacy = {"format": "gbfs-lightgbm-baseline", "version": 1,
              **{k: v for k, v in body.items() if k not in envelope_keys}}
    legacy["checksum"] = envelope.checksum(legacy)
    (tmp_path / "old.json").write_text(json.dumps(legacy))
    for loader in (LightGBMBaseline.load_model, load_model):
        np.testing.assert_array_equal(loader(tmp_path / "old.json").predict_proba(X), est.predict_proba(X))
    legacy["version"] = 2
    legacy["checksum"] = envelope.checksum({k: v for k, v in legacy.items() if k != "checksum"})
    (tmp_path / "v2.json").write_text(json.dumps(legacy))
    with pytest.raises(ValueError, match="unsupported format_version 2"):
        load_model(tmp_path / "v2.json")


def test_unknown_estimator_is_refused(tmp_path):
    body = envelope.seal("NoSuchEstimator", {"params": {}})
    (tmp_path / "m.json").write_text(json.dumps(body))
    with pytest.raises(ValueError, match="m.json: unknown estimator 'NoSuchEstimator'"):
        load_model(tmp_path / "m.json")


def test_concurrent_baseline_saves_leave_one_whole_file(tmp_path, data):
    X, y = data
    models = [LightGBMBaseline(n_estimators=2 + k, random_state=0).fit(X, y) for k in range(4)]
    path = tmp_path / "m.json"
    threads = [threading.Thread(target=lambda m=m: [m.save_model(path) for _ in range(5)]) for m in models]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [p.name for p in tmp_path.iterdir()] == ["m.json"]  # no temporary file left
    assert isinstance(LightGBMBaseline.load_model(path), LightGBMBaseline)


@pytest.mark.slow  # 1.5-2 s: the default suite stays under 5 minutes (CI runs the slow tests too)
def test_file_format_does_not_import_the_estimators():
    code = ("import sys, gbfs.io.envelope, gbfs.estimators.model_io; "
            "print('gbfs.estimators.single_task' in sys.modules, 'gbfs.estimators.multitask' in sys.modules)")
    # importing a submodule runs gbfs/__init__, which imports the estimators: check model_io's own
    # imports instead, from its source
    import ast
    import inspect

    import gbfs.estimators.model_io

    tree = ast.parse(inspect.getsource(gbfs.estimators.model_io))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not imported & {"estimators", "multitask", "baselines"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True"]  # and the package still registers them on import


def _resealed(body):
    body = {k: v for k, v in body.items() if k != "checksum"}
    return {**body, "checksum": envelope.checksum(body)}


@pytest.mark.parametrize("body, match", [
    ({"format": [], "format_version": 1}, "not a gbfs model file"),
    ({"format": {"a": 1}}, "not a gbfs model file"),
    (_resealed({"format": "gbfs-model", "format_version": 1, "estimator": ["GBFSClassifier"]}),
     "unknown estimator"),
    (_resealed({"format": "gbfs-model", "format_version": 1, "estimator": {"a": 1}}), "unknown estimator"),
    (_resealed({"format": "gbfs-model", "format_version": True, "estimator": "GBFSClassifier"}),
     "unsupported format_version True"),
], ids=["format_list", "format_object", "estimator_list", "estimator_object", "format_version_true"])
def test_header_of_the_wrong_json_type_is_a_value_error_naming_the_file(tmp_path, body, match):
    # not a TypeError from hashing a list, and JSON true is not version 1
    path = tmp_path / "m.json"
    path.write_text(json.dumps(body))
    with pytest.raises(ValueError, match=rf"^{path}: {match}"):
        load_model(path)


def test_model_from_dict_verifies_like_load_model(tmp_path, data):
    from gbfs.estimators.model_io import model_from_dict

    X, y = data
    est = GBFSClassifier(n_estimators=3, random_state=0).fit(X, y)
    body = envelope.seal("GBFSClassifier", est._model_body())
    np.testing.assert_array_equal(model_from_dict(body).predict_proba(X), est.predict_proba(X))
    with pytest.raises(ValueError, match="^mem: checksum mismatch"):
        model_from_dict({**body, "init_score": 1.0}, source="mem")
