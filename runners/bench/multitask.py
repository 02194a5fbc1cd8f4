"""Multitask benchmark: ``python -m runners.bench multitask [--quick]``.

Two parts, on a synthetic multitask stand-in (:func:`gbfs.data.synthetic.multitask.multitask`) and
on Isolet made multitask (one-vs-rest tasks, below):

1. Speed.  Boosting seconds (``timings_["boosting_seconds"]``, binning excluded) of one
   :class:`~gbfs.estimators.multitask.GBFSMultitaskClassifier` fit with T tasks against the sum over T
   independent :class:`~gbfs.GBFSClassifier` fits on the same per-task rows, with the same trees
   (A-GBM, SSE gain, mean leaves, depth 4, learning rate 0.1, no early stopping) and threads; the
   single-task fits use ``mu = mu_G + mu_t``, the charge a single task would see.  Numba is warmed
   up first, the two sides alternate within each repeat and the medians are compared.  Target:
   ratio <= 1.1.
2. The GT-GBM paper's Figures 4-5.  Variants Multitask (``mu_G, mu_t > 0``), GroupSparse
   (``mu_t = 0``), SingleTask (:class:`~gbfs.baselines.multitask.PooledTasks`: pooled rows, one-hot
   task) and Independent (:class:`~gbfs.baselines.multitask.IndependentTasks`), every single-task
   model an A-GBM :class:`~gbfs.GBFSClassifier`.  Each variant picks its penalty on the validation
   split from a grid of the same size: ``mu`` in :data:`MU_GRID` (6 values, 0.001 to 0.05); for
   Multitask ``mu_G + mu_t`` in :data:`MU_TOTALS` (0.003 to 0.03) with ``mu_t`` a share of it in
   :data:`TASK_SHARES`.  Ties go to fewer features.  This is repeated for seeds 0, 1, 2 (data and
   splits; one Isolet test split holds only 12 positives per task, so one seed decides little), and
   the chosen fits' test AUPRC and AUC per task and their task-size-weighted Total, averaged over
   the seeds, are drawn with :func:`runners.tracking.multitask_figure.task_bars` to
   ``<out>/bench_<data>_{auprc,auc}.png/.csv``; the verdicts read these means.

Targets (printed MET / NOT MET, never asserted):
(a) synthetic, penalties chosen by validation Total AUPRC: Multitask puts >= 90 % of the shared
features in Omega_G and of each task's own features in Omega_t, with <= 10 % spurious features
(the share of Omega_t not relevant to task t, averaged over tasks), and its test Total AUPRC beats
GroupSparse's and SingleTask's;
(b) Isolet, penalties chosen by validation Total AUC under a budget of K = 20 and 40 features in
total: Multitask's test Total AUC >= the best baseline's.  The budget is ``max_features=K`` for
Multitask and GroupSparse (it caps Omega_G); Independent gets ``K // T`` per task, so the union
never exceeds K; SingleTask's budget also counts the free task columns it uses, so it is refitted
with ``K + T`` minus its excess real features until at most K real features remain.

Isolet (``--isolet``, default ``/work/shared/data/isolet.npz``; skipped with a note when absent):
task t is "letter t vs the rest" for the first T = 5 letters, on all rows; the rows are split once,
stratified by letter (60 / 20 / 20 % fit / validation / test, seeded), and every split is stacked
once per task.  Synthetic fit / validation: the generator's train rows split 80 / 20 stratified by
task and label; its test rows are the test split.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sklearn.model_selection import train_test_split

from gbfs import GBFSClassifier
from gbfs.baselines.multitask import IndependentTasks, PooledTasks
from gbfs.booster.losses.metrics import average_precision, roc_auc, task_weighted
from gbfs.data.synthetic.multitask import multitask
from gbfs.estimators.multitask import GBFSMultitaskClassifier
from runners.bench import provenance

TARGETS = {"speed_ratio": 1.1, "recall": 0.9, "spurious": 0.1}
VARIANTS = ("Multitask", "GroupSparse", "SingleTask", "Independent")
MU_GRID = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05)
# Multitask: the charge of a feature no task uses, mu_G + mu_t, over the middle of MU_GRID's range,
# times the share of it that is mu_t (what a task pays for a feature another task already uses)
MU_TOTALS = (0.003, 0.01, 0.03)
TASK_SHARES = (0.5, 0.75)
BUDGETS = (20, 40)
ISOLET = Path("/work/shared/data/isolet.npz")
FULL = {"trees": 100, "repeats": 5, "seeds": (0, 1, 2), "budgets": BUDGETS, "isolet_tasks": 5,
        "synthetic": dict(scale=0.5, n_tasks=5, n_features=300, n_shared=5, n_specific=3),
        "speed": dict(scale=2.0, n_tasks=4, n_features=500, n_shared=5, n_specific=3),
        "mu_grid": MU_GRID, "mu_totals": MU_TOTALS, "task_shares": TASK_SHARES}
QUICK = {"trees": 8, "repeats": 1, "seeds": (0,), "budgets": (10,), "isolet_tasks": 3,
         "synthetic": dict(scale=0.1, n_tasks=3, n_features=40, n_shared=2, n_specific=2),
         "speed": dict(scale=0.1, n_tasks=3, n_features=40, n_shared=2, n_specific=2),
         "mu_grid": (0.003, 0.01), "mu_totals": (0.003, 0.01), "task_shares": (0.5,)}


@dataclass
class MTData:
    """One multitask data set: fit / validation / test triples ``(X, y, task)``."""

    name: str
    fit: tuple
    val: tuple
    test: tuple
    task_names: list
    relevant_per_task: tuple | None = None  # synthetic only: the truth (a)'s recall is checked against


def base_params(trees: int, threads: int) -> dict:
    """A-GBM in the papers' form, the same for every variant and both sides of the speed test."""
    return dict(method="agbm", criterion="sse", leaf_estimate="mean", max_depth=4, learning_rate=0.1,
                min_samples_leaf=20, n_estimators=trees, n_threads=threads, random_state=0)


