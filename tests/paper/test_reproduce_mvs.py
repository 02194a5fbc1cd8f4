"""The MVS paper's Tables 2-4 from a sampling comparison: the selection rules on a hand-made table,
the paper's numbers, and one tiny run written to disk and logged to MLflow under a parent run."""

from __future__ import annotations

import mlflow
import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from runners.paper.mvs import comparison as sampling
from runners.paper.mvs import tables as reproduce_mvs

BASE_ERROR = 0.2


def _row(strategy, rate, val_auc, rel_error, rel_time, sd=0.01):
    err = BASE_ERROR * (1 + rel_error)
    return {"strategy": strategy, "library": sampling.library(strategy), "rate": rate, "params": "{}",
            "tuned_val_auc": val_auc, "grid_val_auc": "[]", "n_seeds": 3, "test_auc_mean": 1 - err,
            "test_auc_sd": BASE_ERROR * sd, "error_mean": err, "error_sd": BASE_ERROR * sd,
            "rel_error": rel_error, "rel_error_sd": sd, "fit_seconds_mean": 10 * rel_time,
            "rel_time": rel_time, "boost_seconds_mean": 8 * rel_time, "rel_boost_time": rel_time,
            "sampled_share": rate}


@pytest.fixture
def table():
    rows = [_row("none", 1.0, 0.80, 0.0, 1.0, sd=0.0),
            # validation ties at 0.2 and 0.5: the larger rate; 0.2 is the first without quality loss
            _row("sgb", 0.1, 0.78, 0.05, 0.6), _row("sgb", 0.2, 0.81, -0.01, 0.7),
            _row("sgb", 0.5, 0.81, -0.02, 0.8),
            # never without quality loss: the rate of the lowest error (0.2)
            _row("goss", 0.1, 0.77, 0.08, 0.6), _row("goss", 0.2, 0.79, 0.02, 0.7),
            _row("goss", 0.5, 0.80, 0.03, 0.85),
            _row("mvs", 0.1, 0.82, 0.05, 0.65), _row("mvs", 0.2, 0.80, -0.005, 0.72),
            _row("mvs", 0.5, 0.79, -0.03, 0.9)]
    df = pd.DataFrame(rows)[list(sampling.CSV_COLUMNS)]
    meta = {"dataset": "hand_made", "n_train": 100, "n_val": 50, "n_test": 50, "n_features": 7,
            "booster": "gbfs mu=0", "seeds": 3, "seconds": 1.0}
    return df, meta


def test_rate_chosen_on_validation_and_table4_rule(table):
    df, _ = table
    picked = reproduce_mvs.chosen(df)
    assert list(picked.index) == ["sgb", "goss", "mvs"]
    assert picked.rate.to_dict() == {"sgb": 0.5, "goss": 0.5, "mvs": 0.1}       # sgb: the tie's larger rate
    rule = reproduce_mvs.no_loss(df)
    assert rule.rate.to_dict() == {"sgb": 0.2, "goss": 0.2, "mvs": 0.2}
    assert rule.rule.to_dict() == {"sgb": "no loss", "goss": "lowest error", "mvs": "no loss"}


def test_tables_put_the_paper_next_to_ours(table):
    df, meta = table
    md = reproduce_mvs.tables(*table)
    assert set(md) == {"table2.md", "table3.md", "table4.md", "README.md"}
    # Table 2: SGB at 0.5, -2%; the paper's six datasets and their mean, -0.24% (-0.2383)
    sgb_mean = np.mean([-1.13, 0.81, -1.14, 0.03, -0.14, 0.14])
    assert (f"| SGB | 0.5 | 0.8100 | -2.00% ± 1.00 | -1.13% | +0.81% | -1.14% | +0.03% | -0.14% | +0.14% "
            f"| -0.24% | {-2.0 - sgb_mean:+.2f} |") in md["table2.md"]
    assert "| MVS | 0.1 | 0.8200 | +5.00% ± 1.00 |" in md["table2.md"]
    assert "| paper: kdd_internet | 0.0408 |" in md["table2.md"] and "| ours: baseline (gbfs) | 0.2000" in \
        md["table2.md"]
    assert "Click and Average" in md["table2.md"]
    # Table 3: the paper's value at the same rate and the difference; blank at rate 1
    assert "| MVS | 0.1 | +5.00% ± 1.00 | +3.69% | +1.31 |" in md["table3.md"]
    assert "| GOSS | 0.5 | +3.00% ± 1.00 | -0.16% | +3.16 |" in md["table3.md"]
    assert "| SGB | 1 | +0.00% ± 0.00 |  |  |" in md["table3.md"]
    # Table 4: the rule's rate, its time change and the paper's
    assert "| SGB | 0.2 | no loss | -1.00% | -30.00% | -30.00% | -20.70% | -9.30 |" in md["table4.md"]
    assert "| GOSS | 0.2 | lowest error | +2.00% | -30.00% | -30.00% | -20.40% | -9.60 |" in md["table4.md"]
    assert "may be swapped" in md["table4.md"]
    readme = md["README.md"]
    # at 0.1 MVS +5% is not below SGB's +5%: not met; the paper's Table 3 has it at 0.02, 0.05, 0.1
    assert "at every rate <= 0.1): NOT MET; paper, at its rates 0.02, 0.05, 0.1: holds (3 of 3)" in readme
    assert "MVS below SGB and GOSS at every rate below 1: NOT MET; paper: holds (ours at 1 of 3, paper at " \
           "10 of 10)" in readme
    assert "MVS saves the most learning time of SGB, GOSS and MVS (Table 4): NOT MET; paper: holds" in readme
    # smallest rates without loss: ours 0.2 for SGB and MVS; the paper's Table 3: none, 0.5, 0.3
    assert "no larger than SGB's and GOSS's (Table 4's rule): MET; paper: holds" in readme
    assert "paper's Table 3: SGB none, GOSS 0.5, MVS 0.3, MVS Adaptive 0.25)" in readme
    assert "lowest tuned relative error of SGB, GOSS and MVS (Table 2): NOT MET; paper: holds" in readme


