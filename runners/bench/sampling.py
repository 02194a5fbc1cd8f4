"""Sampling benchmark: ``python -m runners.bench sampling``.

Measured side by side in one run (MVS paper, Section 4.3 and Table 4):

* ``mvs_threshold`` -- the expected-O(N) quickselect of Algorithm 2 ("Calculate Threshold") -- on
  ``--threshold-n`` (10^7) regularized gradients of a logistic loss, against two numpy references
  that find the same mu: a binary search over the number of capped values (p = 1) with one
  ``np.partition`` per step, and the sort-based O(N log N) search the paper describes first
  (sort, suffix sums, first valid count).  All three must agree.
* the time per tree at sample rate ``--rate`` (0.2) over the full-data tree, for each of our
  samplers (``GBFSClassifier(sampler=...)``, Newton boosting, mu = 0) and for LightGBM's bagging and
  GOSS over LightGBM's full tree, on an Epsilon-shaped stand-in (80 000 x 2000 at ``--scale 1``).
  Per-tree times are the median over the trees from ``1 / learning_rate`` on, where LightGBM's GOSS
  starts sampling (it grows full trees before), so every ratio compares sampled trees.  Our
  per-iteration time includes what a sampled tree still costs on every row: scoring the new tree
  and the train metrics recorded after each tree.

* the whole fit (wall time of ``fit``, binning included) with MVS at ``--rate`` over the whole fit
  without sampling, at the Flight shape (:mod:`runners.bench.speed.shapes`: 100 000 x 634 at
  ``--fit-scale 1``, ``--fit-trees`` trees), with both test AUCs; LightGBM's bagging at the same
  rate over its own whole fit (Dataset construction + training) is printed beside it.

Targets (printed with MET / NOT MET, never asserted): threshold <= 0.2 s on 10^7 values, ratio
<= 0.4, the whole fit with MVS <= 0.4 of the whole fit without sampling losing at most 0.01 AUC, and
the comparison's: MVS's relative error below SGB's and GOSS's at every rate <= 0.1.
That third one needs the multi-seed tuned comparison of ``python -m runners.sampling`` (minutes to
hours), so the benchmark reads its CSV (``--comparison``, the committed ``results/sampling/sampling.csv``)
rather than rerunning it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

from gbfs import GBFSClassifier
from gbfs.booster.losses.metrics import roc_auc
from gbfs.data.synthetic.generators import GENERATORS
from gbfs.sampling.samplers import mvs_threshold
from runners.bench import provenance

TARGETS = {"threshold_s": 0.2, "per_tree_ratio": 0.4, "fit_ratio": 0.4, "fit_auc_loss": 0.01}
OURS = ("sgb", "goss", "mvs", "mvs_adaptive")


def sampler_params(name: str, rate: float) -> dict:
    """Our estimator's arguments for sample rate ``rate`` (GOSS: half top rows, half the rest;
    MVS: the paper's lambda = 0.1)."""
    if name == "goss":
        return {"sampler": "goss", "top_rate": rate / 2, "other_rate": rate / 2}
    if name == "mvs":
        return {"sampler": "mvs", "subsample": rate, "mvs_lambda": 0.1}
    return {"sampler": name, "subsample": rate}


def gradients(n: int, lam: float = 0.1, seed: int = 0) -> np.ndarray:
    """``sqrt(g^2 + lam h^2)`` of the logistic loss at random probabilities and labels."""
    rng = np.random.default_rng(seed)
    p = rng.random(n)
    g = (rng.random(n) < p) - p
    return np.sqrt(g * g + lam * (p * (1 - p)) ** 2)


def threshold_sort(values: np.ndarray, sample_size: float) -> float:
    """Reference, O(N log N): with the values sorted descending (v_0 >= v_1 >= ...), k capped values
    give mu_k = sum(v_k, v_{k+1}, ...) / (sample_size - k); mu is mu_k for the first k with
    v_k <= mu_k."""
    v = np.sort(values)[::-1]
    if sample_size >= v.shape[0]:
        return float(v[-1])
    k = np.arange(int(np.ceil(sample_size)))
    mu = np.cumsum(v[::-1])[::-1][k] / (sample_size - k)
    return float(mu[np.argmax(v[k] <= mu)])


