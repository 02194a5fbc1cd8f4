"""The selection-stability artifact of a run, when ``stability.enabled=true`` (``conf/config.yaml``).

:func:`log_stability` refits a clone of the run's estimator on ``stability.n_resamples`` seeded
subsamples of the training rows (``stability.subsample`` of them, stratified; validation as the
eval set, so early stopping sees the same data as the run) with
:func:`gbfs.selection.stability.selection_stability`, and logs to the run ``stability.json`` (selection
frequency per feature, every resample's selection, the indices), ``stability.png`` (the most often
selected features) and the metrics ``stability_jaccard``, ``stability_kuncheva``,
``stability_seconds``.  It costs ``n_resamples`` fits, hence off by default.
"""

from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")              # runners draw figures to files, never to a screen
import matplotlib.pyplot as plt  # noqa: E402
from omegaconf import DictConfig  # noqa: E402
from sklearn.base import clone  # noqa: E402

from gbfs.data import Dataset  # noqa: E402
from runners.tracking.run_log import RunLog


def log_stability(cfg: DictConfig, ds: Dataset, model, run_log: RunLog) -> dict[str, float]:
    """Measure and log the selection stability of ``model``'s settings if ``cfg.stability.enabled``.

    Parameters
    ----------
    cfg : DictConfig
        The run's config: ``stability`` (``enabled``, ``n_resamples``, ``subsample``) and ``seed``
        (the subsamples' and the refits' seeds).
    ds : Dataset
        Its train split is resampled; its validation split is every refit's eval set.
    model : estimator
        The run's estimator (fitted or not); only a clone is fitted.
    run_log : RunLog
        The log of the MLflow run to log to (the active run).

    Returns
    -------
    dict
        The logged metrics (``{}`` when stability is off); an undefined index (NaN) is not logged.
    """
    spec = cfg.get("stability")
    if not spec or not spec.get("enabled"):
        return {}
    from gbfs.selection.stability import selection_stability

    t0 = time.perf_counter()
    result = selection_stability(clone(model), ds.X_train, ds.y_train, n_resamples=int(spec.n_resamples),
                                 subsample=float(spec.subsample), eval_set=(ds.X_val, ds.y_val),
                                 random_state=int(cfg.seed), verbose=True)
    result.feature_names = list(ds.feature_names)   # the JSON and the plot name the columns
    metrics = {"stability_jaccard": result.jaccard, "stability_kuncheva": result.kuncheva,
               "stability_seconds": time.perf_counter() - t0}
    metrics = {k: float(v) for k, v in metrics.items() if not math.isnan(v)}
    run_log.metrics(metrics)
    run_log.text(result.to_dict(), "stability.json")
    ax = result.plot()
    with tempfile.TemporaryDirectory() as tmp:
        png = Path(tmp) / "stability.png"
        ax.figure.tight_layout()
        ax.figure.savefig(png, dpi=110)
        run_log.artifact(png)
    plt.close(ax.figure)
    return metrics