def test_reference_numbers():
    t3 = reproduce_mvs.reference("mvs_table3")
    assert list(t3.columns) == ["strategy", "rate", "rel_error_pct"] and len(t3) == 40
    at = t3.set_index(["strategy", "rate"]).rel_error_pct
    assert at[("mvs", 0.1)] == 3.69 and at[("sgb", 0.02)] == 19.92 and at[("mvs_adaptive", 0.5)] == -0.51
    assert sorted(set(t3.rate)) == [0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5]
    t2 = reproduce_mvs.reference("mvs_table2")
    assert list(t2.columns) == ["dataset", "baseline_error", "strategy", "rel_error_pct"] and len(t2) == 24
    assert t2.groupby("dataset", sort=False).baseline_error.first().to_dict() == {
        "kdd_internet": 0.0408, "adult": 0.0688, "amazon": 0.1517, "kdd_upselling": 0.1345, "kick": 0.2265,
        "kdd_churn": 0.2532}
    assert t2.set_index(["dataset", "strategy"]).rel_error_pct[("kdd_internet", "mvs")] == -3.03
    t4 = reproduce_mvs.reference("mvs_table4").set_index("strategy").rel_time_pct
    assert t4.to_dict() == {"sgb": -20.7, "goss": -20.4, "mvs": -27.7}


@pytest.mark.slow
@pytest.mark.usefixtures("restore_mlflow")
def test_compute_write_and_log_under_a_parent(tmp_path):
    settings = {"dataset": "epsilon_like", "scale": 0.02, "feature_scale": 0.05, "rates": [0.2, 1.0],
                "seeds": 2, "trees": 5, "strategies": ["sgb", "mvs"], "threads": 1}
    df, meta = reproduce_mvs.compute(settings, progress=False)
    assert sorted(zip(df.strategy, df.rate)) == [("mvs", 0.2), ("none", 1.0), ("sgb", 0.2)]
    assert meta["seeds"] == 2 and meta["rates"] == [0.2, 1.0] and meta["settings"]["trees"] == 5
    paths = reproduce_mvs.write(df, meta, tmp_path / "out")
    assert {p.name for p in paths} == {"sampling.csv", "sampling.md", "sampling.png", "table2.md",
                                       "table3.md", "table4.md", "README.md"}
    assert all(p.is_file() for p in paths)
    assert (tmp_path / "out" / "sampling.png").read_bytes()[:4] == b"\x89PNG"
    assert "MVS target: not checked" in (tmp_path / "out" / "README.md").read_text()
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(tracking_uri=uri)
    parent = client.create_run(client.create_experiment("reproduction")).info.run_id
    run_id = sampling.log_mlflow(df, paths, meta, uri, tags={"mlflow.parentRunId": parent, "paper": "mvs"})
    tags = client.get_run(run_id).data.tags
    assert tags["mlflow.parentRunId"] == parent and tags["paper"] == "mvs" and tags["role"] == "sampling"
    with mlflow.start_run():            # an active run: the run is nested in it, its role overridden
        active = mlflow.active_run().info.run_id
        nested = sampling.log_mlflow(df, paths[:1], meta, uri, tags={"role": "reproduction"})
    tags = client.get_run(nested).data.tags
    assert tags["mlflow.parentRunId"] == active and tags["role"] == "reproduction"
