"""Shapes of the core benchmark (``python -m runners.bench core``) and its load test (``... load``).

Shapes
------
Each shape is a seeded ``(X_train, y_train, X_test, y_test)`` with binary labels (one has four
classes); ``row_scale`` multiplies the training rows of the generated shapes (never below 200).

* ``gisette`` (6000 x 5000), ``epsilon`` (80000 x 2000), ``flight`` (100000 x 634): dense uniform
  features whose label depends on 20 known columns
  (:func:`gbfs.data.synthetic.generators.make_sparse_classification`, noise 0.5, seed 1); test rows:
  ``min(n_train // 4, 20000)`` more rows of the same generator.
* ``text_like`` (2000 x 5000): word counts, 1 % non-zero, counts 1..5, labels carried by 30
  words (:func:`gbfs.data.synthetic.text.make_text_like`, seed 0), as ``scipy.sparse`` CSR
  float64; test rows: ``1000 * row_scale`` (at least 200) more rows of the same generator.
* ``text_zipf`` (1993 x 4862): the shape of the bag-of-words sets users bring (BASEHOCK, 1993 x
  4862; PCMAC and RELATHE are 1.4k-2k x 3.3k-4.3k), given as they are distributed: a dense float32
  matrix of term counts.  Document frequencies follow Zipf's law (the probability that a document
  holds the word of rank r falls as ``(r + 10)^-1.1``, capped at one half), about 58 distinct words
  per document (1.2 % non-zero), counts 1..5 geometric; so most columns hold a handful of
  non-zeros and most pairs of columns never co-occur (:func:`gbfs.data.synthetic.text.make_text_like`,
  30 informative words, seed 0).  Test rows: ``1000 * row_scale`` more rows.
* ``text_large`` (100000 x 50000): a corpus-sized bag of words as ``scipy.sparse`` CSR float32,
  0.3 % non-zero with ``text_zipf``'s Zipf document frequencies (same generator, seed 0); one byte
  per entry would be 5 GB, so this is the shape where sparse binned storage is what makes a fit
  possible on a laptop.  Test rows: ``1000 * row_scale`` more rows.  Not in the default run
  (LightGBM's Dataset construction alone takes over a minute): ``--shapes text_large``.
* ``flight_onehot`` (100000 x 634): the Flight stand-in
  (:func:`gbfs.data.synthetic.flight.flight_frames` at ``scale = n_train / 100000``, seed 0)
  one-hot encoded by :func:`gbfs.data.formats.encode_flight`, i.e. the ``X`` of
  :func:`~gbfs.data.synthetic.flight.flight_like`, as CSR float32 (about 8 non-zeros per row;
  at small scales rare airports are absent and the width is below 634).  Test rows: the first
  ``min(n_train // 4, 20000)`` rows of the stand-in's test split.
* ``flight_raw`` (100000 x 8): the same rows before one-hot, dense float32: the six categorical
  columns as integer codes of their levels in train and test together, in the order of
  ``encode_flight``'s columns (natural order: ``"c-2"`` before ``"c-10"``), ``DepTime`` and
  ``Distance`` as they are.  Both learners see the
  codes as numbers (no categorical handling), so the settings stay matched.
* ``tox171`` (171 x 5748) and ``isolet`` (1560 x 617): real data, ``<data-dir>/<name>.npz``, made
  binary as in the selection benchmark (:mod:`runners.bench.selection.data`: TOX-171's largest
  class vs the rest, Isolet letters 1-13 vs 14-26) and split 70/30, stratified, seed 0;
  ``row_scale`` does not apply.  A missing file skips the shape with one printed line naming it.
* ``tox171_4class`` (171 x 5748, 4 classes): TOX-171 with its own labels, the tiny wide
  multiclass shape (one tree per class per round), split as above.

Load test
---------
``python -m runners.bench load`` times single fits, each in a fresh Python process that warms up
the kernels (numba's cache, filled by one untimed fit of each shape first) on a small slice and
then times one ``fit`` (wall time, binning
included), with the core benchmark's matched settings and 50 trees (about 5 s and 1.5 s on a
quiet machine): A-GBM (mu = 0.01) on the ``gisette`` shape at 600 x 5000 (row scale 0.1) and our
booster (mu = 0) on ``text_like`` at 10000 x 5000 (row scale 5, sparse input); ``--row-scale``
multiplies both.  Each fit runs on the quiet machine, then while a CPU burner runs (a separate
busy-looping Python process, no CPU affinity, started before the fit's process and always killed
after it), and the loaded / quiet ratio of the median fit times (``--repeats`` fits each) is
compared with :data:`LOAD_TARGET` (MET / NOT MET).  The fit processes run
once with ``OMP_WAIT_POLICY=PASSIVE`` in their environment and once with the variable removed;
rows are labelled by what was passed (the library may set a default itself: the value the
process saw after importing it is recorded as ``omp_wait_policy_seen`` and printed as "seen").
Results go to ``results/bench/load.json``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.model_selection import train_test_split

from gbfs.data.formats import FLIGHT_CATEGORICAL, FLIGHT_COLUMNS, FLIGHT_LABEL, encode_flight, natural_key
from gbfs.data.synthetic.flight import flight_frames
from gbfs.data.synthetic.generators import PAPER_SHAPES, make_sparse_classification
from gbfs.data.synthetic.text import make_text_like
from runners.bench import provenance
from runners.bench.selection import data as bench_selection_data

TEXT_SHAPE = (2000, 5000)
ZIPF_TEXT_SHAPE, ZIPF_TEXT_DENSITY = (1993, 4862), 0.012
LARGE_TEXT_SHAPE, LARGE_TEXT_DENSITY = (100_000, 50_000), 0.003
TEXT_TEST_ROWS = 1000
FLIGHT_ROWS = 100_000
REAL_DATA = ("tox171", "isolet")
MULTICLASS_DATA = {"tox171_4class": "tox171"}
SHAPES = (*PAPER_SHAPES, "text_like", "text_zipf", "flight_onehot", "flight_raw", *REAL_DATA,
          *MULTICLASS_DATA, "text_large")
#: shapes the core benchmark runs unless ``--shapes`` names others
DEFAULT_SHAPES = tuple(s for s in SHAPES if s != "text_large")
SPARSE_SHAPES = ("text_like", "flight_onehot", "text_large")
MIN_ROWS = 200


class ShapeData(NamedTuple):
    """Train and test rows of one shape (``X`` dense ndarray or ``scipy.sparse`` CSR)."""

    X_train: np.ndarray | sp.csr_matrix
    y_train: np.ndarray
    X_test: np.ndarray | sp.csr_matrix
    y_test: np.ndarray


def default_data_dir() -> Path:
    """Where ``tox171.npz`` and ``isolet.npz`` are: ``$GBFS_SHARED_DATA``, else ``<repo>/../shared/data``."""
    return bench_selection_data.default_data_dir()


def _rows(n: int, row_scale: float) -> int:
    return max(MIN_ROWS, int(n * row_scale))


def _dense(name: str, row_scale: float) -> ShapeData:
    n, d = PAPER_SHAPES[name]
    n = _rows(n, row_scale)
    X, y, _ = make_sparse_classification(n + min(n // 4, 20000), d, n_informative=20, noise=0.5,
                                         random_state=1)
    return ShapeData(X[:n], y[:n], X[n:], y[n:])


def _text(row_scale: float, shape: tuple[int, int] = TEXT_SHAPE, density: float = 0.01,
          dense: bool = False, float32: bool = False) -> ShapeData:
    n, d = _rows(shape[0], row_scale), shape[1]
    X, y, _ = make_text_like(n + _rows(TEXT_TEST_ROWS, row_scale), d, density=density, max_count=5,
                             n_informative=30, random_state=0)
    if dense:   # as the real sets are distributed: a dense float32 matrix of counts
        X = X.toarray().astype(np.float32)
    elif float32:  # a corpus' counts in float32, as a vectoriser gives them
        X = X.astype(np.float32)
    return ShapeData(X[:n], y[:n], X[n:], y[n:])


@functools.lru_cache(maxsize=1)
def _flight(n: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The stand-in's raw train and test frames with ``n`` training rows (kept for the other encoding)."""
    return flight_frames(scale=n / FLIGHT_ROWS, random_state=0)