def synthetic_data(cfg: dict, seed: int) -> MTData:
    """The generator's data at ``cfg`` and ``seed``; its train rows split 80 / 20 into fit / validation."""
    d = multitask(**cfg, task_type="binary", random_state=seed)
    strata = d.task_train * 2 + d.y_train
    fit, val = train_test_split(np.arange(len(d.y_train)), test_size=0.2, stratify=strata, random_state=seed)
    part = [(d.X_train[r], d.y_train[r], d.task_train[r]) for r in (fit, val)]
    return MTData("synthetic", *part, (d.X_test, d.y_test, d.task_test),
                  [f"T{t + 1}" for t in range(cfg["n_tasks"])], d.relevant_per_task)


def isolet_data(path: Path, n_tasks: int, seed: int) -> MTData | None:
    """Isolet as ``n_tasks`` one-vs-rest tasks (None when the file is absent)."""
    if not Path(path).is_file():
        return None
    with np.load(path) as z:
        X, label = np.asarray(z["X"], dtype=np.float64), np.asarray(z["y"])
    classes = np.unique(label)[:n_tasks]
    rest, test = train_test_split(np.arange(len(label)), test_size=0.2, stratify=label, random_state=seed)
    fit, val = train_test_split(rest, test_size=0.25, stratify=label[rest], random_state=seed)

    def stack(rows):  # the same rows once per task, so every task is scored on the same speakers
        ys = [(label[rows] == c).astype(np.int64) for c in classes]
        return (np.tile(X[rows], (n_tasks, 1)), np.concatenate(ys), np.repeat(np.arange(n_tasks), len(rows)))

    names = [chr(ord("A") + int(c) - 1) if 1 <= c <= 26 else str(c) for c in classes]
    return MTData("isolet", stack(fit), stack(val), stack(test), names)


