"""The MVS paper's Tables 2-4 from a row-sampling comparison, next to the paper's numbers.

Ibragimov & Gusev, "Minimal Variance Sampling in Stochastic Gradient Boosting" (NeurIPS 2019),
Section 5: SGB, GOSS, MVS, MVS Adaptive in LightGBM on seven binary datasets.  :func:`compute` runs
:func:`runners.paper.mvs.comparison.run`; :func:`tables` sets its table out as the paper's Table 2 (tuned
sampling vs none), Table 3 (error by sample rate) and Table 4 (learning time at the smallest rate
without quality loss) next to ``results/reference/mvs_table{2,3,4}.csv``; :func:`write` writes them.

The paper's numbers, read from its text extraction:

* Table 3: four rows of ten rates, unambiguous.
* Table 2: the baselines follow Table 1's dataset order (KDD Internet 0.0408, Adult 0.0688, Amazon
  0.1517, KDD Upselling 0.1345, Kick 0.2265, KDD Churn 0.2532, Click 0.2655), each followed by its
  SGB, GOSS, MVS, MVS Adaptive values (Adult's and Amazon's share lines, read left to right).  Click's
  and the Average's cells are interleaved, nine values for eight cells.  As the mean of seven columns
  (within rounding) the Average can only be SGB -0.22%, GOSS -0.28%, MVS -0.74%, MVS Adaptive -0.70%,
  but several Click columns fit: both are left out; Table 2's "paper" mean is over the six datasets.
* Table 4: the values read -20.7%, -20.4%, -27.7%, the header "GOSS", "SGB", "MVS".  MVS's -27.7% is
  sure (the text: MVS saves the most time); SGB -20.7% and GOSS -20.4% follow the SGB, GOSS, MVS order
  of Tables 2 and 3 and may be swapped (0.3 points).  Table 4 has no MVS Adaptive.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path

import numpy as np
import pandas as pd

from runners.paper.mvs import report as sampling_report
from runners.paper.mvs.comparison import Booster, describe, load, run
from runners.paper.mvs.report import BASELINE, LABELS, LIGHTGBM, OURS, library, mvs_verdict
from runners.tracking import runs as tracking

REFERENCE_DIR = Path(__file__).resolve().parents[3] / "results" / "reference"
#: the paper's row each strategy is set against (the paper's SGB and GOSS ran in LightGBM)
PAPER_ROW = {"sgb": "sgb", "goss": "goss", "mvs": "mvs", "mvs_adaptive": "mvs_adaptive",
             "lgb_bagging": "sgb", "lgb_goss": "goss"}
NOTE_TABLE2 = ("The paper's Click and Average columns are left out: they are interleaved in the text copy "
               "the numbers were read from (see runners/paper/mvs/tables.py).")
NOTE_TABLE4 = ("The paper's SGB and GOSS values (-20.7%, -20.4%) may be swapped: the text copy gives the "
               "header as GOSS, SGB, MVS; they are stored in the SGB, GOSS, MVS order of Tables 2 and 3.")


def reference(name: str) -> pd.DataFrame:
    """The paper's numbers: ``results/reference/<name>.csv``, ``name`` one of ``mvs_table2``,
    ``mvs_table3``, ``mvs_table4``."""
    return pd.read_csv(REFERENCE_DIR / f"{name}.csv")


def compute(settings: Mapping, progress: bool = True) -> tuple[pd.DataFrame, dict]:
    """Run the comparison of :func:`runners.paper.mvs.comparison.run` on one dataset.

    Parameters
    ----------
    settings : Mapping
        ``dataset`` (a :func:`gbfs.data.load_dataset` name), ``scale``, ``feature_scale``, ``rates``
        (1.0 is the baseline), ``seeds`` (a count), ``trees``; optional ``strategies`` (default
        ours and LightGBM's), ``data_seed`` (0) and any other
        :class:`runners.paper.mvs.comparison.Booster` field.
    progress : bool
        A tqdm bar over the fits.

    Returns
    -------
    (pandas.DataFrame, dict)
        The table of :func:`runners.paper.mvs.comparison.run` and its meta
        (:func:`runners.paper.mvs.comparison.describe`).
    """
    booster = Booster(**{f.name: settings[f.name] for f in fields(Booster) if f.name in settings})
    ds = load(settings["dataset"], settings["scale"], settings["feature_scale"], settings.get("data_seed", 0))
    t0 = time.perf_counter()
    df = run(ds, booster, [float(r) for r in settings["rates"]], list(range(int(settings["seeds"]))),
             list(settings.get("strategies") or OURS + LIGHTGBM), progress=progress)
    return df, describe(ds, booster, settings, time.perf_counter() - t0)


def _strategies(df: pd.DataFrame) -> list[str]:
    return [s for s in (*OURS, *LIGHTGBM) if s in set(df.strategy)]


def chosen(df: pd.DataFrame) -> pd.DataFrame:
    """Table 2's tuning: per strategy the rate below 1 with the best ``tuned_val_auc`` (ties: the
    larger rate), indexed by strategy."""
    sampled = df[(df.rate < 1.0) & df.strategy.isin(PAPER_ROW)]
    best = sampled.sort_values(["tuned_val_auc", "rate"], ascending=False).drop_duplicates("strategy")
    return best.set_index("strategy").loc[_strategies(sampled)]


def no_loss(df: pd.DataFrame) -> pd.DataFrame:
    """Table 4's rule: per strategy the smallest rate below 1 whose mean relative error change is
    <= 0 (``rule`` "no loss"), else the rate of the lowest one ("lowest error"), indexed by strategy."""
    rows = {}
    for s in _strategies(df):
        sub = df[(df.strategy == s) & (df.rate < 1.0)].sort_values("rate")
        ok = sub[sub.rel_error <= 0]
        row = ok.iloc[0] if len(ok) else sub.loc[sub.rel_error.idxmin()]
        rows[s] = {**row.to_dict(), "rule": "no loss" if len(ok) else "lowest error"}
    return pd.DataFrame.from_dict(rows, orient="index")


def _pct(x: float | None, sd: float | None = None) -> str:
    return "" if x is None or pd.isna(x) else f"{x:+.2f}%" + ("" if sd is None else f" ± {sd:.2f}")


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(r) + " |" for r in [head, ["---"] * len(head), *rows]]


def _scope(meta: dict) -> str:
    return (f"Ours: {meta['dataset']} ({meta['n_train']} train / {meta['n_val']} validation / "
            f"{meta['n_test']} test rows x {meta['n_features']} features), {meta['booster']}, "
            f"{meta['seeds']} seeds, one validation split.  Paper: seven datasets, LightGBM, 10 seeds, "
            "5-fold cross-validation; its SGB and GOSS stand also next to LightGBM's bagging and GOSS.")


def _table2(df: pd.DataFrame, meta: dict) -> list[str]:
    ref = reference("mvs_table2")
    datasets = list(dict.fromkeys(ref.dataset))
    paper = ref.pivot(index="strategy", columns="dataset", values="rel_error_pct")[datasets]
    mean = paper.mean(axis=1)
    rows = []
    for s, r in chosen(df).iterrows():
        p, ours = PAPER_ROW[s], 100 * r.rel_error
        rows.append([LABELS[s], f"{r.rate:g}", f"{r.tuned_val_auc:.4f}", _pct(ours, 100 * r.rel_error_sd),
                     *(_pct(v) for v in paper.loc[p]), _pct(mean[p]), f"{ours - mean[p]:+.2f}"])
    out = ["# Tuned sampling vs no sampling (MVS paper, Table 2)", "", _scope(meta), "",
           "Rate: the best validation AUC among the rates below 1 (ties: the larger rate).  Relative error "
           "change: mean 1 - test AUC / the baseline's - 1, ± sd over the seeds.", ""]
    out += _table(["strategy", "rate", "validation AUC", "ours", *(f"paper: {d}" for d in datasets),
                   f"paper: mean of these {len(datasets)}", "ours − paper mean (points)"], rows)
    base = [[f"ours: {LABELS[r.strategy]}", f"{r.error_mean:.4f} ± {r.error_sd:.4f}"]
            for r in df[df.strategy.isin(BASELINE.values())].itertuples()]
    base += [[f"paper: {r.dataset}", f"{r.baseline_error:.4f}"]
             for r in ref.drop_duplicates("dataset").itertuples()]
    return [*out, "", "## Baseline 1 - AUC (no sampling)", "", *_table(["", "1 - AUC"], base), "",
            NOTE_TABLE2]


def _paper3() -> pd.DataFrame:      # the paper's Table 3 with rel_error as a fraction, like ours
    t3 = reference("mvs_table3")
    return t3.assign(rel_error=t3.rel_error_pct / 100)


def _by_cell(df: pd.DataFrame) -> dict[tuple[str, float], float]:    # % by (strategy, rate) below 1
    return {(s, round(r, 6)): 100 * e for s, r, e in zip(df.strategy, df.rate, df.rel_error) if r < 1}


def _table3(df: pd.DataFrame, meta: dict) -> list[str]:
    paper, rows = _by_cell(_paper3()), []
    cells = {(r.strategy, round(r.rate, 6)): r for r in df.itertuples()}
    for s, rate in ((s, round(r, 6)) for s in _strategies(df) for r in sorted(df.rate.unique())):
        r = cells.get((BASELINE[library(s)], rate) if rate >= 1 else (s, rate))  # at 1: the baseline
        if r is not None:
            p, ours = paper.get((PAPER_ROW[s], rate)), 100 * r.rel_error
            rows.append([LABELS[s], f"{rate:g}", _pct(ours, 100 * r.rel_error_sd), _pct(p),
                         "" if p is None else f"{ours - p:+.2f}"])
    return ["# Relative error change by sample rate (MVS paper, Table 3)", "", _scope(meta), "",
            "Ours: mean ± sd over the seeds; paper: average over its datasets (blank: a rate it does not "
            "report).  At rate 1 every strategy is its library's baseline.", "",
            *_table(["strategy", "rate", "ours", "paper", "ours − paper (points)"], rows)]


def _table4(df: pd.DataFrame, meta: dict) -> list[str]:
    paper = reference("mvs_table4").set_index("strategy").rel_time_pct
    rows = []
    for s, r in no_loss(df).iterrows():
        ours, p = 100 * (r.rel_time - 1), paper.get(PAPER_ROW[s])
        rows.append([LABELS[s], f"{r.rate:g}", r.rule, _pct(100 * r.rel_error), _pct(ours),
                     _pct(100 * (r.rel_boost_time - 1)), _pct(p), "" if p is None else f"{ours - p:+.2f}"])
    return ["# Relative learning time change (MVS paper, Table 4)", "", _scope(meta), "",
            "Rate: the smallest rate whose mean relative error change is <= 0 (no quality loss), else the "
            "rate of the lowest error.  Time: mean fit seconds / the baseline's - 1 (boosting only: without "
            "binning).", "",
            *_table(["strategy", "rate", "rule", "relative error change", "time change, ours",
                     "boosting only", "paper", "ours − paper (points)"], rows), "", NOTE_TABLE4]


def _mvs_below(pct: Mapping[tuple[str, float], float], rates) -> list[float]:
    """The rates at which MVS's value is below both SGB's and GOSS's."""
    return [r for r in rates if pct[("mvs", r)] < min(pct[("sgb", r)], pct[("goss", r)])]


