"""The feature-selection benchmark's machinery (runners.bench.selection.suite) end to end on tiny settings:
outputs written, every family's chosen setting within its budget and chosen by validation AUC (checked
from the CSV rows), verdict lines; the path family's guard; the target checks on handmade records."""

from __future__ import annotations

import argparse
import re

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import make_classification

from runners.bench.selection import data, families, report
from runners.bench.selection.families import FAMILIES, Booster, Grids
from runners.bench.selection.suite import add_parser, benchmark, make_split, run_meta, settings, write_report

BUDGETS = (3, 5)
BOOSTER = Booster(n_estimators=15, early_stopping_rounds=5, threads=1)
GRIDS = Grids(mu=(0.003, 0.03, 0.3), mu_budget=(0.0,), mu_refit=(0.01,), mu_cegb=(0.01, 0.1),
              l1_C=(0.05, 1.0))


def tiny_madelon(data_dir):
    return make_classification(n_samples=400, n_features=40, n_informative=5, n_redundant=5, n_repeated=0,
                               n_clusters_per_class=4, flip_y=0.01, random_state=0)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("selection")
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(data.DATASETS, "madelon", tiny_madelon)
        df = benchmark(["breast_cancer", "madelon"], [0], BUDGETS, list(FAMILIES), BOOSTER, GRIDS,
                       out / "no-data", out / "selection.csv")
    lines = write_report(df, BUDGETS, out, {"test": True})
    return out, pd.read_csv(out / "selection.csv"), lines


@pytest.mark.slow  # a whole small benchmark run (the module fixture): ~10 s
def test_outputs_are_written(run):
    out, rows, lines = run
    for name in ("selection.csv", "summary.md", "auc_vs_features.png"):
        assert (out / name).stat().st_size > 0, name
    assert set(rows["dataset"]) == {"breast_cancer", "madelon"}
    expected = set(FAMILIES) if families.selection_path is not None else {
        f for f in FAMILIES if FAMILIES[f].group != "path"}
    assert set(rows["family"]) == expected
    summary = (out / "summary.md").read_text()
    assert "## madelon" in summary and "gbfs:best-val" in summary and "| final model |" in summary


@pytest.mark.slow  # a whole small benchmark run (the module fixture): ~10 s
def test_eligibility_and_budgets_from_the_csv(run):
    _, rows, _ = run
    for r in rows.itertuples():
        eligible = [] if pd.isna(r.eligible_budgets) else [int(k) for k in str(r.eligible_budgets).split(";")]
        assert eligible == [k for k in BUDGETS if r.n_features <= k]
    budgeted = rows.dropna(subset=["budget"])
    assert set(budgeted["group"]) >= {"budget", "refit", "topk", "lgbm-topk"}
    assert (budgeted["n_features"] <= budgeted["budget"]).all()


@pytest.mark.slow  # a whole small benchmark run (the module fixture): ~10 s
def test_every_chosen_setting_is_within_budget_and_best_on_validation(run):
    out, rows, _ = run
    chosen = report.choose(rows, BUDGETS)
    table = report.cells(chosen)
    candidates = rows[rows["group"] != "reference"]
    n_cells = 0
    for (ds, fam), group in candidates.groupby(["dataset", "family"]):
        for k in BUDGETS:
            eligible = group[group["n_features"] <= k]
            pick = chosen[(chosen["dataset"] == ds) & (chosen["family"] == fam) & (chosen["K"] == k)]
            if eligible.empty:
                assert pick.empty
                continue
            n_cells += 1
            assert len(pick) == 1 and pick["n_features"].iloc[0] <= k
            assert pick["val_auc"].iloc[0] == eligible["val_auc"].max()
            best = eligible[eligible["val_auc"] == eligible["val_auc"].max()]
            assert pick["n_features"].iloc[0] == best["n_features"].min()  # ties: fewer features
            cell = table[(table["dataset"] == ds) & (table["family"] == fam) & (table["K"] == k)]
            assert cell["test_auc"].iloc[0] == pytest.approx(pick["test_auc"].iloc[0])
    assert n_cells >= 2 * len(BUDGETS) * 20
    # gbfs:best-val: the best validation AUC among the feature-selecting gbfs families' choices
    selecting = chosen[chosen["group"].isin(families.SELECTING_GROUPS)]
    for (ds, k), group in selecting.groupby(["dataset", "K"]):
        best = chosen[(chosen["dataset"] == ds) & (chosen["K"] == k) & (chosen["family"] == report.BEST)]
        assert best["val_auc"].iloc[0] == group["val_auc"].max()
        assert best["n_features"].iloc[0] <= k
        assert best["chosen_family"].iloc[0] in set(group["family"])


