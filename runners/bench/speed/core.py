"""The core benchmark (``python -m runners.bench core``): the booster against LightGBM, shape by shape.

``gtgbm`` is described in :mod:`runners.bench.gtgbm`, ``categorical`` in
:mod:`runners.bench.categorical`, ``ranking`` in :mod:`runners.bench.ranking`, ``utility`` in
:mod:`runners.bench.utility`, ``cost`` in :mod:`runners.bench.selection.cost`, ``tiny`` in
:mod:`runners.bench.selection.tiny`, ``data`` in
:mod:`runners.bench.data`, ``sampling`` in :mod:`runners.bench.sampling`, ``selection`` in
:mod:`runners.bench.selection.suite`, ``multitask`` in :mod:`runners.bench.multitask`, ``multiclass``
in :mod:`runners.bench.multiclass`, ``load`` (one fit
in a fresh process, quiet vs next to a CPU burner) and the shapes of ``core`` in
:mod:`runners.bench.speed.shapes`.

Targets live here, never as timed assertions in tests.  ``core`` measures, per shape, with
matched settings (depth 5 / 32 leaves, 255 bins, learning rate 0.1, 50 trees, 2 threads, Newton
gain and leaves, mu = 0; :func:`matched_params` and :func:`lgb_params`).  The shapes
(:mod:`runners.bench.speed.shapes`, ``--shapes`` picks any subset) are the paper shapes as dense
uniform data with a sparse signal (Gisette 6000x5000, Epsilon 80000x2000, Flight 100000x634), a
bag-of-words-like sparse matrix (``text_like``, 2000x5000, 1 % non-zero), the same as users bring
real bag-of-words sets, a dense float32 count matrix (``text_zipf``, 1993x4862), the Flight stand-in
one-hot encoded as a sparse matrix (``flight_onehot``) and before one-hot (``flight_raw``), and
the real TOX-171 and Isolet data (from ``--data-dir``; a missing file skips its shape), and TOX-171
with its four classes, tiny and wide.  Sparse
matrices go to both learners as ``scipy.sparse`` CSR, never densified.  Per shape, one
implementation (:func:`measure`) records

* per-tree time and test AUC, and the ratios ours / LightGBM,
* the whole fit including binning (ours: wall time of ``fit``; LightGBM: Dataset construction
  plus training) and its ratio,
* binning time vs LightGBM's Dataset construction,
* the cost of the penalty (A-GBM mu = 0.01 vs mu = 0, per tree),
* peak memory allocated by ``fit`` (tracemalloc) relative to the binned matrix at one byte per
  entry (``rows x features``; a sparse input's stored binned bytes, often far fewer, are
  ``binned_mb``),

and once per run the JIT compile time: a cold process (empty numba cache) and a second process.
A multiclass shape (``tox171_4class``) is measured with LightGBM's ``multiclass`` objective and
macro one-vs-rest AUC; its per-tree time is per round (one tree per class).  Once per run (unless
``--path-data none``), the selection path's cost (:func:`measure_path_cost`): the CPU time of the
default path for four budgets against LightGBM's top K by gain as users run it.

Each target of :data:`TARGETS` is printed as MET or NOT MET (a per-shape target must hold on
every shape; a shape of :data:`SHAPE_TARGETS` has its own: ``text_zipf``'s whole fit at most
LightGBM's).  Results: ``results/bench/core.json`` (``rows``, ``jit``, ``path_cost``, ``targets``,
``shape_targets``, ``verdicts``, ``skipped``, and the ``command`` and ``git_commit`` that made it).
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
import scipy.sparse as sp

from gbfs import GBFSClassifier
from gbfs.booster.losses.metrics import roc_auc
from runners.bench import provenance
from runners.bench.matched import lgb_params, matched_params, warm_up
from runners.bench.speed import shapes as bench_shapes

TARGETS = {"per_tree_ratio": 1.0, "per_tree_ratio_max": 1.5, "fit_ratio": 1.2, "binning_ratio": 0.5,
           "penalty_overhead": 0.05, "auc_gap_pt": 0.5, "jit_cold_s": 15.0, "jit_cached_s": 2.0,
           "memory_ratio": 3.0, "load_ratio": bench_shapes.LOAD_TARGET, "path_cpu_ratio": 2.0}
#: shape -> the targets it must meet instead of :data:`TARGETS`' (bag-of-words data as users bring it:
#: the whole fit at LightGBM's pace, not within 20 %)
SHAPE_TARGETS = {"text_zipf": {"fit_ratio": 1.0}}
#: the selection path's budgets in the path-cost measure
PATH_BUDGETS = (5, 10, 20, 50)


def target(key: str, shape: str | None = None) -> float:
    """The target ``key`` of ``shape`` (its own, else the common one)."""
    return SHAPE_TARGETS.get(shape, {}).get(key, TARGETS[key])


class PeakTraced:
    """Peak memory allocated through numpy/Python while the block runs (tracemalloc).

    numpy reports its buffers to tracemalloc, so this counts the binned matrix, histograms,
    gradients and trees of ``fit``, independent of what the process held before; small
    scratch arrays allocated inside numba kernels are not traced.
    """

    def __enter__(self) -> PeakTraced:
        tracemalloc.start()
        tracemalloc.reset_peak()
        self.base = tracemalloc.get_traced_memory()[0]
        return self

    def __exit__(self, *exc: object) -> None:
        self.peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()

    @property
    def extra(self) -> int:
        return self.peak - self.base


#: fits (ours) and trainings (LightGBM) shorter than this many seconds are timed REPEATS times
REPEAT_BELOW_S = 2.0
REPEATS = 3


def _fastest(run) -> tuple[object, list[float]]:
    """Call ``run()`` (which returns ``(result, seconds, ...)``) once, or :data:`REPEATS` times when
    the first call took less than :data:`REPEAT_BELOW_S`; the last result and each timing's best."""
    times = []
    while len(times) < (REPEATS if not times or times[0][0] < REPEAT_BELOW_S else 1):
        result, *timing = run()
        times.append(timing)
    return result, [min(t[i] for t in times) for i in range(len(times[0]))]


