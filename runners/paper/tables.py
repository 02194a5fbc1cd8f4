"""The GT-GBM paper's Tables 3, 5, 6 and Figures 2, 3 from a reproduction's MLflow runs.

Everything here reads runs back (metrics, params, metric histories, artifacts); nothing is
recomputed from a model in memory.  Numbers are next to the paper's (``results/reference/``):

* ``table3.md`` / ``table3.csv`` -- number of features, test RMSE of the probabilities and test AUC
  (in %, as the paper) per method, mean ± sd over the seeds, the paper's value and the difference;
  the mean absolute pairwise correlation of each method's first features (Figure 3's number); the
  fit seconds; the MLflow run of every seed;
* ``runs.csv`` -- every row's run at every seed: its metrics and its ``method.params.*`` as logged
  (tuned values unrounded), so that any cell of Table 3 can be refitted and compared;
* ``table5.md`` -- the tuned mu, shrinkage and alpha against the paper's Appendix C;
* ``table6.md`` -- GBDT-Full (Appendix D);
* ``figure2.png``, ``figure3.png`` (:mod:`runners.tracking.figures`) and ``README.md`` with the paper's
  claims checked one by one (:mod:`runners.paper.claims`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from mlflow.entities import Run
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig

from runners.core import experiment
from runners.paper import claims as paper_claims
from runners.tracking import figures
from runners.tracking import runs as tracking

log = logging.getLogger(__name__)
REFERENCE = Path(__file__).resolve().parents[2] / "results" / "reference"
#: the metrics of a row's final runs read back for the tables
METRICS = ("n_selected_features", "test_rmse", "test_auc", "val_auc", "fit_seconds")
#: Figure 2's curves (the paper's panels: tree-root variance, RMSE, AUC) against elapsed seconds
CURVES = ("root_variance", "val_rmse", "val_auc")
#: results/reference/table5_hyperparameters.csv names LightGBM's rows "gbdt"
TABLE5_ROW = {"gbdt_full": "gbdt", "gbdt_topk": "gbdt"}
#: Table 5's columns: (header, our parameter, the paper's column)
TABLE5 = (
    ("mu", "mu", "mu"),
    ("shrinkage", "learning_rate", "shrinkage"),
    ("alpha", "min_node_fraction", "alpha"),
)
#: further tuned parameters shown in Table 5 when a row has them
OTHER_TUNED = ("n_target_features", "num_leaves", "min_child_samples")


def reference(name: str) -> pd.DataFrame:
    """A table of the paper, ``results/reference/<name>.csv``."""
    return pd.read_csv(REFERENCE / f"{name}.csv")


def paper_dataset(dataset: str) -> str:
    """The paper's dataset a stand-in stands for (``gisette_like`` -> ``gisette``)."""
    return dataset.removesuffix("_like")


def collect(
    runs: Mapping[str, Run], rows: Sequence, seeds: Sequence[int], metrics: Sequence[str] = METRICS
) -> pd.DataFrame:
    """One record per row and seed from the final runs ``runs["<row>/<seed>"]``: the run id, the
    ``metrics`` (:data:`METRICS`; NaN where a run lacks one), the budget tag and every
    ``method.params.*`` param."""
    records = []
    for row in rows:
        for seed in seeds:
            r = runs[f"{row.name}/{seed}"]
            rec = {
                "row": row.name,
                "label": row.label,
                "paper": row.paper,
                "seed": int(seed),
                "run_id": r.info.run_id,
                "budget": r.data.tags.get("budget"),
            }
            rec.update({m: r.data.metrics.get(m, math.nan) for m in metrics})
            rec.update(
                {
                    k.removeprefix("method.params."): v
                    for k, v in r.data.params.items()
                    if k.startswith("method.params.")
                }
            )
            records.append(rec)
    return pd.DataFrame(records)


def is_given(value) -> bool:
    """Whether a tag or param holds a value (not missing, NaN, or a logged ``None``)."""
    return not (value is None or value in ("", "None") or (isinstance(value, float) and math.isnan(value)))


