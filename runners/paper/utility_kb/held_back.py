"""The new-feature utility test of Koepke & Bilenko (ICML 2012) on a runner's config
(``python -m runners.feature_utility``): the held-back features, the fit without them, their test,
its table and its MLflow run.

:func:`hold_back_and_test` checks ``utility.*`` (:func:`check_config`), loads the data, chooses the
held-back columns (:func:`held_back`), fits ``cfg.method`` without them and tests each one with
:func:`gbfs.selection.feature_utility` (:func:`evaluate_held_back`), all inside one MLflow run
(experiment ``feature-utility``, tag ``role=feature_utility``) whose writes go through
:class:`runners.tracking.run_log.RunLog` (:func:`log_table`); then prints :func:`format_table`.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from omegaconf import DictConfig, OmegaConf

from gbfs import feature_utility
from gbfs.booster.losses.metrics import roc_auc
from gbfs.data import Dataset
from runners.core import experiment
from runners.tracking import runs as tracking
from runners.tracking.run_log import RunLog

#: the splits the held-back features may be tested on (``utility.rows``): never the fitted rows
ROWS = ("test", "val")


def check_config(cfg: DictConfig) -> None:
    """``ValueError`` naming the key on a bad ``utility.*`` setting or a method whose estimator is not
    a gbfs one (the test reads the model's loss gradient), before any data is loaded or run made."""
    u = cfg.utility
    if cfg.method.estimator != "gbfs":
        raise ValueError(f"method {cfg.method.name!r} fits a {cfg.method.estimator!r} estimator; the utility "
                         f"test needs a gbfs one (method.estimator=gbfs, e.g. method=agbm)")
    if u.rows not in ROWS:
        raise ValueError(f"utility.rows must be one of {list(ROWS)}, got {u.rows!r}")
    for key in ("n_bootstrap", "n_relevant", "n_irrelevant"):
        value, low = u.get(key), 1 if key == "n_bootstrap" else 0
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"utility.{key} must be an integer >= {low}, got {value!r}")
    if isinstance(u.alpha, bool) or not isinstance(u.alpha, (int, float)) or not 0 < u.alpha < 1:
        raise ValueError(f"utility.alpha must be a number in (0, 1), got {u.alpha!r}")
    if not isinstance(u.get("progress", True), bool):
        raise ValueError(f"utility.progress must be true or false, got {u.progress!r}")


def held_back(u: DictConfig, ds: Dataset, seed: int) -> list[int]:
    """The held-back column indices: ``u.features`` (indices or names) or a seeded draw."""
    names = list(ds.feature_names)
    d = len(names)
    if u.features is not None:
        out = []
        for f in OmegaConf.to_container(u.features) if OmegaConf.is_config(u.features) else [u.features]:
            if isinstance(f, int) and not isinstance(f, bool) and 0 <= f < d:
                out.append(f)
            elif isinstance(f, str) and f in names:
                out.append(names.index(f))
            else:
                raise ValueError(f"utility.features: {f!r} is neither a column index in [0, {d}) nor a "
                                 f"feature name of dataset {ds.name!r}")
        chosen = list(dict.fromkeys(out))
    else:
        rng = np.random.default_rng([seed, 7])     # a stream of its own: not the model's
        relevant = [] if ds.relevant is None else [int(j) for j in ds.relevant]
        others = [j for j in range(d) if j not in set(relevant)]
        k_rel = min(u.n_relevant, len(relevant))
        k_oth = min(u.n_irrelevant if relevant else u.n_relevant + u.n_irrelevant, len(others))
        chosen = sorted([*rng.choice(relevant, k_rel, replace=False).tolist(),
                         *rng.choice(others, k_oth, replace=False).tolist()])
    if not chosen or len(chosen) >= d:
        raise ValueError(f"utility: hold back at least one feature and keep at least one of the {d}; "
                         f"got {len(chosen)} held back")
    return chosen