def _flight_onehot(row_scale: float) -> ShapeData:
    n = _rows(FLIGHT_ROWS, row_scale)
    train, test = _flight(n)
    X_tr, y_tr, X_te, y_te, _ = encode_flight(train, test)   # flight_like's X_train, X_test
    n_test = min(n // 4, 20000)
    return ShapeData(sp.csr_matrix(X_tr), y_tr, sp.csr_matrix(X_te[:n_test]), y_te[:n_test])


def _flight_raw(row_scale: float) -> ShapeData:
    n = _rows(FLIGHT_ROWS, row_scale)
    train, test = _flight(n)
    columns = [c for c in FLIGHT_COLUMNS if c != FLIGHT_LABEL]
    # the levels (and their order) of encode_flight: code k of a column is its k-th one-hot column
    levels = {c: sorted(set(train[c].astype(str)) | set(test[c].astype(str)), key=natural_key)
              for c in FLIGHT_CATEGORICAL}
    test = test.iloc[: min(n // 4, 20000)]

    def encode(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        X = np.column_stack([
            pd.Categorical(df[c].astype(str), categories=levels[c]).codes if c in levels
            else pd.to_numeric(df[c]).to_numpy() for c in columns]).astype(np.float32)
        return X, (df[FLIGHT_LABEL].to_numpy() == "Y").astype(np.int64)

    return ShapeData(*encode(train), *encode(test))


def _real(name: str, data_dir: Path) -> ShapeData | None:
    if name in MULTICLASS_DATA:
        try:
            X, y = bench_selection_data.all_classes(MULTICLASS_DATA[name], Path(data_dir))
        except FileNotFoundError as e:
            print(f"skipping {name}: {e}", flush=True)
            return None
        y = np.unique(y, return_inverse=True)[1]
    else:
        loaded = bench_selection_data.load(name, Path(data_dir))   # prints one line when the file is missing
        if loaded is None:
            return None
        X, y = loaded
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
    return ShapeData(X_tr, y_tr, X_te, y_te)


def load_shape(name: str, row_scale: float = 1.0, data_dir: Path | None = None) -> ShapeData | None:
    """The rows of shape ``name`` (see the module), or None if its data file is missing.

    Parameters
    ----------
    name : str
        One of :data:`SHAPES`.
    row_scale : float
        Multiplies the training rows of the generated shapes (at least 200 rows).
    data_dir : path, optional
        Folder of ``tox171.npz`` and ``isolet.npz`` (default: :func:`default_data_dir`).

    Returns
    -------
    ShapeData or None
    """
    if name in PAPER_SHAPES:
        return _dense(name, row_scale)
    if name == "text_like":
        return _text(row_scale)
    if name == "text_zipf":
        return _text(row_scale, ZIPF_TEXT_SHAPE, ZIPF_TEXT_DENSITY, dense=True)
    if name == "text_large":
        return _text(row_scale, LARGE_TEXT_SHAPE, LARGE_TEXT_DENSITY, float32=True)
    if name == "flight_onehot":
        return _flight_onehot(row_scale)
    if name == "flight_raw":
        return _flight_raw(row_scale)
    if name in REAL_DATA or name in MULTICLASS_DATA:
        return _real(name, default_data_dir() if data_dir is None else data_dir)
    raise ValueError(f"name must be one of {list(SHAPES)}, got {name!r}")


# -- load test ---------------------------------------------------------------------------------------
#: fit -> (shape, parameters over the matched ones, default row scale)
#: the load test's target: a fit next to a CPU burner takes at most this many times its quiet time
LOAD_TARGET = 2.5
LOAD_FITS = {"agbm_gisette": ("gisette", {"method": "agbm", "mu": 0.01}, 0.1),
             "text_like": ("text_like", {}, 5.0)}
#: label -> the value of OMP_WAIT_POLICY passed to the fit's process (None: removed)
LOAD_ENVS = {"PASSIVE": "PASSIVE", "ACTIVE": "ACTIVE", "(unset)": None}
_BURNER = "while True:\n    pass\n"
_REPO = Path(__file__).resolve().parents[3]


def child_fit(spec: dict) -> dict:
    """In the fit's own process: warm the kernels up on a slice, then time one ``fit``."""
    from gbfs import GBFSClassifier

    data = load_shape(spec["shape"], spec["row_scale"])
    params = spec["params"]
    warm = slice(0, min(500, data.X_train.shape[0]))
    GBFSClassifier(**{**params, "n_estimators": 2}).fit(data.X_train[warm], data.y_train[warm])
    t0 = time.perf_counter()
    est = GBFSClassifier(**params).fit(data.X_train, data.y_train)
    fit_s = time.perf_counter() - t0
    return {"fit_s": fit_s, "per_tree_s": est.timings_["boosting_seconds"] / est.n_iter_,
            "binning_s": est.timings_["binning_seconds"], "n_train": data.X_train.shape[0],
            "n_features": data.X_train.shape[1], "sparse": sp.issparse(data.X_train),
            "omp_wait_policy_seen": os.environ.get("OMP_WAIT_POLICY")}


def _run_child(spec: dict, omp: str | None, burners: int) -> dict:
    """One fit in a fresh process with ``OMP_WAIT_POLICY`` = ``omp`` (None: removed), under ``burners``
    busy-looping processes."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if omp is not None:
        env["OMP_WAIT_POLICY"] = omp
    procs: list[subprocess.Popen] = []
    try:
        procs = [subprocess.Popen([sys.executable, "-c", _BURNER]) for _ in range(burners)]
        if procs:
            time.sleep(0.5)
        out = subprocess.run([sys.executable, "-m", "runners.bench.speed.shapes", json.dumps(spec)], env=env,
                             cwd=_REPO, capture_output=True, text=True)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    if out.returncode != 0:
        raise RuntimeError(f"the fit's process failed ({spec['shape']}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_load(args: argparse.Namespace) -> int:
    from runners.bench.matched import matched_params

    target = LOAD_TARGET
    rows = []
    specs = {}
    for fit in args.fits:
        shape, extra, scale = LOAD_FITS[fit]
        specs[fit] = {"shape": shape, "row_scale": scale * args.row_scale,
                      "params": {**matched_params(args.trees, args.threads), **extra}}
        # one untimed fit first: in a fresh checkout it compiles (into numba's cache on disk) the
        # kernels that the timed processes' warm-up on a slice does not reach
        _run_child(specs[fit], None, 0)
    for label, omp in LOAD_ENVS.items():
        for fit in args.fits:
            spec = specs[fit]
            quiet = [_run_child(spec, omp, 0) for _ in range(args.repeats)]
            loaded = [_run_child(spec, omp, args.burners) for _ in range(args.repeats)]
            q = statistics.median(r["fit_s"] for r in quiet)
            lo = statistics.median(r["fit_s"] for r in loaded)
            row = {"fit": fit, "shape": spec["shape"], "omp_wait_policy": label,
                   "n_train": quiet[0]["n_train"], "n_features": quiet[0]["n_features"],
                   "sparse": quiet[0]["sparse"],
                   "omp_wait_policy_seen": quiet[0]["omp_wait_policy_seen"], "quiet": quiet,
                   "loaded": loaded, "quiet_fit_s": q, "loaded_fit_s": lo, "ratio": lo / q,
                   "met": lo / q <= target}
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k not in ("quiet", "loaded")}), flush=True)
    print_load(rows, target, args.burners)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows, "target_ratio": target, "burners": args.burners,
                                    "threads": args.threads, "trees": args.trees,
                                    "repeats": args.repeats, **provenance()}, indent=2))
    print(f"\nwrote {args.out}")
    return 0


def print_load(rows: list[dict], target: float, burners: int) -> None:
    print(f"\n== load test: one fit per fresh process, quiet vs {burners} CPU burner(s); "
          f"target loaded / quiet <= {target} ==")
    line = "{:>13}  {:>10}  {:>11}  {:>6}  {:>15}  {:>9}  {:>9}  {:>9}  {:>6}  {}"
    print(line.format("fit", "shape", "n x d", "input", "OMP_WAIT_POLICY", "(seen)", "quiet", "loaded",
                      "ratio", "target"))
    for r in rows:
        print(line.format(r["fit"], r["shape"], f"{r['n_train']}x{r['n_features']}",
                          "sparse" if r["sparse"] else "dense", r["omp_wait_policy"],
                          str(r["omp_wait_policy_seen"]),
                          f"{r['quiet_fit_s']:.2f}s", f"{r['loaded_fit_s']:.2f}s", f"{r['ratio']:.2f}",
                          "MET" if r["met"] else "NOT MET"))


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("load", help="one fit in a fresh process, quiet vs next to a CPU burner")
    p.add_argument("--fits", nargs="+", default=list(LOAD_FITS), choices=list(LOAD_FITS))
    p.add_argument("--row-scale", type=float, default=1.0,
                   help="multiplies each fit's rows (defaults: gisette 600 rows, text_like 10000)")
    p.add_argument("--trees", type=int, default=50)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--burners", type=int, default=1, help="busy-looping processes of the loaded runs")
    p.add_argument("--repeats", type=int, default=1, help="fits per setting (the median is compared)")
    p.add_argument("--out", type=Path, default=Path("results/bench/load.json"))
    p.set_defaults(handler=run_load)


if __name__ == "__main__":
    print(json.dumps(child_fit(json.loads(sys.argv[1]))))
