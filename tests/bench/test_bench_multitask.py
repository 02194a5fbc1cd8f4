"""The multitask benchmark (runners.bench.multitask) in quick mode, in-process: outputs written, their
structure, budgets kept and choices made by validation; Isolet skipped with a note when absent and run
on a small stand-in file otherwise.  No timing is asserted: the targets are for the full run."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from runners.bench import main
from runners.bench import multitask as bm


@pytest.fixture(scope="module")
def fake_isolet(tmp_path_factory):
    """Isolet's format (X float32, y = 1..26) at 10 rows per letter and 30 columns, letters separable."""
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(1, 27, dtype=np.int16), 10)
    X = rng.normal(size=(len(y), 30)).astype(np.float32)
    X[:, :5] += (y[:, None] == np.arange(1, 6)) * 2.0
    path = tmp_path_factory.mktemp("isolet") / "isolet.npz"
    np.savez(path, X=X, y=y)
    return path


@pytest.fixture(scope="module")
def quick(tmp_path_factory, fake_isolet):
    out = tmp_path_factory.mktemp("multitask")
    assert main(["multitask", "--quick", "--isolet", str(fake_isolet), "--out", str(out)]) == 0
    return out, json.loads((out / "bench.json").read_text())


def test_outputs_and_structure(quick):
    out, res = quick
    k = bm.QUICK["budgets"][0]
    for tag in ("synthetic", f"isolet_K{k}"):
        for metric in ("auprc", "auc"):
            assert (out / f"bench_{tag}_{metric}.png").stat().st_size > 0
            lines = (out / f"bench_{tag}_{metric}.csv").read_text().splitlines()
            assert [line.split(",")[0] for line in lines[1:]] == list(bm.VARIANTS)
            assert lines[0].split(",")[-1] == "Total"
    assert [s["data"] for s in res["speed"]] == ["synthetic", "isolet"]
    for s in res["speed"]:
        assert s["multitask_s"] > 0 and s["independent_sum_s"] > 0
        assert s["ratio"] == pytest.approx(s["multitask_s"] / s["independent_sum_s"])
        assert len(s["all_multitask_s"]) == len(s["all_independent_s"]) == bm.QUICK["repeats"]
    assert [c["tag"] for c in res["compare"]] == ["synthetic", f"isolet_K{k}"]
    assert res["targets"] == bm.TARGETS and not res["notes"]


def test_choices_by_validation_within_budget(quick):
    _, res = quick
    for c in res["compare"]:
        assert c["n_seeds"] == len(c["per_seed"]) == len(bm.QUICK["seeds"])
        run = c["per_seed"][0]
        n_tasks = len(run["chosen"]["Multitask"]["test"]["auc"])
        for v in bm.VARIANTS:
            fits = [f for f in run["fits"] if f["variant"] == v]
            assert len(fits) == len(bm.QUICK["mu_grid"])  # every variant: a grid of the same size
            best = max(f["val"][f"total_{c['select']}"] for f in fits)
            chosen = run["chosen"][v]
            assert chosen["val"][f"total_{c['select']}"] == best
            assert len(chosen["test"]["auprc"]) == len(chosen["n_features_per_task"]) == n_tasks
            if c["budget"] is not None:
                assert all(f["n_features"] <= c["budget"] for f in fits)
            assert (v == "Multitask") == (chosen["mu_task"] > 0)
            # one seed: the mean is that seed's chosen fit
            assert c["mean"][v]["test"]["total_auc"] == pytest.approx(chosen["test"]["total_auc"])
        if c["data"] == "synthetic":
            rc = c["mean"]["Multitask"]["recovery"]
            assert 0 <= rc["spurious"] <= 1 and 0 <= rc["shared_recall"] <= 1


def test_verdict_lines(quick):
    _, res = quick
    targets = [line for line in res["verdicts"] if line.startswith(("speed", "(a)", "(b)"))]
    assert len(targets) == 2 + 2 + len(bm.QUICK["budgets"])
    for line in targets:
        assert re.search(r": (MET|NOT MET)$", line), line


def test_isolet_skipped_when_absent(tmp_path, capsys):
    assert main(["multitask", "--quick", "--isolet", str(tmp_path / "missing.npz"), "--out",
                 str(tmp_path)]) == 0
    res = json.loads((tmp_path / "bench.json").read_text())
    assert "Isolet skipped" in capsys.readouterr().out and res["notes"]
    assert [c["data"] for c in res["compare"]] == ["synthetic"]


def test_isolet_tasks_are_one_vs_rest_on_the_same_rows(fake_isolet):
    d = bm.isolet_data(fake_isolet, 3, seed=0)
    X, y, task = d.test
    n = len(y) // 3
    assert d.task_names == ["A", "B", "C"] and np.array_equal(np.bincount(task), [n] * 3)
    assert np.array_equal(X[:n], X[n:2 * n])  # every task sees the same rows
    assert all(y[task == t].sum() == 2 for t in range(3))  # 20 % of each letter's 10 rows, stratified