def threshold_partition(values: np.ndarray, sample_size: float) -> float:
    """Reference, O(N log N) in O(N) steps: binary search for the same k as :func:`threshold_sort`,
    reading v_k and the suffix sum from one ``np.partition`` per step (no full sort)."""
    n = values.shape[0]
    if sample_size >= n:
        return float(values.min())

    def mu_if(k: int) -> tuple[bool, float]:
        part = np.partition(values, n - 1 - k)       # v_k at n - 1 - k, the smaller ones before it
        mu = float(part[:n - k].sum()) / (sample_size - k)
        return bool(part[n - 1 - k] <= mu), mu

    lo, hi = 0, int(np.ceil(sample_size)) - 1        # the condition holds at hi (mu_k >= v_k there)
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if mu_if(mid)[0] else (mid + 1, hi)
    return mu_if(lo)[1]


def _best_of(fn, repeat: int) -> tuple[object, float]:
    best, out = np.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return out, best


def bench_threshold(n: int, rate: float, repeat: int = 3) -> dict:
    """Ours vs the two references on ``n`` values at ``sample_size = rate * n`` (best of ``repeat``)."""
    values = gradients(n)
    size = rate * n
    pivots = np.random.default_rng(1).random(64)
    mvs_threshold(values[:1000], rate * 1000, pivots)  # compile (or load from numba's cache)
    ours, t_ours = _best_of(lambda: mvs_threshold(values, size, pivots), repeat)
    part, t_part = _best_of(lambda: threshold_partition(values, size), 1)
    srt, t_sort = _best_of(lambda: threshold_sort(values, size), 1)
    expected = float(np.minimum(1.0, values / ours).sum())
    return {"n": n, "rate": rate, "mu_ours": ours, "mu_partition": part, "mu_sort": srt,
            "max_rel_diff": max(abs(ours - part), abs(ours - srt)) / srt,
            "sum_p_over_target": expected / size, "ours_s": t_ours, "partition_s": t_part, "sort_s": t_sort,
            "speedup_vs_partition": t_part / t_ours, "speedup_vs_sort": t_sort / t_ours}


def _window_median(stamps: list[float], start: int) -> float:
    """Median seconds per iteration over iterations ``start ..`` (end-of-iteration timestamps); the
    median, since a busy machine adds spikes to some trees."""
    d = np.diff(np.asarray(stamps))
    return float(np.median(d[max(start - 1, 0):]))


def _ours(data, params: dict, trees: int, threads: int) -> tuple[float, float, float]:
    Xtr, ytr, Xte, yte = data
    m = GBFSClassifier(method="gbfs", mu=0.0, criterion="newton", leaf_estimate="newton", max_depth=5,
                       max_leaves=32, min_samples_leaf=20, learning_rate=0.1, n_estimators=trees,
                       n_threads=threads, random_state=0, **params).fit(Xtr, ytr)
    rows = [r.get("n_rows_sampled", len(ytr)) for r in m.history_]
    return (_window_median([r["elapsed_seconds"] for r in m.history_], 10), float(np.mean(rows)) / len(ytr),
            roc_auc(yte, m.decision_function(Xte)))


def _lightgbm(data, extra: dict, trees: int, threads: int) -> tuple[float, float]:
    import lightgbm as lgb

    from runners.bench.matched import lgb_params

    Xtr, ytr, Xte, yte = data
    stamps = []
    ds = lgb.Dataset(Xtr, ytr, params={"max_bin": 255, "verbose": -1}).construct()
    booster = lgb.train({**lgb_params(threads), **extra}, ds, num_boost_round=trees,
                        callbacks=[lambda env: stamps.append(time.perf_counter())])
    return _window_median(stamps, 10), roc_auc(yte, booster.predict(Xte, raw_score=True))


