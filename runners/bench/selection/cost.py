"""Selection under a cost budget (``python -m runners.bench cost``): a price per feature against ranking.

    python -m runners.bench cost --quick      # ~10 s: breast_cancer and digits, one seed, two budgets
    python -m runners.bench cost              # five real data sets, seeds 0 1 2 (~1.5 min on 2 cores)

Where features cost different amounts to measure (lab tests, sensors, paid data), a model must stay
within a total cost, not a count.  Ranking methods order features by importance and can only be
truncated where the budget runs out; the papers' first-use penalty prices each feature at its cost
while the trees are grown, so a cheap feature that carries most of a dear one's signal can win.

Scenario.  Data sets and splits as in the selection benchmark (:mod:`runners.bench.selection.suite`: a
stratified 70/30 train/test split, 80/20 fit/validation inside train, per seed; at most 200 trees,
learning rate 0.1, depth 5, 31 leaves, 20 rows per leaf, early stopping after 20 rounds).  Costs,
drawn per data set and seed: log-uniform in [1, 10], and the ``--dear`` (10) features of most gain in
an unpenalised LightGBM fit on the fit rows cost 10 times more -- the informative measurements are the
expensive ones.  Budgets B in cost units (``--budgets``, default 10, 20, 40).  Every method returns a
feature set of total cost <= B and a model refitted on it; its test AUC is compared at equal B:

* ``lgbm:gain-capped`` (cost-blind): LightGBM's gain ranking of a fit on every feature, taken in order
  while the features fit (:func:`gbfs.criteria.refit.within_cost`), LightGBM refitted on them.
* ``lgbm:gain-per-cost`` (cost-aware ranking): the same, ranked by gain / cost.
* ``gbfs:agbm-cost`` (the papers' penalty): A-GBM (Newton) with ``feature_costs`` and ``max_cost=B``,
  relaxed refit, over ``mu`` in ``--mus``; the ``mu`` of best validation AUC is the answer.
* ``gbfs:agbm-cost-blind``: the same at ``mu = 0`` only (the budget alone, no price): the ablation.
* ``gbfs:path-cost``: :func:`gbfs.selection_path` with ``budget_unit="cost"``, every budget in one
  call: the penalised probes, the rankings within the budget and greedy gain per cost as
  candidates, the best validated answer of cost <= B.

The verdict: the penalised answer's test AUC minus the best cost-blind peer's, averaged over every
(data set, B) cell, >= 0.01 (one AUC point).  Results: ``results/bench/cost.json`` (every fit) and the
table printed per cell.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

from gbfs import selection_path
from gbfs.booster.losses.metrics import roc_auc
from gbfs.criteria.refit import within_cost
from runners.bench import default_out, provenance
from runners.bench.selection import data
from runners.bench.selection.families import Booster, Grids, lightgbm_on
from runners.bench.selection.suite import make_split

DATASETS = ("breast_cancer", "digits", "isolet", "madelon", "tox171")
BUDGETS = (10.0, 20.0, 40.0)
MUS = (0.0, 3e-4, 1e-3, 3e-3, 0.01, 0.03)
TARGET_LEAD = 0.01  # AUC the penalised answer must lead the best cost-blind peer by, on average
COST_BLIND = ("lgbm:gain-capped", "gbfs:agbm-cost-blind")


def draw_costs(gain: np.ndarray, seed: int, n_dear: int) -> np.ndarray:
    """Log-uniform costs in [1, 10]; the ``n_dear`` features of most ``gain`` cost ten times more."""
    rng = np.random.default_rng([seed, 7])
    costs = np.exp(rng.uniform(0.0, np.log(10.0), gain.shape[0]))
    dear = np.argsort(-gain, kind="stable")[:n_dear]
    costs[dear[gain[dear] > 0]] *= 10.0
    return costs


def _auc(model, X, y) -> float:
    return roc_auc(y, model.decision_function(X))


class Cell:
    """One seeded split of a data set with its costs and the LightGBM ranking fit they derive from."""

    def __init__(self, name: str, X: np.ndarray, y: np.ndarray, seed: int, booster: Booster, n_dear: int):
        self.split = s = make_split(name, X, y, seed, (1,), booster, Grids())
        self.name, self.seed = name, seed
        self.gain = lightgbm_on(s, np.arange(X.shape[1])).feature_importance("gain")
        self.costs = draw_costs(self.gain, seed, n_dear)

    def ranked(self, budget: float, score: np.ndarray) -> dict:
        """LightGBM refitted on the features of ``score``'s ranking that fit in ``budget``."""
        s = self.split
        order = np.argsort(-score, kind="stable")
        features = within_cost(order[score[order] > 0], self.costs, budget)
        model = lightgbm_on(s, features)
        return {"features": features.tolist(), "val_auc": _auc(model, s.X_val[:, features], s.y_val),
                "test_auc": _auc(model, s.X_test[:, features], s.y_test)}

    def penalised(self, budget: float, mu: float) -> dict:
        s = self.split
        est = s.booster.gbfs(self.seed, method="agbm", mu=mu, criterion="newton", leaf_estimate="newton",
                             feature_costs=self.costs, max_cost=budget, refit=True, selection_patience=5)
        with warnings.catch_warnings():  # a budget that covers every feature of a small set
            warnings.simplefilter("ignore", UserWarning)
            est.fit(s.X_fit, s.y_fit, eval_set=(s.X_val, s.y_val))
        return {"features": est.selected_features_.tolist(), "val_auc": _auc(est, s.X_val, s.y_val),
                "test_auc": _auc(est, s.X_test, s.y_test), "mu": mu}


    def path(self, budgets) -> dict[float, dict]:
        """The selection path with budgets in cost units: ``{budget: answer}``."""
        s = self.split
        template = s.booster.gbfs(self.seed, method="agbm", criterion="newton", leaf_estimate="newton",
                                  feature_costs=self.costs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            found = selection_path(template, s.X_fit, s.y_fit, eval_set=(s.X_val, s.y_val), budgets=budgets,
                                   budget_unit="cost")
        return {r.budget: {"features": r.features.tolist(), "val_auc": r.val_score, "mu": r.mu,
                           "test_auc": _auc(r.model, s.X_test, s.y_test), "source": r.source}
                for r in found.results}


def run_cell(cell: Cell, budgets, mus) -> list[dict]:
    """Every method's answer in every budget of one cell."""
    rows = []
    path = cell.path(budgets)
    for budget in budgets:
        found = {"lgbm:gain-capped": cell.ranked(budget, cell.gain),
                 "lgbm:gain-per-cost": cell.ranked(budget, cell.gain / cell.costs)}
        fits = [cell.penalised(budget, mu) for mu in mus]
        found["gbfs:agbm-cost-blind"] = fits[mus.index(0.0)] if 0.0 in mus else cell.penalised(budget, 0.0)
        priced = [f for f, mu in zip(fits, mus) if mu > 0]
        found["gbfs:agbm-cost"] = max(priced, key=lambda f: f["val_auc"])  # first of the best on ties
        found["gbfs:path-cost"] = path[budget]
        for method, f in found.items():
            spent = float(cell.costs[f["features"]].sum())
            rows.append({"dataset": cell.name, "seed": cell.seed, "budget": budget, "method": method,
                         "n_features": len(f["features"]), "cost": spent, "mu": f.get("mu"),
                         "source": f.get("source"),
                         "val_auc": f["val_auc"], "test_auc": f["test_auc"], "features": f["features"]})
    return rows


def summarise(rows: list[dict]) -> tuple[list[dict], dict]:
    """Mean test AUC per (data set, budget, method) and the verdict on the penalised answer's lead."""
    cells: dict[tuple, dict[str, list[float]]] = {}
    for r in rows:
        cells.setdefault((r["dataset"], r["budget"]), {}).setdefault(r["method"], []).append(r["test_auc"])
    table, leads, path_leads = [], [], []
    for (name, budget), by in sorted(cells.items()):
        mean = {m: float(np.mean(v)) for m, v in by.items()}
        blind = max(mean[m] for m in COST_BLIND)
        lead = mean["gbfs:agbm-cost"] - blind
        leads.append(lead)
        path_leads.append(mean.get("gbfs:path-cost", np.nan) - blind)
        table.append({"dataset": name, "budget": budget, **mean, "lead": lead, "path_lead": path_leads[-1]})
    over = all(r["cost"] <= r["budget"] for r in rows)
    verdict = {"mean_lead": float(np.mean(leads)) if leads else float("nan"), "target": TARGET_LEAD,
               "met": bool(leads) and float(np.mean(leads)) >= TARGET_LEAD, "budgets_kept": over,
               "path_mean_lead": float(np.mean(path_leads)) if path_leads else float("nan")}
    return table, verdict


def print_report(table: list[dict], verdict: dict) -> None:
    methods = ("gbfs:agbm-cost", "gbfs:path-cost", "gbfs:agbm-cost-blind", "lgbm:gain-capped",
               "lgbm:gain-per-cost")
    print(f"\n{'data set':<14} {'B':>5} " + " ".join(f"{m:>21}" for m in methods) + f" {'lead':>8}")
    for t in table:
        print(f"{t['dataset']:<14} {t['budget']:>5g} " + " ".join(f"{t[m]:>21.4f}" for m in methods)
              + f" {t['lead']:>+8.4f}")
    print(f"\npenalised selection (gbfs:agbm-cost) minus the best cost-blind peer, mean over cells: "
          f"{verdict['mean_lead']:+.4f} AUC (target >= +{verdict['target']}): "
          f"{'MET' if verdict['met'] else 'NOT MET'}")
    print(f"the selection path in cost units (gbfs:path-cost) minus the best cost-blind peer: "
          f"{verdict['path_mean_lead']:+.4f} AUC")
    print(f"every answer within its budget: {'MET' if verdict['budgets_kept'] else 'NOT MET'}")


def run(args: argparse.Namespace) -> int:
    datasets, seeds, budgets = args.datasets, args.seeds, tuple(args.budgets)
    if args.quick:
        datasets, seeds, budgets = ["breast_cancer", "digits"], [0], (10.0, 20.0)
    booster = Booster(threads=args.threads)
    rows, t0 = [], time.perf_counter()
    for name in datasets:
        loaded = data.load(name, args.data_dir)
        if loaded is None:
            continue
        for seed in seeds:
            cell = Cell(name, *loaded, seed, booster, args.dear)
            rows += run_cell(cell, budgets, tuple(args.mus))
            print(f"{name} seed {seed}: {time.perf_counter() - t0:.0f} s", flush=True)
    table, verdict = summarise(rows)
    print_report(table, verdict)
    out = args.out or default_out("cost", args.quick)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rows": rows, "table": table, "verdict": verdict,
                                    "seconds": time.perf_counter() - t0, **provenance()}, indent=1))
    print(f"wrote {out}")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("cost", help="selection under a budget in cost units: the first-use price vs rankings")
    p.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=sorted(data.DATASETS))
    p.add_argument("--data-dir", type=Path, default=data.default_data_dir())
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--budgets", nargs="+", type=float, default=list(BUDGETS), help="total costs B")
    p.add_argument("--mus", nargs="+", type=float, default=list(MUS),
                   help="A-GBM's mu grid (0: the ablation)")
    p.add_argument("--dear", type=int, default=10, help="features of most gain made ten times dearer")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="breast_cancer and digits, seed 0, B = 10, 20")
    p.add_argument("--out", type=Path, help="the JSON summary (default results/bench/cost.json; "
                   "--quick: results/bench/quick/cost.json)")
    p.set_defaults(handler=run)