@pytest.mark.slow  # a whole small benchmark run (the module fixture): ~10 s
def test_verdict_lines(run):
    out, _, lines = run
    targets = [line for line in lines if line[:3] in {f"({c})" for c in "abcdef"}]
    assert [t[:3] for t in targets] == ["(a)", "(b)", "(c)", "(d)", "(e)", "(f)"]
    for t in targets:
        assert re.search(r": (MET|NOT MET)$", t), t
    assert all(line in (out / "summary.md").read_text() for line in lines)


def test_path_family_skips_itself_without_selection_path(monkeypatch, capsys):
    X, y = tiny_madelon(None)
    split = make_split("tiny", X, y, 0, BUDGETS, BOOSTER, GRIDS)
    monkeypatch.setattr(families, "selection_path", None)
    assert FAMILIES["gbfs:path-agbm-newton"].run(split) == []
    assert "not importable" in capsys.readouterr().out


def test_split_protocol_and_capped_budgets():
    X, y = tiny_madelon(None)
    split = make_split("tiny", X, y, 1, (5, 50), BOOSTER, GRIDS)
    assert len(split.y_test) == 120 and len(split.y_val) == 56 and len(split.y_fit) == 224
    assert split.budgets == (5, 40)  # a budget above the 40 features is built for all of them
    assert abs(split.y_test.mean() - y.mean()) < 0.02  # stratified


def test_gbfs_mu_is_rescaled_to_gain_units():
    X, y = tiny_madelon(None)
    split = make_split("tiny", X, y, 0, BUDGETS, BOOSTER, GRIDS)
    n = len(split.y_fit)
    assert families.mu_raw(split, "agbm", "sse", 0.01) == 0.01
    assert families.mu_raw(split, "gbfs", "sse", 0.01) == pytest.approx(0.01 * n * np.var(split.y_fit))
    assert families.mu_raw(split, "gbfs", "newton", 0.01) == pytest.approx(0.01 * n)


def _records(**cols):
    base = {"dataset": "d", "seed": 0, "family": "gbfs:agbm-sse", "group": "penalised", "setting": "",
            "budget": np.nan, "note": "", "d": 30, "n_test": 500, "fit_seconds": 1.0}
    n = len(next(iter(cols.values())))
    return pd.DataFrame([{**base, **{k: v[i] for k, v in cols.items()}} for i in range(n)])


def test_monotonicity_and_budget_checks_report_violations():
    rows = _records(mu=[0.1, 0.01, 0.03], n_features=[2, 9, 4])
    assert report.monotonicity_violations(rows) == []
    rows = _records(mu=[0.1, 0.01, 0.03], n_features=[5, 9, 4])
    assert report.monotonicity_violations(rows) == ["d seed 0 gbfs:agbm-sse: mu 0.03 -> 0.1: 4 -> 5 features"]
    over = _records(group=["refit", "path"], family=["gbfs:agbm-sse+refit", "gbfs:path-agbm-sse"],
                    budget=[5, 10], n_features=[6, 8], note=["", "data support 8 features"])
    lines = report._budget_lines(over, pd.DataFrame({"dataset": ["d"], "K": [50], "d": [30]}))
    assert lines[0].endswith("NOT MET") and "6 features" in lines[1] and "data support 8" in lines[2]
    assert "K=50 >= the 30 features of d" in lines[3]


def test_cli_settings(tmp_path):
    ap = argparse.ArgumentParser()
    add_parser(ap.add_subparsers(dest="suite"))
    quick = settings(ap.parse_args(["selection", "--quick"]))
    assert quick["seeds"] == (0,) and quick["out"].name == "quick" and len(quick["datasets"]) < 8
    full = settings(ap.parse_args(["selection", "--datasets", "madelon", "--budgets", "10", "5", "--families",
                                   "lgbm:*", "--out", str(tmp_path)]))
    assert full["budgets"] == (5, 10) and full["seeds"] == (0, 1, 2) and full["out"] == tmp_path
    # a pattern names the opt-in families it matches (lgbm:rfe, lgbm:shap-topk) as well as the default ones
    assert full["families"] == ["lgbm:topk-gain", "lgbm:topk-split", "lgbm:rfe", "lgbm:shap-topk",
                                "lgbm:cegb"]
    with pytest.raises(SystemExit):
        ap.parse_args(["selection", "--budgets", "0"])


