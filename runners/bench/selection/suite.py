"""Feature selection under a budget (``python -m runners.bench selection``): gbfs vs GBDT-topK, CEGB, L1.

    python -m runners.bench selection --quick     # ~2 min: breast_cancer, digits, madelon, one seed
    python -m runners.bench selection             # every data set, seeds 0 1 2 (~30-45 min, 2 cores)
    python -m runners.bench selection --datasets madelon isolet --seeds 0 --budgets 5 10 \\
        --families 'gbfs:agbm-*' 'lgbm:*' ref:unpenalised-sse --out results/selection/try

Protocol.  Data sets (:mod:`runners.bench.selection.data`; one that is not on this machine is skipped
with a note): isolet, tox171, breast_cancer, digits, madelon and the gisette/epsilon/flight stand-ins.
For every seed in 0, 1, 2: a stratified 70/30 train/test split, and inside train a stratified 80/20
fit/validation split (``train_test_split(..., stratify=y, random_state=seed)``).  Every boosted fit
has at most 200 trees, learning rate 0.1, depth 5, 31 leaves, 20 rows per leaf and early stopping
after 20 rounds without a better validation log-loss.  Budgets K = 5, 10, 20, 50.  In each (data
set, K) cell and each method family (:data:`runners.bench.selection.families.FAMILIES`) the setting
with the best validation AUC among those using at most K features is chosen, per seed; the cell
reports its test AUC averaged over the seeds (:mod:`runners.bench.selection.report`).  Budgeted
settings are built for min(K, d) features; cells with K >= d are reported and flagged.

Families: ``gbfs:<method>-<criterion>`` (GBFS, A-GBM, GT-GBM with per-tree group tests, criterion
``sse`` with mean leaves or ``newton`` with Newton leaves, over a ``mu`` grid: the papers' model),
``...+budget`` (``max_features=K``), ``...+refit`` (``max_features=K``, ``refit=True``),
``gbfs:path-<method>-<criterion>`` (:func:`gbfs.selection_path`, all budgets in one call),
``gbfs:topk-gain|split`` (GBDT-topK in our booster), and the peers ``lgbm:topk-gain|split``,
``lgbm:cegb`` and ``l1-logistic``; ``ref:unpenalised-<criterion>`` are the unpenalised fits on every
feature that time target (f).

Outputs in ``--out`` (``results/selection``; ``--quick``: ``results/selection/quick``):
``selection.csv`` (one row per fit: data set, seed, family, setting, the budget it was built for,
``eligible_budgets`` = the K with ``n_features <= K``, n_features, val/test AUC, fit seconds, mu, C,
the path's source and note), ``summary.md`` and ``auc_vs_features.png``.  The verdict printed last
has MET / NOT MET for each target: (a) the validation-chosen gbfs configuration (``gbfs:best-val``:
per seed, the setting of best validation AUC among the penalised, budget, refit and path families --
not ``gbfs:topk-*``, which select no features themselves) >= GBDT-topK (the better of LightGBM's gain
and split rankings, by test AUC) in >= 75 % of cells; (b) never more than 0.005 AUC behind it on
data sets with >= 400 test rows; (c) >= LightGBM CEGB in every cell; (d) features non-increasing in
mu for every penalised method and criterion; (e) no budget exceeded and every path answer with
fewer than K features says why; (f) the path's time (every budget) <= 3x one unpenalised fit with
the same criterion; then (g)-(j) against the peers users pick instead, from
:mod:`runners.bench.selection.peers` (the default path against the best peer, the penalised
selection alone against LightGBM top K, the path's choice regret, its time against LightGBM top K).
Opt-in families (``--families``): ``gbfs:path+exact|+norfe|+exact+norfe|+cv-<method>-<criterion>``
(the path with exactly K features, without recursive elimination, both, or choosing by 5-fold
cross-validation), ``lgbm:rfe``, ``lgbm:shap-topk`` and ``mrmr``.

The mu grids (:class:`runners.bench.selection.families.Grids`; GBFS's mu is rescaled to gain units,
see :mod:`runners.bench.selection.families`): penalised 7 values log-spaced in [1e-4, 0.3];
``+budget`` 0 and 0.01; ``+refit`` 0.003, 0.01, 0.03 (the selection ends after 5 trees without a new
feature, as the path's probes do); CEGB the penalised grid; L1 C in 7 values log-spaced in
[0.003, 3].
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Sequence
from fnmatch import fnmatch
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from runners.bench import provenance
from runners.bench.selection import data, report
from runners.bench.selection.families import CRITERIA, FAMILIES, METHODS, Booster, Grids, Split
from runners.bench.selection.peers import peer_lines

DATASETS = ("breast_cancer", "digits", "isolet", "tox171", "madelon", "gisette_like", "epsilon_like",
            "flight_like")
SEEDS = (0, 1, 2)
BUDGETS = (5, 10, 20, 50)
QUICK = {"datasets": ("breast_cancer", "digits", "madelon"), "seeds": (0,), "budgets": (5, 10),
         "grids": Grids(mu=(1e-3, 0.01, 0.05, 0.2), mu_budget=(0.0,), mu_refit=(0.01,),
                        mu_cegb=(1e-3, 0.01, 0.1), l1_C=(0.01, 0.1, 1.0))}
COLUMNS = ("dataset", "seed", "family", "group", "setting", "budget", "eligible_budgets", "n_features",
           "val_auc", "test_auc", "fit_seconds", "cpu_seconds", "n_trees", "mu", "mu_raw", "C", "source",
           "note", "n_rows", "d", "n_test", "regret", "penalised_test_auc", "penalised_n_features",
           "ranking_seconds", "ranking_cpu_seconds")


def make_split(name: str, X: np.ndarray, y: np.ndarray, seed: int, budgets: Sequence[int], booster: Booster,
               grids: Grids) -> Split:
    """Stratified 70/30 train/test, then 80/20 fit/validation inside train, both seeded by ``seed``.

    Parameters
    ----------
    name : str
        The data set's name (recorded).
    X, y : ndarray
        The whole data set.
    seed : int
        ``random_state`` of both splits and of every estimator fitted on them.
    budgets : sequence of int
        The requested budgets; each is capped at the number of features.
    booster, grids : Booster, Grids
        The families' settings.

    Returns
    -------
    Split
    """
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, stratify=y, random_state=seed)
    X_fit, X_val, y_fit, y_val = train_test_split(X_tr, y_tr, test_size=0.2, stratify=y_tr, random_state=seed)
    capped = tuple(sorted({min(k, X.shape[1]) for k in budgets}))
    return Split(name, seed, X_fit, y_fit, X_val, y_val, X_te, y_te, capped, booster, grids)


def warm_up(booster: Booster) -> None:
    """Compile (or load from numba's cache) every kernel the families use, so no fit times the JIT."""
    rng = np.random.default_rng(0)
    X = rng.random((400, 12))
    y = (X[:, 0] + X[:, 1] > 1).astype(int)
    small = Booster(n_estimators=3, early_stopping_rounds=2, threads=booster.threads)
    tiny = Split("warm-up", 0, X[:300], y[:300], X[300:], y[300:], X[300:], y[300:], (2,), small,
                 Grids(mu=(0.01,), mu_budget=(0.01,), mu_refit=(0.01,), mu_cegb=(0.01,), l1_C=(1.0,)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in [f"gbfs:{m}-{c}{v}" for m in METHODS for c in CRITERIA for v in ("", "+refit")]:
            FAMILIES[name].run(tiny)
        FAMILIES["gbfs:topk-gain"].run(tiny)


def run_split(split: Split, families: Sequence[str], n_rows: int) -> list[dict]:
    """Every family's fits on one split, as CSV records."""
    rows = []
    for name in families:
        t0 = time.perf_counter()
        with warnings.catch_warnings():  # a budget capped at d never binds: the report flags those cells
            warnings.filterwarnings("ignore", message=r"max_features=\d+ is at least", category=UserWarning)
            records = FAMILIES[name].run(split)
        print(f"  {split.dataset} seed {split.seed} {name}: {len(records)} fits, "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
        rows += [{"dataset": split.dataset, "seed": split.seed, "family": name, "group": FAMILIES[name].group,
                  **r, "n_rows": n_rows, "d": split.n_features, "n_test": len(split.y_test)} for r in records]
    return rows


def benchmark(datasets: Sequence[str], seeds: Sequence[int], budgets: Sequence[int], families: Sequence[str],
              booster: Booster, grids: Grids, data_dir: Path, csv_path: Path) -> pd.DataFrame:
    """Fit every family on every split of every available data set.

    Parameters
    ----------
    datasets : sequence of str
        Names in :data:`runners.bench.selection.data.DATASETS`; one that is not available is skipped.
    seeds : sequence of int
    budgets : sequence of int
    families : sequence of str
        Names in :data:`runners.bench.selection.families.FAMILIES`.
    booster, grids : Booster, Grids
    data_dir : Path
        Where ``isolet.npz`` and ``tox171.npz`` are.
    csv_path : Path
        Rewritten after each split, so a long run that is stopped keeps what it measured.

    Returns
    -------
    DataFrame
        One row per fit, the CSV's :data:`COLUMNS`.
    """
    rows = []
    for name in datasets:
        loaded = data.load(name, data_dir)
        if loaded is None:
            continue
        X, y = loaded
        print(f"{name}: {X.shape[0]} rows x {X.shape[1]} features, {np.mean(y == y.max()):.0%} positive",
              flush=True)
        for seed in seeds:
            rows += run_split(make_split(name, X, y, seed, budgets, booster, grids), families, X.shape[0])
            frame(rows, budgets).to_csv(csv_path, index=False)
    return frame(rows, budgets)


def frame(rows: list[dict], budgets: Sequence[int]) -> pd.DataFrame:
    """Records as the CSV's columns, with the budgets each fit is eligible for."""
    df = pd.DataFrame(rows).reindex(columns=list(COLUMNS))
    df["eligible_budgets"] = [";".join(str(k) for k in budgets if n <= k) for n in df["n_features"]]
    return df.astype({"budget": "Int64", "n_trees": "Int64"})  # integers with gaps (NaN) for the CSV


def write_report(df: pd.DataFrame, budgets: Sequence[int], out: Path, meta: dict) -> list[str]:
    """``summary.md`` and ``auc_vs_features.png`` from the fits; returns the verdict lines."""
    chosen = report.choose(df, budgets)
    table = report.cells(chosen)
    lines = report.verdict(df, table) + peer_lines(df, table)
    (out / "summary.md").write_text(report.markdown(df, chosen, table, lines, meta))
    report.plot(table, out / "auc_vs_features.png")
    return lines


def select_families(patterns: Sequence[str] | None) -> list[str]:
    """Registry names matching any of the shell-style ``patterns`` (None: every family of the default
    set -- those with ``default=False``, such as ``lgbm:rfe``, run only when named), in registry order."""
    if not patterns:
        return [n for n, f in FAMILIES.items() if f.default]
    names = [n for n in FAMILIES if any(fnmatch(n, p) for p in patterns)]
    if not names:
        raise SystemExit(f"--families {' '.join(patterns)} matches none of: {', '.join(FAMILIES)}")
    return names


def settings(args: argparse.Namespace) -> dict:
    """The run's settings: ``--quick``'s defaults unless an option was given."""
    quick = QUICK if args.quick else {}
    return {"datasets": args.datasets or quick.get("datasets", DATASETS),
            "seeds": args.seeds or quick.get("seeds", SEEDS),
            "budgets": tuple(sorted(set(args.budgets or quick.get("budgets", BUDGETS)))),
            "families": select_families(args.families), "grids": quick.get("grids", Grids()),
            "booster": Booster(threads=args.threads), "data_dir": args.data_dir,
            "out": args.out or Path("results/selection") / ("quick" if args.quick else "")}


def run_meta(s: dict, df: pd.DataFrame, seconds: float) -> dict:
    """What ``summary.md`` records about the run."""
    skipped = [d for d in s["datasets"] if d not in set(df["dataset"])]
    made_by = provenance()
    return {"command": made_by["command"], "commit": made_by["git_commit"],
            **{k: s[k] for k in ("datasets", "seeds", "budgets", "booster", "grids")},
            "skipped (not available)": skipped or "none", "runtime": f"{seconds:.0f} s"}


def run(args: argparse.Namespace) -> int:
    """``python -m runners.bench selection``: fit, write the CSV, summary and plot, print the verdict."""
    s, t0 = settings(args), time.perf_counter()
    s["out"].mkdir(parents=True, exist_ok=True)
    warm_up(s["booster"])
    df = benchmark(s["datasets"], s["seeds"], s["budgets"], s["families"], s["booster"], s["grids"],
                   s["data_dir"], s["out"] / "selection.csv")
    if df.empty:
        print("no data set was available: nothing to report")
        return 1
    meta = run_meta(s, df, time.perf_counter() - t0)
    lines = write_report(df, s["budgets"], s["out"], meta)
    print(f"\nwrote {s['out']}/selection.csv, summary.md, auc_vs_features.png ({meta['runtime']})\n")
    print("\n".join(lines))
    return 0


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"a budget must be >= 1, got {value}")
    return value


def add_parser(sub) -> None:
    p = sub.add_parser("selection", help="feature selection under a budget: gbfs vs GBDT-topK, CEGB, L1",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="breast_cancer, digits, madelon, seed 0, budgets 5 10, small grids (~2 min)")
    p.add_argument("--datasets", nargs="+", choices=list(data.DATASETS), metavar="NAME",
                   help=f"of {', '.join(data.DATASETS)} (default: all)")
    p.add_argument("--seeds", nargs="+", type=int, help="default: 0 1 2")
    p.add_argument("--budgets", nargs="+", type=_positive, help="feature budgets K (default: 5 10 20 50)")
    p.add_argument("--families", nargs="+", metavar="PATTERN",
                   help=f"shell patterns of family names (default: all): {', '.join(FAMILIES)}")
    p.add_argument("--threads", type=int, default=2, help="threads of every boosted fit")
    p.add_argument("--data-dir", type=Path, default=data.default_data_dir(),
                   help="isolet.npz and tox171.npz (default: $GBFS_SHARED_DATA or <repo>/../shared/data)")
    p.add_argument("--out", type=Path, help="output directory (default: results/selection[/quick])")
    p.set_defaults(handler=run)
