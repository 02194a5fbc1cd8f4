"""Every config composes (Hydra's compose API) and every method x dataset combination instantiates."""

from __future__ import annotations

import pytest
from harness_utils import compose_cfg, group_options
from omegaconf import OmegaConf

from runners import run
from runners.core import budget, experiment

METHODS = group_options("method")
DATASETS = group_options("dataset")
#: the learning-to-rank methods and data (dataset.task: ranking), which combine with each other only
RANKING_METHODS = [m for m in METHODS if m.startswith("rank_")]
RANKING_DATASETS = ["ranking_like", "ranking_file"]
PAIRS = [(m, d) for m in METHODS for d in DATASETS if (m in RANKING_METHODS) == (d in RANKING_DATASETS)]


def test_groups_hold_what_the_issue_names():
    assert set(METHODS) == {"gbfs", "agbm", "gtgbm", "gbdt_full", "gbdt_topk", "lgbm_cegb", "gbfs_topk",
                            "gbfs_path", "agbm_path", "gtgbm_path", "mt_agbm", "mt_gtgbm", "mt_groupsparse",
                            "mt_singletask", "mt_independent", "rank_gbdt_full", "rank_gbfs", "rank_agbm",
                            "rank_gtgbm", "rank_gbdt_topk"}
    assert {"gisette", "epsilon", "flight", "gisette_like", "epsilon_like", "flight_like"} <= set(DATASETS)
    assert {"off", "optuna"} <= set(group_options("tune"))
    assert {"sqlite", "remote"} <= set(group_options("tracking"))
    assert {"quickstart", "table3_gisette"} <= set(group_options("experiment"))


@pytest.mark.parametrize("method, dataset", PAIRS)
def test_every_method_and_dataset_instantiates(tmp_path, method, dataset):
    cfg = compose_cfg(tmp_path, [f"method={method}", f"dataset={dataset}"])
    OmegaConf.resolve(cfg)                       # every interpolation resolves
    assert cfg.method.name == method and cfg.dataset.name == dataset
    params = experiment.method_params(cfg.method)
    if method == "gbdt_topk":
        params["k"] = 5                          # normally taken from sibling runs
    if method in ("gbfs_topk", "rank_gbdt_topk"):
        assert params["max_features"] is None    # no default K: it must be given
        params["max_features"] = 5
    est = experiment.build_estimator(cfg.method, cfg.seed, cfg.n_threads, params)
    got = est.get_params()   # a multitask baseline wraps its single-task estimator
    assert got.get("random_state", got.get("estimator__random_state")) == cfg.seed
    # the search space names parameters of the method, with valid types (a path has none)
    for name, spec in (cfg.method.search_space or {}).items():
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


@pytest.mark.parametrize("method", ["gbfs", "agbm", "gtgbm"])
def test_gbfs_methods_expose_the_budget_and_refit_off_by_default(tmp_path, method):
    cfg = compose_cfg(tmp_path, [f"method={method}"])
    assert cfg.method.params.max_features is None and cfg.method.params.refit is False
    assert cfg.method.budget_param == "max_features" and budget.budget_of(cfg.method) is None
    given = compose_cfg(tmp_path, [f"method={method}", "method.params.max_features=7",
                                   "method.params.refit=true"])
    est = experiment.build_estimator(given.method, 0, 1, experiment.method_params(given.method))
    assert est.get_params()["max_features"] == 7 and est.get_params()["refit"] is True
    assert budget.budget_tags(given) == {"budget": "7"}


@pytest.mark.parametrize("method, template", [("gbfs_path", "gbfs"), ("agbm_path", "agbm"),
                                              ("gtgbm_path", "gtgbm")])
def test_path_methods_are_their_method_as_a_path(tmp_path, method, template):
    path, base = compose_cfg(tmp_path, [f"method={method}"]), compose_cfg(tmp_path, [f"method={template}"])
    assert path.method.estimator == "gbfs_path" and path.method.params == base.method.params
    assert list(path.method.budgets) == [5, 10, 20, 50] and path.method.search_space is None
    # the configs spell out the library's own defaults
    import inspect

    from gbfs import selection_path

    defaults = inspect.signature(selection_path).parameters
    keys = ("patience", "n_probes", "refine", "rfe_step", "exact", "cv")
    assert dict(path.method.path) == {k: defaults[k].default for k in keys}
    assert not path.method.counts_for_topk and budget.budget_of(path.method) is None
    assert "gbfs_path" in run.KINDS       # runners.run fits it as a path, not as one model


def test_unknown_estimator_names_the_known_ones(tmp_path):
    cfg = compose_cfg(tmp_path, ["method=agbm", "method.estimator=xgboost"])
    with pytest.raises(ValueError, match=r"must be one of \['gbfs', 'gbfs_multiclass', 'gbfs_multitask', "
                                         r"'gbfs_path', 'gbfs_ranker', 'gbfs_regressor', "
                                         r"'independent_tasks', "
                                         r"'lightgbm', 'lightgbm_lambdarank', 'lightgbm_multiclass', "
                                         r"'lightgbm_regression', 'pooled_tasks'\]"):
        experiment.build_estimator(cfg.method, 0, 1, experiment.method_params(cfg.method))
