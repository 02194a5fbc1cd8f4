"""Data-parallel fits on Dask against ``lightgbm.dask`` (``python -m runners.bench dask``).

Every configuration (rows x workers x features) starts a ``distributed.LocalCluster`` of worker
processes with one thread each on 127.0.0.1 and generates its rows *on the workers*, partition by
partition (``dask.array``'s seeded generator: no process ever holds all rows), as a binary target
of a few informative columns.  On the same cluster and rows it fits
:class:`gbfs.dask.DaskGBFSClassifier` and ``lightgbm.DaskLGBMClassifier`` with the matched settings
of :mod:`runners.bench.matched` (Newton gain and leaves, depth 5 / 32 leaves, 255 bins, mu = 0, one
thread per worker) and prints, per configuration:

* time per tree: ours (the boosting loop alone, and the whole fit with binning over the trees)
  and LightGBM's (its whole fit over the trees: its Dask fit has no separate boosting time);
* communication per tree: the bytes of histograms the workers sent to the driver;
* memory per worker: the largest growth of a worker's resident memory during the fit (sampled
  after every tree) next to its share of the binned rows plus the histograms it builds.

Targets (MET / NOT MET): per-tree time at most :data:`TARGETS` ``time_ratio`` x lightgbm.dask's at
10^6 rows (whole fits compared), memory per worker at most ``memory_ratio`` x its share of the
binned data plus histograms.  Results go to ``results/dask/bench.json`` with the command and
commit.  Larger runs are the same command, e.g. ``--rows 10000000 --workers 4 --features 100``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

TARGETS = {"time_ratio": 1.5, "memory_ratio": 1.2, "time_rows": 1_000_000}


def _rss() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


def _block(rows: int, features: int, seed: list) -> tuple[np.ndarray, np.ndarray]:
    """One partition's rows: standard normal features, a label of the first five and noise."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, features))
    w = np.zeros(features)
    w[:5] = [1.0, -2.0, 1.5, 0.5, -1.0]
    return X, ((X @ w + rng.normal(size=rows)) > 0).astype(np.float64)


