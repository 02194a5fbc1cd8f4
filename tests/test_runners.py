"""The runners run end to end on tiny settings (the full benchmark is ``python -m runners.bench core``)."""

import json

import numpy as np

from runners import bench, quickstart


def test_quickstart_selects_informative_features():
    rows = quickstart.run(n_samples=1500, n_features=60, n_estimators=30, seed=0)
    by = {r["method"]: r for r in rows}
    assert set(by) == {"boosting (mu=0)", "GBFS (mu=2)", "A-GBM (mu=0.01)"}
    for r in rows:
        assert 0.5 < r["test_auc"] <= 1.0
    # the penalised methods keep (almost) only the 10 informative columns, plain boosting does not
    assert by["A-GBM (mu=0.01)"]["n_selected"] < by["boosting (mu=0)"]["n_selected"]
    assert by["A-GBM (mu=0.01)"]["informative_found"] >= 8


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