# -- part 1: speed -------------------------------------------------------------------------------
def warm_up(threads: int) -> None:
    """Compile (or load from numba's cache) the kernels of both estimators."""
    d = synthetic_data(QUICK["synthetic"], 0)
    X, y, t = d.fit
    p = base_params(2, threads)
    GBFSMultitaskClassifier(mu=0.01, mu_task=0.01, **p).fit(X, y, t).predict_proba(X, t)
    GBFSClassifier(mu=0.02, **p).fit(X[t == 0], y[t == 0]).predict_proba(X)


def bench_speed(data: MTData, trees: int, threads: int, repeats: int, mu=(0.01, 0.01)) -> dict:
    """Median boosting seconds: one multitask fit vs the sum of the T single-task fits."""
    X, y, task = data.fit
    p = base_params(trees, threads)
    rows = [np.flatnonzero(task == t) for t in np.unique(task)]
    parts = [(np.ascontiguousarray(X[r]), y[r]) for r in rows]

    def multi():
        m = GBFSMultitaskClassifier(mu=mu[0], mu_task=mu[1], **p).fit(X, y, task)
        return m.timings_["boosting_seconds"], sum(tr.n_leaves for trees in m.trees_ for tr in trees)

    def independent():
        ests = [GBFSClassifier(mu=mu[0] + mu[1], **p).fit(Xt, yt) for Xt, yt in parts]
        return (sum(e.timings_["boosting_seconds"] for e in ests),
                sum(tr.n_leaves for e in ests for tr in e.trees_))

    t_multi, t_ind = [], []
    for k in range(repeats):  # alternate who goes first, so drift on a shared machine hits both
        for side in ((multi, independent) if k % 2 == 0 else (independent, multi)):
            (t_multi if side is multi else t_ind).append(side())
    med_m, med_i = float(np.median([s for s, _ in t_multi])), float(np.median([s for s, _ in t_ind]))
    return {"data": data.name, "n_tasks": len(rows), "rows_per_task": [len(r) for r in rows],
            "n_features": X.shape[1], "trees": trees, "threads": threads, "repeats": repeats,
            "multitask_s": med_m, "independent_sum_s": med_i, "ratio": med_m / med_i,
            "ms_per_round": 1e3 * med_m / trees, "multitask_leaves": t_multi[0][1],
            "independent_leaves": t_ind[0][1], "all_multitask_s": [s for s, _ in t_multi],
            "all_independent_s": [s for s, _ in t_ind]}


# -- part 2: Figures 4-5 -------------------------------------------------------------------------
def _grid(variant: str, cfg: dict) -> list[tuple[float, float]]:
    """``(mu, mu_task)`` settings, as many for every variant; only Multitask has a task penalty."""
    if variant != "Multitask":
        return [(m, 0.0) for m in cfg["mu_grid"]]
    pairs = [(m * (1 - s), m * s) for m in cfg["mu_totals"] for s in cfg["task_shares"]]
    if len(pairs) != len(cfg["mu_grid"]):
        raise ValueError(f"every variant needs a grid of {len(cfg['mu_grid'])} settings, Multitask has "
                         f"{len(pairs)}")
    return pairs


