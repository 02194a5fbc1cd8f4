"""Calibration and power of the new-feature utility test (``python -m runners.bench utility``).

The test is :func:`gbfs.selection.feature_utility` (Koepke & Bilenko, ICML 2012, Algorithm 1).  For each
task (``regression``: :class:`gbfs.GBFSRegressor`; ``binary``: :class:`gbfs.GBFSClassifier`) and
each seed, :func:`make_data` draws

* features ``X``: ``x0, x1, x2, x4`` i.i.d. U(0, 1) and a flag ``x3`` ~ Bernoulli(1/2); the
  model's signal is the GT-GBM paper's Figure-1 function plus the flag,
  ``f(X) = 2 x0 - 3 * 2^x1 + log2(1 + x2) + x3`` (x4 is noise the model may use);
* a held-back feature ``x'`` ~ U(0, 1) entering through ``h(x') = sqrt(2) cos(2 pi x')`` (mean 0,
  variance 1, and no linear correlation with ``x'``: a correlation filter would not see it);
* ``regression``: ``y = f(X) + s h(x') + eps``, eps ~ N(0, 1);
  ``binary``: ``y ~ Bernoulli(sigmoid(1.5 f_std(X) + s h(x')))`` with ``f_std`` = ``f``
  standardised (by its exact mean and standard deviation).

**Signal strength.**  Regression: the share of the variance the best model on ``X`` cannot explain
that the new feature explains, ``R2_new = s^2 / (s^2 + 1)``.  Binary: the standard deviation ``s``
of the new feature's term on the log-odds scale.  Each is also *measured* on the evaluation rows
(``measured_strength``): regression, the share of the fitted model's residual variance removed by
subtracting the true term ``s h(x')``; binary, the log-loss the fitted model would lose by adding
the true term to its log-odds (nats per row).

**Protocol.**  The model (plain Newton boosting: ``mu = 0``, depth 3 / 8 leaves, 150 trees at
learning rate 0.2, and no early stopping: early-stopped models left part of ``x0``'s slope
un-fitted, which the test found) is fitted on ``--n-train`` rows without ``x'``; the test runs on
``--n-eval`` fresh rows, 80 times fewer (the paper bounds the bootstrap's bias by how close the
model's gradient is to that of the best model, Theorem 4.3, e.g. one "training on a much larger
dataset", Section 4.2), with ``n_bootstrap = 100``, for four candidates: a pure-noise U(0, 1)
column, copies of the used flag ``x3`` and of the used continuous ``x0`` (nulls: the model already
has them), and ``x'`` (alternative).  A candidate is significant when its p-value <= 0.05.

Why two copies: the test detects any function of the candidate that correlates with the model's
gradient, and on the tested rows that includes the fitted model's own estimation error along the
copied feature.  Along a flag that error is one contrast, ~1/n_train in variance; along a
continuous feature it is a wiggly function of many fitted steps, whose share of the gradient times
``n_eval`` sets the excess false-positive rate of its copy.  Both are reported.

**Targets** (MET / NOT MET, per task): (a) the false-positive rate of each null candidate within
[0.03, 0.07] over ``--seeds`` seeds (default 200); (b) power >= 0.9 for ``x'`` at the strength of
:data:`STRENGTH` (regression ``R2_new = 0.05``, binary ``s = 0.5``).  ``--curve`` also measures
power at :data:`CURVE` strengths on ``--curve-seeds`` seeds.  Results:
``results/bench/utility.json``.  5 to 8 minutes on 2 cores (``--jobs 2``), by the machine's load.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before any OpenMP runtime loads

import argparse
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from joblib import Parallel, delayed

from gbfs import GBFSClassifier, GBFSRegressor, feature_utility
from gbfs.booster.losses.loss import LogisticLoss
from runners.bench import provenance

TASKS = ("regression", "binary")
ALPHA = 0.05
TARGETS = {"fpr_low": 0.03, "fpr_high": 0.07, "power": 0.9}
#: the strength at which the power target is checked: R2_new (regression), log-odds SD (binary)
STRENGTH = {"regression": 0.05, "binary": 0.5}
#: further strengths of the power curve (``--curve``)
CURVE = {"regression": (0.01, 0.02, 0.05, 0.1), "binary": (0.25, 0.5, 0.75, 1.0)}
CANDIDATES = ("noise", "copy_flag", "copy_x0", "signal")
NULLS = CANDIDATES[:3]
_LN2 = math.log(2)
#: exact mean and standard deviation of f(X) = 2 x0 - 3 * 2^x1 + log2(1 + x2) + x3
_F_MEAN = 1.0 - 3.0 / _LN2 + (2 * _LN2 - 1) / _LN2 + 0.5
_F_SD = math.sqrt(4 / 12 + 9 * (3 / (2 * _LN2) - 1 / _LN2 ** 2)
                  + (2 * _LN2 ** 2 - 4 * _LN2 + 2) / _LN2 ** 2 - ((2 * _LN2 - 1) / _LN2) ** 2 + 0.25)
MODEL = dict(method="gbfs", mu=0.0, n_estimators=150, learning_rate=0.2, max_depth=3, max_leaves=8,
             min_samples_leaf=20, criterion="newton", leaf_estimate="newton", n_threads=1)


@dataclass(frozen=True)
class UtilityData:
    """One draw: ``X``/``y`` (train and evaluation rows), the candidates on the evaluation rows
    (columns in :data:`CANDIDATES` order), and the true new term ``s h(x')`` on them."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_eval: np.ndarray
    y_eval: np.ndarray
    candidates: np.ndarray
    new_term: np.ndarray


def coefficient(task: str, strength: float) -> float:
    """``s`` of the new term from the strength: ``sqrt(R2 / (1 - R2))`` (regression), itself (binary)."""
    return math.sqrt(strength / (1.0 - strength)) if task == "regression" else float(strength)


def make_data(task: str, strength: float, n_train: int, n_eval: int, seed: int) -> UtilityData:
    """The data of one seed (see the module docstring)."""
    rng = np.random.default_rng(seed)
    n = n_train + n_eval
    X = rng.random((n, 5))
    X[:, 3] = X[:, 3] < 0.5
    x_new, noise = rng.random(n), rng.random(n)
    f = 2 * X[:, 0] - 3 * 2.0 ** X[:, 1] + np.log2(1 + X[:, 2]) + X[:, 3]
    term = coefficient(task, strength) * math.sqrt(2.0) * np.cos(2 * np.pi * x_new)
    if task == "regression":
        y = f + term + rng.standard_normal(n)
    else:
        logit = 1.5 * (f - _F_MEAN) / _F_SD + term
        y = (rng.random(n) < 1.0 / (1.0 + np.exp(-logit))).astype(np.int64)
    ev = slice(n_train, n)
    cand = np.column_stack([noise[ev], X[ev, 3], X[ev, 0], x_new[ev]])
    return UtilityData(X[:n_train], y[:n_train], X[ev], y[ev], cand, term[ev])


def fit_model(task: str, data: UtilityData, seed: int):
    """The model without ``x'`` (:data:`MODEL`)."""
    est = (GBFSRegressor if task == "regression" else GBFSClassifier)(**MODEL, random_state=seed)
    return est.fit(data.X_train, data.y_train)


def measured_strength(task: str, model, data: UtilityData) -> float:
    """The new term's utility for the fitted model on the evaluation rows (module docstring)."""
    if task == "regression":
        resid = data.y_eval - model.predict(data.X_eval)
        return float(1.0 - np.var(resid - data.new_term) / np.var(resid))
    raw = model.decision_function(data.X_eval)
    y = data.y_eval.astype(np.float64)
    return LogisticLoss.loss(y, raw) - LogisticLoss.loss(y, raw + data.new_term)


def one_seed(task: str, strength: float, seed: int, n_train: int, n_eval: int,
             candidates: tuple[str, ...] = CANDIDATES) -> dict:
    """p-values and z of the ``candidates`` on one seed's data, and the measured strength."""
    data = make_data(task, strength, n_train, n_eval, seed)
    model = fit_model(task, data, seed)
    cols = [CANDIDATES.index(c) for c in candidates]
    res = feature_utility(model, data.X_eval, data.y_eval, data.candidates[:, cols], random_state=seed,
                          feature_names=list(candidates))
    return {"seed": seed, "p": res.p_value.tolist(), "z": res.z.tolist(),
            "used_copied": bool({0, 3} <= set(model.selected_features_.tolist())),
            "measured_strength": measured_strength(task, model, data)}


def summarise(rows: list[dict], candidates: tuple[str, ...]) -> dict:
    """Per candidate: rejection rate at :data:`ALPHA` (with its binomial standard error), mean z,
    mean p; over the seeds: the mean measured strength and the share of models using both copied
    features."""
    P, Z = np.array([r["p"] for r in rows]), np.array([r["z"] for r in rows])
    out = {}
    for j, c in enumerate(candidates):
        rate = float(np.mean(P[:, j] <= ALPHA))
        out[c] = {"reject_rate": rate, "se": math.sqrt(rate * (1 - rate) / len(rows)),
                  "mean_z": float(Z[:, j].mean()), "mean_p": float(P[:, j].mean())}
    out["measured_strength"] = float(np.mean([r["measured_strength"] for r in rows]))
    out["share_models_using_copied"] = float(np.mean([r["used_copied"] for r in rows]))
    out["n_seeds"] = len(rows)
    return out


def verdicts(summary: dict) -> dict[str, dict]:
    """MET / NOT MET of every target: per task, calibration of noise and copy, power."""
    out = {}
    for task, s in summary.items():
        for c in NULLS:
            rate = s["main"][c]["reject_rate"]
            out[f"{task}_fpr_{c}"] = {
                "what": f"{task}: false-positive rate, {c} candidate", "value": rate,
                "target": f"in [{TARGETS['fpr_low']}, {TARGETS['fpr_high']}]",
                "met": TARGETS["fpr_low"] <= rate <= TARGETS["fpr_high"]}
        power = s["main"]["signal"]["reject_rate"]
        out[f"{task}_power"] = {"what": f"{task}: power at strength {STRENGTH[task]}", "value": power,
                                "target": f">= {TARGETS['power']}", "met": power >= TARGETS["power"]}
    return out


def run(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    one_seed(args.tasks[0], 0.1, 0, 500, 100)          # compile (or load) the kernels once here
    pool = Parallel(n_jobs=args.jobs)
    summary: dict[str, dict] = {}
    for task in args.tasks:
        seeds = range(args.first_seed, args.first_seed + args.seeds)
        rows = pool(delayed(one_seed)(task, STRENGTH[task], s, args.n_train, args.n_eval) for s in seeds)
        summary[task] = {"strength": STRENGTH[task], "main": summarise(rows, CANDIDATES)}
        if args.curve:
            curve = {}
            for k, strength in enumerate(CURVE[task]):
                # seeds of their own (10^6 + ...): the curve's data never repeats the main run's
                rows = pool(delayed(one_seed)(task, strength, 10**6 * (k + 1) + s, args.n_train, args.n_eval,
                                              ("signal",)) for s in range(args.curve_seeds))
                curve[str(strength)] = summarise(rows, ("signal",))
            summary[task]["curve"] = curve
        print(f"{task}: done in {time.perf_counter() - t0:.0f} s", flush=True)
    checks = verdicts(summary)
    report(summary, checks, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"settings": {k: str(v) if isinstance(v, Path) else v
                                                 for k, v in vars(args).items() if k != "handler"},
                                    "model": MODEL, "alpha": ALPHA, "targets": TARGETS,
                                    "strength": STRENGTH, "summary": summary, "verdicts": checks,
                                    "seconds": time.perf_counter() - t0, **provenance()}, indent=2))
    print(f"wrote {args.out}")
    return 0


