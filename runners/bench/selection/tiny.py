"""Tiny, wide data (``python -m runners.bench tiny``): fewer than 100 fitting rows and thousands of features.

    python -m runners.bench tiny --quick     # ~20 s: the microarray-like set, two seeds
    python -m runners.bench tiny             # microarray-like and TOX-171, seeds 0-4 (~3 min, 2 cores)

Microarray data has a few dozen samples and thousands of genes.  There a booster that gives every
distinct value its own bin can let one split separate the fitting rows perfectly, after which later
trees learn little: few distinct predicted scores and a poor test AUC.  LightGBM guards against it
with ``min_data_in_bin = 3``, which is our default too; this benchmark measures our booster with
``min_data_in_bin`` 1 and 3 against LightGBM with 3 and 1, side by side.

Data: ``microarray``, made with the statistics of expression data (60 samples x 5000 genes,
log-normal expression with gene-specific means and spreads, rounded to 0.1 as arrays report it; 5
informative genes shifted by the class, in correlated pairs with 5 decoys), and the real TOX-171
(171 x 5748, the largest class against the rest; from ``--data-dir``, skipped when absent).  Per seed
the selection benchmark's protocol (:mod:`runners.bench.selection.suite`): stratified 70/30 train/test,
80/20 fit/validation inside train, at most 200 trees, learning rate 0.1, depth 5, 31 leaves, early
stopping after 20 rounds; 5 rows per leaf here (20 would leave a 33-row fit without a split).

Rows: every feature (GBDT-Full), and top-K by gain refitted on K = 10 features (GBDT-topK), for
ours and LightGBM.  Reported: test AUC (mean over seeds) and distinct predicted test scores (mean).
Targets: ours with ``min_data_in_bin=3`` within 0.01 AUC of LightGBM's top-K, and as
many distinct scores as LightGBM's.  Results: ``results/bench/tiny.json``.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np

from gbfs.booster.losses.metrics import roc_auc
from runners.bench import default_out, provenance
from runners.bench.selection import data
from runners.bench.selection.families import Booster, Grids
from runners.bench.selection.suite import make_split

BOOSTER = Booster(min_samples_leaf=5)
K = 10
AUC_GAP = 0.01


def microarray(n: int = 60, d: int = 5000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Expression-like data: log-normal genes, 5 informative ones in correlated pairs with decoys."""
    rng = np.random.default_rng([seed, 60])
    y = np.arange(n) % 2
    rng.shuffle(y)
    mean, spread = rng.normal(6.0, 1.5, d), rng.uniform(0.2, 1.0, d)
    log_x = mean + spread * rng.standard_normal((n, d))
    shift = 0.6 * (2 * y - 1)
    for g in range(5):
        log_x[:, g] += shift * spread[g]
        log_x[:, 5 + g] = log_x[:, g] + 0.5 * spread[g] * rng.standard_normal(n)  # a noisy copy
    return np.round(np.exp(log_x), 1), y


def load(name: str, data_dir: Path, seed: int):
    if name == "microarray":
        return microarray(seed=seed)
    return data.load(name, data_dir)


def _score(model, X_test, y_test) -> dict:
    s = model.decision_function(X_test)
    return {"test_auc": roc_auc(y_test, s), "distinct_scores": int(np.unique(np.round(s, 10)).size)}


def fits(X, y, seed: int, booster: Booster) -> list[dict]:
    """Every row of one seeded split."""
    s = make_split("tiny", X, y, seed, (1,), booster, Grids())
    k = min(K, X.shape[1])
    settings = {f"ours mdb={m} {what}": booster.gbfs(seed, min_data_in_bin=m, criterion="newton",
                                                     leaf_estimate="newton", **kw)
                for m in (1, 3) for what, kw in (("full", {"method": "agbm", "mu": 0.0}),
                                                 ("topk", {"method": "topk", "max_features": k}))}
    settings.update({f"lgbm mdb={m} {what}": booster.lightgbm(seed, what, lgb_params={"min_data_in_bin": m},
                                                              **({"k": k, "importance_type": "gain"}
                                                                 if what == "topk" else {}))
                     for m in (3, 1) for what in ("full", "topk")})
    rows = []
    for name, model in settings.items():
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            model.fit(s.X_fit, s.y_fit, eval_set=(s.X_val, s.y_val))
        rows.append({"setting": name, "seed": seed, "n_fit": int(s.X_fit.shape[0]), "seconds":
                     time.perf_counter() - t0, **_score(model, s.X_test, s.y_test)})
    return rows


def summarise(rows: list[dict]) -> tuple[dict, dict]:
    """Mean AUC and distinct scores per (data set, setting); the two targets on every data set."""
    table: dict[str, dict[str, dict]] = {}
    for r in rows:
        cell = table.setdefault(r["dataset"], {}).setdefault(r["setting"], {"auc": [], "distinct": []})
        cell["auc"].append(r["test_auc"])
        cell["distinct"].append(r["distinct_scores"])
    means = {ds: {s: {"auc": float(np.mean(v["auc"])), "distinct": float(np.mean(v["distinct"]))}
                  for s, v in by.items()} for ds, by in table.items()}
    verdict = {}
    for ds, by in means.items():
        ours, theirs = by["ours mdb=3 topk"], by["lgbm mdb=3 topk"]
        verdict[ds] = {"auc_gap": ours["auc"] - theirs["auc"],
                       "auc_met": ours["auc"] >= theirs["auc"] - AUC_GAP,
                       "distinct_met": ours["distinct"] >= theirs["distinct"]}
    return means, verdict


def run(args: argparse.Namespace) -> int:
    datasets, seeds = (["microarray"], [0, 1]) if args.quick else (args.datasets, args.seeds)
    booster = replace(BOOSTER, threads=args.threads)
    rows = []
    for name in datasets:
        for seed in seeds:
            loaded = load(name, args.data_dir, seed)
            if loaded is None:
                break
            rows += [{"dataset": name, **r} for r in fits(*loaded, seed, booster)]
            print(f"{name} seed {seed} done", flush=True)
    means, verdict = summarise(rows)
    for ds, by in means.items():
        print(f"\n{ds} ({len(seeds)} seeds)\n{'setting':<22} {'test AUC':>9} {'distinct scores':>16}")
        for setting, m in by.items():
            print(f"{setting:<22} {m['auc']:>9.4f} {m['distinct']:>16.1f}")
        v = verdict[ds]
        print(f"ours (min_data_in_bin=3) top-K vs LightGBM top-K: AUC {v['auc_gap']:+.4f} (>= -{AUC_GAP}) "
              f"{'MET' if v['auc_met'] else 'NOT MET'}; distinct scores "
              f"{'MET' if v['distinct_met'] else 'NOT MET'}")
    out = args.out or default_out("tiny", args.quick)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rows": rows, "means": means, "verdict": verdict, **provenance()},
                              indent=1))
    print(f"wrote {out}")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("tiny", help="tiny, wide data: min_data_in_bin against LightGBM")
    p.add_argument("--datasets", nargs="+", default=["microarray", "tox171"])
    p.add_argument("--data-dir", type=Path, default=data.default_data_dir())
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="the microarray-like set, seeds 0 and 1")
    p.add_argument("--out", type=Path, help="the JSON summary (default results/bench/tiny.json; "
                   "--quick: results/bench/quick/tiny.json)")
    p.set_defaults(handler=run)
