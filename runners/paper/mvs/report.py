"""The outputs of the row-sampling comparison (``python -m runners.sampling``): Markdown tables shaped
like the MVS paper's Tables 3 and 4, the figure, the MVS target verdict and the MLflow run.

Everything here reads the DataFrame of :func:`runners.paper.mvs.comparison.run` (columns
:data:`runners.paper.mvs.comparison.CSV_COLUMNS`) and fits nothing.  The strategy names, their
order and labels live here because both the fits and the tables use them;
:mod:`runners.paper.mvs.comparison` re-exports them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

OURS = ("sgb", "goss", "mvs", "mvs_adaptive")
LIGHTGBM = ("lgb_bagging", "lgb_goss")
#: the no-sampling baseline of each library (rate 1.0)
BASELINE = {"gbfs": "none", "lightgbm": "lgb_none"}
LABELS = {"sgb": "SGB", "goss": "GOSS", "mvs": "MVS", "mvs_adaptive": "MVS Adaptive",
          "lgb_bagging": "LightGBM bagging", "lgb_goss": "LightGBM GOSS", "none": "baseline (gbfs)",
          "lgb_none": "baseline (LightGBM)"}


def library(strategy: str) -> str:
    """``"lightgbm"`` for LightGBM's strategies and baseline, else ``"gbfs"``."""
    return "lightgbm" if strategy.startswith("lgb_") else "gbfs"


def _pivot(df: pd.DataFrame, fmt) -> list[str]:
    """Markdown rows: strategies as rows, rates as columns (the layout of the paper's Table 3)."""
    rates = sorted(df.rate.unique())
    lines = ["| strategy | " + " | ".join(f"{r:g}" for r in rates) + " |", "|---" * (len(rates) + 1) + "|"]
    for strategy in [s for s in (*OURS, *LIGHTGBM, *BASELINE.values()) if s in set(df.strategy)]:
        sub = df[df.strategy == strategy].set_index("rate")
        cells = [fmt(sub.loc[r]) if r in sub.index else "" for r in rates]
        lines.append(f"| {LABELS[strategy]} | " + " | ".join(cells) + " |")
    return lines


#: the comparison target: at these rates MVS's error should be below SGB's and GOSS's (MVS paper)
TARGET_RATES = 0.1


def mvs_verdict(df: pd.DataFrame, max_rate: float = TARGET_RATES) -> tuple[bool | None, list[str]]:
    """Is MVS's mean relative error below SGB's and GOSS's at every rate <= ``max_rate``?

    Returns ``(met, lines)``: ``met`` is None when the table has no such rate or lacks one of the
    three strategies; ``lines`` give each rate's numbers and the gap in standard errors (the sd of
    the difference of two means over the seeds).
    """
    need = {"mvs", "sgb", "goss"}
    rates = sorted(r for r in set(df.rate) if r <= max_rate + 1e-12)
    if not rates or not need <= set(df.strategy):
        return None, [f"MVS target: not checked (needs sgb, goss and mvs at a rate <= {max_rate:g})"]
    met, lines = True, []
    for rate in rates:
        cell = df[df.rate == rate].set_index("strategy")
        mvs = cell.loc["mvs"]
        parts = []
        for other in ("sgb", "goss"):
            o = cell.loc[other]
            se = float(np.hypot(mvs.rel_error_sd, o.rel_error_sd) / np.sqrt(mvs.n_seeds))
            gap = (o.rel_error - mvs.rel_error) / se if se > 0 else float("inf")
            met &= bool(mvs.rel_error < o.rel_error)
            parts.append(f"{LABELS[other]} {100 * o.rel_error:+.1f}% ({gap:+.1f} se)")
        lines.append(f"  rate {rate:g}: MVS {100 * mvs.rel_error:+.1f}% vs " + ", ".join(parts))
    head = (f"MVS target (relative error below SGB's and GOSS's at every rate <= {max_rate:g}): "
            + ("MET" if met else "NOT MET"))
    return met, [head, *lines]


