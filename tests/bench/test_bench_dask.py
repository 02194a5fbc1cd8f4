"""``python -m runners.bench dask``: its verdicts, and one tiny run on a real local cluster."""

from __future__ import annotations

import json

import pytest

from runners.bench import dask as bench


def _row(rows, time_ratio, memory_ratio):
    return {"rows": rows, "time_ratio": time_ratio, "memory_ratio": memory_ratio}


def test_verdicts_read_the_time_target_at_a_million_rows_only():
    v = bench.verdicts([_row(100_000, 3.0, 1.1), _row(1_000_000, 1.4, 1.1)])
    assert v["time"]["met"] and v["time"]["measured"] == [1.4] and v["memory"]["met"]
    v = bench.verdicts([_row(100_000, 1.0, 1.3)])
    assert not v["time"]["met"] and not v["memory"]["met"]  # no run at 10^6 rows: not met


@pytest.mark.slow
def test_bench_dask_tiny(tmp_path, capsys):
    pytest.importorskip("distributed", reason="the dask extra is not installed")
    from runners.bench import main

    out = tmp_path / "dask.json"
    assert main(["dask", "--rows", "4000", "--trees", "2", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    run = result["runs"][0]
    assert run["rows"] == 4000 and run["ours"]["hist_bytes_per_tree"] > 0 and run["lightgbm"]["fit_s"] > 0
    assert "MET" in capsys.readouterr().out and "command" in result and "git_commit" in result
