"""What every run of the harness is tagged with, and the table a run or a study prints.

:func:`run_tags` are the tags every MLflow run of a config carries (method, dataset, seed, sampler,
git commit, budget, worker, and a multirun's sweep); :func:`format_table` is the Markdown table
``runners.run`` and ``runners.tune`` print, and :func:`ui_hint` says how to open the runs in the
MLflow UI.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from runners.core import budget
from runners.tracking import mlflow_native
from runners.tracking import runs as tracking


def run_tags(cfg: DictConfig) -> dict[str, str]:
    """The tags of every run of ``cfg``: ``tracking.tags``, method, dataset (a data file's name for
    ``dataset=file``, :func:`runners.tracking.mlflow_native.dataset_label`), seed, sampler, git
    commit, whether it counts for GBDT-topK's K, its budget, ``worker`` (this process,
    :func:`runners.tracking.runs.worker_id`) and, in a multirun, ``sweep_dir`` and ``sweep_overrides``
    (the job's overrides, a JSON list)."""
    tags = {**tracking.user_tags(cfg.tracking),
            "method": cfg.method.name, "dataset": mlflow_native.dataset_label(cfg.dataset),
            "seed": str(cfg.seed), "task": str(cfg.dataset.get("task") or "binary"),
            "sampler": str(cfg.sampler.name) if cfg.get("sampler") else "none",
            "git_commit": tracking.git_commit(), "worker": tracking.worker_id(),
            "counts_for_topk": str(bool(cfg.method.counts_for_topk)).lower(), **budget.budget_tags(cfg)}
    if HydraConfig.initialized():
        hc = HydraConfig.get()
        if hc.mode is not None and hc.mode.name == "MULTIRUN":
            tags["sweep_dir"] = str(hc.sweep.dir)
            # this job's choices, for the sweep's table (runners.tuning.hydra_callbacks.run_value)
            tags["sweep_overrides"] = json.dumps(list(hc.overrides.task))[:5000]
    return tags


def in_multirun() -> bool:
    if not HydraConfig.initialized():
        return False
    mode = HydraConfig.get().mode
    return mode is not None and mode.name == "MULTIRUN"


def _cell(row: dict, key: str, fmt: str) -> str:
    value = row.get(key)
    if value in (None, "", "None"):     # "None": a param logged from a null config value
        return "-"
    try:
        return format(float(value), fmt) if fmt else str(value)
    except ValueError:     # a tag or param that is not a number
        return str(value)


#: the table's numeric columns: (header, row key, format)
TABLE_METRICS = (("test AUC", "test_auc", ".4f"), ("test RMSE", "test_rmse", ".4f"),
                 ("selected features", "n_selected_features", ".0f"), ("fit s", "fit_seconds", ".1f"))
#: the other tasks' scores, each shown only when a row has it (before the selected features): ranking,
#: multiclass, regression
RANKING_METRICS = (("test NDCG@10", "test_ndcg_at_10", ".4f"), ("test MRR", "test_mrr", ".4f"),
                   ("test accuracy", "test_accuracy", ".4f"), ("test macro AUC", "test_macro_auc", ".4f"),
                   ("test log-loss", "test_logloss", ".4f"), ("test R²", "test_r2", ".4f"))


def format_table(rows: list[dict], columns: Sequence[str] = ()) -> str:
    """A Markdown table: method, dataset, budget (the K a model was held to, "-" if none), the
    ``columns`` (e.g. the parameters a sweep varies), test AUC, test RMSE (with ranking runs, test
    NDCG@10 and MRR, multiclass accuracy, macro AUC and log-loss, regression R²; AUC and RMSE only
    if a row has them), selected features, fit seconds."""
    ranking = [c for c in RANKING_METRICS if any(c[1] in r for r in rows)
               and not (c[1] == "test_logloss" and any("test_auc" in r for r in rows))]
    binary = [c for c in TABLE_METRICS[:2] if not ranking or any(c[1] in r for r in rows)]
    cols = [("method", "method", ""), ("dataset", "dataset", ""), ("budget", "budget", ".0f"),
            *((c, c, "") for c in columns), *binary, *ranking, *TABLE_METRICS[2:]]
    lines = ["| " + " | ".join(h for h, _, _ in cols) + " |", "|" + " --- |" * len(cols)]
    lines += ["| " + " | ".join(_cell(r, key, fmt) for _, key, fmt in cols) + " |" for r in rows]
    return "\n".join(lines)


def _mean_sd(values: list[float]) -> tuple[float, float]:
    """The mean and the sample standard deviation (0 for one value)."""
    mean = sum(values) / len(values)
    sd = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5 if len(values) > 1 else 0.0
    return mean, sd


def aggregate_seeds(rows: list[dict], columns: Sequence[str]) -> tuple[list[dict], list[str]]:
    """The rows of a sweep with one row per configuration over its seeds: every numeric column of
    :func:`format_table` as ``mean ± sd`` (sample sd; the value alone for one seed) and ``seeds``, the
    number of rows pooled.  A configuration is every shown key but ``seed``; the order is the rows'."""
    keys = ["method", "dataset", "budget", *(c for c in columns if c != "seed")]
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault(tuple(str(r.get(k)) for k in keys), []).append(r)
    metrics = [(key, fmt) for _, key, fmt in (*TABLE_METRICS, *RANKING_METRICS)]
    out = []
    for group in groups.values():
        row = {k: group[0].get(k) for k in keys}
        row["seeds"] = len(group)
        for key, fmt in metrics:
            values = [float(r[key]) for r in group if r.get(key) not in (None, "", "None")]
            if not values:
                continue
            mean, sd = _mean_sd(values)
            row[key] = format(mean, fmt) if len(values) < 2 else f"{format(mean, fmt)} ± {format(sd, fmt)}"
        out.append(row)
    return out, [*(c for c in columns if c != "seed"), "seeds"]


#: the score a sweep's chart plots against the number of selected features, per task: the first of
#: these a sweep's rows have
CHART_SCORES = (("test_auc", "test AUC"), ("test_accuracy", "test accuracy"), ("test_r2", "test R²"),
                ("test_ndcg_at_10", "test NDCG@10"))


def chart_points(rows: list[dict], columns: Sequence[str]) -> tuple[str, list[dict]]:
    """The points of a sweep's chart, one per configuration (as :func:`aggregate_seeds` pools them):
    ``label`` (method, data set and the swept values; ``config`` the same without the data set,
    ``dataset`` apart), the mean and sample sd of ``n_selected_features`` (x)
    and of the score (y; :data:`CHART_SCORES`), and ``n``, the seeds pooled.  Returns the score's
    title and the points; rows without the score or a feature count are left out."""
    key, title = next(((k, t) for k, t in CHART_SCORES if any(r.get(k) is not None for r in rows)),
                      CHART_SCORES[0])
    keys = ["method", "dataset", "budget", *(c for c in columns if c != "seed")]
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r.get(key) is not None and r.get("n_selected_features") is not None:
            groups.setdefault(tuple(str(r.get(k)) for k in keys), []).append(r)

    points = []
    for group in groups.values():
        first = group[0]
        label = " ".join(str(first.get(k)) for k in keys if first.get(k) not in (None, "", "None"))
        config = " ".join(str(first.get(k)) for k in keys
                          if k != "dataset" and first.get(k) not in (None, "", "None"))
        (x, x_sd), (y, y_sd) = (_mean_sd([float(r[k]) for r in group]) for k in ("n_selected_features", key))
        points.append({"label": label, "dataset": str(first.get("dataset")), "config": config,
                       "x": x, "x_sd": x_sd, "y": y, "y_sd": y_sd, "n": len(group)})
    return title, points


def summary_name(title: str, points: list[dict]) -> str:
    """The name of a sweep's summary run: for each data set, the configuration of the highest mean
    score (every :data:`CHART_SCORES` is higher-is-better) with its mean ± sd and feature count, then
    ``sweep summary``; the runs table answers "which is best" from the experiment's first page."""
    best: dict[str, dict] = {}
    for p in points:
        if p["dataset"] not in best or p["y"] > best[p["dataset"]]["y"]:
            best[p["dataset"]] = p
    if len(best) == 1:
        (p,) = best.values()
        return (f"best {p['config']}: {title} {p['y']:.4f} ± {p['y_sd']:.4f}, {p['x']:.0f} features "
                f"({p['n']} seed{'s' if p['n'] != 1 else ''}) · sweep summary")
    found = "; ".join(f"{ds}: {p['config']} {p['y']:.4f}" for ds, p in best.items())
    return f"best {title} by data set: {found} · sweep summary" if best else "sweep summary"


def ui_hint(uri: str, exp_id: str | None = None) -> str:
    """How to look at the runs: the server itself for a remote store, else ``mlflow ui`` on the file;
    with ``exp_id``, the link to that experiment's runs table in the runners' view (its columns,
    :func:`runners.tracking.mlflow_native.runs_view_url`)."""
    page = "" if exp_id is None else "/" + mlflow_native.runs_view_url(exp_id)
    if uri.startswith(("http://", "https://")):
        return f"Compare the runs in the MLflow UI: open {uri.rstrip('/') if page else uri}{page}"
    return (f"Compare the runs in the MLflow UI: mlflow ui --backend-store-uri {uri}  "
            f"(then open http://127.0.0.1:5000{page})")
