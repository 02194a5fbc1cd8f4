"""Benchmarks printed side by side with LightGBM in one run (``python -m runners.bench core|gtgbm|data``).

``gtgbm`` is described in :mod:`runners.bench_gtgbm`, ``data`` in
:mod:`runners.bench_data`, ``sampling`` in :mod:`runners.bench_sampling`, ``selection`` in
:mod:`runners.bench_selection`, ``multitask`` in :mod:`runners.bench_multitask`.

Targets live here, never as timed assertions in tests.  ``core`` measures,
per paper shape (Gisette 6000x5000, Epsilon 80000x2000, Flight 100000x634, synthetic
dense data with a sparse signal), with matched settings (depth 5 / 32 leaves, 255
bins, learning rate 0.1, 50 trees, 2 threads, Newton gain and leaves, mu = 0):

* binning time vs LightGBM's Dataset construction,
* per-tree time and test AUC, and the ratios ours / LightGBM,
* the cost of the penalty (A-GBM mu = 0.01 vs mu = 0, per tree),
* peak memory allocated by ``fit`` (tracemalloc) relative to the binned matrix,
* JIT compile time: a cold process (empty numba cache) and a second process.
"""

from __future__ import annotations

import os

# before numba, LightGBM or scikit-learn load an OpenMP runtime (it reads this once): spinning idle
# OpenMP threads steal the cores from the next fit and distort timings on a shared machine
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import json
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

from gbfs import GBFSClassifier
from gbfs.binning import BinMapper
from gbfs.data.synthetic import PAPER_SHAPES, make_sparse_classification
from gbfs.metrics import roc_auc
from runners import bench_data, bench_gtgbm, bench_multitask, bench_sampling, bench_selection

TARGETS = {"per_tree_ratio": 1.0, "per_tree_ratio_max": 1.5, "binning_ratio": 0.5, "penalty_overhead": 0.05,
           "auc_gap_pt": 0.5, "jit_cold_s": 15.0, "jit_cached_s": 2.0, "memory_ratio": 3.0}


def matched_params(n_trees: int, threads: int) -> dict:
    """Our estimator's parameters that match :func:`lgb_params`."""
    return dict(method="gbfs", mu=0.0, criterion="newton", leaf_estimate="newton", max_depth=5,
                max_leaves=32, min_samples_leaf=20, min_child_weight=1e-3, reg_lambda=0.0,
                learning_rate=0.1, n_estimators=n_trees, max_bins=255, n_threads=threads,
                random_state=0)


def lgb_params(threads: int) -> dict:
    return dict(objective="binary", num_leaves=32, max_depth=5, min_data_in_leaf=20,
                min_sum_hessian_in_leaf=1e-3, lambda_l2=0.0, learning_rate=0.1, max_bin=255,
                num_threads=threads, verbose=-1, deterministic=True, force_col_wise=False,
                bagging_fraction=1.0, feature_fraction=1.0, seed=0)


class PeakTraced:
    """Peak memory allocated through numpy/Python while the block runs (tracemalloc).

    numpy reports its buffers to tracemalloc, so this counts the binned matrix, histograms,
    gradients and trees of ``fit``, independent of what the process held before; small
    scratch arrays allocated inside numba kernels are not traced.
    """

    def __enter__(self):
        tracemalloc.start()
        tracemalloc.reset_peak()
        self.base = tracemalloc.get_traced_memory()[0]
        return self

    def __exit__(self, *exc):
        self.peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()

    @property
    def extra(self) -> int:
        return self.peak - self.base


def warm_up(threads: int) -> None:
    """Compile (or load from numba's cache) every kernel so timings and memory exclude JIT."""
    rng = np.random.default_rng(0)
    X = rng.random((3000, 6))
    X[::9, 2] = np.nan
    y = (X[:, 0] + X[:, 1] > 1).astype(int)
    for method, crit in (("gbfs", "newton"), ("agbm", "sse")):
        GBFSClassifier(method=method, criterion=crit, n_estimators=2, n_threads=threads,
                       max_depth=5).fit(X, y).predict(X)


