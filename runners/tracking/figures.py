"""The GT-GBM paper's Figures 2 and 3 for our runs, and the correlations they rest on.

:func:`figure2` draws the training curves (tree-root variance, validation RMSE, validation AUC against
training time); :func:`figure3` draws the absolute correlations among two methods' selected features.
:func:`correlation_heatmap` is the one-panel heatmap every run logs. All correlations come from
:func:`correlation_matrix`, so the figures and the numbers printed beside them agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")              # runners draw figures to files, never to a screen
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

#: Figure 2's panels, left to right: (metric key, panel title)
FIGURE2_PANELS = (("root_variance", "tree-root variance"), ("val_rmse", "validation RMSE"),
                  ("val_auc", "validation AUC"))
#: a panel's time axis is logarithmic when its positive times span more than this factor
LOG_TIME_SPAN = 20.0


def correlation_matrix(X: np.ndarray, cols: Sequence[int]) -> np.ndarray:
    """Pearson correlations among the columns ``cols`` of ``X``, computed in float64.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    cols : sequence of int
        The columns to correlate, in the order of the result's rows and columns.

    Returns
    -------
    ndarray of shape (len(cols), len(cols))
        1 on the diagonal; a constant (or non-finite) column has correlation 0 with every other
        column, so the result holds no NaN.
    """
    A = np.asarray(X[:, list(cols)], dtype=np.float64).reshape(X.shape[0], len(cols))
    k = A.shape[1]
    corr = np.eye(k)
    if k < 2 or A.shape[0] < 2:
        return corr
    with np.errstate(all="ignore"):   # non-finite columns are masked out below
        # constancy is judged on the raw column: the mean of n equal values is not always exact
        varying = np.isfinite(A).all(axis=0) & (A.max(axis=0) > A.min(axis=0))
        A = A - A.mean(axis=0)
        # scale before squaring so that huge or tiny columns neither overflow nor underflow
        scale = np.abs(A).max(axis=0)
        varying &= np.isfinite(scale) & (scale > 0)
        A = np.where(varying, A / np.where(varying, scale, 1.0), 0.0)
        norms = np.sqrt((A * A).sum(axis=0))
        norms[~varying] = 1.0
        corr = (A.T @ A) / np.outer(norms, norms)
    corr[~np.isfinite(corr)] = 0.0
    np.clip(corr, -1.0, 1.0, out=corr)
    np.fill_diagonal(corr, 1.0)
    return corr


def mean_abs_correlation(X: np.ndarray, cols: Sequence[int]) -> float:
    """The mean absolute off-diagonal Pearson correlation among the columns ``cols`` of ``X``.

    Each unordered pair counts once; ``nan`` when fewer than two columns are given.
    """
    if len(cols) < 2:
        return float("nan")
    upper = np.triu_indices(len(cols), k=1)
    return float(np.abs(correlation_matrix(X, cols)[upper]).mean())


def correlation_heatmap(X: np.ndarray, selected: list[int], names: list[str], path: Path,
                        max_features: int = 50) -> Path:
    """PNG of the Pearson correlations among the selected features (GT-GBM paper, Figure 3).

    At most ``max_features`` (the first selected) are drawn; constant columns have no correlation
    and are drawn as 0.
    """
    cols = selected[:max_features]
    fig, ax = plt.subplots(figsize=(6.4, 5.4))
    if len(cols) >= 2:
        im = ax.imshow(np.abs(correlation_matrix(X, cols)), vmin=0.0, vmax=1.0, cmap="viridis")
        fig.colorbar(im, ax=ax, label="|Pearson correlation|")
        if len(cols) <= 25:
            labels = [names[j] for j in cols]
            ax.set_xticks(range(len(cols)), labels, rotation=90, fontsize=6)
            ax.set_yticks(range(len(cols)), labels, fontsize=6)
    else:
        ax.text(0.5, 0.5, f"{len(cols)} selected feature(s): no pairs to correlate", ha="center")
    ax.set_title(f"Correlations among the first {len(cols)} selected features")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _save(fig: Figure, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # "tight": constrained layout alone crops the rotated tick labels under square heatmaps
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def _figure2(curves: Mapping[str, Mapping[str, Sequence[tuple[float, float]]]], title: str) -> Figure:
    """The unsaved figure of :func:`figure2`: three panels, one line per method having a panel's key."""
    fig, axes = plt.subplots(1, 3, figsize=(14.0, 4.4), layout="constrained")
    colours = {label: f"C{i % 10}" for i, label in enumerate(curves)}
    handles = {}
    for ax, (key, panel) in zip(axes, FIGURE2_PANELS):
        drawn = {label: np.asarray(c[key], dtype=np.float64).reshape(-1, 2)
                 for label, c in curves.items() if len(c.get(key, ())) > 0}
        times = np.concatenate([pts[:, 0] for pts in drawn.values()]) if drawn else np.empty(0)
        positive = times[np.isfinite(times) & (times > 0)]
        log_x = positive.size > 0 and positive.max() > LOG_TIME_SPAN * positive.min()
        for label, pts in drawn.items():
            if log_x:          # a log axis cannot show the points at time 0
                pts = pts[pts[:, 0] > 0]
            (handles[label],) = ax.plot(pts[:, 0], pts[:, 1], color=colours[label], label=label,
                                        marker="o" if len(pts) == 1 else None)  # a lone point shows
        if log_x:
            ax.set_xscale("log")
        if not drawn:
            ax.text(0.5, 0.5, "no curve logged", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(panel)
        ax.set_xlabel("training time (s)")
        ax.set_ylabel(panel)
        ax.grid(alpha=0.3)
    if handles:
        ordered = [label for label in curves if label in handles]
        fig.legend([handles[label] for label in ordered], ordered, loc="outside lower center",
                   ncol=min(len(ordered), 6), fontsize="small")
    fig.suptitle(title)
    return fig


def figure2(curves: Mapping[str, Mapping[str, Sequence[tuple[float, float]]]], path: Path,
            title: str) -> Path:
    """Draw the training curves of GT-GBM paper, Figure 2, and save them as a PNG.

    Parameters
    ----------
    curves : mapping of str to mapping of str to sequence of (float, float)
        ``curves[label][key]`` is a method's curve of metric ``key`` as (seconds, value) points sorted by
        time; ``key`` is ``"root_variance"`` (left panel), ``"val_rmse"`` (middle) or ``"val_auc"``
        (right). A method without a key, or with an empty curve for it, is absent from that panel.
    path : Path
        The PNG to write; its folder is created if missing.
    title : str
        The figure's title.

    Returns
    -------
    Path
        ``path``.

    Notes
    -----
    Each method keeps one colour across the panels and the legend is drawn once, below them. A
    panel's time axis is logarithmic when its positive times span more than a factor of 20.
    """
    return _save(_figure2(curves, title), path)


def _heatmap_panel(ax, X: np.ndarray, cols: Sequence[int], names: Sequence[str], label: str):
    """One side of Figure 3; returns the image, or None when there are fewer than two columns."""
    mean = mean_abs_correlation(X, cols)
    ax.set_title(f"{label} ({len(cols)} features)\nmean |r| off-diagonal = {mean:.3f}", fontsize="medium")
    if len(cols) < 2:
        ax.text(0.5, 0.5, f"{len(cols)} feature(s): no pairs to correlate", ha="center", va="center",
                transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])
        return None
    im = ax.imshow(np.abs(correlation_matrix(X, cols)), vmin=0.0, vmax=1.0, cmap="Blues")
    if len(cols) <= 25:
        ticks = [names[j] for j in cols]
        ax.set_xticks(range(len(cols)), ticks, rotation=90, fontsize=6)
        ax.set_yticks(range(len(cols)), ticks, fontsize=6)
    return im


