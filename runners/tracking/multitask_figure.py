"""The GT-GBM paper's Figures 4-5 for our runs: per-task bars of the multitask variants.

One group of bars per task plus "Total" (the task-size-weighted average, as in the paper), one bar
per variant (Multitask, GroupSparse, SingleTask, Independent, ...).  Written as a PNG and as the CSV
of the plotted numbers, so a figure under ``results/`` can be checked and regenerated.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")              # runners draw figures to files, never to a screen
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from gbfs.booster.losses.metrics import task_weighted  # noqa: E402


def with_total(per_task: Sequence[float], sizes: Sequence[int]) -> list[float]:
    """The per-task values followed by their task-size-weighted Total."""
    return [float(v) for v in per_task] + [task_weighted(per_task, sizes)]


def task_bars(scores: Mapping[str, Sequence[float]], task_names: Sequence[str], sizes: Sequence[int],
              metric: str, path: str | Path, title: str = "") -> dict[str, list[float]]:
    """Draw Figure 4/5's bars: ``scores[variant][t]`` is the metric of task ``t``.

    Writes ``path`` (PNG) and ``path`` with suffix ``.csv`` (variant, task..., Total); returns the
    plotted numbers, Total last.
    """
    path = Path(path)
    rows = {name: with_total(v, sizes) for name, v in scores.items()}
    groups = [str(t) for t in task_names] + ["Total"]
    width = 0.8 / max(1, len(rows))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(groups) + 2), 4.0))
    x = np.arange(len(groups))
    for k, (name, values) in enumerate(rows.items()):
        ax.bar(x + (k - (len(rows) - 1) / 2) * width, values, width, label=name)
    finite = [v for vals in rows.values() for v in vals if np.isfinite(v)]
    if finite:  # the differences are in the last digits: start the axis near the smallest bar
        lo, hi = min(finite), max(finite)
        ax.set_ylim(max(0.0, lo - 0.1 * (hi - lo + 1e-3)), hi + 0.05 * (hi - lo + 1e-3))
    ax.set_xticks(x, groups)
    ax.set_ylabel(metric)
    ax.set_title(title or f"{metric} per task")
    ax.legend(fontsize="small")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    with path.with_suffix(".csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["variant", *groups])
        for name, values in rows.items():
            w.writerow([name, *(f"{v:.6f}" for v in values)])
    return rows