def evaluate_held_back(cfg: DictConfig, ds: Dataset, held: Sequence[int]) -> tuple[pd.DataFrame, dict]:
    """Fit the model without ``held``, test each of them; the table and the metrics."""
    keep = np.setdiff1d(np.arange(ds.X_train.shape[1]), held)
    params = experiment.method_params(cfg.method)
    model = experiment.build_estimator(cfg.method, int(cfg.seed), cfg.n_threads, params, cfg.get("sampler"))
    model.fit(ds.X_train[:, keep], ds.y_train, eval_set=(ds.X_val[:, keep], ds.y_val))
    X, y = ds.split(cfg.utility.rows)
    res = feature_utility(model, X[:, keep], y, X[:, held], n_bootstrap=int(cfg.utility.n_bootstrap),
                          random_state=int(cfg.seed), feature_names=[ds.feature_names[j] for j in held],
                          verbose=bool(cfg.utility.get("progress", True)))
    table = res.to_frame().drop(columns=["null_mean", "null_std"])
    table.insert(1, "index", list(held))
    table["significant"] = table.p_value <= cfg.utility.alpha
    relevant = None if ds.relevant is None else set(ds.relevant.tolist())
    table["relevant"] = [None if relevant is None else j in relevant for j in held]
    metrics = {"n_held_back": len(held), "n_significant": int(table.significant.sum()),
               "n_selected_features": len(model.selected_features_), "n_rows_tested": len(y),
               f"{cfg.utility.rows}_auc": roc_auc(y, model.decision_function(X[:, keep]))}
    if relevant is not None:
        rel = table.relevant.astype(bool)
        metrics.update(n_relevant_held_back=int(rel.sum()),
                       n_relevant_significant=int((table.significant & rel).sum()),
                       n_irrelevant_significant=int((table.significant & ~rel).sum()))
    return table, metrics


def _key(name: str) -> str:
    return re.sub(r"[^0-9A-Za-z_\-. /]", "_", name)    # the characters MLflow allows in a metric name


def log_table(table: pd.DataFrame, metrics: dict, run_log: RunLog) -> None:
    """The metrics, each feature's ``z.<name>`` and ``p.<name>``, and the table as a CSV artifact."""
    per_feature = {f"{k}.{_key(str(f))}": float(v) for f, z, p in zip(table.feature, table.z, table.p_value)
                   for k, v in (("z", z), ("p", p))}
    run_log.metrics({**metrics, **per_feature})
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "feature_utility.csv"
        table.to_csv(path, index=False)
        run_log.artifact(path)


def format_table(table: pd.DataFrame) -> str:
    """The table as Markdown: feature, index, z, p, significant, relevant ("-" where unknown)."""
    lines = ["| feature | index | z | p | significant | truly relevant |", "|" + " --- |" * 6]
    for r in table.itertuples():
        rel = "-" if r.relevant is None else ("yes" if r.relevant else "no")
        lines.append(f"| {r.feature} | {r.index} | {r.z:.2f} | {r.p_value:.3f} | "
                     f"{'yes' if r.significant else 'no'} | {rel} |")
    return "\n".join(lines)


def hold_back_and_test(cfg: DictConfig) -> dict[str, float]:
    """Hold back, fit, test, print and log (one MLflow run); return the metrics.

    Raises
    ------
    ValueError
        On a bad ``utility.*``, dataset, ``seed`` or ``tracking.uri`` setting, before any MLflow run.
    """
    check_config(cfg)
    tracking.check_uri(cfg.tracking.uri)
    ds = experiment.load_data(cfg)
    held = held_back(cfg.utility, ds, int(cfg.seed))
    tracking.configure(cfg.tracking)
    tags = {**tracking.user_tags(cfg.tracking), **tracking.parent_tag(cfg.tracking),
            "role": "feature_utility", "method": cfg.method.name, "dataset": cfg.dataset.name,
            "seed": str(cfg.seed), "git_commit": tracking.git_commit(), "worker": tracking.worker_id()}
    with tracking.managed_run(run_name=cfg.run_name, tags=tags) as active:
        run_log = RunLog(active.info.run_id)
        run_log.config(cfg, extra={"utility.held_back": held})
        table, metrics = evaluate_held_back(cfg, ds, held)
        log_table(table, metrics, run_log)
    if cfg.get("print_summary", True):
        print(f"New-feature utility test (Koepke-Bilenko) of {len(held)} held-back features of "
              f"{cfg.dataset.name}, model {cfg.method.name}, on {metrics['n_rows_tested']} "
              f"{cfg.utility.rows} rows:")
        print(format_table(table))
    return metrics