def _figure3(X: np.ndarray, left: Sequence[int], right: Sequence[int], names: Sequence[str],
             labels: tuple[str, str], title: str) -> tuple[Figure, float, float]:
    """The unsaved figure of :func:`figure3` and the mean |r| of its left and right sides."""
    fig, axes = plt.subplots(1, 2, figsize=(12.0, 5.8), layout="constrained")
    images = [_heatmap_panel(ax, X, cols, names, label)
              for ax, cols, label in zip(axes, (left, right), labels)]
    image = next((im for im in images if im is not None), None)
    if image is not None:        # one scale, 0..1, for both sides
        fig.colorbar(image, ax=list(axes), label="|Pearson correlation|", shrink=0.8)
    fig.suptitle(title)
    return fig, mean_abs_correlation(X, left), mean_abs_correlation(X, right)


def figure3(X: np.ndarray, left: Sequence[int], right: Sequence[int], names: Sequence[str],
            labels: tuple[str, str], path: Path, title: str) -> tuple[float, float]:
    """Draw the feature-correlation heatmaps of GT-GBM paper, Figure 3, and save them as a PNG.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        The data the correlations are computed on (e.g. the training set).
    left, right : sequence of int
        The columns of each side, e.g. GBDT-topK's top 20 and GT-GBM's first 20 selected features.
    names : sequence of str
        The names of all columns of ``X``; tick labels when a side has at most 25 features.
    labels : tuple of (str, str)
        The methods' names, titling the left and right panels.
    path : Path
        The PNG to write; its folder is created if missing.
    title : str
        The figure's title.

    Returns
    -------
    tuple of (float, float)
        :func:`mean_abs_correlation` of ``left`` and of ``right`` (``nan`` for a side with fewer than
        two columns, which shows a text instead of a heatmap).

    Notes
    -----
    As in the paper, the colour scale 0..1 is shared and lighter means closer to 0.
    """
    fig, mean_left, mean_right = _figure3(X, left, right, names, labels, title)
    _save(fig, path)
    return mean_left, mean_right