def bench_trees(scale: float, feature_scale: float, rate: float, trees: int, threads: int) -> list[dict]:
    """Per-tree seconds at ``rate`` vs the full tree, ours and LightGBM's (matched settings)."""
    if trees < 12:
        raise ValueError("--trees must be >= 12: trees 10.. are timed (LightGBM's GOSS starts there)")
    d = GENERATORS["epsilon_like"](scale=scale, feature_scale=feature_scale, random_state=0)
    data = (d.X_train, d.y_train, d.X_test, d.y_test)
    _ours((d.X_train[:500], d.y_train[:500], d.X_test[:100], d.y_test[:100]), {}, 12, threads)  # JIT
    full, _, full_auc = _ours(data, {}, trees, threads)
    rows = [{"library": "gbfs", "strategy": "none", "per_tree_s": full, "ratio": 1.0,
             "sampled_share": 1.0, "test_auc": full_auc}]
    for name in OURS:
        per_tree, share, auc = _ours(data, sampler_params(name, rate), trees, threads)
        rows.append({"library": "gbfs", "strategy": name, "per_tree_s": per_tree, "ratio": per_tree / full,
                     "sampled_share": share, "test_auc": auc})
    lgb_full, lgb_auc = _lightgbm(data, {}, trees, threads)
    rows.append({"library": "lightgbm", "strategy": "none", "per_tree_s": lgb_full, "ratio": 1.0,
                 "sampled_share": 1.0, "test_auc": lgb_auc})
    goss = {"data_sample_strategy": "goss", "top_rate": rate / 2, "other_rate": rate / 2}
    for name, extra in (("bagging", {"bagging_fraction": rate, "bagging_freq": 1}), ("goss", goss)):
        per_tree, auc = _lightgbm(data, extra, trees, threads)
        rows.append({"library": "lightgbm", "strategy": name, "per_tree_s": per_tree,
                     "ratio": per_tree / lgb_full, "sampled_share": rate, "test_auc": auc})
    for r in rows:
        r.update(n_train=len(d.y_train), n_features=d.X_train.shape[1])
    return rows


def bench_whole_fit(scale: float, rate: float, trees: int, threads: int) -> dict:
    """Whole-fit seconds and test AUC with MVS at ``rate`` and without sampling, at the Flight shape;
    LightGBM's bagging at ``rate`` and its full fit beside them."""
    import lightgbm as lgb

    from runners.bench.matched import Matched, warm_up
    from runners.bench.speed.shapes import load_shape

    Xtr, ytr, Xte, yte = load_shape("flight", scale)
    m = Matched(n_estimators=trees, threads=threads)
    warm_up(threads)
    mvs = sampler_params("mvs", rate)
    GBFSClassifier(**m.ours(n_estimators=3, **mvs)).fit(Xtr[:3000], ytr[:3000])   # this layout's kernels
    out = {"n_train": len(ytr), "n_features": Xtr.shape[1], "trees": trees, "rate": rate}
    for label, extra in (("none", {}), ("mvs", mvs)):
        t0 = time.perf_counter()
        est = GBFSClassifier(**m.ours(**extra)).fit(Xtr, ytr)
        out[f"{label}_fit_s"] = time.perf_counter() - t0
        out[f"{label}_auc"] = roc_auc(yte, est.decision_function(Xte))
    for label, extra in (("lgb_none", {}), ("lgb_bagging", {"bagging_fraction": rate, "bagging_freq": 1})):
        t0 = time.perf_counter()
        ds = lgb.Dataset(Xtr, ytr, params={"max_bin": m.max_bins, "verbose": -1, "num_threads": threads})
        booster = lgb.train({**m.lightgbm(), **extra}, ds, num_boost_round=trees)
        out[f"{label}_fit_s"] = time.perf_counter() - t0
        out[f"{label}_auc"] = roc_auc(yte, booster.predict(Xte, raw_score=True))
    out["fit_ratio"] = out["mvs_fit_s"] / out["none_fit_s"]
    out["auc_loss"] = out["none_auc"] - out["mvs_auc"]
    out["lgb_fit_ratio"] = out["lgb_bagging_fit_s"] / out["lgb_none_fit_s"]
    return out


def _met(ok: bool) -> str:
    return "MET" if ok else "NOT MET"


def comparison_verdict(path: Path) -> list[str]:
    """The third target, read from a comparison CSV written by ``python -m runners.sampling``."""
    from runners.paper.mvs.comparison import mvs_verdict

    if not path.is_file():
        return [f"MVS target: no comparison at {path} (run: python -m runners.sampling)"]
    met, lines = mvs_verdict(pd.read_csv(path))
    return [lines[0] + f"  [from {path}]", *lines[1:]]


