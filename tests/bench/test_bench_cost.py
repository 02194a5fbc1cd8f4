"""The cost-budget benchmark (``python -m runners.bench cost``): its costs, its answers, its verdict."""

from __future__ import annotations

import json

import numpy as np
import pytest

from runners import bench
from runners.bench.selection.cost import COST_BLIND, draw_costs, summarise


def test_costs_are_log_uniform_and_the_features_of_most_gain_are_dear():
    gain = np.zeros(200)
    gain[[3, 50, 7]] = [5.0, 9.0, 1.0]
    costs = draw_costs(gain, seed=0, n_dear=2)
    cheap = np.delete(costs, [3, 50])
    assert np.all((cheap >= 1.0) & (cheap <= 10.0)) and cheap.std() > 1.0
    assert np.all((costs[[3, 50]] >= 10.0) & (costs[[3, 50]] <= 100.0))
    np.testing.assert_array_equal(draw_costs(gain, seed=0, n_dear=2), costs)  # seeded
    # a feature without gain is never made dear, whatever n_dear asks
    assert np.sum(draw_costs(gain, seed=1, n_dear=10) > 10.0) <= 3


def _row(dataset, budget, method, auc, cost=5.0):
    return {"dataset": dataset, "seed": 0, "budget": budget, "method": method, "test_auc": auc, "cost": cost}


def test_the_lead_is_over_the_best_cost_blind_peer_not_the_cost_aware_one():
    rows = [_row("a", 10, "gbfs:agbm-cost", 0.90), _row("a", 10, "gbfs:agbm-cost-blind", 0.85),
            _row("a", 10, "lgbm:gain-capped", 0.88), _row("a", 10, "lgbm:gain-per-cost", 0.95)]
    table, verdict = summarise(rows)
    assert set(COST_BLIND) == {"lgbm:gain-capped", "gbfs:agbm-cost-blind"}
    assert table[0]["lead"] == pytest.approx(0.02)
    assert verdict["met"] and verdict["budgets_kept"]
    rows[0]["test_auc"] = 0.885
    assert not summarise(rows)[1]["met"]
    rows[1]["cost"] = 10.5
    assert not summarise(rows)[1]["budgets_kept"]


@pytest.mark.slow
def test_the_benchmark_keeps_every_budget_and_prints_its_verdict(tmp_path, capsys):
    out = tmp_path / "cost.json"
    assert bench.main(["cost", "--datasets", "breast_cancer", "--seeds", "0", "--budgets", "8", "20",
                       "--mus", "0", "0.003", "--out", str(out)]) == 0
    got = json.loads(out.read_text())
    rows = got["rows"]
    assert {r["method"] for r in rows} == {"gbfs:agbm-cost", "gbfs:agbm-cost-blind", "gbfs:path-cost",
                                           "lgbm:gain-capped", "lgbm:gain-per-cost"}
    assert len(rows) == 10 and all(0 < r["cost"] <= r["budget"] for r in rows)
    assert all(r["source"] for r in rows if r["method"] == "gbfs:path-cost")  # which candidate answered
    assert all(r["mu"] == 0.003 for r in rows if r["method"] == "gbfs:agbm-cost")
    assert got["verdict"]["budgets_kept"]
    assert {"command", "git_commit"} <= set(got)
    printed = capsys.readouterr().out
    assert "minus the best cost-blind peer" in printed and ("NOT MET" in printed or "MET" in printed)
    assert "the selection path in cost units (gbfs:path-cost) minus the best cost-blind peer" in printed
