"""Scaling curves (``python -m runners.bench scaling``): time against rows, features and threads.

Ours and LightGBM with matched settings (:mod:`runners.bench.matched`, ``--trees`` trees, 2 threads
unless the curve is over threads) on dense float32 data of
:func:`gbfs.data.synthetic.generators.make_sparse_classification` (uniform features, 10 informative):

* ``rows``: ``n`` = 10^3 ... ``--max-rows`` (default 10^6) at 100 features;
* ``features``: ``d`` = 10^2 ... ``--max-features`` (default 10^5) at 1000 rows;
* ``threads``: 1 and 2 at 10^5 x 100.

Per point, the whole fit (ours: wall time of ``fit``, binning included; LightGBM: Dataset
construction plus training) and the time per tree (ours: boosting seconds over trees; LightGBM:
training over trees).  Per curve, the fitted exponent: the least-squares slope of log time against
log size, ours and LightGBM's (1.0 is linear; below 1 a fixed cost still dominates the small end).

How close to the machine: the histogram kernel's updates per second -- one histogram of every row
and feature, three channels (:func:`gbfs.booster.kernels.histogram.build_histogram`) -- next to a
minimal accumulate loop on the same matrix (one float64 channel, nothing else: the least work an
update can be), on one thread and on all of them.  Nothing here is a target; results go to
``results/bench/scaling.json`` with the command and commit that made them.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before any OpenMP runtime loads

import argparse
import json
import time
from pathlib import Path

import numba
import numpy as np
from numba import njit, prange

from gbfs import GBFSClassifier
from gbfs.booster.binning import BinMapper
from gbfs.booster.kernels.histogram import HistogramLayout, build_histogram
from gbfs.data.synthetic.generators import make_sparse_classification
from runners.bench import provenance
from runners.bench.matched import Matched, warm_up

ROWS_AT, FEATURES_AT, THREADS_AT = 100, 1000, (100_000, 100)


def _data(n: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    X, y, _ = make_sparse_classification(n, d, n_informative=10, noise=0.5, random_state=0,
                                         dtype=np.float32)
    return X, y


def point(n: int, d: int, trees: int, threads: int) -> dict:
    """One fit of each learner on ``n x d``: whole fit and per-tree seconds."""
    import lightgbm as lgb

    X, y = _data(n, d)
    m = Matched(n_estimators=trees, threads=threads)
    GBFSClassifier(**m.ours(n_estimators=2)).fit(X[:2000], y[:2000])   # this layout's kernels, compiled
    t0 = time.perf_counter()
    ours = GBFSClassifier(**m.ours()).fit(X, y)
    fit = time.perf_counter() - t0
    t0 = time.perf_counter()
    ds = lgb.Dataset(X, y, params={"max_bin": m.max_bins, "verbose": -1, "num_threads": threads}).construct()
    t1 = time.perf_counter()
    lgb.train(m.lightgbm(), ds, num_boost_round=trees)
    t2 = time.perf_counter()
    return {"n": n, "d": d, "threads": threads, "trees": trees, "ours_fit_s": fit,
            "ours_per_tree_s": ours.timings_["boosting_seconds"] / ours.n_iter_,
            "lgb_fit_s": t2 - t0, "lgb_per_tree_s": (t2 - t1) / trees}


def exponent(sizes: list[float], seconds: list[float]) -> float:
    """Least-squares slope of log seconds against log size."""
    return float(np.polyfit(np.log(sizes), np.log(seconds), 1)[0])


def curve(name: str, points: list[dict], key: str) -> dict:
    """A curve's points and the fitted exponents of its four timings along ``key``."""
    sizes = [p[key] for p in points]
    return {"curve": name, "along": key, "points": points,
            "exponents": {t: exponent(sizes, [p[t] for p in points]) for t in
                          ("ours_fit_s", "lgb_fit_s", "ours_per_tree_s", "lgb_per_tree_s")}}


@njit(parallel=True, cache=True)
def _minimal_accumulate(X_binned, r, out):
    """The least work of a histogram update: one float64 channel per bin of one column."""
    for f in prange(X_binned.shape[1]):
        col = X_binned[:, f]
        acc = np.zeros(256)
        for i in range(col.shape[0]):
            acc[col[i]] += r[i]
        out[f] = acc[0]