def _timed_fit(params: dict, Xtr, ytr) -> tuple[GBFSClassifier, float, float]:
    """The model, whole-fit seconds and seconds per tree of ``params`` on ``(Xtr, ytr)``, the
    fastest of the repeats :func:`_fastest` takes."""
    def fit():
        t0 = time.perf_counter()
        model = GBFSClassifier(**params).fit(Xtr, ytr)
        return model, time.perf_counter() - t0, model.timings_["boosting_seconds"] / model.n_iter_

    model, (fit_s, per_tree_s) = _fastest(fit)
    return model, fit_s, per_tree_s


def measure(name: str, Xtr: np.ndarray | sp.csr_matrix, ytr: np.ndarray, Xte: np.ndarray | sp.csr_matrix,
            yte: np.ndarray, n_trees: int, threads: int) -> dict:
    """Ours (matched, mu = 0; then A-GBM mu = 0.01 and the paper mode) vs LightGBM on one shape.

    ``Xtr``, ``Xte`` are dense arrays or ``scipy.sparse`` CSR matrices, given as they are to both
    learners.  Timings: ours per tree = boosting seconds / trees and whole fit = wall time of
    ``fit`` (binning included), LightGBM per tree = ``lgb.train`` time / trees and whole fit =
    Dataset construction (best of 2) + ``lgb.train``; a fit or training shorter than
    :data:`REPEAT_BELOW_S` is timed :data:`REPEATS` times on both sides and the fastest is kept (a
    run of a few milliseconds per tree moves by 10-40 % between runs on a 2-core VM).  Binning:
    ours is the fastest of the three fits' binning steps (BinMapper fit + transform inside
    ``fit``), LightGBM's the Dataset construction.  Each variant first fits 2 trees on at most
    3000 rows (kernels this data needs are compiled before any timing); peak memory is measured in
    a separate, untimed fit (tracing slows allocations).
    """
    import lightgbm as lgb

    sparse = sp.issparse(Xtr)
    nnz = Xtr.nnz if sparse else np.count_nonzero(Xtr)
    n_classes = int(np.unique(ytr).shape[0])
    score = _auc if n_classes == 2 else _macro_auc
    out = {"shape": name, "n_classes": n_classes, "n_train": Xtr.shape[0], "n_features": Xtr.shape[1],
           "n_test": Xte.shape[0], "n_trees": n_trees, "threads": threads, "sparse": sparse,
           "nonzero_share": nnz / max(Xtr.shape[0] * Xtr.shape[1], 1)}
    params = matched_params(n_trees, threads)
    variants = {"ours": params, "penalty": {**params, "method": "agbm", "mu": 0.01},
                "paper": {**params, "criterion": "sse", "leaf_estimate": "mean"}}
    # kernels this data's layout needs beyond warm_up's (compiled or loaded from numba's cache)
    for p in variants.values():
        GBFSClassifier(**{**p, "n_estimators": 2}).fit(Xtr[:3000], ytr[:3000])

    # peak memory of fit, untimed (run before LightGBM so its allocations do not hide ours)
    with PeakTraced() as mem:
        traced = GBFSClassifier(**params).fit(Xtr, ytr)
    out["ours_peak_extra_mb"] = mem.extra / 2**20
    out["memory_ratio"] = mem.extra / max(1, Xtr.shape[0] * Xtr.shape[1])
    del traced

    # ours, mu = 0: whole fit, per tree, AUC
    ours, out["ours_fit_s"], out["ours_per_tree_s"] = _timed_fit(params, Xtr, ytr)
    out["ours_auc"] = score(yte, ours, Xte)
    out["ours_leaves_per_tree"] = float(np.mean([t.n_leaves for t in ours.trees_]))
    out["binned_mb"] = ours.timings_["binned_bytes"] / 2**20

    # penalty cost: A-GBM mu > 0 vs mu = 0 on the same criterion
    pen, _, out["penalty_per_tree_s"] = _timed_fit(variants["penalty"], Xtr, ytr)
    out["penalty_overhead"] = out["penalty_per_tree_s"] / out["ours_per_tree_s"] - 1.0
    out["penalty_n_features"] = pen.n_features_selected_
    out["penalty_auc"] = score(yte, pen, Xte)

    # the papers' first-order mode (criterion="sse", mean leaves), for reference
    paper, _, out["paper_mode_per_tree_s"] = _timed_fit(variants["paper"], Xtr, ytr)
    out["paper_mode_auc"] = score(yte, paper, Xte)
    out["ours_binning_s"] = min(m.timings_["binning_seconds"] for m in (ours, pen, paper))

    # LightGBM, matched
    t_ds = []
    for _ in range(2):
        t0 = time.perf_counter()
        ds = lgb.Dataset(Xtr, ytr, params={"max_bin": 255, "verbose": -1, "num_threads": threads},
                         free_raw_data=False).construct()
        t_ds.append(time.perf_counter() - t0)
    out["lgb_dataset_s"] = min(t_ds)
    objective = {} if n_classes == 2 else {"objective": "multiclass", "num_class": n_classes}

    def train():
        t0 = time.perf_counter()
        booster = lgb.train({**lgb_params(threads), **objective}, ds, num_boost_round=n_trees)
        return booster, time.perf_counter() - t0

    booster, (out["lgb_train_s"],) = _fastest(train)
    out["lgb_per_tree_s"] = out["lgb_train_s"] / n_trees
    out["lgb_fit_s"] = out["lgb_dataset_s"] + out["lgb_train_s"]
    out["lgb_auc"] = score(yte, booster, Xte)
    out["lgb_leaves_per_tree"] = float(np.mean(
        [t["num_leaves"] for t in booster.dump_model()["tree_info"]]))

    out["per_tree_ratio"] = out["ours_per_tree_s"] / out["lgb_per_tree_s"]
    out["fit_ratio"] = out["ours_fit_s"] / out["lgb_fit_s"]
    out["binning_ratio"] = out["ours_binning_s"] / out["lgb_dataset_s"]
    out["auc_gap_pt"] = 100 * (out["ours_auc"] - out["lgb_auc"])
    return out


