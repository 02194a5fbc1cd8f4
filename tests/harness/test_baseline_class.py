"""A new baseline library is one class and one method yaml: ``_target_`` names the class, and
``python -m runners.run`` fits, scores and logs it like any method (a real MLflow store)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest
from harness_utils import TINY, compose_cfg
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from runners.core import experiment

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
METHOD = """\
# scikit-learn's L1-penalised logistic regression, brought in by its class alone
name: l1_toy
estimator: null          # a class of another library: no kind of the harness
_target_: toy_baseline.L1Logistic
counts_for_topk: false
params:
  C: 0.05
search_space:
  C: {type: float, low: 0.001, high: 1.0, log: true}
"""


@pytest.mark.slow  # a whole runners.run against a real store: ~7 s
def test_a_class_and_a_yaml_run_as_a_method(tmp_path):
    extra = tmp_path / "conf"
    (extra / "method").mkdir(parents=True)
    (extra / "method" / "l1_toy.yaml").write_text(METHOD)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(REPO)])}
    proc = subprocess.run([sys.executable, "-m", "runners.run", f"paths.root_dir={tmp_path}", *TINY[:3],
                           f"hydra.searchpath=[file://{extra}]", "method=l1_toy"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| l1_toy | gisette_like |" in proc.stdout
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    runs = MlflowClient().search_runs([e.experiment_id for e in MlflowClient().search_experiments()])
    (run,) = [r for r in runs if r.data.tags.get("method") == "l1_toy"]
    assert run.info.status == "FINISHED"
    assert 0.5 < run.data.metrics["test_auc"] <= 1.0
    assert 0 < run.data.metrics["n_selected_features"] < 100   # the L1 penalty dropped columns
    assert run.data.params["method.params.C"] == "0.05"


def test_a_target_that_is_no_class_is_named():
    method = OmegaConf.create({"name": "x", "estimator": None, "_target_": "toy_baseline.NoSuchClass",
                               "params": {}})
    with pytest.raises(ValueError, match=r"method\._target_: 'toy_baseline.NoSuchClass'"):
        experiment.estimator_kind(method)
    with pytest.raises(ValueError, match=r"method.estimator must be one of .* got 'x'"):   # a typo
        experiment.estimator_kind(OmegaConf.create({"name": "x", "estimator": "x", "params": {},
                                                    "_target_": "gbfs.GBFSClassifier"}))
    with pytest.raises(ValueError, match=r"method.estimator is null and method._target_ names no class"):
        experiment.estimator_kind(OmegaConf.create({"name": "x", "estimator": None, "params": {}}))


@pytest.mark.parametrize("name", sorted(p.stem for p in (REPO / "conf" / "method").glob("*.yaml")))
def test_every_method_names_its_estimator_and_builds_it(name, tmp_path):
    """Every method yaml names its estimator with ``_target_``; what it builds is what its kind
    (``method.estimator``) builds."""
    method = compose_cfg(tmp_path, [f"method={name}"]).method
    assert "_target_" in method, f"conf/method/{name}.yaml has no _target_"
    params = {k: v for k, v in OmegaConf.to_container(method.params).items() if v != "???"}
    if method.estimator == "gbfs_path":   # a path's template has no budgets of its own
        params.pop("budgets", None)
    built = experiment.estimator_kind(method).build(random_state=0, n_threads=1, **params)
    by_kind = experiment.ESTIMATORS[method.estimator].build(random_state=0, n_threads=1, **params)
    assert type(built) is type(by_kind)
    # nested estimators (the multitask baselines') compare by their parameters, not identity
    assert {k: repr(v) for k, v in built.get_params().items()} == \
        {k: repr(v) for k, v in by_kind.get_params().items()}