def test_opt_in_families_run_only_when_named():
    from runners.bench.selection.suite import select_families

    default = select_families(None)
    assert "lgbm:rfe" not in default and not any(n.startswith("gbfs:path+") for n in default)
    assert {"lgbm:topk-gain", "gbfs:path-agbm-newton"} <= set(default)
    assert select_families(["lgbm:rfe", "gbfs:path+norfe-agbm-*"]) == [
        "gbfs:path+norfe-agbm-sse", "gbfs:path+norfe-agbm-newton", "lgbm:rfe"]


def test_lightgbm_elimination_and_the_path_with_elimination_fill_every_budget():
    X, y = tiny_madelon(None)
    split = make_split("tiny", X, y, 0, BUDGETS, BOOSTER, GRIDS)
    for name in ("lgbm:rfe", "gbfs:path-agbm-newton", "gbfs:path+exact-agbm-newton"):
        rows = FAMILIES[name].run(split)
        assert [r["budget"] for r in sorted(rows, key=lambda r: r["budget"])] == list(BUDGETS)
        assert all(r["n_features"] <= r["budget"] and 0.5 < r["test_auc"] <= 1 for r in rows)
    assert sorted(r["n_features"] for r in FAMILIES["lgbm:rfe"].run(split)) == list(BUDGETS)
    assert all(r["cpu_seconds"] > 0 for r in rows)  # the path's CPU time, which target (j) compares


def test_lightgbm_top_k_records_the_cpu_time_of_its_ranking_fit():
    X, y = tiny_madelon(None)
    rows = FAMILIES["lgbm:topk-gain"].run(make_split("tiny", X, y, 0, BUDGETS, BOOSTER, GRIDS))
    # the ranking fit is part of each fit: its CPU time is positive and at most the fit's
    assert all(0 < r["ranking_cpu_seconds"] <= r["cpu_seconds"] for r in rows)


def _naive_mrmr(X, y, k):
    from sklearn.feature_selection import f_classif

    relevance = np.nan_to_num(f_classif(X, y)[0])
    taken = [next(j for j in range(X.shape[1]) if relevance[j] >= relevance.max() * (1 - 1e-9))]
    while len(taken) < k:
        scores = {}
        for j in range(X.shape[1]):
            if j not in taken:
                redundancy = np.mean([abs(np.corrcoef(X[:, j], X[:, t])[0, 1]) for t in taken])
                scores[j] = relevance[j] / max(redundancy, 1e-12)
        best = max(scores.values())
        taken.append(min(j for j, v in scores.items() if v >= best * (1 - 1e-9)))  # near-ties: earlier
    return taken


def test_mrmr_order_equals_its_definition_and_passes_over_a_copy():
    X, y = make_classification(n_samples=200, n_features=12, n_informative=4, n_redundant=0, random_state=3)
    X = np.column_stack([X, X[:, 0] * 2.0 + 0.001])  # an exact copy of feature 0 (rescaled)
    order = families.mrmr_order(X, y, 6)
    assert order.tolist() == _naive_mrmr(X, y, 6)
    first = order[0]
    twin = 12 if first == 0 else (0 if first == 12 else None)
    if twin is not None:
        assert twin not in order[:3]  # as relevant as the first, but wholly redundant with it


def test_shap_and_mrmr_families_fill_every_budget():
    X, y = tiny_madelon(None)
    split = make_split("tiny", X, y, 0, BUDGETS, BOOSTER, GRIDS)
    for name in ("lgbm:shap-topk", "mrmr"):
        rows = FAMILIES[name].run(split)
        assert sorted(r["n_features"] for r in rows) == list(BUDGETS)
        assert all(0.5 < r["test_auc"] <= 1 and r["fit_seconds"] > 0 for r in rows)


