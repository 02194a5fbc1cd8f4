"""The GBFS paper's reproduction: its data, its baselines, how curves are read, and its part of
``runners.reproduce`` (one MLflow run, reused)."""

from __future__ import annotations

import mlflow
import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf
from sklearn.datasets import load_breast_cancer
from sklearn.metrics import adjusted_rand_score

from gbfs.data.synthetic.generators import make_gbfs_figure1
from runners.paper.gbfs_kdd import experiments as E
from runners.paper.gbfs_kdd import report as R
from runners.paper.gbfs_kdd import selectors as S
from runners.paper.reproduction import parts as reproduce_parts
from runners.paper.reproduction import plan as plan

BOOSTER = {"n_estimators": 40, "learning_rate": 0.2, "max_depth": 3, "min_samples_leaf": 5,
           "early_stopping_rounds": 10}


def test_figure1_data_is_two_nonlinear_features_and_their_sum():
    for shape in ("disc", "xor"):
        X, y = make_gbfs_figure1(500, shape, random_state=3)
        assert X.shape == (500, 3) and set(np.unique(y)) == {0, 1}
        np.testing.assert_array_equal(X[:, 2], X[:, 0] + X[:, 1])
        expected = X[:, 0] ** 2 + X[:, 1] ** 2 < 0.5 if shape == "disc" else X[:, 0] * X[:, 1] > 0
        np.testing.assert_array_equal(y, expected)
        np.testing.assert_array_equal(X, make_gbfs_figure1(500, shape, random_state=3)[0])
    with pytest.raises(ValueError, match="shape"):
        make_gbfs_figure1(10, "ring")


def test_a_curve_is_read_at_k_by_feature_count_never_by_error():
    pts = pd.DataFrame({"seed": [0, 0, 0, 0, 1, 1],
                        "n_features": [0, 3, 5, 9, 4, 12],
                        "error": [0.5, 0.01, 0.30, 0.02, 0.2, 0.1]})
    # seed 0: the 5-feature point (most features <= 5), although the 3-feature one errs less;
    # seed 1 has nothing above the empty model at K=3
    assert R.at_most(pts, 5) == {0: 0.30, 1: 0.2}
    assert R.at_most(pts, 3) == {0: 0.01}


def test_hsic_lasso_is_deterministic_silent_and_leaves_numpy_global_state(capsys):
    X, y = load_breast_cancer(return_X_y=True)
    s = S.split(X, y, 0.25, 0)
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    first = S.hsic_order(s, 5)
    assert np.array_equal(np.random.get_state()[1], before)
    assert np.array_equal(first, S.hsic_order(s, 5))
    assert len(first) == 5 and len(set(first.tolist())) == 5
    assert capsys.readouterr().out == ""


def test_mrmr_skips_a_duplicate_of_what_it_already_has():
    rng = np.random.default_rng(0)
    u, v = rng.standard_normal((2, 600))
    y = (u + 0.7 * v > 0).astype(np.int64)
    strong, weaker = u + 0.1 * rng.standard_normal(600), v + 0.1 * rng.standard_normal(600)
    X = np.column_stack([strong, strong * 2.0 + 1e-3 * rng.standard_normal(600), weaker])
    order = S.mrmr_order(S.split(X, y, 0.25, 0), 2, threads=1)
    assert order[0] in (0, 1)                 # the most relevant first
    assert order[1] == 2                      # not the copy of the first: redundancy is priced


def test_gbfs_choice_never_reads_the_test_labels():
    X, y = make_gbfs_figure1(600, "disc", random_state=0)
    s = S.split(X, y, 0.2, 0)
    scrambled = S.Split(s.X_train, s.y_train, s.X_test, 1 - s.y_test, 0)
    a = E.gbfs_chosen(s, [0.1, 1.0, 10.0], BOOSTER)
    b = E.gbfs_chosen(scrambled, [0.1, 1.0, 10.0], BOOSTER)
    assert (a["param"], a["features"]) == (b["param"], b["features"])
    assert a["error"] == pytest.approx(1 - b["error"])
    c = E.l1_chosen(s, [0.01, 0.1, 1.0])
    assert c["features"] == E.l1_chosen(scrambled, [0.01, 0.1, 1.0])["features"]


def test_gene_bags_recover_blocks_of_correlated_columns():
    rng = np.random.default_rng(1)
    blocks = [rng.standard_normal((80, 1)) + 0.1 * rng.standard_normal((80, 10)) for _ in range(3)]
    X = np.hstack(blocks) + 50.0                        # positive "intensities"
    genes, bags = E.gene_bags(X, 30, 3)
    assert genes.tolist() == list(range(30))
    assert adjusted_rand_score(np.repeat([0, 1, 2], 10), bags) == 1.0