def sample_sd(x: pd.Series) -> float:
    return float(x.std(ddof=1)) if len(x) > 1 else 0.0


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    """Per row (in order): mean and sd over the seeds of the features, RMSE, AUC (in %) and fit
    seconds; each seed's features, AUC and fit seconds (``*_by_seed``: seed -> value, for the
    paired claims of :mod:`runners.paper.claims`); the seeds' run ids."""
    out = []
    for row, g in frame.groupby("row", sort=False):
        auc = 100.0 * g.test_auc
        out.append(
            {
                "row": row,
                "label": g.label.iloc[0],
                "paper": g.paper.iloc[0],
                "n_seeds": len(g),
                "n_features": g.n_selected_features.mean(),
                "n_features_sd": sample_sd(g.n_selected_features),
                "rmse": g.test_rmse.mean(),
                "rmse_sd": sample_sd(g.test_rmse),
                "auc": auc.mean(),
                "auc_sd": sample_sd(auc),
                "fit_seconds": g.fit_seconds.mean(),
                **{f"{k}_by_seed": {int(s): float(x) for s, x in zip(g.seed, v)}
                   for k, v in (("auc", auc), ("n_features", g.n_selected_features),
                                ("fit_seconds", g.fit_seconds))},
                "budget": ",".join(sorted({str(b) for b in g.budget if is_given(b)}, key=float)) or None,
                "run_ids": " ".join(g.run_id),
            }
        )
    return pd.DataFrame(out)


def table3(summary: pd.DataFrame, dataset: str, correlations: Mapping[str, float]) -> pd.DataFrame:
    """Table 3 next to the paper's: ours (mean, sd), the paper's value and ours - paper for the
    number of features, RMSE and AUC (%); ``corr_top`` from ``correlations`` (by row)."""
    ref = reference("table3")
    ref = ref[ref.dataset == paper_dataset(dataset)].set_index("method")
    full = reference("table6_gbdt_full")
    full = full[full.dataset == paper_dataset(dataset)].set_index("method")
    rows = []
    for s in summary.itertuples():
        paper = {"n_features": math.nan, "rmse": math.nan, "auc": math.nan}
        if s.paper in ref.index:
            p = ref.loc[s.paper]
            paper = {"n_features": float(p.n_features), "rmse": float(p.rmse), "auc": float(p.auc_roc)}
        elif s.paper in full.index:  # Table 6 gives GBDT-Full's AUC only
            paper["auc"] = float(full.loc[s.paper].auc_roc)
        rec = {"method": s.label, "row": s.row, "paper": s.paper, "n_seeds": s.n_seeds, "budget": s.budget}
        for key in ("n_features", "rmse", "auc"):
            rec.update(
                {
                    key: getattr(s, key),
                    f"{key}_sd": getattr(s, f"{key}_sd"),
                    f"{key}_paper": paper[key],
                    f"{key}_delta": getattr(s, key) - paper[key],
                }
            )
        rec.update(corr_top=correlations.get(s.row, math.nan), fit_seconds=s.fit_seconds, run_ids=s.run_ids,
                   **{k: getattr(s, k) for k in ("auc_by_seed", "n_features_by_seed", "fit_seconds_by_seed")})
        rows.append(rec)
    return pd.DataFrame(rows)


def fmt_num(x: float, fmt: str) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def cite_runs(run_ids: str) -> str:
    """MLflow run ids as a table cell: the first 8 characters of each (``table3.csv`` has them whole)."""
    return ", ".join(f"`{i[:8]}`" for i in run_ids.split())


def mean_sd(m: float, sd: float, fmt: str, n: int) -> str:
    return fmt_num(m, fmt) + ("" if n < 2 else f" ± {fmt_num(sd, fmt)}")


def table3_markdown(t3: pd.DataFrame, dataset: str, n_features_corr: int) -> str:
    lines = [
        f"| method | # feats | paper | Δ | RMSE | paper | Δ | AUC (%) | paper | Δ | "
        f"mean abs r, first {n_features_corr} | fit s | MLflow runs |",
        "|---" * 13 + "|",
    ]
    for r in t3.itertuples():
        lines.append(
            f"| {r.method}{f' (K={r.budget})' if is_given(r.budget) else ''} | "
            f"{mean_sd(r.n_features, r.n_features_sd, '.1f', r.n_seeds)} | "
            f"{fmt_num(r.n_features_paper, '.0f')} | "
            f"{fmt_num(r.n_features_delta, '+.1f')} | {mean_sd(r.rmse, r.rmse_sd, '.3f', r.n_seeds)} | "
            f"{fmt_num(r.rmse_paper, '.3f')} | {fmt_num(r.rmse_delta, '+.3f')} | "
            f"{mean_sd(r.auc, r.auc_sd, '.2f', r.n_seeds)} | {fmt_num(r.auc_paper, '.2f')} | "
            f"{fmt_num(r.auc_delta, '+.2f')} | {fmt_num(r.corr_top, '.3f')} | "
            f"{fmt_num(r.fit_seconds, '.1f')} | {cite_runs(r.run_ids)} |"
        )
    return "\n".join(lines)