def _auc(y: np.ndarray, model, X) -> float:
    """Binary AUC of ``model``'s raw scores (ours or a LightGBM booster)."""
    ours = hasattr(model, "decision_function")
    return roc_auc(y, model.decision_function(X) if ours else model.predict(X, raw_score=True))


def _macro_auc(y: np.ndarray, model, X) -> float:
    """Macro one-vs-rest AUC of ``model``'s class probabilities (ours or a LightGBM booster)."""
    from sklearn.metrics import roc_auc_score

    proba = model.predict_proba(X) if hasattr(model, "predict_proba") else model.predict(X)
    return float(roc_auc_score(y, proba, multi_class="ovr"))


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


def path_cost_in_fresh_process(dataset: str, data_dir: Path, threads: int) -> dict | None:
    """:func:`measure_path_cost` in a new Python process: both sides are timed the same way whatever
    ran before (after the large shapes LightGBM's refits took 40 % more CPU time in this process)."""
    code = ("import json, sys; from pathlib import Path; "
            "from runners.bench.speed.core import measure_path_cost; "
            "print(json.dumps(measure_path_cost(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]))))")
    proc = subprocess.run([sys.executable, "-c", code, dataset, str(data_dir), str(threads)], check=True,
                          capture_output=True, text=True)
    *said, result = proc.stdout.strip().splitlines()
    for line in said:  # e.g. the one line of a missing data file
        print(line)
    return json.loads(result)