def _largest_gap(pct: Mapping[tuple[str, float], float], rates) -> tuple[float, float]:
    """MVS Adaptive's value minus MVS's where they differ most, and that rate."""
    return max(((pct[("mvs_adaptive", r)] - pct[("mvs", r)], r) for r in rates), key=lambda x: abs(x[0]))


def _met(ours: bool, paper: bool) -> str:
    return ("MET" if ours else "NOT MET") + "; paper: " + ("holds" if paper else "does not hold")


def _listed(values: Mapping[str, float], fmt: str = "{:+.2f}%") -> str:
    return ", ".join(f"{LABELS[s]} {'none' if np.isinf(v) else fmt.format(v)}" for s, v in values.items())


def _summary(df: pd.DataFrame) -> list[str]:
    """The paper's claims of Tables 2-4, each checked on ours and on the paper's numbers."""
    ours, paper, three = _by_cell(df), _by_cell(_paper3()), ["sgb", "goss", "mvs"]
    prates = sorted({r for _, r in paper})
    low = [r for r in prates if r <= sampling_report.TARGET_RATES + 1e-12]
    _, lines = mvs_verdict(df)
    ok = _mvs_below(paper, low)
    out = [f"- {lines[0]}; paper, at its rates {', '.join(f'{r:g}' for r in low)}: "
           f"{'holds' if ok == low else 'does not hold'} ({len(ok)} of {len(low)})",
           *(f"  {x.strip()}" for x in lines[1:])]
    rates = {s: sorted(r for t, r in ours if t == s) for s in _strategies(df)}
    both = sorted(set.intersection(*(set(rates.get(s, ())) for s in three)))
    if both:
        mine, theirs = _mvs_below(ours, both), _mvs_below(paper, prates)
        out.append(f"- MVS below SGB and GOSS at every rate below 1: {_met(mine == both, theirs == prates)} "
                   f"(ours at {len(mine)} of {len(both)}, paper at {len(theirs)} of {len(prates)})")
    pair = sorted(set(rates.get("mvs", ())) & set(rates.get("mvs_adaptive", ())))
    if pair:
        (d, r), (pd_, pr) = _largest_gap(ours, pair), _largest_gap(paper, prates)
        out.append(f"- MVS Adaptive − MVS where they differ most: ours {d:+.2f} points at rate {r:g}; "
                   f"paper {pd_:+.2f} at rate {pr:g}")
    diffs = {s: np.mean(d) for s, rs in rates.items()
             if (d := [ours[(s, r)] - paper[(PAPER_ROW[s], r)] for r in rs if (PAPER_ROW[s], r) in paper])}
    if diffs:
        out.append("- Ours − the paper's Table 3, mean over the rates both have (points): "
                   + _listed(diffs, "{:+.2f}"))
    pick, t2 = chosen(df), reference("mvs_table2")
    mean = t2.groupby("strategy").rel_error_pct.mean()
    mine, theirs = no_loss(df), no_loss(_paper3())
    if not set(three) <= set(mine.index):
        return out
    out.append("- MVS has the lowest tuned relative error of SGB, GOSS and MVS (Table 2): "
               f"{_met(pick.rel_error[three].idxmin() == 'mvs', mean[three].idxmin() == 'mvs')} (ours: "
               f"{_listed({s: 100 * pick.rel_error[s] for s in three})}; paper, mean of its "
               f"{t2.dataset.nunique()} datasets here: {_listed(mean[three])})")
    reach = [{s: r.rate if r.rule == "no loss" else np.inf for s, r in t.iterrows()} for t in (mine, theirs)]
    first = [v["mvs"] < np.inf and v["mvs"] <= min(v["sgb"], v["goss"]) for v in reach]
    out.append("- MVS reaches no quality loss at a rate no larger than SGB's and GOSS's (Table 4's rule): "
               f"{_met(*first)} (the smallest rate with relative error change <= 0; ours: "
               f"{_listed(reach[0], '{:g}')}; paper's Table 3: {_listed(reach[1], '{:g}')})")
    times = pd.Series({s: 100 * (mine.rel_time[s] - 1) for s in three})
    ptimes = reference("mvs_table4").set_index("strategy").rel_time_pct[three]
    out.append("- MVS saves the most learning time of SGB, GOSS and MVS (Table 4): "
               f"{_met(times.idxmin() == 'mvs', ptimes.idxmin() == 'mvs')} "
               f"(ours: {_listed(times, '{:+.1f}%')}; paper: {_listed(ptimes, '{:+.1f}%')})")
    return out