def table5_markdown(frame: pd.DataFrame, dataset: str, seed: int) -> str:
    """Table 5: the parameters the first seed's study chose, next to the paper's Appendix C."""
    ref = reference("table5_hyperparameters")
    ref = ref[ref.dataset == paper_dataset(dataset)].set_index("method")
    lines = [
        "| method | mu | paper | shrinkage | paper | alpha | paper | other tuned | MLflow run |",
        "|---" * 9 + "|",
    ]
    for r in frame[frame.seed == seed].itertuples():
        key = TABLE5_ROW.get(r.row, r.paper)
        paper = ref.loc[key] if key in ref.index else None
        cells = []
        for _, ours, theirs in TABLE5:
            value = getattr(r, ours, None)
            cells += [
                fmt_num(float(value), ".3g") if value not in (None, "None") and not _nan(value) else "-",
                "-" if paper is None or pd.isna(paper[theirs]) else f"{paper[theirs]:g}",
            ]
        other = ", ".join(
            f"{k}={getattr(r, k)}" for k in OTHER_TUNED if k in frame.columns and not _nan(getattr(r, k))
        )
        lines.append(f"| {r.label} | " + " | ".join(cells) + f" | {other or '-'} | `{r.run_id[:8]}` |")
    return "\n".join(lines)


