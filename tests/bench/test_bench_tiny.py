"""The tiny-data benchmark (``python -m runners.bench tiny``): its data, its rows, its verdict."""

from __future__ import annotations

import json

import numpy as np
import pytest

from runners import bench
from runners.bench.selection.tiny import microarray, summarise


def test_microarray_like_data_has_its_statistics():
    X, y = microarray(seed=0)
    assert X.shape == (60, 5000) and np.all(X > 0) and set(np.unique(y)) == {0, 1}
    assert np.array_equal(X, np.round(X, 1))  # arrays report one decimal
    log_x = np.log(np.maximum(X, 0.05))
    # the informative genes separate the classes, the rest do not (on average)
    diff = np.abs(log_x[y == 1].mean(0) - log_x[y == 0].mean(0)) / log_x.std(0)
    assert diff[:5].mean() > 3 * diff[10:].mean()
    np.testing.assert_array_equal(microarray(seed=0)[0], X)


def test_the_verdict_compares_our_min_data_in_bin_3_top_k_with_lightgbms():
    rows = [{"dataset": "a", "setting": s, "test_auc": auc, "distinct_scores": d}
            for s, auc, d in (("ours mdb=3 topk", 0.80, 10), ("lgbm mdb=3 topk", 0.805, 12))]
    _, verdict = summarise(rows)
    assert verdict["a"]["auc_met"] and not verdict["a"]["distinct_met"]
    assert abs(verdict["a"]["auc_gap"] + 0.005) < 1e-12


@pytest.mark.slow
def test_the_quick_benchmark_writes_every_setting(tmp_path, capsys):
    out = tmp_path / "tiny.json"
    assert bench.main(["tiny", "--datasets", "microarray", "--seeds", "0", "--out", str(out)]) == 0
    got = json.loads(out.read_text())
    assert {r["setting"] for r in got["rows"]} == {f"{who} mdb={m} {what}" for who in ("ours", "lgbm")
                                                  for m in (1, 3) for what in ("full", "topk")}
    assert all(0 < r["distinct_scores"] <= 18 and 0 <= r["test_auc"] <= 1 for r in got["rows"])
    assert "MET" in capsys.readouterr().out
    assert {"command", "git_commit"} <= set(got)   # what made it, as every benchmark's summary
