"""Claims of the papers about two methods, decided over paired seeds, and the GT-GBM paper's claims
about its Table 3 and Figures 2-3 checked on a reproduction's table.

**The rule.** Every seed fits both methods on the same split, so a claim is tested on the per-seed
differences ``d_s = a_s - b_s + allowance`` (``allowance``: the loss the claim tolerates, e.g.
"loses at most 0.5 pt").  With mean ``m`` and standard error ``se = sd(d) / sqrt(n)`` over the
``n`` common seeds the claim *holds* when ``m > 2 se``, *does not hold* when ``m < -2 se``
(significantly the other way), and is *within noise* otherwise -- including any claim resting on
one seed, which has no standard error.  A claim whose differences are all equal (``se = 0``, e.g.
identical models) holds or fails by the sign of ``m`` and is within noise at ``m = 0``.

**The GT-GBM claims** are computed from the numbers of :func:`runners.paper.tables.table3` (ours,
per seed) and the paper's own (``results/reference/``).  A claim about one number (Figure 3's
correlation, from the first seed's model) has no standard error and says so.  Nothing is
concluded that the numbers do not say.

**GBDT-topK against GBDT-Full** (:func:`topk_overlaps`, :func:`topk_sentence`): per seed, how many
of GBDT-Full's features GBDT-topK's K columns keep and how many its refit uses, read back from the
runs' artifacts; where the K columns keep them all, the two rows are the same model in effect.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
from mlflow.entities import Run
from mlflow.tracking import MlflowClient

from gbfs import load_model

HOLDS, NOISE, FAILS = "holds", "within noise", "does not hold"
#: standard errors a mean difference must exceed to decide a claim
Z = 2.0


@dataclass(frozen=True)
class Verdict:
    """The outcome of one claim: its word, the mean paired difference, its standard error, the seeds."""

    word: str
    diff: float
    se: float
    n: int

    @property
    def bold(self) -> str:
        return f"**{self.word}**"

    def note(self, fmt: str = "+.2f", unit: str = "") -> str:
        """``"+0.41 pt, 1.3 se over 5 paired seeds"``: the numbers the word was decided on."""
        if self.n == 0:
            return "no paired seed"
        diff = f"{self.diff:{fmt}}{unit}"
        if self.n < 2:
            return f"{diff}, one seed"
        if self.se == 0:
            return f"{diff}, the same on all {self.n} paired seeds"
        return f"{diff}, {self.diff / self.se:+.1f} se over {self.n} paired seeds"


def paired(a: Mapping[int, float], b: Mapping[int, float], allowance: float = 0.0) -> Verdict:
    """Decide the claim ``a - b > -allowance`` on the seeds both ``a`` and ``b`` have (seed -> value).

    ``diff`` reports the mean of ``a - b`` (the allowance is not added to it).
    """
    seeds = sorted(set(a) & set(b))
    d = [float(a[s]) - float(b[s]) for s in seeds if not (math.isnan(a[s]) or math.isnan(b[s]))]
    n = len(d)
    if n == 0:
        return Verdict(NOISE, math.nan, math.nan, 0)
    m = sum(d) / n
    if n < 2:
        return Verdict(NOISE, m, math.nan, 1)
    se = math.sqrt(sum((x - m) ** 2 for x in d) / (n - 1) / n)
    return decide(m, se, n, allowance)


def decide(diff: float, se: float, n: int, allowance: float = 0.0) -> Verdict:
    """The rule on a difference and its standard error (however estimated): *holds* when
    ``diff + allowance > Z se``, *does not hold* when below ``-Z se``, *within noise* otherwise."""
    shifted = diff + allowance
    if shifted > Z * se:
        word = HOLDS
    elif shifted < -Z * se:
        word = FAILS
    else:
        word = NOISE
    return Verdict(word, diff, se, n)


def tally(lines: list[str]) -> str:
    """``"2 hold, 1 within noise, 1 does not hold"`` over bullets that carry a bold verdict word."""
    counts = {w: sum(f"**{w}**" in line for line in lines) for w in (HOLDS, NOISE, FAILS)}
    return (f"{counts[HOLDS]} hold, {counts[NOISE]} within noise, {counts[FAILS]} "
            f"{'do' if counts[FAILS] != 1 else 'does'} not hold")


SELECTORS = (("gbfs", "GBFS"), ("agbm", "A-GBM"), ("gtgbm", "GT-GBM"))


def _pt(x: float) -> str:
    return "-" if x is None or math.isnan(x) else f"{x:+.2f} pt"


def claims(t3: pd.DataFrame, twins: Mapping[str, str] | None = None) -> list[str]:
    """The claims of the paper's Section 5.1 that this table can check, one Markdown bullet each.

    ``twins`` (row -> the row whose tuned parameters it fits, ``tuned_as``): Figure 2's claim is
    also checked on the twins of A-GBM and GT-GBM (the exact split search, the paper's cost model).
    """
    by = {r.paper: r for r in t3.itertuples() if isinstance(r.paper, str)}
    out = []
    topk = by.get("gbdt_topk")
    if topk is not None:
        for key, name in SELECTORS:
            if key not in by:
                continue
            r = by[key]
            v, paper = paired(r.auc_by_seed, topk.auc_by_seed), r.auc_paper - topk.auc_paper
            out.append(
                f"- Table 3: {name} has a higher test AUC than GBDT-topK (K = {topk.budget}): "
                f"ours {v.note(unit=' pt')}, paper {_pt(paper)}: {v.bold}."
            )
    if {"gbfs", "agbm", "gtgbm"} <= set(by):
        gt, others = by["gtgbm"], [(by["gbfs"], "GBFS"), (by["agbm"], "A-GBM")]
        for o, name in others:
            v = paired(o.n_features_by_seed, gt.n_features_by_seed)
            paper = gt.n_features_paper < o.n_features_paper
            out.append(
                f"- Table 3's caption: GT-GBM picks fewer features than {name}: ours {gt.n_features:.1f} vs "
                f"{o.n_features:.1f} ({name} - GT-GBM {v.note('+.1f')}); paper {gt.n_features_paper:.0f} vs "
                f"{o.n_features_paper:.0f} ({'fewer' if paper else 'not fewer'} there): {v.bold}."
            )
        for o, name in others:
            out.append(_faster(o, gt, f"{name}", "GT-GBM", ""))
    twin = _twins_of(t3, twins or {})
    if {"agbm", "gtgbm"} <= set(twin):
        o, gt = twin["agbm"], twin["gtgbm"]
        how = f", their twins at the same tuned parameters ({o.method} and {gt.method})"
        out.append(_faster(o, gt, "A-GBM", "GT-GBM", how))
    if "gtgbm" in by and topk is not None and not math.isnan(by["gtgbm"].corr_top):
        a, b = topk.corr_top, by["gtgbm"].corr_top
        out.append(
            f"- Figure 3: GT-GBM's first features are less correlated with each other than "
            f"GBDT-topK's: mean absolute pairwise correlation {b:.3f} vs {a:.3f} on the first seed's "
            f"models (one number each, no standard error; the paper shows it on Gisette, without a "
            f"number): {'lower' if b < a else 'not lower'}."
        )
    full = by.get("gbdt_full")
    sel = [by[k] for k, _ in SELECTORS if k in by]
    if full is not None and sel:
        best = max(sel, key=lambda r: r.auc)
        best_paper = max(r.auc_paper for r in sel)
        v, paper = paired(best.auc_by_seed, full.auc_by_seed, allowance=0.5), best_paper - full.auc_paper
        out.append(
            f"- Tables 3 and 6: the best selector ({best.method}) loses at most 0.5 pt of test AUC "
            f"against GBDT-Full on all features: ours {v.note(unit=' pt')}, paper {_pt(paper)}: {v.bold}."
        )
    return out


def _faster(o, gt, name: str, gt_name: str, how: str) -> str:
    """Figure 2's claim that ``gt`` fits faster than ``o`` (table rows), paired over seeds."""
    v = paired(o.fit_seconds_by_seed, gt.fit_seconds_by_seed)
    return (f"- Figure 2{how}: {gt_name} trains faster than {name}: {name}'s fit takes "
            f"{o.fit_seconds / gt.fit_seconds:.2f}× {gt_name}'s ({v.note('+.2f', ' s')}; paper: about 10× at "
            f"Gisette, 100× at Epsilon, less at Flight): {v.bold}.")


def _twins_of(t3: pd.DataFrame, twins: Mapping[str, str]) -> dict:
    """The paper's row key (``agbm``, ...) -> the table row of its twin (``tuned_as`` it)."""
    by_row = {r.row: r for r in t3.itertuples()}
    return {by_row[src].paper: by_row[name] for name, src in twins.items()
            if name in by_row and src in by_row and isinstance(by_row[src].paper, str)}


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
    t3: pd.DataFrame, dataset: str, head: str, seconds: float, seeds: Sequence[int] | np.ndarray,
    twins: Mapping[str, str] | None = None, topk_check: str | None = None,
) -> str:
    """The dataset's ``README.md``: what matches the paper, what does not, by how much (``twins``:
    as :func:`claims`); with ``topk_check`` (:func:`topk_sentence`), whether
    GBDT-topK is another model than GBDT-Full."""
    checked = claims(t3, twins)
    lines = [
        f"# Reproduction of the GT-GBM paper on {dataset}",
        "",
        head,
        "",
        f"Every method was tuned on the validation split of seed {seeds[0]} (a twin takes the tuned "
        f"parameters of its row) and fitted on each of the {len(seeds)} seeds; the runs took "
        f"{seconds:.0f} s of wall time in all (studies and fits). "
        f"`table3.md`, `table5.md`, `table6.md`, `figure2.png`, `figure3.png` are next to this file.",
        "",
        f"## The paper's claims: {tally(checked)} here",
        "",
        "A claim holds when its mean difference over the paired seeds exceeds two standard errors, does "
        "not hold when it exceeds them the other way, and is within noise otherwise.",
        "",
        *checked,
    ]
    if topk_check:
        lines += ["", "## GBDT-topK against GBDT-Full", "", topk_check]
    extra = peers(t3)
    if extra:
        lines += ["", "## Our peers (not in the paper)", "", *extra]
    if dataset.endswith("_like"):
        lines += [
            "",
            f"This is a synthetic stand-in of the paper's {dataset.removesuffix('_like')} (its columns, a "
            "known sparse signal, and the rows given above), so absolute numbers are not comparable with "
            "the paper's; the claims compare methods with each other, which is what the paper's claims "
            "are about.",
        ]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ GBDT-topK against GBDT-Full