def bench_shape(name: str, n: int, d: int, n_trees: int, threads: int, n_test: int) -> dict:
    import lightgbm as lgb

    X, y, _ = make_sparse_classification(n + n_test, d, n_informative=20, noise=0.5, random_state=1)
    Xtr, ytr, Xte, yte = X[:n], y[:n], X[n:], y[n:]
    del X
    out = {"shape": name, "n_train": n, "n_features": d, "n_test": n_test, "n_trees": n_trees,
           "threads": threads}

    # ours, mu = 0, with memory sampling (run first so LightGBM's allocations do not hide ours)
    with PeakTraced() as mem:
        ours = GBFSClassifier(**matched_params(n_trees, threads)).fit(Xtr, ytr)
    out["ours_binning_s"] = ours.timings_["binning_seconds"]
    out["ours_per_tree_s"] = ours.timings_["boosting_seconds"] / ours.n_iter_
    out["ours_auc"] = roc_auc(yte, ours.decision_function(Xte))
    out["binned_mb"] = ours.timings_["binned_bytes"] / 2**20
    out["ours_peak_extra_mb"] = mem.extra / 2**20
    out["memory_ratio"] = mem.extra / ours.timings_["binned_bytes"]
    out["ours_leaves_per_tree"] = float(np.mean([t.n_leaves for t in ours.trees_]))

    # binning alone (fit + transform), best of 2
    t_bin = []
    for _ in range(2):
        t0 = time.perf_counter()
        BinMapper(255, 200_000, np.random.default_rng(0)).fit(Xtr).transform(Xtr)
        t_bin.append(time.perf_counter() - t0)
    out["ours_binning_s"] = min(t_bin)

    # penalty cost: A-GBM mu > 0 vs mu = 0 on the same criterion
    pen = GBFSClassifier(**{**matched_params(n_trees, threads), "method": "agbm", "mu": 0.01}).fit(Xtr, ytr)
    out["penalty_per_tree_s"] = pen.timings_["boosting_seconds"] / pen.n_iter_
    out["penalty_overhead"] = out["penalty_per_tree_s"] / out["ours_per_tree_s"] - 1.0
    out["penalty_n_features"] = pen.n_features_selected_
    out["penalty_auc"] = roc_auc(yte, pen.decision_function(Xte))

    # the papers' first-order mode (criterion="sse", mean leaves), for reference
    paper = GBFSClassifier(**{**matched_params(n_trees, threads), "criterion": "sse",
                              "leaf_estimate": "mean"}).fit(Xtr, ytr)
    out["paper_mode_per_tree_s"] = paper.timings_["boosting_seconds"] / paper.n_iter_
    out["paper_mode_auc"] = roc_auc(yte, paper.decision_function(Xte))

    # LightGBM, matched
    params = lgb_params(threads)
    t_ds = []
    for _ in range(2):
        t0 = time.perf_counter()
        ds = lgb.Dataset(Xtr, ytr, params={"max_bin": 255, "verbose": -1, "num_threads": threads},
                         free_raw_data=False).construct()
        t_ds.append(time.perf_counter() - t0)
    out["lgb_dataset_s"] = min(t_ds)
    t0 = time.perf_counter()
    booster = lgb.train(params, ds, num_boost_round=n_trees)
    out["lgb_per_tree_s"] = (time.perf_counter() - t0) / n_trees
    out["lgb_auc"] = roc_auc(yte, booster.predict(Xte, raw_score=True))
    out["lgb_leaves_per_tree"] = float(np.mean(
        [t["num_leaves"] for t in booster.dump_model()["tree_info"]]))

    out["per_tree_ratio"] = out["ours_per_tree_s"] / out["lgb_per_tree_s"]
    out["binning_ratio"] = out["ours_binning_s"] / out["lgb_dataset_s"]
    out["auc_gap_pt"] = 100 * (out["ours_auc"] - out["lgb_auc"])
    return out


_JIT_SNIPPET = """
import time
t0 = time.perf_counter()
import numpy as np
from gbfs import GBFSClassifier
t1 = time.perf_counter()
rng = np.random.default_rng(0)
X = rng.random((500, 8)); X[::7, 1] = np.nan
y = (X[:, 0] > 0.5).astype(int)
m = GBFSClassifier(n_estimators=3, min_samples_leaf=5).fit(X, y, eval_set=(X, y))
m.predict_proba(X)
t2 = time.perf_counter()
print(f"{t1 - t0} {t2 - t1}")
"""