def report(summary: dict, checks: dict, args: argparse.Namespace) -> None:
    print(f"\n== new-feature utility test: {args.seeds} seeds, {args.n_train} training rows, "
          f"{args.n_eval} tested rows, alpha {ALPHA} ==")
    print(f"{'task':<11} {'candidate':<9} {'reject':>7} {'+-se':>6} {'mean z':>7} {'mean p':>7}")
    for task, s in summary.items():
        for c in CANDIDATES:
            r = s["main"][c]
            print(f"{task:<11} {c:<9} {r['reject_rate']:7.3f} {r['se']:6.3f} {r['mean_z']:7.2f} "
                  f"{r['mean_p']:7.3f}")
        print(f"{task:<11} signal strength {s['strength']} (measured {s['main']['measured_strength']:.4f}); "
              f"models using x0 and x3: {s['main']['share_models_using_copied']:.2f}")
        for strength, r in s.get("curve", {}).items():
            print(f"{task:<11} power curve: strength {strength:<5} power {r['signal']['reject_rate']:.3f} "
                  f"(measured {r['measured_strength']:.4f}, {r['n_seeds']} seeds)")
    print("\ntargets:")
    for c in checks.values():
        print(f"  {c['what']:<48} {c['value']:6.3f}  {c['target']:<16} {'MET' if c['met'] else 'NOT MET'}")


def add_parser(sub) -> None:
    p = sub.add_parser("utility", help="calibration and power of the Koepke-Bilenko new-feature utility test")
    p.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    p.add_argument("--seeds", type=int, default=200, help="data draws per task (calibration and power)")
    p.add_argument("--first-seed", type=int, default=0, help="seeds first-seed .. first-seed + seeds - 1")
    p.add_argument("--n-train", type=int, default=40_000, help="rows the model is fitted on")
    p.add_argument("--n-eval", type=int, default=500, help="rows the test runs on")
    p.add_argument("--curve", action="store_true", help="also the power curve over CURVE strengths")
    p.add_argument("--curve-seeds", type=int, default=100)
    p.add_argument("--jobs", type=int, default=2, help="seeds in parallel (joblib processes)")
    p.add_argument("--out", type=Path, default=Path("results/bench/utility.json"))
    p.set_defaults(handler=run)