def markdown(df: pd.DataFrame, meta: dict) -> str:
    """``sampling.md``: the tables shaped like the paper's Table 3 (error) and Table 4 (time)."""
    base = df[df.strategy.isin(BASELINE.values())]
    out = ["# Row sampling: relative error and learning time (MVS paper, Tables 3 and 4)", "",
           f"{meta['dataset']}: {meta['n_train']} train / {meta['n_val']} validation / {meta['n_test']} test "
           f"rows x {meta['n_features']} features; booster {meta['booster']}; seeds {meta['seeds']}; "
           f"{meta['seconds']:.0f} s in all.", ""]
    out += [f"Baseline {LABELS[r.strategy]}: 1 - AUC = {r.error_mean:.4f} ± {r.error_sd:.4f}, "
            f"fit {r.fit_seconds_mean:.2f} s." for r in base.itertuples()]
    out += ["", "## Relative error change, mean 1 - test AUC / baseline's - 1 (Table 3)", ""]
    out += _pivot(df, lambda r: f"{100 * r.rel_error:+.2f}%")
    out += ["", "## Relative learning time change, mean fit seconds / baseline's - 1 (Table 4)", ""]
    out += _pivot(df, lambda r: f"{100 * (r.rel_time - 1):+.1f}%")
    out += ["", "## Test AUC, mean ± sd over the seeds", ""]
    out += _pivot(df, lambda r: f"{r.test_auc_mean:.4f} ± {r.test_auc_sd:.4f}")
    out += ["", "## Sampling parameters chosen on the validation split", ""]
    out += _pivot(df, lambda r: ", ".join(f"{k}={v:g}" for k, v in json.loads(r.params).items()
                                                    if isinstance(v, float)))
    out += ["", "## Target", "", *mvs_verdict(df)[1]]
    out += ["", "At rate 1 every sampler keeps every row with weight 1: that column is the baseline. "
            "Errors are 1 - AUC as in the paper; the sd of the relative error is sd(error) / baseline error; "
            "a gap in se is the difference of the mean relative errors over its standard error."]
    return "\n".join(out) + "\n"


def plot(df: pd.DataFrame, path: Path, title: str) -> None:
    """``sampling.png``: relative error change and relative learning time vs sample rate (log x)."""
    import matplotlib

    matplotlib.use("Agg")                       # headless: files only
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for strategy in [s for s in (*OURS, *LIGHTGBM) if s in set(df.strategy)]:
        sub = pd.concat([df[df.strategy == strategy],
                         df[df.strategy == BASELINE[library(strategy)]]]).sort_values("rate")
        style = "--" if library(strategy) == "lightgbm" else "-"
        axes[0].errorbar(sub.rate, 100 * sub.rel_error, yerr=100 * sub.rel_error_sd / np.sqrt(sub.n_seeds),
                         fmt=style + "o", ms=4, capsize=2, label=LABELS[strategy])
        axes[1].plot(sub.rate, sub.rel_time, style + "o", ms=4, label=LABELS[strategy])
    for ax, ylabel, ref in ((axes[0], "relative error change (%)", 0.0),
                            (axes[1], "relative learning time", 1.0)):
        ax.set_xscale("log")
        ax.axhline(ref, color="grey", lw=0.8)
        ax.set_xlabel("sample rate")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(fontsize=8)
    axes[0].set_title("1 - AUC vs no sampling (± sd / sqrt(seeds))", fontsize=9)
    axes[1].set_title("fit seconds / no sampling's", fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write(df: pd.DataFrame, out: Path, meta: dict) -> list[Path]:
    """Write ``sampling.csv``, ``sampling.md`` and ``sampling.png`` into ``out``; return the paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "sampling.csv", out / "sampling.md", out / "sampling.png"]
    df.to_csv(paths[0], index=False, float_format="%.6g")
    paths[1].write_text(markdown(df, meta))
    plot(df, paths[2], f"{meta['dataset']}, {meta['booster']}")
    return paths


def metric_name(kind: str, strategy: str, rate: float) -> str:
    """``rel_error_mvs_0.1``-style MLflow metric names."""
    return f"{kind}_{strategy}_{rate:g}"


def log_mlflow(df: pd.DataFrame, paths: Sequence[Path], meta: dict, uri: str,
               experiment: str = "gbfs-sampling", tags: Mapping[str, str] | None = None) -> str:
    """One MLflow run: the settings as params, every cell's relative error / time and test AUC as
    metrics, the CSV, Markdown and PNG as artifacts; returns the run id.

    ``tags`` are merged into the run's tags (``role=sampling``, ``dataset``) and win over them; with
    ``{"mlflow.parentRunId": id}`` the run shows under that run in the MLflow UI.  When a run is
    active in this process the new run is nested in it (MLflow then sets the parent itself).
    """
    import mlflow

    from runners.tracking import runs as tracking
    from runners.tracking.run_log import RunLog

    artifacts = None
    if uri.startswith("sqlite:///"):            # next to the store, not in the working directory
        artifacts = str(Path(uri[len("sqlite:///"):]).expanduser().parent / "mlartifacts")
    tracking.configure({"uri": uri, "experiment": experiment, "artifact_location": artifacts})
    metrics = {}
    for r in df.itertuples():
        for kind in ("rel_error", "rel_time", "test_auc_mean"):
            metrics[metric_name(kind.removesuffix("_mean"), r.strategy, r.rate)] = getattr(r, kind)
    run_tags = {"role": "sampling", "dataset": str(meta["dataset"]), **{str(k): str(v) for k, v in
                                                                       (tags or {}).items()}}
    # without nested=True, MLflow refuses to start a run while another one is active
    with tracking.managed_run(run_name=f"sampling-{meta['dataset']}", tags=run_tags,
                              nested=mlflow.active_run() is not None) as active:
        run_log = RunLog(active.info.run_id)
        run_log.params({k: str(v)[:500] for k, v in tracking.flatten(meta).items()})
        run_log.metrics(metrics)
        for p in paths:
            run_log.artifact(p)
        return active.info.run_id