def _best_of(fn, repeats: int = 3) -> float:
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def update_rates(n: int = 200_000, d: int = 100) -> dict:
    """Histogram updates per second: our kernel (three channels) and the minimal loop, on one
    thread and on all threads."""
    X, _ = _data(n, d)
    mapper = BinMapper().fit(X)
    Xb = mapper.transform(X)
    layout = HistogramLayout(mapper.n_bins_non_missing_)
    rng = np.random.default_rng(0)
    r, h = rng.normal(size=n), rng.random(n)
    hist, features, rows = layout.new(), np.arange(d, dtype=np.int64), np.empty(0, dtype=np.int32)
    out = np.empty(d)
    rates, threads = {}, numba.get_num_threads()
    for label, k in (("1_thread", 1), (f"{threads}_threads", threads)):
        numba.set_num_threads(k)
        try:
            ours = _best_of(lambda: build_histogram(Xb, features, rows, r, h, features, layout.offsets,
                                                    layout.n_bins, hist))
            minimal = _best_of(lambda: _minimal_accumulate(Xb, r, out))
        finally:
            numba.set_num_threads(threads)
        rates[label] = {"ours_updates_per_s": n * d / ours, "minimal_updates_per_s": n * d / minimal,
                        "share_of_minimal": minimal / ours}
    return {"n": n, "d": d, **rates}


def _sizes(lo: int, hi: int) -> list[int]:
    return [10 ** k for k in range(int(round(np.log10(lo))), int(np.floor(np.log10(hi))) + 1)]


def run(args: argparse.Namespace) -> int:
    warm_up(2)
    rows = [point(n, ROWS_AT, args.trees, 2) for n in _sizes(1000, args.max_rows)]
    features = [point(FEATURES_AT, d, args.trees, 2) for d in _sizes(100, args.max_features)]
    threads = [point(*THREADS_AT, args.trees, t) for t in (1, 2)]
    curves = [curve("rows", rows, "n"), curve("features", features, "d"),
              curve("threads", threads, "threads")]
    rates = update_rates()
    for c in curves:
        print(f"\n== {c['curve']} (along {c['along']}) ==")
        print(f"{c['along']:>8}  {'fit ours':>9}  {'fit lgb':>9}  {'tree ours':>10}  {'tree lgb':>10}")
        for p in c["points"]:
            print(f"{p[c['along']]:>8}  {p['ours_fit_s']:>8.3f}s  {p['lgb_fit_s']:>8.3f}s  "
                  f"{1e3 * p['ours_per_tree_s']:>8.2f}ms  {1e3 * p['lgb_per_tree_s']:>8.2f}ms")
        e = c["exponents"]
        print(f"exponent: whole fit ours {e['ours_fit_s']:.2f}, LightGBM {e['lgb_fit_s']:.2f};  "
              f"per tree ours {e['ours_per_tree_s']:.2f}, LightGBM {e['lgb_per_tree_s']:.2f}")
    print(f"\nhistogram updates per second ({rates['n']} x {rates['d']}, three channels vs a minimal "
          "one-channel loop):")
    for label, v in rates.items():
        if isinstance(v, dict):
            print(f"  {label:>10}: ours {v['ours_updates_per_s'] / 1e6:7.0f} M/s, minimal "
                  f"{v['minimal_updates_per_s'] / 1e6:7.0f} M/s, ours at "
                  f"{100 * v['share_of_minimal']:.0f} % of it")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"curves": curves, "update_rates": rates, **provenance()}, indent=2))
    print(f"\nwrote {args.out}")
    return 0


def _at_least(low: int):
    """An argparse type: an integer of at least ``low`` (a curve needs two points to fit its slope)."""
    def parse(text: str) -> int:
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        return value
    return parse


def add_parser(sub) -> None:
    p = sub.add_parser("scaling", help="time against rows, features and threads, ours and LightGBM's")
    p.add_argument("--trees", type=_at_least(1), default=20)
    p.add_argument("--max-rows", type=_at_least(10_000), default=1_000_000,
                   help="the rows curve's largest size (a power of ten from 10^3 up; at least two points)")
    p.add_argument("--max-features", type=_at_least(1000), default=100_000,
                   help="the features curve's largest size (a power of ten from 10^2 up; at least two "
                        "points)")
    p.add_argument("--out", type=Path, default=Path("results/bench/scaling.json"))
    p.set_defaults(handler=run)