def _data(client, rows: int, workers: int, features: int, seed: int = 0):
    """``X``, ``y`` generated on the workers, partition ``k`` on worker ``k`` (the scheduler
    would put small partitions on one worker), kept there."""
    import operator

    import dask
    import dask.array as da
    from distributed import wait

    addresses = sorted(client.scheduler_info()["workers"])[:workers]
    sizes = [rows // workers + (k < rows % workers) for k in range(workers)]
    xs, ys = [], []
    for k, (w, n) in enumerate(zip(addresses, sizes)):
        block = client.submit(_block, n, features, [seed, k], workers=[w], pure=False)
        xs.append(da.from_delayed(dask.delayed(client.submit(operator.getitem, block, 0, workers=[w])),
                                  (n, features), np.float64))
        ys.append(da.from_delayed(dask.delayed(client.submit(operator.getitem, block, 1, workers=[w])),
                                  (n,), np.float64))
    X, y = da.concatenate(xs), da.concatenate(ys)
    wait(client.persist([X, y]))
    return X, y


class _PeakMemory:
    """A callback sampling every worker's resident memory after each tree."""

    def __init__(self, client):
        self.client, self.peak = client, {}

    def __call__(self, env) -> None:
        for w, rss in self.client.run(_rss).items():
            self.peak[w] = max(self.peak.get(w, 0), rss)


def _ours(client, X, y, settings, trees: int) -> dict:
    from gbfs.dask import DaskGBFSClassifier

    before = client.run(_rss)
    probe = _PeakMemory(client)
    t0 = time.perf_counter()
    m = DaskGBFSClassifier(client=client, **settings.ours(n_threads=1)).fit(X, y, callbacks=[probe])
    fit_s = time.perf_counter() - t0
    t = m.timings_
    growth = [probe.peak[w] - before[w] for w in before if w in probe.peak]
    return {"fit_s": fit_s, "per_tree_ms": 1000 * t["boosting_seconds"] / trees,
            "fit_per_tree_ms": 1000 * fit_s / trees, "hist_bytes_per_tree": t["histogram_bytes_per_tree"],
            "hist_requests_per_tree": t["histogram_requests"] / trees,
            "rss_growth_per_worker": max(growth) if growth else 0, "shard_bytes": t["shard_bytes"],
            "hosts": len(t["shard_bytes"])}


def _lightgbm(client, X, y, settings, trees: int) -> dict:
    import lightgbm as lgb

    params = settings.lightgbm(num_threads=1)
    params.pop("seed")
    t0 = time.perf_counter()
    lgb.DaskLGBMClassifier(client=client, n_estimators=trees, random_state=settings.seed, **params).fit(X, y)
    fit_s = time.perf_counter() - t0
    return {"fit_s": fit_s, "fit_per_tree_ms": 1000 * fit_s / trees}


def _budget(rows: int, workers: int, features: int) -> int:
    """A worker's share of the binned rows (one byte per entry) plus its histograms (one per
    partition, 256 bins x 3 float64 channels per feature at most)."""
    return -(-rows // workers) * features + features * 256 * 3 * 8


def run_one(rows: int, workers: int, features: int, trees: int) -> dict:
    from distributed import Client, LocalCluster

    from runners.bench.matched import Matched

    settings = Matched(n_estimators=trees, threads=1)
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0", silence_logs=40) as cluster, Client(cluster) as client:
        Xw, yw = _data(client, 4000, workers, features, seed=1)  # compile (or load) every kernel
        _ours(client, Xw, yw, Matched(n_estimators=2, threads=1), 2)
        X, y = _data(client, rows, workers, features)
        ours = _ours(client, X, y, settings, trees)
        lgbm = _lightgbm(client, X, y, settings, trees)
    budget = _budget(rows, workers, features)
    return {"rows": rows, "workers": workers, "features": features, "trees": trees, "ours": ours,
            "lightgbm": lgbm, "time_ratio": ours["fit_per_tree_ms"] / lgbm["fit_per_tree_ms"],
            "memory_budget_per_worker": budget,
            "memory_ratio": ours["rss_growth_per_worker"] / budget}


def _print(rows: list[dict]) -> None:
    print(f"{'rows':>9s} {'wk':>3s} {'feat':>5s} {'ours ms/tree':>13s} {'(fit)':>8s} {'lgb ms/tree':>12s} "
          f"{'ratio':>6s} {'hist KB/tree':>13s} {'RSS MB/wk':>10s} {'budget MB':>10s} {'mem ratio':>9s}")
    for r in rows:
        o = r["ours"]
        print(f"{r['rows']:9d} {r['workers']:3d} {r['features']:5d} {o['per_tree_ms']:13.1f} "
              f"{o['fit_per_tree_ms']:8.1f} {r['lightgbm']['fit_per_tree_ms']:12.1f} {r['time_ratio']:6.2f} "
              f"{o['hist_bytes_per_tree'] / 1e3:13.1f} {o['rss_growth_per_worker'] / 1e6:10.1f} "
              f"{r['memory_budget_per_worker'] / 1e6:10.1f} {r['memory_ratio']:9.2f}")


def verdicts(rows: list[dict]) -> dict:
    """MET / NOT MET of both targets over the measured configurations."""
    timed = [r for r in rows if r["rows"] >= TARGETS["time_rows"]]
    time_met = bool(timed) and all(r["time_ratio"] <= TARGETS["time_ratio"] for r in timed)
    mem_met = all(r["memory_ratio"] <= TARGETS["memory_ratio"] for r in rows)
    return {"time": {"target": TARGETS["time_ratio"], "measured": [r["time_ratio"] for r in timed],
                     "met": time_met},
            "memory": {"target": TARGETS["memory_ratio"], "measured": [r["memory_ratio"] for r in rows],
                       "met": mem_met}}


def run(args: argparse.Namespace) -> int:
    from runners.bench import provenance

    rows = [run_one(n, w, d, args.trees) for n in args.rows for w in args.workers for d in args.features]
    _print(rows)
    v = verdicts(rows)
    measured = ", ".join(f"{x:.2f}" for x in v["time"]["measured"])
    print(f"\nper-tree time <= {TARGETS['time_ratio']}x lightgbm.dask at >= {TARGETS['time_rows']} rows: "
          f"{'MET' if v['time']['met'] else 'NOT MET'} ({measured})")
    print(f"memory per worker <= {TARGETS['memory_ratio']}x binned share + histograms: "
          f"{'MET' if v['memory']['met'] else 'NOT MET'} "
          f"({', '.join(f'{x:.2f}' for x in v['memory']['measured'])})")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result = {**provenance(), "targets": TARGETS, "verdicts": v, "runs": rows}
    args.out.write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("dask", help="data-parallel fits on a local Dask cluster vs lightgbm.dask")
    p.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    p.add_argument("--workers", type=int, nargs="+", default=[2])
    p.add_argument("--features", type=int, nargs="+", default=[50])
    p.add_argument("--trees", type=int, default=20)
    p.add_argument("--out", type=Path, default=Path("results/dask/bench.json"))
    p.set_defaults(handler=run)
