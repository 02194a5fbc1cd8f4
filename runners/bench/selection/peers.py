"""The selection benchmark's targets against what users pick instead of the selection path.

Printed after the verdict of :mod:`runners.bench.selection.report`, from the same cells (each
family's validation-chosen answer per data set, seed and K, test AUC averaged over seeds):

(g) the default path (``gbfs:path-agbm-newton``: ``selection_path`` with A-GBM and its defaults)
    >= the best peer - 0.002 AUC on average at every K, never more than 0.005 behind in a cell, and
    >= the best peer in at least half the cells, on data sets with >= 400 test rows.  The peers are
    every LightGBM-based and classical selector that ran (top K by gain / split / SHAP with a
    refit, recursive elimination, CEGB, mRMR, L1-logistic); the best peer of a cell is picked on
    test, in the peers' favour.
(h) the papers' penalised selection alone (each budget's best validated penalised candidate of the
    default path -- a probe's selection or its re-selection, refitted; no ranking candidate) >=
    LightGBM top K by gain on average at every K.
(i) the path's choice regret (test AUC of the best candidate it could have answered with, in
    hindsight, minus its answer's) <= 0.002 on average, per path family.
(j) the path for every budget <= 2x the time of LightGBM top K for every budget, counted as users
    run it: one ranking fit and one refit per budget (per split; mean of the ratios).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

DEFAULT_PATH = "gbfs:path-agbm-newton"
PEER_GROUPS = ("lgbm-topk", "lgbm-rfe", "lgbm-shap", "mrmr", "cegb", "l1")
TARGETS = {"mean_behind": 0.002, "max_behind": 0.005, "win_share": 0.5, "min_test_rows": 400,
           "regret": 0.002, "time_ratio": 2.0}


def _met(ok: bool) -> str:
    return "MET" if ok else "NOT MET"


def peer_lines(rows: pd.DataFrame, table: pd.DataFrame) -> list[str]:
    """Lines (g)-(j), each ending in MET / NOT MET (NOT EVALUATED without the families it needs)."""
    return _path_vs_peers(table) + _penalised_alone(rows, table) + _regret(rows) + _time(rows)


def _path_vs_peers(table: pd.DataFrame) -> list[str]:
    peers = table[table["group"].isin(PEER_GROUPS)]
    path = table[table["family"] == DEFAULT_PATH].set_index(["dataset", "K"])
    if path.empty or peers.empty:
        return [f"(g) NOT EVALUATED: needs {DEFAULT_PATH} and at least one peer"]
    best = peers.loc[peers.groupby(["dataset", "K"])["test_auc"].idxmax()].set_index(["dataset", "K"])
    best = best[["test_auc", "family"]].rename(columns={"test_auc": "test_auc_peer", "family": "peer"})
    cmp = path[["test_auc", "n_test"]].join(best, how="inner")
    cmp = cmp[cmp["n_test"] >= TARGETS["min_test_rows"]]
    if cmp.empty:
        return [f"(g) NOT EVALUATED: no data set with >= {TARGETS['min_test_rows']} test rows"]
    gap = cmp["test_auc"] - cmp["test_auc_peer"]
    per_k = gap.groupby(level="K").mean()
    ok = bool((per_k >= -TARGETS["mean_behind"]).all() and (gap >= -TARGETS["max_behind"]).all()
              and (gap >= 0).mean() >= TARGETS["win_share"])
    peer_names = ", ".join(sorted(peers["family"].unique()))
    lines = [f"(g) default path vs the best peer ({peer_names}), {len(cmp)} cells with >= "
             f"{TARGETS['min_test_rows']} test rows: mean {gap.mean():+.4f}, per K "
             + ", ".join(f"{k}: {v:+.4f}" for k, v in per_k.items())
             + f" (>= -{TARGETS['mean_behind']}); worst {gap.min():+.4f} (>= -{TARGETS['max_behind']}); "
             f"ahead or level in {int((gap >= 0).sum())}/{len(gap)} (>= half): {_met(ok)}"]
    lines += [f"    {d} K={k}: path {r.test_auc:.4f}, best peer {r.peer} {r.test_auc_peer:.4f} ({g:+.4f})"
              for (d, k), r, g in zip(cmp.index, cmp.itertuples(), gap) if g < -TARGETS["max_behind"]]
    return lines


def _penalised_alone(rows: pd.DataFrame, table: pd.DataFrame) -> list[str]:
    path = rows[rows["family"] == DEFAULT_PATH]
    topk = table[table["family"] == "lgbm:topk-gain"].set_index(["dataset", "K"])["test_auc"]
    if path.empty or topk.empty or "penalised_test_auc" not in path:
        return ["(h) NOT EVALUATED: needs the default path and lgbm:topk-gain"]
    pen = path.groupby(["dataset", "budget"])["penalised_test_auc"].mean()
    pen.index = pen.index.set_names(["dataset", "K"])
    gap = (pen - topk).dropna()
    per_k = gap.groupby(level="K").mean()
    ok = bool((per_k >= 0).all())
    return [f"(h) the path's penalised candidates alone vs LightGBM top-K by gain ({len(gap)} cells): "
            "per K " + ", ".join(f"{k}: {v:+.4f}" for k, v in per_k.items()) + f" (>= 0): {_met(ok)}"]


def _regret(rows: pd.DataFrame) -> list[str]:
    path = rows[(rows["group"] == "path")]
    if path.empty or "regret" not in path or path["regret"].isna().all():
        return ["(i) NOT EVALUATED: no path fits with a test set"]
    per = path.groupby("family")["regret"].mean()
    default = per.get(DEFAULT_PATH, np.nan)
    lines = [f"(i) choice regret of the default path {default:.4f} (<= {TARGETS['regret']}): "
             f"{_met(bool(default <= TARGETS['regret']))}"]
    return lines + [f"    {f}: mean regret {v:.4f}" for f, v in per.items()]


def lightgbm_topk_seconds(rows: pd.DataFrame, clock: str = "cpu") -> pd.Series:
    """Per (data set, seed): LightGBM top K by gain for every budget as users run it, one ranking fit
    and a refit per budget (the benchmark's fits each repeat the same ranking fit); ``clock``
    ``"cpu"``: CPU time of every thread (the target's measure), ``"wall"``: elapsed seconds."""
    fit, ranking = ("cpu_seconds", "ranking_cpu_seconds") if clock == "cpu" else \
        ("fit_seconds", "ranking_seconds")
    topk = rows[rows["family"] == "lgbm:topk-gain"]
    if topk.empty or ranking not in topk or topk[ranking].isna().all():
        return pd.Series(dtype=float)
    g = topk.groupby(["dataset", "seed"])
    return g[fit].sum() - g[ranking].sum() + g[ranking].mean()


def _time(rows: pd.DataFrame) -> list[str]:
    ratios = {}
    for clock, column in (("cpu", "cpu_seconds"), ("wall", "fit_seconds")):
        path = rows[rows["family"] == DEFAULT_PATH]
        topk = lightgbm_topk_seconds(rows, clock)
        if column not in path or path.empty or topk.empty:  # a run of the path alone has no ratio
            continue
        ratios[clock] = (path.groupby(["dataset", "seed"])[column].first() / topk).dropna()
    ratio = ratios.get("cpu", pd.Series(dtype=float))
    if ratio.empty:
        return ["(j) NOT EVALUATED: needs the default path and lgbm:topk-gain with ranking_cpu_seconds"]
    per = ratio.groupby(level="dataset").mean()
    wall = ratios.get("wall", pd.Series(dtype=float)).groupby(level="dataset").mean()
    ok = bool(ratio.mean() <= TARGETS["time_ratio"])
    return [f"(j) path CPU time / LightGBM top-K CPU time (one ranking, a refit per budget): mean "
            f"{ratio.mean():.2f}x (<= {TARGETS['time_ratio']:g}x; elapsed {wall.mean():.2f}x): "
            f"{_met(ok)}"] + \
        [f"    {d}: {v:.2f}x (elapsed {wall.get(d, np.nan):.2f}x)" for d, v in per.items()]