def _fit(variant: str, mu: tuple[float, float], budget: int | None, p: dict, data: MTData):
    X, y, task = data.fit
    T = len(data.task_names)
    if variant in ("Multitask", "GroupSparse"):
        return GBFSMultitaskClassifier(mu=mu[0], mu_task=mu[1], max_features=budget, **p).fit(X, y, task)
    if variant == "Independent":
        return IndependentTasks(GBFSClassifier(mu=mu[0], max_features=None if budget is None else max(
            1, budget // T), **p)).fit(X, y, task)
    if budget is None:
        return PooledTasks(GBFSClassifier(mu=mu[0], **p)).fit(X, y, task)
    # the task columns count in the single-task budget but not as features: give them room, and
    # take back whatever real features that room let in beyond K
    cap = budget + T
    for _ in range(4):
        m = PooledTasks(GBFSClassifier(mu=mu[0], max_features=cap, **p)).fit(X, y, task)
        excess = m.n_features_selected_ - budget
        if excess <= 0:
            return m
        cap -= excess
    return PooledTasks(GBFSClassifier(mu=mu[0], max_features=budget, **p)).fit(X, y, task)


def per_task(model, split: tuple, n_tasks: int) -> dict:
    """AUC and AUPRC of each task on ``split``, their Totals and the task sizes."""
    X, y, task = split
    p = model.predict_proba(X, task)[:, 1]
    out = {"auc": [], "auprc": [], "sizes": []}
    for t in range(n_tasks):
        r = task == t
        out["auc"].append(roc_auc(y[r], p[r]))
        out["auprc"].append(average_precision(y[r], p[r]))
        out["sizes"].append(int(r.sum()))
    for m in ("auc", "auprc"):
        out[f"total_{m}"] = task_weighted(out[m], out["sizes"])
    return out


def recovery(model, relevant_per_task) -> dict:
    """Target (a)'s recall of shared features in Omega_G and own features in Omega_t, and spurious."""
    rel = [set(map(int, r)) for r in relevant_per_task]
    shared = set.intersection(*rel)
    omega_g = set(map(int, model.selected_features_))
    own_recall, spurious = [], []
    for t, r in enumerate(rel):
        omega_t = set(map(int, model.selected_features_per_task_[t]))
        own = r - shared
        own_recall.append(len(own & omega_t) / len(own) if own else 1.0)
        spurious.append(len(omega_t - r) / len(omega_t) if omega_t else 0.0)
    return {"shared_recall": len(shared & omega_g) / len(shared) if shared else 1.0,
            "own_recall": float(np.mean(own_recall)), "spurious": float(np.mean(spurious)),
            "own_recall_per_task": own_recall, "spurious_per_task": spurious}


def choose(data: MTData, budget: int | None, select: str, cfg: dict, threads: int) -> dict:
    """Every variant over its grid on one split; the validation-chosen fit of each variant."""
    p, T = base_params(cfg["trees"], threads), len(data.task_names)
    fits, chosen = [], {}
    for variant in VARIANTS:
        best = None
        for mu in _grid(variant, cfg):
            t0 = time.perf_counter()
            m = _fit(variant, mu, budget, p, data)
            rec = {"variant": variant, "mu": mu[0], "mu_task": mu[1], "budget": budget,
                   "fit_seconds": time.perf_counter() - t0, "n_features": int(len(m.selected_features_)),
                   "n_features_per_task": [int(len(s)) for s in m.selected_features_per_task_],
                   "val": per_task(m, data.val, T), "test": per_task(m, data.test, T)}
            if data.relevant_per_task is not None:
                rec["recovery"] = recovery(m, data.relevant_per_task)
            fits.append(rec)
            key = (rec["val"][f"total_{select}"], -rec["n_features"])
            if best is None or key > best[0]:
                best = (key, rec)
        chosen[variant] = best[1]
    return {"chosen": chosen, "fits": fits}


def _mean(recs: list[dict]) -> dict:
    """The seeds' chosen fits of one variant, averaged (per-task lists element-wise)."""
    out = {"mu": [r["mu"] for r in recs], "mu_task": [r["mu_task"] for r in recs],
           "n_features_per_seed": [r["n_features"] for r in recs],
           "n_features": float(np.mean([r["n_features"] for r in recs])),
           "n_features_per_task": np.mean([r["n_features_per_task"] for r in recs], axis=0).tolist(),
           "test": {k: np.mean([r["test"][k] for r in recs], axis=0).tolist() for k in recs[0]["test"]}}
    if "recovery" in recs[0]:
        out["recovery"] = {k: float(np.mean([r["recovery"][k] for r in recs]))
                           for k in ("shared_recall", "own_recall", "spurious")}
    return out


def compare(datas: list[MTData], budget: int | None, select: str, cfg: dict, threads: int, out: Path) -> dict:
    """:func:`choose` on each seed's split; the chosen fits' test scores averaged, drawn as bars."""
    from runners.tracking.multitask_figure import task_bars

    per_seed = [choose(d, budget, select, cfg, threads) for d in datas]
    mean = {v: _mean([r["chosen"][v] for r in per_seed]) for v in VARIANTS}
    data = datas[0]
    tag = data.name if budget is None else f"{data.name}_K{budget}"
    sizes = mean[VARIANTS[0]]["test"]["sizes"]
    suffix = "" if budget is None else f", <= {budget} features"
    for metric, label in (("auprc", "AUPRC"), ("auc", "AUC")):
        task_bars({v: c["test"][metric] for v, c in mean.items()}, data.task_names, sizes, f"test {label}",
                  out / f"bench_{tag}_{metric}.png", title=f"{data.name}: test {label}{suffix}, mean of "
                  f"{len(datas)} seed(s) (penalties chosen by validation {select.upper()})")
    return {"data": data.name, "budget": budget, "select": select, "tag": tag, "n_seeds": len(datas),
            "mean": mean, "per_seed": per_seed}


# -- verdicts and the run ------------------------------------------------------------------------
def _gs(values, fmt: str = "g") -> str:
    return "[" + ", ".join(format(v, fmt) for v in values) + "]"


def _met(ok: bool) -> str:
    return "MET" if ok else "NOT MET"


def verdicts(res: dict) -> list[str]:
    lines = []
    for s in res["speed"]:
        ok = s["ratio"] <= TARGETS["speed_ratio"]
        lines.append(f"speed {s['data']}: {s['n_tasks']} tasks x {s['rows_per_task'][0]} rows x "
                     f"{s['n_features']} features, {s['trees']} trees: multitask {s['multitask_s']:.3f} s "
                     f"({s['ms_per_round']:.1f} ms / round) vs independent sum "
                     f"{s['independent_sum_s']:.3f} s, ratio {s['ratio']:.3f} "
                     f"(target <= {TARGETS['speed_ratio']}): {_met(ok)}")
    for c in res["compare"]:
        ch = c["mean"]
        lines.append(f"\n{c['tag']}: mean of {c['n_seeds']} seed(s), penalties chosen by validation Total "
                     f"{c['select'].upper()}")
        lines.append("| variant | mu per seed | mu_task per seed | features per seed | mean per task | "
                     "test Total AUPRC | test Total AUC |")
        lines.append("| --- | --- | --- | --- | --- | --- | --- |")
        for v, r in ch.items():
            lines.append(f"| {v} | {_gs(r['mu'])} | {_gs(r['mu_task'])} | {r['n_features_per_seed']} | "
                         f"{_gs(r['n_features_per_task'], '.1f')} | {r['test']['total_auprc']:.4f} | "
                         f"{r['test']['total_auc']:.4f} |")
        mt = ch["Multitask"]
        if c["data"] == "synthetic":
            rc = mt["recovery"]
            ok = (min(rc["shared_recall"], rc["own_recall"]) >= TARGETS["recall"]
                  and rc["spurious"] <= TARGETS["spurious"])
            lines.append(f"(a) Multitask recovery: shared in Omega_G {100 * rc['shared_recall']:.0f} %, "
                         f"own in Omega_t {100 * rc['own_recall']:.0f} %, spurious "
                         f"{100 * rc['spurious']:.1f} % (targets >= {100 * TARGETS['recall']:.0f} %, "
                         f"<= {100 * TARGETS['spurious']:.0f} %): {_met(ok)}")
            a = mt["test"]["total_auprc"]
            gs, st = (ch[v]["test"]["total_auprc"] for v in ("GroupSparse", "SingleTask"))
            lines.append(f"(a) Multitask Total AUPRC {a:.4f} > GroupSparse {gs:.4f} and SingleTask "
                         f"{st:.4f}: {_met(a > gs and a > st)}")
        else:
            base = {v: ch[v]["test"]["total_auc"] for v in VARIANTS[1:]}
            best = max(base, key=base.get)
            over = [v for v in VARIANTS if max(ch[v]["n_features_per_seed"]) > c["budget"]]
            lines.append(f"(b) K={c['budget']}: Multitask Total AUC {mt['test']['total_auc']:.4f} >= best "
                         f"baseline {best} {base[best]:.4f} (features: " + ", ".join(
                             f"{v} {ch[v]['n_features']:g}" for v in VARIANTS) + "): "
                         f"{_met(mt['test']['total_auc'] >= base[best] and not over)}")
    return lines


def run(args) -> int:
    """Both parts, the verdicts printed, ``bench.json`` and the figures written to ``args.out``."""
    cfg = QUICK if args.quick else FULL
    trees = args.trees or cfg["trees"]
    out = args.out or Path("results/multitask") / ("bench_quick" if args.quick else "")
    out.mkdir(parents=True, exist_ok=True)
    cfg = {**cfg, "trees": trees}
    seeds = args.seeds or cfg["seeds"]
    res = {"quick": args.quick, "seeds": list(seeds), "threads": args.threads, "targets": TARGETS,
           "settings": {k: v for k, v in cfg.items()}, "base_params": base_params(trees, args.threads),
           "speed": [], "compare": [], "notes": []}
    warm_up(args.threads)
    synth = [synthetic_data(cfg["synthetic"], k) for k in seeds]
    isolet = [isolet_data(args.isolet, cfg["isolet_tasks"], k) for k in seeds]
    if isolet[0] is None:
        note = f"Isolet skipped: {args.isolet} not found (the synthetic parts ran)"
        print(note)
        res["notes"].append(note)
    for data in (synthetic_data(cfg["speed"], seeds[0]), isolet[0]):
        if data is not None:
            res["speed"].append(bench_speed(data, trees, args.threads, args.repeats or cfg["repeats"]))
            print(json.dumps({k: v for k, v in res["speed"][-1].items() if not k.startswith("all_")}),
                  flush=True)
    res["compare"].append(compare(synth, None, "auprc", cfg, args.threads, out))
    if isolet[0] is not None:
        for k in cfg["budgets"]:
            res["compare"].append(compare(isolet, k, "auc", cfg, args.threads, out))
    lines = verdicts(res)
    print("\n" + "\n".join(lines))
    res["verdicts"] = lines
    (out / "bench.json").write_text(json.dumps({**res, **provenance()}, indent=2, default=_json))
    print(f"\nwrote {out / 'bench.json'} and the figures in {out}")
    return 0


def _json(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, (np.ndarray, Path)):
        return o.tolist() if isinstance(o, np.ndarray) else str(o)
    raise TypeError(type(o).__name__)


def add_parser(sub) -> None:
    """Register the ``multitask`` subcommand on :mod:`runners.bench`'s subparsers."""
    p = sub.add_parser("multitask", help="multitask boosting: speed vs independent fits; Figures 4-5")
    p.add_argument("--quick", action="store_true", help="tiny data, few trees (seconds)")
    p.add_argument("--trees", type=int, help="trees per task (default 100; --quick 8)")
    p.add_argument("--repeats", type=int, help="speed repeats (default 5; --quick 1)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seeds", type=int, nargs="+", help="data and split seeds of part 2; the first is "
                   "part 1's (default 0 1 2; --quick 0)")
    p.add_argument("--isolet", type=Path, default=ISOLET, help="isolet.npz (X, y); skipped when absent")
    p.add_argument("--out", type=Path, help="output folder (default results/multitask[/bench_quick])")
    p.set_defaults(handler=run)