#: paired runs (the path, then LightGBM's top K) of the path's cost; the median pair is reported
PATH_RUNS = 3


def measure_path_cost(dataset: str, data_dir: Path, threads: int, seed: int = 0,
                      runs: int = PATH_RUNS) -> dict | None:
    """CPU seconds of the default selection path for :data:`PATH_BUDGETS` against LightGBM's top K
    by gain as users run it -- one fit ranks the features, one refit per budget -- on one split of
    the selection benchmark (:mod:`runners.bench.selection`: its protocol, settings and data set
    ``dataset``); None when the data set's file is missing.  CPU time (``time.process_time``, every
    thread) is what a sweep of many paths pays; wall time is recorded too.

    The two are timed ``runs`` times, each path run followed by a LightGBM run, and the pair of the
    median CPU ratio is reported (``path_cpu_ratios``: every pair's): on a shared 2-core VM either
    side alone moves by a fifth between runs, and a pair sees the same state of the host."""
    from runners.bench.selection import data as selection_data
    from runners.bench.selection.families import FAMILIES, Booster, Grids, lightgbm_on
    from runners.bench.selection.peers import DEFAULT_PATH
    from runners.bench.selection.suite import make_split
    from runners.bench.selection.suite import warm_up as warm_up_families

    loaded = selection_data.load(dataset, data_dir)
    if loaded is None:
        return None
    booster = Booster(threads=threads)
    split = make_split(dataset, *loaded, seed, PATH_BUDGETS, booster, Grids())
    warm_up_families(booster)
    pairs = []
    for _ in range(runs):
        cpu, wall = time.process_time(), time.perf_counter()
        FAMILIES[DEFAULT_PATH].run(split)
        pair = {"path_cpu_s": time.process_time() - cpu, "path_wall_s": time.perf_counter() - wall}
        cpu, wall = time.process_time(), time.perf_counter()
        gain = lightgbm_on(split, np.arange(split.n_features)).feature_importance("gain")
        order = np.argsort(-gain, kind="stable")
        for k in split.budgets:
            lightgbm_on(split, order[:k])
        pair.update(lgb_topk_cpu_s=time.process_time() - cpu, lgb_topk_wall_s=time.perf_counter() - wall)
        pair["path_cpu_ratio"] = pair["path_cpu_s"] / pair["lgb_topk_cpu_s"]
        pairs.append(pair)
    ratios = [p["path_cpu_ratio"] for p in pairs]
    median = sorted(range(runs), key=ratios.__getitem__)[(runs - 1) // 2]
    return {"dataset": dataset, "seed": seed, "budgets": list(split.budgets), "family": DEFAULT_PATH,
            **pairs[median], "path_cpu_ratios": ratios}


def _fmt_row(cols: list, widths: list[int]) -> str:
    return "  ".join(str(c).rjust(w) for c, w in zip(cols, widths))


#: target key -> (what is compared, the value of a row); every shape must meet the target
_ROW_TARGETS = {
    "per_tree_ratio": ("per-tree time ours / LightGBM", lambda r: r["per_tree_ratio"]),
    "per_tree_ratio_max": ("per-tree time ours / LightGBM (never above)", lambda r: r["per_tree_ratio"]),
    "fit_ratio": ("whole fit incl. binning ours / LightGBM", lambda r: r["fit_ratio"]),
    "auc_gap_pt": ("|AUC gap| (pt)", lambda r: abs(r["auc_gap_pt"])),
    "binning_ratio": ("binning ours / LightGBM Dataset", lambda r: r["binning_ratio"]),
    "penalty_overhead": ("penalty overhead per tree (mu = 0.01)", lambda r: r["penalty_overhead"]),
    "memory_ratio": ("peak fit memory / rows x features bytes", lambda r: r["memory_ratio"]),
}


def verdicts(rows: list[dict], jit: dict | None, path: dict | None = None) -> dict[str, dict]:
    """Per target: the worst value over the shapes (and where), and whether the target is met (a
    shape of :data:`SHAPE_TARGETS` against its own)."""
    out = {}
    for key, (what, value) in _ROW_TARGETS.items():
        common = [r for r in rows if key not in SHAPE_TARGETS.get(r["shape"], {})]
        if common:
            worst = max(common, key=value)
            out[key] = {"what": what, "target": TARGETS[key], "worst": value(worst), "shape": worst["shape"],
                        "met": all(value(r) <= TARGETS[key] for r in common)}
        for r in rows:
            own = SHAPE_TARGETS.get(r["shape"], {}).get(key)
            if own is not None:
                out[f"{key}:{r['shape']}"] = {"what": f"{what}, {r['shape']}", "target": own,
                                               "worst": value(r), "shape": r["shape"], "met": value(r) <= own}
    if path is not None:
        ratio, limit = path["path_cpu_ratio"], TARGETS["path_cpu_ratio"]
        what = f"selection path CPU / LightGBM top-K ({len(path['budgets'])} budgets)"
        out["path_cpu_ratio"] = {"what": what, "target": limit, "worst": ratio, "shape": path["dataset"],
                                 "met": ratio <= limit}
    for label in ("cold", "cached") if jit else ():
        v = jit[f"jit_{label}_import_s"] + jit[f"jit_{label}_first_fit_s"]
        out[f"jit_{label}_s"] = {"what": f"JIT, {label} process: import + first fit (s)",
                                 "target": TARGETS[f"jit_{label}_s"], "worst": v, "shape": None,
                                 "met": v <= TARGETS[f"jit_{label}_s"]}
    return out


def print_core(rows: list[dict], jit: dict | None, checks: dict[str, dict], path: dict | None = None) -> None:
    print("\n== gbfs core benchmark: ours vs LightGBM (matched: depth 5 / 32 leaves, 255 bins, lr 0.1) ==")
    head = ["shape", "n x d", "nnz %", "bin ours", "bin lgb", "ratio", "tree ours", "tree lgb", "ratio",
            "fit ours", "fit lgb", "ratio", "AUC ours", "AUC lgb", "gap pt", "pen +%", "mem x"]
    widths = [13, 16, 6, 8, 8, 6, 9, 9, 6, 8, 8, 6, 8, 8, 7, 7, 6]
    print(_fmt_row(head, widths))
    for r in rows:
        kind = " sp" if r["sparse"] else ""
        print(_fmt_row([
            r["shape"], f"{r['n_train']}x{r['n_features']}{kind}", f"{100 * r['nonzero_share']:.1f}",
            f"{r['ours_binning_s']:.3f}s", f"{r['lgb_dataset_s']:.3f}s", f"{r['binning_ratio']:.2f}",
            f"{1e3 * r['ours_per_tree_s']:.1f}ms", f"{1e3 * r['lgb_per_tree_s']:.1f}ms",
            f"{r['per_tree_ratio']:.2f}", f"{r['ours_fit_s']:.2f}s", f"{r['lgb_fit_s']:.2f}s",
            f"{r['fit_ratio']:.2f}", f"{r['ours_auc']:.4f}", f"{r['lgb_auc']:.4f}", f"{r['auc_gap_pt']:+.2f}",
            f"{100 * r['penalty_overhead']:+.1f}", f"{r['memory_ratio']:.2f}"], widths))
    print("(sp: scipy.sparse CSR input to both learners; fit lgb = Dataset construction + train)")
    print("\npaper mode (criterion='sse', mean leaves), mu = 0:  " + ",  ".join(
        f"{r['shape']}: AUC {r['paper_mode_auc']:.4f}, {1e3 * r['paper_mode_per_tree_s']:.1f} ms/tree"
        for r in rows))
    print("A-GBM mu = 0.01:  " + ",  ".join(
        f"{r['shape']}: {r['penalty_n_features']} features, AUC {r['penalty_auc']:.4f}" for r in rows))
    if jit:
        print(f"\nJIT: cold process import {jit['jit_cold_import_s']:.2f}s + first fit "
              f"{jit['jit_cold_first_fit_s']:.2f}s;  second process import {jit['jit_cached_import_s']:.2f}s"
              f" + first fit {jit['jit_cached_first_fit_s']:.2f}s")
    if path:
        print(f"\nselection path ({path['family']}, budgets {path['budgets']}) on {path['dataset']}: "
              f"CPU {path['path_cpu_s']:.1f}s (wall {path['path_wall_s']:.1f}s) vs LightGBM top-K by gain "
              f"(one ranking fit, a refit per budget) CPU {path['lgb_topk_cpu_s']:.1f}s "
              f"(wall {path['lgb_topk_wall_s']:.1f}s): {path['path_cpu_ratio']:.2f}x, the median pair of "
              + ", ".join(f"{r:.2f}" for r in path["path_cpu_ratios"]))
    print("\ntargets (every shape):")
    for c in checks.values():
        where = f" ({c['shape']})" if c["shape"] else ""
        print(f"  {c['what']:<46} <= {c['target']:<5}  worst {c['worst']:8.3f}{where:<16} "
              f"{'MET' if c['met'] else 'NOT MET'}")


def run_core(args: argparse.Namespace) -> int:
    sparse = any(name in bench_shapes.SPARSE_SHAPES for name in args.shapes)
    rows, skipped = [], []
    for name in args.shapes:
        data = bench_shapes.load_shape(name, args.row_scale, args.data_dir)
        if data is None:
            skipped.append(name)
            continue
        if not rows:  # compiled once there is something to time (every shape may be missing)
            warm_up(args.threads, sparse=sparse)
        rows.append(measure(name, *data, args.trees, args.threads))
        del data
        print(json.dumps(rows[-1]), flush=True)
    jit = None if args.no_jit else bench_jit()
    path = None if args.path_data is None else path_cost_in_fresh_process(args.path_data, args.data_dir,
                                                                           args.threads)
    if path is not None:
        print(json.dumps(path), flush=True)
    checks = verdicts(rows, jit, path)
    print_core(rows, jit, checks, path)
    if skipped:
        print(f"skipped (data missing): {', '.join(skipped)}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows, "jit": jit, "path_cost": path, "targets": TARGETS,
                                    "shape_targets": SHAPE_TARGETS, "verdicts": checks, "skipped": skipped,
                                    **provenance()}, indent=2))
    print(f"\nwrote {args.out}")
    return 0