def tables(df: pd.DataFrame, meta: dict) -> dict[str, str]:
    """The paper's Tables 2-4 from ``df`` (columns :data:`runners.paper.mvs.comparison.CSV_COLUMNS`)
    next to the paper's numbers, and a summary of what matches.

    Returns
    -------
    dict of str to str
        Markdown texts keyed ``table2.md``, ``table3.md``, ``table4.md`` and ``README.md``.
    """
    readme = ["# The MVS paper's Section 5 (Tables 2-4), reproduced", "", _scope(meta), "",
              "What holds in ours and in the paper, computed from the tables beside this file:", "",
              *_summary(df), "", NOTE_TABLE2, NOTE_TABLE4]
    texts = {"table2.md": _table2(df, meta), "table3.md": _table3(df, meta), "table4.md": _table4(df, meta),
             "README.md": readme}
    return {name: "\n".join(lines) + "\n" for name, lines in texts.items()}


def write(df: pd.DataFrame, meta: dict, out_dir: Path) -> list[Path]:
    """Write ``sampling.csv``, ``.md``, ``.png`` (:func:`runners.paper.mvs.report.write`) and the four
    Markdown files of :func:`tables` into ``out_dir``; return every path."""
    out_dir = Path(out_dir)
    paths = sampling_report.write(df, out_dir, meta)
    made_by = tracking.made_by("runners.reproduce")
    for name, text in tables(df, meta).items():
        title, _, rest = text.partition("\n\n")  # the provenance line under each file's title
        (out_dir / name).write_text(f"{title}\n\n{made_by}\n\n{rest}")
        paths.append(out_dir / name)
    return paths
