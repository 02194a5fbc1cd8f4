"""GT-GBM Figure 1: root candidate-set recovery vs dimension and sample size (``python -m runners.figure1``).

Section 4.3 of the GT-GBM paper: with s = 3 target features and delta = 0.1, data
``y = 2 x1 - 3 * 2^x2 + log2(1 + x3) + eps`` (x uniform on [0, 1]^d, eps ~ N(0, 1);
x1, x2, x3 are columns 0, 1, 2) and, per cell of a grid of ambient dimension d and
sample size n, 50 replications, each with fresh data and fresh random subsets.  A
replication succeeds when the candidate set C that group testing finds at the root of
the first tree (:func:`gbfs.criteria.group_testing.root_candidates`) contains columns 0, 1 and 2.

Writes ``<out-dir>/figure1.csv`` (one row per cell), ``figure1.png`` (the success-rate
heatmap, dark = 1, light = 0 as in the paper) and ``figure1_summary.json`` (the n needed
for 80 % success per d and the slope of log n80 against log d; the paper reads the
figure as a near-linear dependence of n on d, i.e. a slope near 1).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from gbfs.criteria.group_testing import plan, root_candidates
from gbfs.data.synthetic.generators import make_figure1_regression
from runners.tracking.runs import git_commit

S = 3  # target features, fixed by the paper's experiment
DELTA = 0.1
SIGNAL = (0, 1, 2)  # the columns of x1, x2, x3
TARGET_RATE = 0.8
MIN_SAMPLES_LEAF = 20  # the library default: a root split needs n >= 40
DEFAULT_D = (50, 100, 200, 400, 800, 1600)
# n = 40 * 2^k: 40 = 2 * min_samples_leaf is the smallest node that can be split at all (success
# near 0 for every d), and 20480 brings d = 1600 above 0.9; the grid takes 3-5 minutes on 2 cores
# (d = 3200 would double that and still sit below 0.9 at the top row)
DEFAULT_N = (40, 80, 160, 320, 640, 1280, 2560, 5120, 10240, 20480)
CSV_COLUMNS = ("d", "n", "replications", "successes", "success_rate", "seconds")


def replication_seeds(seed: int, d: int, n: int, rep: int) -> tuple[int, int]:
    """Data seed and subset seed of one replication, derived from the run's ``seed``.

    Keyed by ``(d, n, rep)`` rather than by grid position, so a cell gives the same result
    whatever grid it is run in (a narrow re-run reproduces the cells of a wide one).

    Parameters
    ----------
    seed : int
        The run's seed (``--seed``).
    d, n : int
        The cell.
    rep : int
        Replication index within the cell.

    Returns
    -------
    data_seed, subset_seed : int
        Independent 32-bit seeds for :func:`make_figure1_regression` and :func:`root_candidates`.
    """
    data_seed, subset_seed = np.random.SeedSequence([seed, d, n, rep]).generate_state(2)
    return int(data_seed), int(subset_seed)


def _warm_up() -> None:
    # compile (or load from numba's cache) the group-testing kernels so the first cell's time
    # does not include JIT
    X, y = make_figure1_regression(200, 12, random_state=0)
    root_candidates(X, y, S, DELTA, random_state=0)


def run(d_values: Sequence[int], n_values: Sequence[int], replications: int = 50, seed: int = 0,
        verbose: bool = False) -> list[dict]:
    """Success rate of the root candidate set on every (d, n) cell.

    Parameters
    ----------
    d_values, n_values : sequence of int
        Ambient dimensions (d >= 3) and sample sizes of the grid.
    replications : int, default 50
        Replications per cell, each with its own data and subsets (:func:`replication_seeds`).
    seed : int, default 0
        Seed from which every replication's seeds are derived.
    verbose : bool, default False
        Print one line per cell as it finishes.

    Returns
    -------
    list of dict
        One row per cell, d-major, with keys ``d, n, replications, successes, success_rate,
        seconds`` (``seconds``: wall time of the cell, data generation included).
    """
    if min(d_values) < S:
        raise ValueError(f"every d must be at least s = {S} (the signal columns), got {list(d_values)}")
    if replications < 1:
        raise ValueError(f"replications must be positive, got {replications}")
    _warm_up()
    signal = set(SIGNAL)
    rows = []
    for d in d_values:
        for n in n_values:
            t0 = time.perf_counter()
            successes = 0
            for rep in range(replications):
                data_seed, subset_seed = replication_seeds(seed, d, n, rep)
                X, y = make_figure1_regression(n, d, random_state=data_seed)
                cands = root_candidates(X, y, S, DELTA, random_state=subset_seed,
                                        min_samples_leaf=MIN_SAMPLES_LEAF)
                successes += signal <= set(cands.tolist())
            secs = time.perf_counter() - t0
            rows.append({"d": int(d), "n": int(n), "replications": int(replications),
                         "successes": int(successes), "success_rate": successes / replications,
                         "seconds": secs})
            if verbose:
                print(f"d={d:>6} n={n:>7}  success {successes:>3}/{replications}  {secs:7.2f}s", flush=True)
    return rows


def write_csv(rows: list[dict], path: Path) -> None:
    """Write the cells of :func:`run` to ``path`` (columns :data:`CSV_COLUMNS`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=CSV_COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({**r, "success_rate": f"{r['success_rate']:.4f}", "seconds": f"{r['seconds']:.3f}"})


def _grid(rows: list[dict]) -> tuple[list[int], list[int], np.ndarray]:
    """(d values, n values, rates[n_index, d_index]) of the cells, NaN where a cell is missing."""
    ds = sorted({r["d"] for r in rows})
    ns = sorted({r["n"] for r in rows})
    rates = np.full((len(ns), len(ds)), np.nan)
    for r in rows:
        rates[ns.index(r["n"]), ds.index(r["d"])] = r["success_rate"]
    return ds, ns, rates


def _isotonic(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted non-decreasing least-squares fit (pool adjacent violators)."""
    blocks: list[list[float]] = []  # [mean, weight, length]
    for yi, wi in zip(y, w):
        blocks.append([float(yi), float(wi), 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, w2, l2 = blocks.pop()
            m1, w1, l1 = blocks.pop()
            blocks.append([(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2, l1 + l2])
    return np.concatenate([np.full(int(b[2]), b[0]) for b in blocks])


def estimate_n80(rows: list[dict], target: float = TARGET_RATE) -> dict:
    """The sample size at which the success rate reaches ``target``, per d, and its slope in d.

    The true rate is non-decreasing in n, so each d's rates are first made monotone
    (weighted isotonic regression, which only pools neighbouring cells that sampling noise
    put out of order); n80 is then the linear interpolation in log n where that curve first
    reaches ``target``.  A d whose curve is already at ``target`` on the smallest n, or never
    reaches it, is censored (``n80`` is None, ``status`` says which) and left out of the fit
    ``log n80 = intercept + slope * log d``.

    Parameters
    ----------
    rows : list of dict
        The cells of :func:`run`.
    target : float, default 0.8
        Success rate to reach.

    Returns
    -------
    dict
        ``target``, ``per_d`` (list of ``{d, n80, status}``), ``slope``, ``intercept``
        (natural logs) and ``n_fit`` (the number of d values in the fit); slope and
        intercept are None with fewer than two uncensored d values.
    """
    ds, ns, rates = _grid(rows)
    log_n = np.log(np.asarray(ns, dtype=float))
    reps = {(r["d"], r["n"]): r["replications"] for r in rows}
    per_d = []
    for j, d in enumerate(ds):
        ok = ~np.isnan(rates[:, j])
        if not ok.any():
            per_d.append({"d": d, "n80": None, "status": "no cells"})
            continue
        w = np.array([reps[(d, n)] for n, k in zip(ns, ok) if k], dtype=float)
        fit = _isotonic(rates[ok, j], w)
        x = log_n[ok]
        hit = np.flatnonzero(fit >= target)
        if hit.size == 0:
            per_d.append({"d": d, "n80": None, "status": "above grid"})
        elif hit[0] == 0:
            per_d.append({"d": d, "n80": None, "status": "below grid"})
        else:
            i = hit[0]
            frac = (target - fit[i - 1]) / (fit[i] - fit[i - 1])
            per_d.append({"d": d, "n80": round(float(np.exp(x[i - 1] + frac * (x[i] - x[i - 1]))), 1),
                          "status": "interpolated"})
    pts = [(p["d"], p["n80"]) for p in per_d if p["n80"] is not None]
    slope = intercept = None
    if len(pts) >= 2:
        slope, intercept = (round(float(v), 4) for v in np.polyfit(np.log([p[0] for p in pts]),
                                                                   np.log([p[1] for p in pts]), 1))
    return {"target": target, "per_d": per_d, "slope": slope, "intercept": intercept, "n_fit": len(pts)}


def plot(rows: list[dict], path: Path, summary: dict | None = None) -> None:
    """Success-rate heatmap: d on the x axis, n on the y axis, dark = 1 and light = 0.

    The grids are usually geometric, so cells are drawn equally spaced (a log scale on both
    axes); each cell is annotated with its rate.  With ``summary`` (from :func:`estimate_n80`)
    the interpolated n80 of each d is overlaid.
    """
    import matplotlib

    matplotlib.use("Agg")  # headless: no display on the benchmark machines
    import matplotlib.pyplot as plt

    ds, ns, rates = _grid(rows)
    reps = sorted({r["replications"] for r in rows})
    fig, ax = plt.subplots(figsize=(1.1 * len(ds) + 2.4, 0.55 * len(ns) + 2.2))
    im = ax.imshow(rates, origin="lower", cmap="Greys", vmin=0.0, vmax=1.0, aspect="auto")
    for i in range(len(ns)):
        for j in range(len(ds)):
            v = rates[i, j]
            if not np.isnan(v):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=8,
                        color="white" if v > 0.5 else "black")
    if summary is not None:
        pts = [(ds.index(p["d"]), p["n80"]) for p in summary["per_d"] if p["n80"] is not None]
        if pts:
            # n80 lies between grid rows: place it by interpolating its log on the rows' logs
            y = np.interp(np.log([p[1] for p in pts]), np.log(ns), np.arange(len(ns)))
            label = f"n at {100 * summary['target']:.0f} % success"
            if summary["slope"] is not None:
                label += f" (slope of log n vs log d: {summary['slope']:.2f})"
            ax.plot([p[0] for p in pts], y, "o--", color="tab:red", ms=4, lw=1.0, label=label)
            # below the axes: inside, it would cover the annotations of a corner cell
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), fontsize=8, frameon=False)
    ax.set_xticks(range(len(ds)), [str(d) for d in ds])
    ax.set_yticks(range(len(ns)), [str(n) for n in ns])
    ax.set_xlabel("ambient dimension d")
    ax.set_ylabel("sample size n")
    rep_txt = "/".join(str(r) for r in reps)
    ax.set_title(f"GT-GBM root candidate set contains x1, x2, x3\ns = {S}, \u03b4 = {DELTA}, "
                 f"{rep_txt} replications per cell", fontsize=10)
    fig.colorbar(im, ax=ax, label="success rate")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)


def format_table(rows: list[dict]) -> str:
    """Success rates as text: one line per n, one column per d."""
    ds, ns, rates = _grid(rows)
    lines = ["n \\ d".rjust(8) + "".join(f"{d:>7}" for d in ds)]
    for i in reversed(range(len(ns))):  # large n on top, as in the figure
        lines.append(f"{ns[i]:>8}" + "".join("      -" if np.isnan(v) else f"{v:>7.2f}" for v in rates[i]))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line, run the grid, write the CSV, PNG and summary JSON, print the table."""
    ap = argparse.ArgumentParser(prog="python -m runners.figure1", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--d", type=int, nargs="+", default=list(DEFAULT_D), help="ambient dimensions")
    ap.add_argument("--n", type=int, nargs="+", default=list(DEFAULT_N), help="sample sizes")
    ap.add_argument("--replications", type=int, default=50, help="replications per cell")
    ap.add_argument("--seed", type=int, default=0, help="seed of every replication's data and subsets")
    ap.add_argument("--out-dir", type=Path, default=Path("results"))
    ap.add_argument("--quiet", action="store_true", help="no per-cell progress lines")
    args = ap.parse_args(argv)

    d_values = sorted(set(args.d))
    n_values = sorted(set(args.n))
    p = plan(max(n_values), max(d_values), S, DELTA)
    if not args.quiet:
        print(f"GT-GBM Figure 1: s = {S}, delta = {DELTA}, {p.n_subsets} subsets of ceil(d/{S}) features, "
              f"{args.replications} replications per cell, seed {args.seed}", flush=True)
    t0 = time.perf_counter()
    rows = run(d_values, n_values, args.replications, args.seed, verbose=not args.quiet)
    total = time.perf_counter() - t0
    summary = estimate_n80(rows)

    out = args.out_dir
    write_csv(rows, out / "figure1.csv")
    plot(rows, out / "figure1.png", summary)
    (out / "figure1_summary.json").write_text(json.dumps({
        "s": S, "delta": DELTA, "n_subsets": p.n_subsets, "replications": args.replications,
        "seed": args.seed, "d_values": d_values, "n_values": n_values, "total_seconds": round(total, 2),
        "n80": summary, "command": " ".join(["python -m runners.figure1", *(argv or sys.argv[1:])]),
        "git_commit": git_commit()}, indent=2) + "\n")

    print(f"\nsuccess rate (candidate set contains columns 0, 1, 2), {args.replications} replications, "
          f"{total:.0f}s\n")
    print(format_table(rows))
    print(f"\nn for {100 * TARGET_RATE:.0f} % success (isotonic fit, interpolated in log n):")
    for q in summary["per_d"]:
        val = f"{q['n80']:.0f}" if q["n80"] is not None else q["status"]
        print(f"  d = {q['d']:>6}: {val}")
    if summary["slope"] is not None:
        print(f"slope of log n80 vs log d: {summary['slope']:.2f} over {summary['n_fit']} d values "
              f"(the paper: near-linear, slope ~1)")
    else:
        print("slope of log n80 vs log d: needs n80 inside the grid for at least two d values")
    print(f"\nwrote {out / 'figure1.csv'}, {out / 'figure1.png'}, {out / 'figure1_summary.json'}")
    return 0