def _path_data(value: str) -> str | None:
    """``--path-data``: a selection-benchmark data set, or ``none`` (refused before any fit)."""
    from runners.bench.selection.data import DATASETS

    if value == "none":
        return None
    if value not in DATASETS:
        raise argparse.ArgumentTypeError(f"must be one of {sorted(DATASETS)} or 'none', got {value!r}")
    return value


def add_parser(sub) -> None:
    core = sub.add_parser("core", help="booster vs LightGBM on the papers' shapes and the real-data shapes")
    core.add_argument("--shapes", nargs="+", default=list(bench_shapes.DEFAULT_SHAPES),
                      choices=list(bench_shapes.SHAPES))
    core.add_argument("--trees", type=int, default=50)
    core.add_argument("--threads", type=int, default=2)
    core.add_argument("--row-scale", type=float, default=1.0,
                      help="multiply the number of training rows (e.g. 0.1 for a quick run)")
    core.add_argument("--data-dir", type=Path, default=bench_shapes.default_data_dir(),
                      help="folder of tox171.npz and isolet.npz (default: $GBFS_SHARED_DATA or "
                           "<repo>/../shared/data)")
    core.add_argument("--no-jit", action="store_true", help="skip the JIT timing subprocesses")
    core.add_argument("--path-data", default="isolet",
                      help="data set of the selection path's cost (a selection-benchmark data set; "
                           "'none' skips it)", type=_path_data)
    core.add_argument("--out", type=Path, default=Path("results/bench/core.json"))
    core.set_defaults(handler=run_core)