def print_summary(res: dict) -> None:
    t = res["threshold"]
    print(f"\nmvs_threshold on {t['n']:.0e} values, sample rate {t['rate']}: ours {t['ours_s']:.3f} s, "
          f"np.partition search {t['partition_s']:.2f} s ({t['speedup_vs_partition']:.0f}x), sort "
          f"{t['sort_s']:.2f} s ({t['speedup_vs_sort']:.0f}x); mu agrees to {t['max_rel_diff']:.1e}, "
          f"sum p / target = {t['sum_p_over_target']:.9f}  (target <= {TARGETS['threshold_s']} s: "
          f"{_met(t['ours_s'] <= TARGETS['threshold_s'])})")
    rows = res["per_tree"]
    shape = f"{rows[0]['n_train']} x {rows[0]['n_features']}"
    print(f"\nper-tree time at rate {res['rate']} / full tree, {shape} "
          f"(trees 10..{res['trees'] - 1}; target ratio <= {TARGETS['per_tree_ratio']})")
    print("| library | strategy | ms / tree | ratio | rows / tree | test AUC |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['library']} | {r['strategy']} | {1e3 * r['per_tree_s']:.1f} | {r['ratio']:.2f} | "
              f"{r['sampled_share']:.3f} | {r['test_auc']:.4f} |")
    ours = [r["ratio"] for r in rows if r["library"] == "gbfs" and r["strategy"] != "none"]
    print(f"per-tree target (ratio <= {TARGETS['per_tree_ratio']} for each of our samplers; worst "
          f"{max(ours):.2f}): {_met(max(ours) <= TARGETS['per_tree_ratio'])}")
    f = res["whole_fit"]
    ok = f["fit_ratio"] <= TARGETS["fit_ratio"] and f["auc_loss"] <= TARGETS["fit_auc_loss"]
    print(f"\nwhole fit at the Flight shape ({f['n_train']} x {f['n_features']}, {f['trees']} trees): MVS at "
          f"{f['rate']} {f['mvs_fit_s']:.2f} s / no sampling {f['none_fit_s']:.2f} s = {f['fit_ratio']:.2f}, "
          f"test AUC {f['mvs_auc']:.4f} vs {f['none_auc']:.4f} (loss {f['auc_loss']:+.4f}); target ratio <= "
          f"{TARGETS['fit_ratio']} losing <= {TARGETS['fit_auc_loss']} AUC: {_met(ok)}")
    print(f"  LightGBM bagging at {f['rate']}: {f['lgb_bagging_fit_s']:.2f} s / {f['lgb_none_fit_s']:.2f} s "
          f"= {f['lgb_fit_ratio']:.2f} (AUC {f['lgb_bagging_auc']:.4f} vs {f['lgb_none_auc']:.4f})")
    print("\n" + "\n".join(res["comparison"]))


def run(args) -> int:
    res = {"rate": args.rate, "trees": args.trees, "threads": args.threads, "scale": args.scale,
           "feature_scale": args.feature_scale, "targets": TARGETS}
    res["threshold"] = bench_threshold(args.threshold_n, args.rate)
    print(json.dumps({"threshold": res["threshold"]}), flush=True)
    res["per_tree"] = bench_trees(args.scale, args.feature_scale, args.rate, args.trees, args.threads)
    res["whole_fit"] = bench_whole_fit(args.fit_scale, args.rate, args.fit_trees, args.threads)
    res["comparison"] = comparison_verdict(args.comparison)
    print_summary(res)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({**res, **provenance()}, indent=2))
    print(f"\nwrote {args.out}")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("sampling", help="MVS threshold vs numpy references; per-tree time of sampled trees")
    p.add_argument("--threshold-n", type=int, default=10_000_000, help="values for mvs_threshold")
    p.add_argument("--rate", type=float, default=0.2, help="sample rate (GOSS: half top, half other)")
    p.add_argument("--scale", type=float, default=1.0, help="rows of the Epsilon stand-in (1: 80 000)")
    p.add_argument("--feature-scale", type=float, default=1.0, help="columns of the stand-in (1: 2000)")
    p.add_argument("--trees", type=int, default=30, help="trees per fit (>= 12; trees 10.. are timed)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--fit-scale", type=float, default=1.0, help="rows of the Flight shape (1: 100 000)")
    p.add_argument("--fit-trees", type=int, default=100, help="trees of the whole-fit comparison")
    p.add_argument("--out", type=Path, default=Path("results/bench/sampling.json"))
    p.add_argument("--comparison", type=Path, default=Path("results/sampling/sampling.csv"),
                   help="CSV of python -m runners.sampling, for the MVS-vs-SGB/GOSS target")
    p.set_defaults(handler=run)
