"""Row sampling compared as in the MVS paper's Section 5 (Tables 2-4): ``python -m runners.sampling``.

    python -m runners.sampling --quick                    # a tiny run (about a minute)
    python -m runners.sampling                            # epsilon_like at scale 0.1, every rate
    python -m runners.sampling --dataset epsilon --scale 0.1 --out results/sampling/epsilon

Results go to ``--out`` (``results/sampling``; ``--quick``: ``results/bench/sampling-quick``) as
CSV, Markdown and PNG, and to one MLflow run in ``--tracking-uri`` (``sqlite:///mlflow.db``, the
harness's store; ``--no-mlflow`` skips it), written by :mod:`runners.paper.mvs.report`.  The last
lines printed are the verdict on the target: at every rate <= 0.1, is MVS's relative error below
SGB's and GOSS's?

For every strategy -- ours: SGB, GOSS, MVS, MVS Adaptive (``GBFSClassifier(sampler=...)``); LightGBM's
bagging and GOSS as peers -- and every sample rate below 1, the sampling parameters are tuned on the
validation split with a small grid (GOSS: ``top_rate`` = 0.1, 0.25, 0.5 or 0.75 of the rate and
``other_rate`` the rest; MVS: lambda in 0.01, 0.1, 1, 10; SGB and MVS Adaptive have none), picking the
best validation AUC of a fit with the first seed.  The chosen setting is then fitted with every seed
on train and scored on test.  As in the paper, error = 1 - test AUC, the relative error change is
mean error / baseline error - 1 (Tables 2, 3) and the relative learning time is mean fit seconds /
baseline's (Table 4 prints it as a change, ratio - 1).  The baseline is the same booster without
sampling, fitted with the same seeds: the rate-1.0 column (every sampler keeps every row with weight 1
there, so it is not refitted per sampler).  LightGBM's rows are relative to LightGBM without sampling.

The booster is plain Newton boosting by default: ``method="gbfs"`` with ``mu = 0`` (no feature penalty,
so the comparison is not confounded by which features a noisy sample lets the penalty admit),
``criterion="newton"``, ``leaf_estimate="newton"``.  Why Newton: the paper derives MVS for
hessian-weighted split scores (Eqs. 7-9; ``g_hat = sqrt(g^2 + lambda h^2)`` only makes sense next to a
hessian denominator) and runs it in CatBoost and LightGBM, both Newton boosters; the LightGBM peers here
are Newton too, so ours and LightGBM's rows compare like with like.  ``--method agbm --mu 0.01`` runs
the feature-selecting booster instead, ``--criterion sse`` the papers' first-order mode.

Differences from the paper: one validation split instead of 5-fold cross-validation, a grid instead of
a free search, 5 seeds instead of 10, a fixed number of trees (no early stopping) and one dataset.
Fit seconds include binning and the train metrics both libraries record after every tree, which
sampling does not shorten; ``rel_boost_time`` (boosting only) is in the CSV too.  Seeds are visited in
the outer loop so that a changing machine load hits every cell alike.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from gbfs import GBFSClassifier
from gbfs.baselines.lightgbm_baseline import LightGBMBaseline
from gbfs.booster.losses.metrics import roc_auc
from gbfs.data import Dataset, load_dataset
from runners.bench.matched import Matched
from runners.paper.mvs.report import (  # noqa: F401  (the outputs, re-exported)
    BASELINE,
    LABELS,
    LIGHTGBM,
    OURS,
    TARGET_RATES,
    library,
    log_mlflow,
    markdown,
    metric_name,
    mvs_verdict,
    plot,
    write,
)

DEFAULT_RATES = (0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)
TOP_SHARES = (0.1, 0.25, 0.5, 0.75)       # GOSS: top_rate as a share of the sample rate
MVS_LAMBDAS = (0.01, 0.1, 1.0, 10.0)      # the paper finds ~0.1 best (Section 5)
CSV_COLUMNS = ("strategy", "library", "rate", "params", "tuned_val_auc", "grid_val_auc", "n_seeds",
               "test_auc_mean", "test_auc_sd", "error_mean", "error_sd", "rel_error", "rel_error_sd",
               "fit_seconds_mean", "rel_time", "boost_seconds_mean", "rel_boost_time", "sampled_share")


@dataclass(frozen=True)
class Booster:
    """The boosting settings shared by every fit; ours and LightGBM's are matched (depth, leaves,
    rows per leaf, learning rate, trees, no L2, Newton leaves)."""

    method: str = "gbfs"
    mu: float = 0.0
    trees: int = 100
    learning_rate: float = 0.1
    max_depth: int = 5
    max_leaves: int = 32
    min_samples_leaf: int = 20
    criterion: str = "newton"
    goss_style: str = "paper"
    threads: int | None = 1       # one thread: relative times least disturbed by other load

    def estimator(self, strategy: str, params: dict, seed: int):
        """``GBFSClassifier`` (``params``: its sampler arguments) or ``LightGBMBaseline``
        (``params``: LightGBM's sampling parameters, passed as ``lgb_params``), from the matched
        settings (:class:`runners.bench.matched.Matched`)."""
        matched = Matched(n_estimators=self.trees, learning_rate=self.learning_rate, max_depth=self.max_depth,
                          max_leaves=self.max_leaves, min_samples_leaf=self.min_samples_leaf,
                          threads=self.threads, seed=seed)
        if library(strategy) == "lightgbm":
            return LightGBMBaseline(**matched.baseline("full", lgb_params=dict(params) or None))
        leaf = "newton" if self.criterion == "newton" else "mean"
        return GBFSClassifier(**matched.ours(method=self.method, mu=self.mu, criterion=self.criterion,
                                             leaf_estimate=leaf, **params))


def grid(strategy: str, rate: float, goss_style: str = "paper") -> list[dict]:
    """The candidate sampling parameters of one strategy at one rate (tuned on validation)."""
    if strategy in BASELINE.values():
        return [{}]
    split = [(round(s * rate, 8), round((1 - s) * rate, 8)) for s in TOP_SHARES]
    grids = {
        "sgb": [{"sampler": "sgb", "subsample": rate}],
        "mvs_adaptive": [{"sampler": "mvs_adaptive", "subsample": rate}],
        "mvs": [{"sampler": "mvs", "subsample": rate, "mvs_lambda": lam} for lam in MVS_LAMBDAS],
        "goss": [{"sampler": "goss", "top_rate": a, "other_rate": b, "goss_style": goss_style}
                 for a, b in split],
        "lgb_bagging": [{"bagging_fraction": rate, "bagging_freq": 1}],
        "lgb_goss": [{"data_sample_strategy": "goss", "top_rate": a, "other_rate": b} for a, b in split],
    }
    if strategy not in grids:
        raise ValueError(f"unknown strategy {strategy!r}; expected one of {OURS + LIGHTGBM}")
    return grids[strategy]


@dataclass
class Fit:
    """What one fit contributes: validation and test AUC, seconds, share of rows per tree."""

    val_auc: float
    test_auc: float
    fit_seconds: float
    boost_seconds: float
    sampled_share: float


def fit_one(booster: Booster, strategy: str, params: dict, seed: int, ds: Dataset) -> Fit:
    """Fit on train (no eval set: the trees do not depend on it, and scoring it would cost time)."""
    est = booster.estimator(strategy, params, seed)
    t0 = time.perf_counter()
    est.fit(ds.X_train, ds.y_train)
    seconds = time.perf_counter() - t0
    sampled = [r["n_rows_sampled"] for r in est.history_ if "n_rows_sampled" in r]
    if library(strategy) == "gbfs":
        share = float(np.mean(sampled)) / len(ds.y_train) if sampled else 1.0
    else:   # LightGBM does not report its bag sizes
        share = 1.0 if strategy == "lgb_none" else float("nan")
    return Fit(roc_auc(ds.y_val, est.decision_function(ds.X_val)),
               roc_auc(ds.y_test, est.decision_function(ds.X_test)), seconds,
               float(est.timings_["boosting_seconds"]), share)


def warm_up(booster: Booster, strategies: Sequence[str], dtype=np.float64) -> None:
    """Compile (or load from numba's cache) every kernel the timed fits use, on 300 rows x 256
    columns of the timed data's ``dtype``: wide enough that the root's histograms take the parallel
    kernels the timed fits take, and of the same type, which the binning kernels are compiled for
    (otherwise the first timed fit -- the baseline every time is relative to -- pays for them)."""
    rng = np.random.default_rng(0)
    X = rng.random((300, 256)).astype(dtype)
    y = (X[:, 0] + 0.3 * rng.standard_normal(300) > 0.5).astype(int)
    tiny = Dataset("warm-up", X, y, X, y, X, y, [f"x{j}" for j in range(X.shape[1])], "binary")
    # learning rate 0.5: goss_style="lightgbm" starts sampling at tree 1 / 0.5 = 2
    small = Booster(**{**asdict(booster), "trees": 3, "learning_rate": 0.5})
    for s in dict.fromkeys([*(BASELINE[library(s)] for s in strategies), *strategies]):
        fit_one(small, s, grid(s, 0.5, booster.goss_style)[0], 0, tiny)


def _cells(strategies: Sequence[str], rates: Sequence[float]) -> list[tuple[str, float]]:
    libs = [lib for lib in ("gbfs", "lightgbm") if any(library(s) == lib for s in strategies)]
    sampled = [(s, float(r)) for s in strategies for r in rates if r < 1.0]
    return [(BASELINE[lib], 1.0) for lib in libs] + sampled


def run(ds: Dataset, booster: Booster = Booster(), rates: Sequence[float] = DEFAULT_RATES,
        seeds: Sequence[int] = (0, 1, 2, 3, 4), strategies: Sequence[str] = OURS + LIGHTGBM,
        progress: bool = True) -> pd.DataFrame:
    """Tune each strategy's sampling parameters per rate, fit every seed, compare with no sampling.

    Parameters
    ----------
    ds : Dataset
        Binary task with train, validation (tuning) and test (evaluation) splits.
    booster : Booster
        Settings shared by every fit.
    rates : sequence of float in (0, 1]
        Sample rates; 1.0 is the baseline (always fitted, whether listed or not).
    seeds : sequence of int
        ``random_state`` of the fits; the grid is searched with ``seeds[0]``.
    strategies : sequence of str
        Among :data:`OURS` and :data:`LIGHTGBM`.
    progress : bool
        A tqdm bar over the fits (stderr).

    Returns
    -------
    pandas.DataFrame
        One row per strategy x rate below 1 plus one baseline row per library, columns
        :data:`CSV_COLUMNS` (``params`` and ``grid_val_auc`` as JSON).
    """
    if not seeds:
        raise ValueError("seeds must not be empty")
    if any(not 0.0 < r <= 1.0 for r in rates):
        raise ValueError(f"rates must be in (0, 1], got {list(rates)}")
    for s in strategies:
        grid(s, 0.5)                               # unknown names fail before any fit
    cells = _cells(strategies, rates)
    grids = {c: grid(c[0], c[1], booster.goss_style) for c in cells}
    warm_up(booster, strategies, ds.X_train.dtype)
    bar = tqdm(total=sum(len(g) + len(seeds) - 1 for g in grids.values()), desc="sampling fits",
               unit="fit", disable=not progress)
    chosen, searched, fits = {}, {}, {}
    for cell in cells:                             # tuning: every candidate with the first seed
        results = []
        for params in grids[cell]:
            results.append(fit_one(booster, cell[0], params, seeds[0], ds))
            bar.update(1)
        best = int(np.argmax([f.val_auc for f in results]))   # ties: the first candidate
        chosen[cell], searched[cell], fits[cell] = grids[cell][best], results, [results[best]]
    for seed in seeds[1:]:                         # evaluation: the other seeds, cell after cell
        for cell in cells:
            fits[cell].append(fit_one(booster, cell[0], chosen[cell], seed, ds))
            bar.update(1)
    bar.close()
    return summarize(cells, chosen, searched, fits)


def _sd(x: np.ndarray) -> float:
    return float(np.std(x, ddof=1)) if len(x) > 1 else 0.0


def summarize(cells, chosen, searched, fits) -> pd.DataFrame:
    """The table of :func:`run` from its fits (relative to each library's baseline)."""
    rows = []
    for strategy, rate in cells:
        f = fits[(strategy, rate)]
        err = np.array([1.0 - x.test_auc for x in f])
        rows.append({"strategy": strategy, "library": library(strategy), "rate": rate,
                     "params": json.dumps(chosen[(strategy, rate)], sort_keys=True),
                     "tuned_val_auc": f[0].val_auc, "n_seeds": len(f),
                     "grid_val_auc": json.dumps([round(x.val_auc, 6) for x in searched[(strategy, rate)]]),
                     "test_auc_mean": 1.0 - float(err.mean()), "test_auc_sd": _sd(err),
                     "error_mean": float(err.mean()), "error_sd": _sd(err),
                     "fit_seconds_mean": float(np.mean([x.fit_seconds for x in f])),
                     "boost_seconds_mean": float(np.mean([x.boost_seconds for x in f])),
                     "sampled_share": float(np.mean([x.sampled_share for x in f]))})
    df = pd.DataFrame(rows)
    base = df[df.strategy.isin(BASELINE.values())].set_index("library")
    b = base.loc[df.library]
    df["rel_error"] = df.error_mean.to_numpy() / b.error_mean.to_numpy() - 1.0
    df["rel_error_sd"] = df.error_sd.to_numpy() / b.error_mean.to_numpy()
    df["rel_time"] = df.fit_seconds_mean.to_numpy() / b.fit_seconds_mean.to_numpy()
    df["rel_boost_time"] = df.boost_seconds_mean.to_numpy() / b.boost_seconds_mean.to_numpy()
    return df[list(CSV_COLUMNS)]


def describe(ds: Dataset, booster: Booster, args: Mapping, seconds: float) -> dict:
    """The ``meta`` of a comparison, for the tables and the MLflow params.

    ``args`` holds the command's ``dataset``, ``scale``, ``feature_scale``, ``seeds`` (a count) and
    ``rates`` (``vars()`` of the parsed arguments, or a settings mapping); ``seconds`` is the time
    :func:`run` took.
    """
    return {"dataset": args["dataset"], "scale": args["scale"], "feature_scale": args["feature_scale"],
            "n_train": len(ds.y_train), "n_val": len(ds.y_val), "n_test": len(ds.y_test),
            "n_features": ds.X_train.shape[1], "seeds": args["seeds"], "rates": list(args["rates"]),
            "booster": f"{booster.method} mu={booster.mu:g}, {booster.criterion}, {booster.trees} trees, "
                       f"lr {booster.learning_rate:g}, depth {booster.max_depth}/{booster.max_leaves} leaves",
            "settings": asdict(booster), "seconds": seconds}


QUICK = {"scale": 0.02, "feature_scale": 0.05, "rates": [0.1, 0.5, 1.0], "seeds": 2, "trees": 20}


def load(name: str, scale: float, feature_scale: float, seed: int) -> Dataset:
    """A binary dataset by :func:`gbfs.data.load_dataset` name (``feature_scale``: stand-ins only)."""
    kwargs = {"feature_scale": feature_scale} if name.endswith("_like") else {}
    ds = load_dataset(name, scale=scale, seed=seed, progress=False, **kwargs)
    if ds.task != "binary":
        raise ValueError(f"dataset {name!r} is a {ds.task} task; the comparison needs a binary one (AUC)")
    return ds


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m runners.sampling", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="epsilon_like", help="a gbfs.data.load_dataset name (binary)")
    ap.add_argument("--scale", type=float, default=0.1, help="rows: stand-in multiplier / share of real data")
    ap.add_argument("--feature-scale", type=float, default=1.0, help="columns of a synthetic stand-in")
    ap.add_argument("--data-seed", type=int, default=0, help="seed of the data and of the validation split")
    ap.add_argument("--rates", type=float, nargs="+", default=list(DEFAULT_RATES))
    ap.add_argument("--seeds", type=int, default=5, help="fits per cell, random_state 0 .. seeds - 1")
    ap.add_argument("--strategies", nargs="+", default=list(OURS + LIGHTGBM), choices=list(OURS + LIGHTGBM))
    ap.add_argument("--no-lightgbm", action="store_true", help="only our samplers")
    b = Booster()
    ap.add_argument("--method", default=b.method, choices=["gbfs", "agbm"])
    ap.add_argument("--mu", type=float, default=b.mu, help="feature penalty (0: plain boosting)")
    ap.add_argument("--trees", type=int, default=b.trees)
    ap.add_argument("--learning-rate", type=float, default=b.learning_rate)
    ap.add_argument("--max-depth", type=int, default=b.max_depth)
    ap.add_argument("--max-leaves", type=int, default=b.max_leaves)
    ap.add_argument("--min-samples-leaf", type=int, default=b.min_samples_leaf)
    ap.add_argument("--criterion", default=b.criterion, choices=["newton", "sse"],
                    help="newton: Newton gain and leaves; sse: the papers' first-order mode")
    ap.add_argument("--goss-style", default=b.goss_style, choices=["paper", "lightgbm"])
    ap.add_argument("--threads", type=int, default=b.threads)
    ap.add_argument("--quick", action="store_true", help=f"a tiny run: {QUICK}")
    ap.add_argument("--out", type=Path, default=None,
                    help="folder of the CSV / Markdown / PNG (default results/sampling; --quick: "
                         "results/bench/sampling-quick, so a quick run never overwrites the results)")
    ap.add_argument("--tracking-uri", default="sqlite:///mlflow.db", help="MLflow store of the run")
    ap.add_argument("--no-mlflow", action="store_true", help="do not log to MLflow")
    ap.add_argument("--experiment", default="gbfs-sampling", help="MLflow experiment")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
    if args.out is None:
        args.out = Path("results/bench/sampling-quick" if args.quick else "results/sampling")
    if args.no_lightgbm:
        args.strategies = [s for s in args.strategies if s in OURS]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the comparison, write the CSV, Markdown and PNG (and an MLflow run), print the tables."""
    args = parse_args(argv)
    booster = Booster(method=args.method, mu=args.mu, trees=args.trees, learning_rate=args.learning_rate,
                      max_depth=args.max_depth, max_leaves=args.max_leaves,
                      min_samples_leaf=args.min_samples_leaf, criterion=args.criterion,
                      goss_style=args.goss_style, threads=args.threads)
    ds = load(args.dataset, args.scale, args.feature_scale, args.data_seed)
    t0 = time.perf_counter()
    df = run(ds, booster, args.rates, list(range(args.seeds)), args.strategies, progress=not args.quiet)
    meta = describe(ds, booster, vars(args), time.perf_counter() - t0)
    paths = write(df, args.out, meta)
    print(markdown(df, meta))
    if not args.no_mlflow:
        run_id = log_mlflow(df, paths, meta, args.tracking_uri, args.experiment)
        print(f"MLflow run {run_id} in {args.tracking_uri} (experiment {args.experiment})")
    print("wrote " + ", ".join(str(p) for p in paths))
    print("\n".join(mvs_verdict(df)[1]))
    return 0