def test_unknown_data_set_is_named():
    with pytest.raises(ValueError, match="unknown data set 'mnist'"):
        E.load("mnist", None)


def _settings() -> dict:
    return {"seeds": 2, "threads": 1, "mus": [0.3, 3.0], "Cs": [0.1, 1.0], "booster": BOOSTER,
            "rf_trees": 10, "svm_splits": 2, "figure1": {"n": 300, "shapes": ["disc"]},
            "figure2": {"dataset": "tox171", "genes": 50, "bags": 3, "k": 3},
            "curves": {"datasets": ["breast_cancer"], "wide": [], "svm_dataset": "breast_cancer",
                       "ks": [2, 5], "test_fraction": 0.25, "mrmr_max_cells": 100_000,
                       "hsic_max_cells": 100_000}}


@pytest.mark.slow  # a few seconds: the default suite stays under 5 minutes
@pytest.mark.usefixtures("restore_mlflow")
def test_the_part_runs_once_writes_its_files_and_is_reused(tmp_path, monkeypatch):
    calls = []
    real = reproduce_parts.PARTS["gbfs"]

    def compute(settings, data_dir):
        calls.append(data_dir)
        return real.compute(settings, data_dir)

    monkeypatch.setitem(reproduce_parts.PARTS, "gbfs", reproduce_parts.Part(real.title, compute, real.write))
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    mlflow.set_tracking_uri(uri)
    exp = mlflow.set_experiment("reproduction").experiment_id
    client = MlflowClient(uri)
    parent = client.create_run(exp).info.run_id
    settings = {**_settings(), "data_dir": str(tmp_path / "no-data")}   # Figure 2's tox171 is missing
    out = reproduce_parts.run_part(client, exp, parent, "gbfs", settings, "cfg1", tmp_path / "gbfs")
    readme = (out / "README.md").read_text()
    assert len(calls) == 1
    assert "Figure 2" in readme and "Not run: its data set is not on this machine." in readme
    assert "disc: GBFS's test error is below L1-LR's" in readme and f"`{parent}`" in readme
    curves = pd.read_csv(out / "curves.csv")
    assert set(curves.method) == {"L1-LR", "RF-FS", "mRMR", "HSIC Lasso", "GBFS"}
    assert curves.svm_error.notna().any() and (out / "figure3.png").read_bytes()[:4] == b"\x89PNG"
    runs = client.search_runs([exp], "tags.role = 'gbfs_paper'")
    assert len(runs) == 1 and runs[0].data.tags["mlflow.parentRunId"] == parent
    first = (out / "curves.csv").read_text()
    reproduce_parts.run_part(client, exp, parent, "gbfs", settings, "cfg1", tmp_path / "gbfs")
    assert len(calls) == 1 and (out / "curves.csv").read_text() == first   # reused, same numbers


def test_reproduce_papers_are_checked_and_select_parts():
    cfg = OmegaConf.create({"reproduce": {"papers": ["gbfs"], "datasets": None, "scale": "q",
                                          "scales": {"q": {"seeds": [0], "n_trials": 1,
                                                           "datasets": {"gisette_like": {}},
                                                           "mvs": {"dataset": "x"}}}}})
    assert plan.papers_of(cfg) == ["gbfs"]
    assert plan.datasets_of(cfg) == {} and not plan.runs_mvs(cfg)
    cfg.reproduce.papers = None
    assert plan.papers_of(cfg) == ["gtgbm", "mvs", "gbfs", "utility"] and plan.runs_mvs(cfg)
    cfg.reproduce.papers = ["gbfs", "utlity"]
    with pytest.raises(ValueError, match=r"reproduce.papers: unknown \['utlity'\]"):
        plan.scale_of(cfg)
    cfg.reproduce.papers = "gbfs"
    with pytest.raises(ValueError, match="reproduce.papers must be a list"):
        plan.papers_of(cfg)


def test_l1_lr_is_repeatable_by_seed():
    # liblinear shuffles its coordinates: unseeded, the order (even the count) of the non-zero
    # weights moved between runs
    X, y = load_breast_cancer(return_X_y=True)
    s = S.split(X, y, 0.25, 1)
    np.random.seed(0)
    first = S.l1_points(s, [0.03, 1.0, 3.0])
    np.random.seed(99)
    assert S.l1_points(s, [0.03, 1.0, 3.0]) == first