def _nan(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def table6_markdown(t3: pd.DataFrame, frame: pd.DataFrame, dataset: str, seed: int) -> str:
    """Table 6: GBDT-Full's tuned shrinkage and test AUC against the paper's Appendix D."""
    ref = reference("table6_gbdt_full")
    ref = ref[ref.dataset == paper_dataset(dataset)].set_index("method")
    head = "| method | shrinkage | paper | alpha (paper) | AUC (%) | paper | Δ | MLflow runs |"
    lines = [head, "|---" * 8 + "|"]
    for r in t3[t3.row.isin(frame[frame.paper == "gbdt_full"].row)].itertuples():
        lr = frame[(frame.row == r.row) & (frame.seed == seed)].learning_rate.iloc[0]
        p = ref.loc["gbdt_full"] if "gbdt_full" in ref.index else None
        lines.append(
            f"| {r.method} | {float(lr):.3g} | {'-' if p is None else f'{p.shrinkage:g}'} | "
            f"{'-' if p is None else f'{p.alpha:g}'} | {mean_sd(r.auc, r.auc_sd, '.2f', r.n_seeds)} | "
            f"{fmt_num(r.auc_paper, '.2f')} | {fmt_num(r.auc_delta, '+.2f')} | {cite_runs(r.run_ids)} |"
        )
    return "\n".join(lines)


# ------------------------------------------------------------------- read back from MLflow


def curves(client: MlflowClient, run_id: str) -> dict[str, list[tuple[float, float]]]:
    """Figure 2's curves of one run: each of :data:`CURVES` against ``elapsed_seconds`` by
    iteration (the final model's metrics, logged one step after the last iteration, have no time
    and are left out)."""
    elapsed = {m.step: m.value for m in client.get_metric_history(run_id, "elapsed_seconds")}
    out = {}
    for key in CURVES:
        points = sorted(
            (elapsed[m.step], m.value) for m in client.get_metric_history(run_id, key) if m.step in elapsed
        )
        if points:
            out[key] = points
    return out


def first_features(run_id: str, n: int) -> list[int]:
    """A run's first ``n`` features: LightGBM GBDT-topK's ranking (its model file's columns, in
    order of importance), else the selected features in order of first use."""
    columns = paper_claims.topk_columns(run_id)
    return (paper_claims.selected_features(run_id) if columns is None else columns)[:n]


@dataclass(frozen=True)
class DatasetRuns:
    """One dataset of a reproduction, as its writer reads it (:data:`runners.paper.reproduction.run.WRITERS`:
    :func:`write_dataset`, :func:`runners.paper.reproduction.ranking.write_dataset`): the store and the
    parent run, the dataset's name, rows, runs (``"<row>/<seed>"``), seeds, unit config and the
    reproduction's settings, and the folder its tables go to."""

    client: MlflowClient
    parent_id: str
    dataset: str
    rows: Sequence
    runs: Mapping[str, Run]
    seeds: Sequence[int]
    data_cfg: DictConfig
    settings: DictConfig
    folder: Path


def write_runs(frame: pd.DataFrame, folder: Path) -> Path:
    """``folder/runs.csv``: :func:`collect`'s records, metrics at six significant digits as in
    ``table3.csv``, parameters as MLflow logged them (strings: a tuned float keeps every digit, so a
    refit at them is the run again)."""
    path = folder / "runs.csv"
    frame.to_csv(path, index=False, float_format="%.6g")
    return path


def write_dataset(d: DatasetRuns) -> Path:
    """Write ``d.folder``'s tables, figures and README from the runs of one dataset; return the folder."""
    d.folder.mkdir(parents=True, exist_ok=True)
    frame = collect(d.runs, d.rows, d.seeds)
    first = {row.name: d.runs[f"{row.name}/{d.seeds[0]}"].info.run_id for row in d.rows}
    ds = experiment.load_data(d.data_cfg)
    n = int(d.settings.figure3_features)
    top = {name: first_features(run_id, n) for name, run_id in first.items()}
    corr = {name: figures.mean_abs_correlation(ds.X_train, cols) for name, cols in top.items()}
    t3 = table3(summarize(frame), d.dataset, corr)
    t3.drop(columns=[c for c in t3.columns if c.endswith("_by_seed")]).to_csv(
        d.folder / "table3.csv", index=False, float_format="%.6g")
    write_runs(frame, d.folder)
    labels = {row.name: row.label for row in d.rows}
    title = f"{d.dataset} ({len(ds.y_train)} train rows x {ds.X_train.shape[1]} features), seed {d.seeds[0]}"
    figures.figure2({labels[k]: curves(d.client, v) for k, v in first.items()}, d.folder / "figure2.png",
                    title)
    pair = [r.name for r in d.rows if r.paper == "gbdt_topk"][:1] + [
        r.name for r in d.rows if r.paper == "gtgbm"
    ][:1]
    if len(pair) == 2:
        figures.figure3(
            ds.X_train,
            top[pair[0]],
            top[pair[1]],
            ds.feature_names,
            (labels[pair[0]], labels[pair[1]]),
            d.folder / "figure3.png",
            title,
        )
    head = (
        f"{d.dataset}: {len(ds.y_train)} train / {len(ds.y_val)} validation / {len(ds.y_test)} test rows x "
        f"{ds.X_train.shape[1]} features; seeds {list(d.seeds)}; the paper's numbers are for "
        f"{paper_dataset(d.dataset)}. Parent MLflow run `{d.parent_id}`. "
        f"{tracking.made_by('runners.reproduce')}"
    )
    (d.folder / "table3.md").write_text(
        f"# Table 3: {d.dataset}\n\n{head}\n\n{table3_markdown(t3, d.dataset, n)}\n"
    )
    (d.folder / "table5.md").write_text(
        f"# Table 5: tuned parameters, {d.dataset}\n\n{head}\n\n"
        f"{table5_markdown(frame, d.dataset, d.seeds[0])}\n"
    )
    (d.folder / "table6.md").write_text(
        f"# Table 6: GBDT-Full, {d.dataset}\n\n{head}\n\n"
        f"{table6_markdown(t3, frame, d.dataset, d.seeds[0])}\n"
    )
    seconds = paper_claims.compute_seconds(d.client, d.parent_id, d.dataset)
    twins = {r.name: r.tuned_as for r in d.rows if r.tuned_as}
    found = paper_claims.topk_overlaps(d.runs, d.rows, d.seeds)
    if found and not all(o.differs for o in found):
        log.warning("%s: GBDT-topK keeps every feature GBDT-Full uses on some seed", d.dataset)
    readme = paper_claims.readme(t3, d.dataset, head, seconds, np.asarray(d.seeds), twins,
                                 paper_claims.topk_sentence(found) if found else None)
    (d.folder / "README.md").write_text(readme)
    return d.folder
