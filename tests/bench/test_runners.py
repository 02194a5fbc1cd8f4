"""The runners run end to end on tiny settings (the full benchmark is ``python -m runners.bench core``)."""

import json
from pathlib import Path

import numpy as np
import pytest

from runners import bench, quickstart


def test_quickstart_selects_informative_features():
    rows = quickstart.run(n_samples=1500, n_features=60, n_estimators=30, seed=0)
    by = {r["method"]: r for r in rows}
    assert set(by) == {"boosting (mu=0)", "GBFS (mu=2)", "A-GBM (mu=0.01)", "GT-GBM (node)", "GT-GBM (tree)"}
    for r in rows:
        assert 0.5 < r["test_auc"] <= 1.0
    # the penalised methods keep (almost) only the 10 informative columns, plain boosting does not
    assert by["A-GBM (mu=0.01)"]["n_selected"] < by["boosting (mu=0)"]["n_selected"]
    for m in ("A-GBM (mu=0.01)", "GT-GBM (node)", "GT-GBM (tree)"):
        assert by[m]["informative_found"] >= 8
        assert by[m]["n_selected"] < by["boosting (mu=0)"]["n_selected"]


@pytest.mark.slow  # a few seconds: the default suite stays under 5 minutes
def test_bench_gtgbm_small(tmp_path, capsys):
    out = tmp_path / "gtgbm.json"
    assert bench.main(["gtgbm", "--shapes", "epsilon", "--row-scale", "0.02", "--trees", "3", "--s", "5",
                       "--group-test-rows", "1000", "--searches", "histogram", "exact",
                       "--out", str(out)]) == 0
    row, exact = json.loads(out.read_text())["rows"]
    assert row["n_train"] == 1600 and row["n_features"] == 2000
    # both ways: the exact search's A-GBM and GT-GBM, on the same data, with the same selections' shape
    assert (row["split_search"], exact["split_search"]) == ("histogram", "exact")
    assert {(g["scope"], g["s"]) for g in exact["gtgbm"]} == {("node", 5), ("tree", 5), ("tree+rows", 5)}
    assert "lgb" not in exact and abs(exact["agbm"]["auc"] - row["agbm"]["auc"]) < 0.1
    assert {(g["scope"], g["s"]) for g in row["gtgbm"]} == {("node", 5), ("tree", 5), ("tree+rows", 5)}
    for g in row["gtgbm"]:
        assert g["n_subsets"] == 54 and g["subset_size"] == 400  # Theorem 4.1 with s = 5, delta = 0.1
        assert np.isfinite(g["speedup"]) and g["model"] > 0 and g["precompute_s"] > 0
    printed = capsys.readouterr().out
    assert "GT-GBM" in printed and "LGB-CEGB" in printed and "targets" in printed
    assert "epsilon, exact search (the paper's cost model): GT-GBM node scope s = 5:" in printed


@pytest.mark.slow  # a whole small core benchmark, ~10 s; CI runs the slow tests too
def test_bench_core_small(tmp_path, capsys):
    out = tmp_path / "core.json"
    assert bench.main(["core", "--shapes", "flight", "--row-scale", "0.01", "--trees", "5",
                       "--no-jit", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    (row,) = data["rows"]
    assert row["n_train"] == 1000 and row["n_features"] == 634
    for key in ("per_tree_ratio", "binning_ratio", "auc_gap_pt", "penalty_overhead", "memory_ratio"):
        assert np.isfinite(row[key])
    printed = capsys.readouterr().out
    assert "tree ours" in printed and "flight" in printed


@pytest.mark.slow   # writes and parses format-exact files of three datasets (~5 s)
def test_bench_data_small(tmp_path, capsys):
    out = tmp_path / "data.json"
    assert bench.main(["data", "--scale", "0.02", "--epsilon-rows", "400", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["gisette"]["shape_test"] == [50, 5000] and data["gisette"]["n_features"] == 5000
    assert data["epsilon"]["shape_test"][1] == 2000 and data["epsilon"]["shape_train"][0] == 64   # 80 % of 80
    assert data["flight"]["n_features"] > 500
    assert {"command", "git_commit"} <= set(data)
    r = data["libsvm_readers"]
    assert r["rows"] == 400 and np.isfinite(r["ratio_vs_sklearn"]) and np.isfinite(r["ratio_vs_lightgbm"])
    printed = capsys.readouterr().out
    assert "ours/LightGBM" in printed and "cached load" in printed


def test_every_benchmark_module_is_a_suite_of_the_command():
    """Suites are found, not listed: each module of runners.bench with ``add_parser`` adds its
    sub-command (and only those do)."""
    import argparse

    sub = argparse.ArgumentParser().add_subparsers()
    for module in bench.suites():
        module.add_parser(sub)
    assert set(sub.choices) == {"categorical", "core", "cost", "dask", "data", "gtgbm", "load", "multiclass",
                                "multitask", "ranking", "sampling", "scaling", "selection", "tiny", "utility"}
    assert all(callable(p.get_default("handler")) for p in sub.choices.values())


def test_a_quick_run_writes_apart_from_the_committed_summary():
    assert bench.default_out("cost") == Path("results/bench/cost.json")
    assert bench.default_out("cost", quick=True) == Path("results/bench/quick/cost.json")