def bench_jit() -> dict:
    """Import and first-fit time in a cold process (empty numba cache), then a second process."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        res = {}
        for label in ("cold", "cached"):
            t0 = time.perf_counter()
            proc = subprocess.run([sys.executable, "-c", _JIT_SNIPPET], env=env, check=True,
                                  capture_output=True, text=True)
            wall = time.perf_counter() - t0
            imp, fit = map(float, proc.stdout.split())
            res[f"jit_{label}_import_s"] = imp
            res[f"jit_{label}_first_fit_s"] = fit
            res[f"jit_{label}_process_s"] = wall
        return res


def _fmt_row(cols, widths):
    return "  ".join(str(c).rjust(w) for c, w in zip(cols, widths))


def print_core(rows: list[dict], jit: dict | None) -> None:
    print("\n== gbfs core benchmark: ours vs LightGBM (matched: depth 5 / 32 leaves, 255 bins, lr 0.1) ==")
    head = ["shape", "n x d", "bin ours", "bin lgb", "ratio", "tree ours", "tree lgb", "ratio",
            "AUC ours", "AUC lgb", "gap pt", "pen +%", "mem x"]
    widths = [8, 14, 9, 9, 6, 10, 10, 6, 9, 9, 7, 7, 6]
    print(_fmt_row(head, widths))
    for r in rows:
        print(_fmt_row([
            r["shape"], f"{r['n_train']}x{r['n_features']}", f"{r['ours_binning_s']:.3f}s",
            f"{r['lgb_dataset_s']:.3f}s", f"{r['binning_ratio']:.2f}", f"{1e3 * r['ours_per_tree_s']:.1f}ms",
            f"{1e3 * r['lgb_per_tree_s']:.1f}ms", f"{r['per_tree_ratio']:.2f}", f"{r['ours_auc']:.4f}",
            f"{r['lgb_auc']:.4f}", f"{r['auc_gap_pt']:+.2f}", f"{100 * r['penalty_overhead']:+.1f}",
            f"{r['memory_ratio']:.2f}"], widths))
    print("\npaper mode (criterion='sse', mean leaves), mu = 0:  " + ",  ".join(
        f"{r['shape']}: AUC {r['paper_mode_auc']:.4f}, {1e3 * r['paper_mode_per_tree_s']:.1f} ms/tree"
        for r in rows))
    print("A-GBM mu = 0.01:  " + ",  ".join(
        f"{r['shape']}: {r['penalty_n_features']} features, AUC {r['penalty_auc']:.4f}" for r in rows))
    if jit:
        print(f"\nJIT: cold process import {jit['jit_cold_import_s']:.2f}s + first fit "
              f"{jit['jit_cold_first_fit_s']:.2f}s;  second process import {jit['jit_cached_import_s']:.2f}s"
              f" + first fit {jit['jit_cached_first_fit_s']:.2f}s")
    t = TARGETS
    print(f"\ntargets: per-tree ratio <= {t['per_tree_ratio']} (never > {t['per_tree_ratio_max']}), "
          f"binning ratio <= {t['binning_ratio']}, penalty <= +{100 * t['penalty_overhead']:.0f}%, "
          f"|AUC gap| <= {t['auc_gap_pt']} pt, cold JIT <= {t['jit_cold_s']}s, "
          f"cached <= {t['jit_cached_s']}s, "
          f"memory <= {t['memory_ratio']}x binned")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m runners.bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="suite", required=True)
    core = sub.add_parser("core", help="booster vs LightGBM on the papers' shapes")
    core.add_argument("--shapes", nargs="+", default=list(PAPER_SHAPES), choices=list(PAPER_SHAPES))
    core.add_argument("--trees", type=int, default=50)
    core.add_argument("--threads", type=int, default=2)
    core.add_argument("--row-scale", type=float, default=1.0,
                      help="multiply the number of training rows (e.g. 0.1 for a quick run)")
    core.add_argument("--no-jit", action="store_true", help="skip the JIT timing subprocesses")
    core.add_argument("--out", type=Path, default=Path("results/bench/core.json"))
    core.set_defaults(handler=run_core)
    bench_gtgbm.add_parser(sub)
    bench_data.add_parser(sub)
    bench_sampling.add_parser(sub)
    bench_selection.add_parser(sub)
    bench_multitask.add_parser(sub)
    args = ap.parse_args(argv)
    return args.handler(args)


def run_core(args) -> int:

    warm_up(args.threads)
    rows = []
    for name in args.shapes:
        n, d = PAPER_SHAPES[name]
        n = max(200, int(n * args.row_scale))
        r = bench_shape(name, n, d, args.trees, args.threads, n_test=min(n // 4, 20000))
        rows.append(r)
        print(json.dumps(r), flush=True)
    jit = None if args.no_jit else bench_jit()
    print_core(rows, jit)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows, "jit": jit, "targets": TARGETS}, indent=2))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
