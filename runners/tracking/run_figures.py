"""What a run shows about its model in the MLflow UI besides its metrics: the importance of the
features it uses (``feature_importance.json`` and a bar chart) and, for a binary model, its ROC and
precision-recall curves on the test rows (``roc_pr.png``).

The bar chart is the library's :func:`gbfs.plotting.plot_importance`; the curves are scikit-learn's
``roc_curve`` and ``precision_recall_curve``, with the run's own test AUC (the library's
:func:`gbfs.booster.losses.metrics.roc_auc`) in the legend, so the picture and the metric agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")              # runners draw figures to files, never to a screen
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.metrics import average_precision_score, precision_recall_curve, roc_curve  # noqa: E402

from gbfs.booster.losses.metrics import roc_auc  # noqa: E402
from gbfs.plotting import plot_importance  # noqa: E402

#: bars in the importance chart (every used feature is in the JSON)
MAX_BARS = 20
IMPORTANCE_JSON = "feature_importance.json"
IMPORTANCE_PNG = "feature_importance.png"
ROC_PR_PNG = "roc_pr.png"


def importance_record(model, feature_names: Sequence[str]) -> dict:
    """Every feature the model splits on, by total gain (ties: the lower index), with its gain and
    number of splits (LightGBM's two ``importance_type``\\ s)."""
    gain = np.asarray(model.feature_importance("gain"), dtype=np.float64)
    split = np.asarray(model.feature_importance("split"), dtype=np.float64)
    order = [int(j) for j in np.argsort(-gain, kind="stable") if gain[j] > 0 or split[j] > 0]
    return {"importance_type": "gain", "n_features_used": len(order),
            "features": [{"rank": r, "index": j, "name": str(feature_names[j]), "gain": float(gain[j]),
                          "split": int(split[j])} for r, j in enumerate(order)]}


def importance_figure(model, feature_names: Sequence[str], path: Path, title: str) -> Path:
    """The :data:`MAX_BARS` features of most gain as a bar chart (:func:`gbfs.plotting.plot_importance`)."""
    n = int(np.count_nonzero(np.asarray(model.feature_importance("gain")) > 0))
    fig, ax = plt.subplots(figsize=(6.5, 1.2 + 0.28 * max(1, min(n, MAX_BARS))))
    plot_importance(model, max_num_features=MAX_BARS, ax=ax, title=title,
                    feature_names=[str(f) for f in feature_names])
    return _save(fig, path)


def roc_pr_figure(y: np.ndarray, score: np.ndarray, path: Path, title: str) -> Path:
    """ROC and precision-recall curves of ``score`` against the 0/1 labels ``y``, side by side."""
    y = np.asarray(y, dtype=np.float64)
    fpr, tpr, _ = roc_curve(y, score)
    precision, recall, _ = precision_recall_curve(y, score)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.0, 4.0))
    left.plot(fpr, tpr, color="tab:blue", label=f"AUC {roc_auc(y, score):.4f}")
    left.plot([0, 1], [0, 1], color="0.7", linestyle="--", linewidth=1)
    left.set(xlabel="false positive rate", ylabel="true positive rate", title="ROC (test rows)")
    right.plot(recall, precision, color="tab:orange",
               label=f"average precision {average_precision_score(y, score):.4f}")
    right.axhline(float(np.mean(y)), color="0.7", linestyle="--", linewidth=1)
    right.set(xlabel="recall", ylabel="precision", title="precision-recall (test rows)", ylim=(0, 1.02))
    for ax in (left, right):
        ax.legend(loc="lower right")
    fig.suptitle(title)
    # fixed margins: tight_layout would measure every label first, a third of the figure's time
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.13, top=0.84, wspace=0.25)
    return _save(fig, path, tight=False)


def sweep_figure(points: Sequence[dict], score: str, path: Path, title: str) -> Path:
    """A sweep's chart: ``score`` against the number of selected features, one point per
    configuration with its sd over seeds as error bars in both directions
    (:func:`runners.core.summaries.chart_points`)."""
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for i, p in enumerate(points):
        ax.errorbar(p["x"], p["y"], xerr=p["x_sd"], yerr=p["y_sd"], fmt="o", capsize=3,
                    color=plt.cm.tab10(i % 10), label=f"{p['label']} ({p['n']} seed{'s' * (p['n'] > 1)})")
    ax.set(xlabel="selected features (mean ± sd over seeds)", ylabel=f"{score} (mean ± sd)", title=title)
    xs = [p["x"] for p in points]
    if min(xs) > 0 and max(xs) > 20 * min(xs):   # counts from a few to hundreds: a log axis
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())   # 10, 100: plain counts
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.legend(fontsize=8, loc="best")
    return _save(fig, path)


def _save(fig, path: Path, tight: bool = True) -> Path:
    if tight:
        fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
