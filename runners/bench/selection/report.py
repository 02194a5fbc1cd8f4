"""Choice, summary, plot and verdict of the feature-selection benchmark
(:mod:`runners.bench.selection.suite`).

Everything here reads the per-fit records (the CSV's rows).  In each (data set, seed, budget K) and
for each family the setting with the best validation AUC among those using at most K features is
chosen (ties: fewer features, then the earlier setting); its test AUC is what the family scores
there, averaged over seeds.  *Meta families* choose among families the same way, per seed, by
validation AUC of each family's chosen setting (:data:`META`): ``gbfs:best-val`` is the
configuration target (a) compares, chosen among every feature-selecting gbfs family.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runners.bench.selection.families import FAMILIES, SELECTING_GROUPS

TARGETS = {"win_share": 0.75, "max_behind": 0.005, "min_test_rows": 400, "path_time_ratio": 3.0}
BEST = "gbfs:best-val"
META = {BEST: SELECTING_GROUPS, "gbfs:penalised-best": ("penalised",), "gbfs:refit-best": ("refit", "path"),
        "gbfs:topk-best": ("topk",)}
LGBM_TOPK = ("lgbm:topk-gain", "lgbm:topk-split")
ORDER = [*FAMILIES, *META]  # tables list families in registry order, then the meta families
# the families the plot draws in colour (every other gbfs family is a faint grey line)
STYLES = {BEST: dict(color="C3", lw=2.6, zorder=5), "gbfs:refit-best": dict(color="C1", lw=1.5),
          "gbfs:penalised-best": dict(color="C2", lw=1.5),
          "gbfs:topk-best": dict(color="C7", lw=1.5, ls="--"),
          "lgbm:topk-gain": dict(color="C0", lw=1.8, ls="--"),
          "lgbm:topk-split": dict(color="C9", lw=1.8, ls="--"),
          "lgbm:cegb": dict(color="C5", lw=1.8, ls=":"), "l1-logistic": dict(color="C4", lw=1.8, ls="-.")}
KEYS = ["dataset", "seed", "K"]


def _best(df: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """The row of best validation AUC per ``by`` group (ties: fewer features, then the first row)."""
    order = df.sort_values(["val_auc", "n_features"], ascending=[False, True], kind="stable")
    return order.groupby(by, sort=False).head(1)


def choose(rows: pd.DataFrame, budgets) -> pd.DataFrame:
    """Each family's validation-chosen setting per (data set, seed, K), plus the meta families.

    Parameters
    ----------
    rows : DataFrame
        The fits (the CSV's rows); ``ref:*`` fits are never chosen.
    budgets : sequence of int
        The cells' K; a fit is eligible in every cell with ``n_features <= K``.

    Returns
    -------
    DataFrame
        The chosen rows with ``K`` and ``chosen_family`` (for a meta family: the family it picked).
    """
    rows = rows[(rows["group"] != "reference") & np.isfinite(rows["val_auc"])]
    chosen = pd.concat([_best(rows[rows["n_features"] <= k], ["dataset", "seed", "family"]).assign(K=k)
                        for k in budgets], ignore_index=True)
    chosen["chosen_family"] = chosen["family"]
    meta = [_best(chosen[chosen["group"].isin(groups)], KEYS).assign(family=name, group="meta")
            for name, groups in META.items()]
    return pd.concat([chosen, *meta], ignore_index=True)


def cells(chosen: pd.DataFrame) -> pd.DataFrame:
    """Mean over seeds of each family's chosen setting, per (data set, K)."""
    return (chosen.groupby(["dataset", "K", "family"], sort=False)
            .agg(test_auc=("test_auc", "mean"), val_auc=("val_auc", "mean"),
                 n_features=("n_features", "mean"), n_seeds=("seed", "nunique"), group=("group", "first"),
                 d=("d", "first"), n_test=("n_test", "first"))
            .reset_index()
            .sort_values(["dataset", "family", "K"], key=_registry_order, kind="stable", ignore_index=True))


def _registry_order(col: pd.Series) -> pd.Series:
    """Sort key: families in :data:`ORDER`, data sets in order of appearance, K by value."""
    if col.name == "family":
        return col.map({f: i for i, f in enumerate(ORDER)})
    return col if col.name == "K" else col.map({d: i for i, d in enumerate(col.drop_duplicates())})


def _met(ok: bool) -> str:
    return "MET" if ok else "NOT MET"


def _compare(table: pd.DataFrame) -> pd.DataFrame:
    """Per (data set, K): gbfs:best-val, the better LightGBM GBDT-topK and CEGB, by mean test AUC."""
    wide = table.pivot(index=["dataset", "K"], columns="family", values="test_auc")
    info = table.groupby(["dataset", "K"])[["d", "n_test"]].first()
    out = pd.DataFrame({"gbfs": wide.get(BEST), "topk": wide.reindex(columns=list(LGBM_TOPK)).max(axis=1),
                        "cegb": wide.get("lgbm:cegb")}, index=wide.index).join(info)
    return out.reset_index()


def verdict(rows: pd.DataFrame, table: pd.DataFrame) -> list[str]:
    """The printed lines of targets (a)-(f).

    Parameters
    ----------
    rows : DataFrame
        The fits.
    table : DataFrame
        :func:`cells` of :func:`choose`.

    Returns
    -------
    list of str
        One line per target, ending in MET or NOT MET (NOT EVALUATED if the families it needs were
        not run), each followed by indented details (violations, ratios, flagged cells).
    """
    cmp = _compare(table)
    flagged = int((cmp["K"] >= cmp["d"]).sum())
    note = f" ({flagged} cells with K >= d included)" if flagged else ""
    lines = []
    if cmp["gbfs"].isna().all() or cmp["topk"].isna().all():
        lines += ["(a) NOT EVALUATED: no gbfs or no lgbm:topk results", "(b) NOT EVALUATED"]
    else:
        win = cmp["gbfs"] >= cmp["topk"]
        lines.append(f"(a) gbfs:best-val >= GBDT-topK (best of LightGBM gain/split) in {int(win.sum())}/"
                     f"{len(cmp)} cells = {win.mean():.0%}{note} (target >= {TARGETS['win_share']:.0%}): "
                     f"{_met(win.mean() >= TARGETS['win_share'])}")
        big = cmp[cmp["n_test"] >= TARGETS["min_test_rows"]]
        behind = big["topk"] - big["gbfs"]
        worst = "" if big.empty else (f"; worst {behind.max():+.4f} ({big.loc[behind.idxmax(), 'dataset']}, "
                                      f"K={big.loc[behind.idxmax(), 'K']})")
        lines.append(f"(b) never > {TARGETS['max_behind']} AUC behind GBDT-topK on data sets with >= "
                     f"{TARGETS['min_test_rows']} test rows ({len(big)} cells{worst}): "
                     f"{_met(bool((behind <= TARGETS['max_behind']).all()))}")
    capped = cmp.loc[cmp["K"] >= cmp["d"], ["dataset", "K", "d"]]
    lines += _cegb_line(cmp) + _monotone_lines(rows) + _budget_lines(rows, capped) + _path_time_lines(rows)
    return lines


def _cegb_line(cmp: pd.DataFrame) -> list[str]:
    if cmp["cegb"].isna().all() or cmp["gbfs"].isna().all():
        return ["(c) NOT EVALUATED: no lgbm:cegb or no gbfs results"]
    have = cmp.dropna(subset=["cegb"])
    lost = have[have["gbfs"] < have["cegb"]]
    empty = len(cmp) - len(have)
    return [f"(c) gbfs:best-val >= LightGBM CEGB in every cell ({len(have) - len(lost)}/{len(have)}"
            f"{f'; {empty} cells without a CEGB setting of <= K features' if empty else ''}): "
            f"{_met(lost.empty)}"] + [f"    behind CEGB: {r.dataset} K={r.K}: {r.gbfs:.4f} < {r.cegb:.4f}"
                                      for r in lost.itertuples()]


def monotonicity_violations(rows: pd.DataFrame) -> list[str]:
    """Penalised fits (no budget, no refit) whose feature count grows from one mu to the next larger."""
    out = []
    pen = rows[rows["group"] == "penalised"].sort_values("mu", kind="stable")
    for (ds, seed, fam), g in pen.groupby(["dataset", "seed", "family"], sort=True):
        mu, n = g["mu"].to_numpy(), g["n_features"].to_numpy()
        out += [f"{ds} seed {seed} {fam}: mu {mu[i]:.3g} -> {mu[i + 1]:.3g}: {n[i]} -> {n[i + 1]} features"
                for i in np.flatnonzero(np.diff(n) > 0)]
    return out


def _monotone_lines(rows: pd.DataFrame) -> list[str]:
    viol = monotonicity_violations(rows)
    n = int((rows["group"] == "penalised").sum())
    return [f"(d) features non-increasing in mu for every penalised method and criterion ({n} fits, "
            f"{len(viol)} violations): {_met(not viol)}"] + [f"    {v}" for v in viol]


def _budget_lines(rows: pd.DataFrame, capped: pd.DataFrame) -> list[str]:
    """Target (e); ``capped`` lists the (dataset, K, d) cells whose budget was built for d features."""
    budgeted = rows[rows["group"].isin(["budget", "refit", "path", "topk", "lgbm-topk"])]
    over = budgeted[budgeted["n_features"] > budgeted["budget"]]
    path = rows[rows["group"] == "path"]
    short = path[path["n_features"] < path["budget"]]
    silent = short[[not (isinstance(n, str) and n) for n in short["note"]]]
    lines = [f"(e) max_features never exceeded ({len(budgeted)} budgeted fits, {len(over)} over) and "
             f"every path answer with fewer than K features says why ({len(short)} such answers, "
             f"{len(silent)} without a note): {_met(over.empty and silent.empty)}"]
    lines += [f"    over budget: {r.dataset} seed {r.seed} {r.family} {r.setting}: {r.n_features} features"
              for r in over.itertuples()]
    for r in short.itertuples():
        why = r.note if isinstance(r.note, str) and r.note else "no note from the path"
        lines.append(f"    path answers K={r.budget:.0f} with fewer: {r.dataset} seed {r.seed} {r.family}: "
                     f"{r.n_features} features ({why})")
    return lines + [f"    K={r.K} >= the {r.d} features of {r.dataset}: its budgeted settings and path were "
                    f"built for K={r.d} (the cell is flagged)" for r in capped.itertuples()]


def path_time_ratios(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (data set, path family): mean path seconds / mean seconds of one unpenalised fit with the
    same criterion, both over seeds."""
    path = rows[rows["group"] == "path"].groupby(["dataset", "seed", "family"]).first().reset_index()
    ref = rows[rows["group"] == "reference"].groupby(["dataset", "family"])["fit_seconds"].mean()
    path["criterion"] = path["family"].str.rsplit("-", n=1).str[-1]
    out = path.groupby(["dataset", "family", "criterion"])["fit_seconds"].mean().reset_index()
    out["reference"] = [ref.get((d, f"ref:unpenalised-{c}"), np.nan)
                        for d, c in zip(out["dataset"], out["criterion"])]
    out["ratio"] = out["fit_seconds"] / out["reference"]
    return out


def _path_time_lines(rows: pd.DataFrame) -> list[str]:
    ratios = path_time_ratios(rows)
    if ratios.empty or ratios["ratio"].isna().all():
        return ["(f) NOT EVALUATED: no path or no unpenalised reference fits"]
    limit = TARGETS["path_time_ratio"]
    lines = [f"(f) path time (all budgets) <= {limit:g}x one unpenalised fit (worst "
             f"{ratios['ratio'].max():.1f}x): {_met(bool((ratios['ratio'] <= limit).all()))}"]
    for ds, g in ratios.groupby("dataset", sort=False):
        lines.append(f"    {ds}: " + ", ".join(f"{f.removeprefix('gbfs:path-')} {r:.1f}x"
                                                  for f, r in zip(g["family"], g["ratio"])))
    return lines


def _fmt(v, n) -> str:
    return "" if pd.isna(v) else f"{v:.4f} ({n:.0f})"


def markdown(rows: pd.DataFrame, chosen: pd.DataFrame, table: pd.DataFrame, lines: list[str],
             meta: dict) -> str:
    """``summary.md``: per data set and K the mean test AUC (mean #features) of every family's
    validation-chosen setting, the winner, the gap decomposition and the verdict."""
    out = ["# Feature selection under a budget: gbfs vs GBDT-topK, CEGB and L1 logistic", "",
           *[f"- {k}: {v}" for k, v in meta.items()], "", "## Verdict", "", "```", *lines, "```", ""]
    for ds, t in table.groupby("dataset", sort=False):
        ks = sorted(t["K"].unique())
        d, n_test = int(t["d"].iloc[0]), int(t["n_test"].iloc[0])
        out += [f"## {ds} ({d} features, {n_test} test rows)", "",
                "Mean test AUC (mean number of features) of each family's validation-chosen setting."
                + (f" Cells with K >= {d} are flagged `*`." if max(ks) >= d else ""), "",
                "| family | " + " | ".join(f"K={k}{' *' if k >= d else ''}" for k in ks) + " |",
                "| --- |" + " --- |" * len(ks)]
        wide = t.pivot(index="family", columns="K", values=["test_auc", "n_features"])
        for fam in t["family"].drop_duplicates():
            out.append(f"| {fam} | " + " | ".join(_fmt(wide.loc[fam, ("test_auc", k)],
                                                       wide.loc[fam, ("n_features", k)]) for k in ks) + " |")
        win = t.loc[t.groupby("K")["test_auc"].idxmax()]
        out += ["", "Winner (best mean test AUC): " + "; ".join(f"K={r.K}: {r.family} {r.test_auc:.4f}"
                                                                 for r in win.itertuples()), ""]
        picks = chosen[(chosen["dataset"] == ds) & (chosen["family"] == BEST)]
        out += ["gbfs:best-val picked (per seed): " + "; ".join(
            f"K={k}: " + ", ".join(g["chosen_family"].str.removeprefix("gbfs:"))
            for k, g in picks.groupby("K")), ""]
        path = rows[(rows["dataset"] == ds) & (rows["group"] == "path")]
        out += ["Path models by source (every path family and seed): " + "; ".join(
            f"K={k:.0f}: " + ", ".join(f"{src} {n}" for src, n in g["source"].value_counts().items())
            for k, g in path.groupby("budget")), ""] if len(path) else []
        out += _gap_table(t, ks)
    return "\n".join(out) + "\n"


def _gap_table(t: pd.DataFrame, ks) -> list[str]:
    """Where the gap to LightGBM's GBDT-topK comes from: library (our topK vs LightGBM's), selection
    (our topK vs our refit/path -- the same kind of final model on other features) and final model
    (refit/path vs the penalised model -- a better model on a similar selection)."""
    wide = t.pivot(index="K", columns="family", values="test_auc")
    lg = wide.reindex(columns=list(LGBM_TOPK)).max(axis=1)
    ours, refit, pen = (wide.get(f, pd.Series(np.nan, index=wide.index))
                        for f in ("gbfs:topk-best", "gbfs:refit-best", "gbfs:penalised-best"))
    out = ["Gap of the penalised model (best on validation, no refit) to LightGBM's GBDT-topK, split into "
           "library (LightGBM topK - our topK), selection (our topK - our refit/path) and final model "
           "(refit/path - penalised):", "",
           "| K | LightGBM topK | our topK | refit/path | penalised | gap | library | selection "
           "| final model |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for k in ks:
        vals = [lg[k], ours[k], refit[k], pen[k]]
        parts = [lg[k] - pen[k], lg[k] - ours[k], ours[k] - refit[k], refit[k] - pen[k]]
        out.append(f"| {k} | " + " | ".join(f"{v:.4f}" for v in vals) + " | "
                   + " | ".join(f"{p:+.4f}" for p in parts) + " |")
    return out + [""]


def plot(table: pd.DataFrame, path: Path) -> None:
    """One panel per data set: mean test AUC of each family's chosen setting against K (log scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    names = list(table["dataset"].drop_duplicates())
    cols = min(4, len(names))
    n_rows = -(-len(names) // cols)
    legend_in = 0.6  # inches below the panels for the shared legend (two rows)
    fig, axes = plt.subplots(n_rows, cols, figsize=(4.2 * cols, 3.4 * n_rows + legend_in), squeeze=False)
    for ax, ds in zip(axes.flat, names):
        t = table[table["dataset"] == ds]
        for fam, g in t.groupby("family", sort=False):
            style = STYLES.get(fam, dict(lw=0.8, alpha=0.35, color="grey"))
            ax.plot(g["K"], g["test_auc"], marker="o", ms=3, label=fam if fam in STYLES else None, **style)
        ks = sorted(t["K"].unique())
        ax.set_xscale("log")
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.set_title(f"{ds} (d={int(t['d'].iloc[0])})", fontsize=9)
        ax.set_xlabel("budget K (features)", fontsize=8)
        ax.set_ylabel("mean test AUC", fontsize=8)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    handles.append(plt.Line2D([], [], color="grey", alpha=0.35))
    fig.legend(handles, labels + ["other gbfs families"], loc="lower center", ncol=5, fontsize=8)
    fig.tight_layout(rect=(0, legend_in / (3.4 * n_rows + legend_in), 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
