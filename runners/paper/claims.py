"""The GT-GBM paper's claims about its Table 3 and Figures 2-3, checked on a reproduction's table.

Each claim is computed from the numbers of :func:`runners.paper.tables.table3` (ours, mean over
the seeds) and the paper's own (``results/reference/``), and worded as *holds* or *does not hold*
with both sets of numbers; a difference of test AUC smaller than twice its standard error over
the seeds is called *within noise*.  Nothing is concluded that the numbers do not say.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from mlflow.tracking import MlflowClient

SELECTORS = (("gbfs", "GBFS"), ("agbm", "A-GBM"), ("gtgbm", "GT-GBM"))


def _holds(ok: bool) -> str:
    return "**holds**" if ok else "**does not hold**"


def _pt(x: float) -> str:
    return "-" if x is None or math.isnan(x) else f"{x:+.2f} pt"


def _se(a, b) -> float:
    """Standard error of the difference of two rows' mean AUC over their seeds."""
    return math.sqrt(a.auc_sd**2 / a.n_seeds + b.auc_sd**2 / b.n_seeds)


def noise_note(diff: float, se: float) -> str:
    if se == 0 or math.isnan(se):
        return ""
    return " (within noise)" if abs(diff) < 2 * se else f" ({abs(diff) / se:.1f} se)"


def claims(t3: pd.DataFrame) -> list[str]:
    """The claims of the paper's Section 5.1 that this table can check, one Markdown bullet each."""
    by = {r.paper: r for r in t3.itertuples() if isinstance(r.paper, str)}
    out = []
    topk = by.get("gbdt_topk")
    if topk is not None:
        for key, name in SELECTORS:
            if key not in by:
                continue
            r = by[key]
            diff, paper = r.auc - topk.auc, r.auc_paper - topk.auc_paper
            out.append(
                f"- Table 3: {name} has a higher test AUC than GBDT-topK (K = {topk.budget}): "
                f"ours {_pt(diff)}{noise_note(diff, _se(r, topk))}, paper {_pt(paper)}: {_holds(diff > 0)}."
            )
    if {"gbfs", "agbm", "gtgbm"} <= set(by):
        gt, others = by["gtgbm"], [by["gbfs"], by["agbm"]]
        ours = gt.n_features <= min(o.n_features for o in others)
        paper = gt.n_features_paper <= min(o.n_features_paper for o in others)
        out.append(
            f"- Table 3's caption: GT-GBM picks no more features than GBFS and A-GBM: ours "
            f"{gt.n_features:.1f} vs {others[0].n_features:.1f} / {others[1].n_features:.1f}; paper "
            f"{gt.n_features_paper:.0f} vs {others[0].n_features_paper:.0f} / "
            f"{others[1].n_features_paper:.0f} ({'holds' if paper else 'does not hold'} there): "
            f"{_holds(ours)}."
        )
        faster = [o.fit_seconds / gt.fit_seconds for o in others]
        out.append(
            f"- Figure 2: GT-GBM trains faster than GBFS and A-GBM: their fit time is "
            f"{faster[0]:.2f}× / {faster[1]:.2f}× GT-GBM's (paper: about 10× at Gisette, 100× at "
            f"Epsilon, less at Flight): {_holds(min(faster) > 1)}."
        )
    if "gtgbm" in by and topk is not None and not math.isnan(by["gtgbm"].corr_top):
        a, b = topk.corr_top, by["gtgbm"].corr_top
        out.append(
            f"- Figure 3: GT-GBM's first features are less correlated with each other than "
            f"GBDT-topK's: mean absolute pairwise correlation {b:.3f} vs {a:.3f} "
            f"(the paper shows it on Gisette, without a number): {_holds(b < a)}."
        )
    full = by.get("gbdt_full")
    sel = [by[k] for k, _ in SELECTORS if k in by]
    if full is not None and sel:
        best = max(sel, key=lambda r: r.auc)
        best_paper = max(r.auc_paper for r in sel)
        diff, paper = best.auc - full.auc, best_paper - full.auc_paper
        out.append(
            f"- Tables 3 and 6: the best selector ({best.method}) loses at most 0.5 pt of test AUC "
            f"against GBDT-Full on all features: ours {_pt(diff)}{noise_note(diff, _se(best, full))}, paper "
            f"{_pt(paper)}: {_holds(diff >= -0.5)}."
        )
    return out


def peers(t3: pd.DataFrame) -> list[str]:
    """Our extra rows (no paper number) against the best of the paper's methods on test AUC."""
    paper_rows = t3[t3.paper.apply(lambda p: isinstance(p, str))]
    if paper_rows.empty:
        return []
    best = paper_rows.loc[paper_rows.auc.idxmax()]
    out = []
    for r in t3[~t3.index.isin(paper_rows.index)].itertuples():
        diff = r.auc - best.auc
        out.append(
            f"- {r.method}: test AUC {r.auc:.2f} % with {r.n_features:.1f} features, "
            f"{_pt(diff)} against the best of the paper's rows ({best.method}, {best.auc:.2f} % with "
            f"{best.n_features:.1f} features)."
        )
    return out


def compute_seconds(client: MlflowClient, parent_id: str, dataset: str) -> float:
    """Wall seconds of the dataset's studies (trials and refit) and fits, from their MLflow runs."""
    runs = client.search_runs(
        [client.get_run(parent_id).info.experiment_id],
        max_results=5000,
        filter_string=(
            f"tags.reproduction = '{parent_id}' and tags.repro_dataset = '{dataset}' "
            "and attributes.status = 'FINISHED'"
        ),
    )
    return float(
        sum(
            (r.info.end_time - r.info.start_time) / 1000.0
            for r in runs
            if r.data.tags.get("role") in ("study", "evaluation") and r.info.end_time
        )
    )


def readme(
    t3: pd.DataFrame, dataset: str, head: str, seconds: float, seeds: Sequence[int] | np.ndarray
) -> str:
    """The dataset's ``README.md``: what matches the paper, what does not, by how much."""
    checked = claims(t3)
    n_hold = sum("**holds**" in c for c in checked)
    lines = [
        f"# Reproduction of the GT-GBM paper on {dataset}",
        "",
        head,
        "",
        f"Every method was tuned on the validation split of seed {seeds[0]} and fitted on each of the "
        f"{len(seeds)} seeds; the runs took {seconds:.0f} s of wall time in all (studies and fits). "
        f"`table3.md`, `table5.md`, `table6.md`, `figure2.png`, `figure3.png` are next to this file.",
        "",
        f"## The paper's claims: {n_hold} of {len(checked)} hold here",
        "",
        *checked,
    ]
    extra = peers(t3)
    if extra:
        lines += ["", "## Our peers (not in the paper)", "", *extra]
    if dataset.endswith("_like"):
        lines += [
            "",
            f"This is a synthetic stand-in of the paper's {dataset.removesuffix('_like')} (its columns, a "
            "known sparse signal, and the rows given above), so absolute numbers are not comparable with "
            "the paper's; the claims compare methods with each other, which is what the paper's claims "
            "are about. With few test rows the seeds' spread is large: read the ± and the noise marks.",
        ]
    return "\n".join(lines) + "\n"
