"""The ``bags`` config group: feature bags built from the training rows or column names and given to
the gbfs methods; refused, naming the key, for methods that have none."""

from __future__ import annotations

import numpy as np
import pytest
from harness_utils import TINY, compose_cfg
from mlflow.tracking import MlflowClient

from gbfs import load_model
from gbfs.criteria.bags import feature_bags
from runners import run as run_module
from runners.core import checks, experiment


@pytest.mark.parametrize("overrides, match", [
    (["bags=correlation", "method=gbdt_full"], "bags=correlation: method 'gbdt_full'.*takes no feature bags"),
    (["bags=groups", "method=gbfs"], "set bags.args.groups"),
    (["bags=correlation", "bags.args.n_bags=0", "method=gbfs"], r"bags=correlation \(bags.rule, bags.args\)"
                                                                r": n_bags must be >= 1"),
    (["bags=prefix", "+bags.args.sep=_", "method=gbfs"], "sep"),
    (["bags=correlation", "method=gbfs", "+method.params.feature_bags=[0,1]"], "both give the bags"),
])
def test_bad_bags_are_refused_before_any_run(tmp_path, overrides, match):
    cfg = compose_cfg(tmp_path, [*TINY, *overrides])
    with pytest.raises(ValueError, match=match):
        checks.check_run(cfg)
    assert not (tmp_path / "mlflow.db").exists()


def test_a_run_fits_on_the_bags_of_its_training_rows(tmp_path):
    cfg = compose_cfg(tmp_path, [*TINY, "method=gbfs", "bags=correlation", "bags.args.n_bags=12",
                                 "method.params.max_features=3", "method.params.early_stopping_rounds=null"])
    checks.check_run(cfg)
    run_module.run(cfg)
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("gbfs").experiment_id])
    assert run.info.status == "FINISHED" and run.data.params["bags.rule"] == "correlation"
    model = load_model(client.download_artifacts(run.info.run_id, "model.json", str(tmp_path)))
    ds = experiment.load_data(cfg)
    expected = feature_bags(ds.X_train, "correlation", n_bags=12)
    np.testing.assert_array_equal(model.feature_bags, expected)
    assert len(set(expected[model.selected_features_])) <= 3   # the budget counts bags
