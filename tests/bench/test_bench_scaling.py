"""The scaling curves: points along rows, features and threads, fitted exponents, update rates."""

from __future__ import annotations

import json

import numpy as np
import pytest

from runners import bench
from runners.bench.speed import scaling


def test_exponent_is_the_log_log_slope():
    assert scaling.exponent([10, 100, 1000], [2.0, 20.0, 200.0]) == pytest.approx(1.0)
    assert scaling.exponent([10, 100], [3.0, 3.0]) == pytest.approx(0.0, abs=1e-12)


def test_sizes_are_the_powers_of_ten_in_range():
    assert scaling._sizes(1000, 1_000_000) == [1000, 10_000, 100_000, 1_000_000]
    assert scaling._sizes(100, 5000) == [100, 1000]


@pytest.mark.slow  # two dozen small fits of both learners: ~20 s
def test_scaling_end_to_end(tmp_path, capsys):
    out = tmp_path / "scaling.json"
    assert bench.main(["scaling", "--trees", "2", "--max-rows", "10000", "--max-features", "1000",
                       "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    curves = {c["curve"]: c for c in result["curves"]}
    assert [p["n"] for p in curves["rows"]["points"]] == [1000, 10000]
    assert [p["d"] for p in curves["features"]["points"]] == [100, 1000]
    assert [p["threads"] for p in curves["threads"]["points"]] == [1, 2]
    for c in curves.values():
        assert all(np.isfinite(v) for v in c["exponents"].values())
        for p in c["points"]:
            assert min(p["ours_fit_s"], p["lgb_fit_s"], p["ours_per_tree_s"], p["lgb_per_tree_s"]) > 0
    for label in ("1_thread",):
        rate = result["update_rates"][label]
        assert rate["ours_updates_per_s"] > 0 and 0 < rate["share_of_minimal"]
    assert result["command"] and result["git_commit"]
    printed = capsys.readouterr().out
    assert "exponent" in printed and "updates per second" in printed


@pytest.mark.parametrize("argv, message", [
    (["scaling", "--max-rows", "10"], "--max-rows: must be >= 10000"),
    (["scaling", "--trees", "0"], "--trees: must be >= 1"),
    (["core", "--path-data", "bogus"], "--path-data: must be one of"),
])
def test_bad_arguments_are_refused_before_any_fit(argv, message, capsys):
    with pytest.raises(SystemExit):
        bench.main(argv)
    assert message in capsys.readouterr().err