# GBDT-topK refits on the K features its ranking fit ranked first; when those K columns hold every
# feature GBDT-Full uses, the refit can build GBDT-Full's trees again, and the paper's comparison (a
# smaller model on the features an importance ranking keeps) does not show.


@dataclass(frozen=True)
class Overlap:
    """One seed: GBDT-Full uses ``full`` features; GBDT-topK kept ``k`` columns (its K), ``kept`` of
    them used by GBDT-Full; its refit uses ``used`` features, ``shared`` of them used by GBDT-Full."""

    seed: int
    full: int
    k: int
    kept: int
    used: int
    shared: int

    @property
    def differs(self) -> bool:
        """GBDT-topK's columns leave out some of GBDT-Full's features (so it cannot be GBDT-Full)."""
        return self.kept < self.full


def selected_features(run_id: str) -> list[int]:
    """The features a run's model uses, in order of first use (its ``selected_features.json``)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path="selected_features.json",
                                                   dst_path=tmp)
        return [int(f["index"]) for f in json.loads(Path(path).read_text())["features"]]


def topk_columns(run_id: str) -> list[int] | None:
    """The columns a LightGBM GBDT-topK run refitted on, in order of importance (its model file's
    ``columns_``); None for a run without such a model file."""
    if "model.json" not in {a.path for a in MlflowClient().list_artifacts(run_id)}:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        model = load_model(mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path="model.json",
                                                               dst_path=tmp))
        return [int(j) for j in model.columns_] if getattr(model, "kind", None) == "topk" else None


def topk_overlaps(runs: Mapping[str, Run], rows: Sequence, seeds: Sequence[int]) -> list[Overlap]:
    """Per seed, GBDT-Full's features against GBDT-topK's (the first rows whose ``paper`` is
    ``gbdt_full`` and ``gbdt_topk``); empty when the table lacks either row or its model file."""
    full = next((r.name for r in rows if r.paper == "gbdt_full"), None)
    topk = next((r.name for r in rows if r.paper == "gbdt_topk"), None)
    if full is None or topk is None:
        return []
    out = []
    for seed in seeds:
        f_run, t_run = runs[f"{full}/{seed}"].info.run_id, runs[f"{topk}/{seed}"].info.run_id
        kept = topk_columns(t_run)
        if kept is None:   # a store without model files: nothing to compare
            return []
        f, kept, used = set(selected_features(f_run)), set(kept), set(selected_features(t_run))
        out.append(Overlap(int(seed), len(f), len(kept), len(f & kept), len(used), len(f & used)))
    return out


def topk_sentence(found: Sequence[Overlap]) -> str:
    """The README's line: how many of GBDT-Full's features GBDT-topK keeps, seed by seed."""
    seeds = "; ".join(
        f"seed {o.seed}: GBDT-topK (K={o.k}) keeps {o.kept} of GBDT-Full's {o.full} features, its refit "
        f"uses {o.used}, {o.shared} of them GBDT-Full's" for o in found)
    n = sum(o.differs for o in found)
    verdict = (f"GBDT-topK leaves out some of GBDT-Full's features on {n} of {len(found)} seeds"
               + ("" if n == len(found) else
                  "; where it keeps them all, its K columns hold every feature GBDT-Full uses and the "
                  "two rows are the same model in effect"))
    return f"- GBDT-topK against GBDT-Full (features each model uses): {seeds}. {verdict}."
