"""Every config composes (Hydra's compose API) and every method x dataset combination instantiates."""

from __future__ import annotations

import pytest
from harness_utils import compose_cfg, group_options
from omegaconf import OmegaConf

from runners import experiment

METHODS = group_options("method")
DATASETS = group_options("dataset")


def test_groups_hold_what_the_issue_names():
    assert set(METHODS) == {"gbfs", "agbm", "gtgbm", "gbdt_full", "gbdt_topk", "lgbm_cegb"}
    assert {"gisette", "epsilon", "flight", "gisette_like", "epsilon_like", "flight_like"} <= set(DATASETS)
    assert {"off", "optuna"} <= set(group_options("tune"))
    assert {"sqlite", "remote"} <= set(group_options("tracking"))
    assert {"quickstart", "table3_gisette"} <= set(group_options("experiment"))


@pytest.mark.parametrize("dataset", DATASETS)
@pytest.mark.parametrize("method", METHODS)
def test_every_method_and_dataset_instantiates(tmp_path, method, dataset):
    cfg = compose_cfg(tmp_path, [f"method={method}", f"dataset={dataset}"])
    OmegaConf.resolve(cfg)                       # every interpolation resolves
    assert cfg.method.name == method and cfg.dataset.name == dataset
    params = experiment.method_params(cfg.method)
    if method == "gbdt_topk":
        params["k"] = 5                          # normally taken from sibling runs
    est = experiment.build_estimator(cfg.method, cfg.seed, cfg.n_threads, params)
    assert est.get_params()["random_state"] == cfg.seed
    # the search space names parameters of the method, with valid types
    for name, spec in cfg.method.search_space.items():
        assert name in cfg.method.params
        assert spec.type in ("float", "int", "categorical")
        if spec.type != "categorical":
            assert spec.low < spec.high


OTHER = [(g, o) for g in ("tune", "tracking", "sampler") for o in group_options(g)]


@pytest.mark.parametrize("group, option", OTHER)
def test_other_groups_compose(tmp_path, group, option):
    cfg = compose_cfg(tmp_path, [f"{group}={option}"])
    OmegaConf.resolve(cfg)


@pytest.mark.parametrize("name", group_options("experiment"))
def test_experiments_compose_with_hydra_config(tmp_path, name):
    cfg = compose_cfg(tmp_path, [f"experiment={name}"], hydra_cfg=True)
    assert cfg.hydra.mode.name == "MULTIRUN"
    assert "method" in cfg.hydra.sweeper.params
    assert cfg.hydra.job.chdir is False


@pytest.mark.parametrize("launcher", ["joblib", "local_parallel", "slurm"])
def test_launchers_compose(tmp_path, launcher):
    cfg = compose_cfg(tmp_path, [f"hydra/launcher={launcher}"], hydra_cfg=True)
    assert cfg.hydra.launcher._target_.split(".")[-1] in ("JoblibLauncher", "SlurmLauncher")


def test_paths_derive_from_root(tmp_path):
    cfg = compose_cfg(tmp_path, [])
    assert cfg.tracking.uri == f"sqlite:///{tmp_path}/mlflow.db"
    assert cfg.tracking.artifact_location == f"{tmp_path}/mlartifacts"
    assert cfg.paths.log_dir == f"{tmp_path}/outputs"