def test_peer_targets_compare_the_default_path_with_the_best_peer_of_each_cell():
    from runners.bench.selection.peers import DEFAULT_PATH, lightgbm_topk_seconds, peer_lines

    cells = []
    for k, path, rfe, topk in [(5, 0.90, 0.91, 0.89), (10, 0.93, 0.92, 0.925)]:
        cells += [{"dataset": "big", "K": k, "family": DEFAULT_PATH, "group": "path", "test_auc": path},
                  {"dataset": "big", "K": k, "family": "lgbm:rfe", "group": "lgbm-rfe", "test_auc": rfe},
                  {"dataset": "big", "K": k, "family": "lgbm:topk-gain", "group": "lgbm-topk",
                   "test_auc": topk}]
    table = pd.DataFrame(cells).assign(n_test=500)
    rows = pd.DataFrame(
        [{"dataset": "big", "seed": 0, "family": DEFAULT_PATH, "group": "path", "budget": k,
          "fit_seconds": 9.0, "cpu_seconds": 9.5, "regret": reg, "penalised_test_auc": pen,
          "ranking_seconds": np.nan, "ranking_cpu_seconds": np.nan}
         for k, reg, pen in [(5, 0.004, 0.88), (10, 0.0, 0.93)]]
        + [{"dataset": "big", "seed": 0, "family": "lgbm:topk-gain", "group": "lgbm-topk", "budget": k,
            "fit_seconds": 2.0, "cpu_seconds": 3.0, "regret": np.nan, "penalised_test_auc": np.nan,
            "ranking_seconds": 1.5, "ranking_cpu_seconds": 2.5} for k in (5, 10)])
    # LightGBM top K as users run it: one ranking (1.5 s; 2.5 s of CPU) and two refits (0.5 s each)
    assert lightgbm_topk_seconds(rows, "wall").tolist() == [2.5]
    assert lightgbm_topk_seconds(rows).tolist() == [3.5]
    lines = peer_lines(rows, table)
    g, h, i, j = (next(x for x in lines if x.startswith(f"({t})")) for t in "ghij")
    assert g.startswith("(g)") and "mean -0.0025" in g and "worst -0.0100" in g and g.endswith("NOT MET")
    assert "big K=5: path 0.9000, best peer lgbm:rfe 0.9100" in lines[1]
    assert h.startswith("(h)") and "5: -0.0100, 10: +0.0050" in h and h.endswith("NOT MET")
    assert i.startswith("(i)") and "0.0020" in i and i.endswith(" MET")
    # the target is CPU time (9.5 / 3.5); the elapsed ratio (9 / 2.5) is printed beside it
    assert j.startswith("(j) path CPU time") and "2.71x" in j and "elapsed 3.60x" in j
    assert j.endswith("NOT MET")



def test_peer_targets_of_a_run_of_the_default_path_alone_are_not_evaluated():
    from runners.bench.selection.peers import DEFAULT_PATH, peer_lines

    table = pd.DataFrame([{"dataset": "big", "K": 5, "family": DEFAULT_PATH, "group": "path",
                           "test_auc": 0.9, "n_test": 500}])
    rows = pd.DataFrame([{"dataset": "big", "seed": 0, "family": DEFAULT_PATH, "group": "path", "budget": 5,
                          "fit_seconds": 9.0, "cpu_seconds": 9.5, "regret": 0.001,
                          "penalised_test_auc": 0.88}])
    lines = peer_lines(rows, table)
    assert [x[:3] for x in lines if x.startswith("(")] == ["(g)", "(h)", "(i)", "(j)"]
    g, h, j = (next(x for x in lines if x.startswith(f"({t})")) for t in "ghj")
    assert "NOT EVALUATED" in g and "NOT EVALUATED" in h and "NOT EVALUATED" in j
    assert next(x for x in lines if x.startswith("(i)")).endswith(" MET")

def test_summary_records_its_command_and_commit():
    s = {"datasets": ("madelon", "isolet"), "seeds": (0,), "budgets": (5,), "booster": Booster(),
         "grids": Grids()}
    meta = run_meta(s, pd.DataFrame({"dataset": ["madelon"]}), 12.3)
    assert meta["command"].startswith("python -m runners.bench")
    assert re.fullmatch(r"[0-9a-f]{40}|unknown", meta["commit"]), meta["commit"]
    assert meta["skipped (not available)"] == ["isolet"] and meta["runtime"] == "12 s"
