"""Data benchmark: ``python -m runners.bench data``.

Writes format-exact raw files from the synthetic stand-ins (Gisette text at its full
6000 + 1000 x 5000 size, Epsilon as bz2 LIBSVM with ``--epsilon-rows`` raw rows, Flight as
the 100 000 + 100 000 row benchm-ml CSVs) into a temporary data root with a manifest of
their checksums, then measures, side by side in one run:

* ``prepare`` (verify sha256, parse, write the compressed cache) and a cached load;
* our LIBSVM parser against scikit-learn's ``load_svmlight_file`` and LightGBM's own text
  loader (``lgb.Dataset(path).construct()``, which parses and bins) on the same
  uncompressed file, and the bz2 stream rate that bounds Epsilon's preparation;
* synthetic stand-in generation (at full size unless ``--scale``).
"""

from __future__ import annotations

import bz2
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from gbfs.data import load_dataset
from gbfs.data.fetching.download import sha256_file
from gbfs.data.fetching.manifest import REPO_DATASETS
from gbfs.data.formats import read_libsvm_bz2, read_libsvm_rows
from gbfs.data.synthetic.flight import flight_frames
from gbfs.data.synthetic.generators import GENERATORS
from runners.bench import provenance


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def _write_manifest(root: Path, name: str, files: dict[str, Path], **changes) -> None:
    m = json.loads((REPO_DATASETS / f"{name}.json").read_text())
    for fname, path in files.items():
        shutil.move(path, root / name / "raw" / fname)
        if m["files"][fname]["sha256"] is not None:
            m["files"][fname]["sha256"] = sha256_file(root / name / "raw" / fname)
    m.update(changes)
    (root / f"{name}.json").write_text(json.dumps(m))


def _gisette_files(tmp: Path, scale: float) -> dict[str, Path]:
    ds = GENERATORS["gisette_like"](scale=scale, random_state=0)
    out = {}
    for stem, X, y in (("train", ds.X_train, ds.y_train), ("valid", ds.X_test, ds.y_test)):
        lines = (" ".join(map(str, row)) + " \n" for row in X.astype(np.int64).tolist())
        (tmp / f"gisette_{stem}.data").write_text("".join(lines))
        (tmp / f"gisette_{stem}.labels").write_text("".join("1\n" if v else "-1\n" for v in y))
        out[f"gisette_{stem}.data"] = tmp / f"gisette_{stem}.data"
        out[f"gisette_{stem}.labels"] = tmp / f"gisette_{stem}.labels"
    return out


def _libsvm_text(X: np.ndarray, y: np.ndarray) -> bytes:
    lines = []
    for row, label in zip(X.tolist(), y.tolist()):
        lines.append(("1 " if label else "-1 ") + " ".join(f"{j + 1}:{v:.6g}" for j, v in enumerate(row)))
    return ("\n".join(lines) + "\n").encode()


def _epsilon_files(tmp: Path, n_rows: int) -> tuple[dict[str, Path], Path]:
    ds = GENERATORS["epsilon_like"](scale=n_rows / 80000, random_state=0)
    out = {}
    for fname, X, y in (("epsilon_normalized.bz2", ds.X_train, ds.y_train),
                        ("epsilon_normalized.t.bz2", ds.X_test, ds.y_test)):
        text = _libsvm_text(X, y)
        if fname == "epsilon_normalized.bz2":
            (tmp / "epsilon_train.svm").write_bytes(text)
        (tmp / fname).write_bytes(bz2.compress(text, compresslevel=9))
        out[fname] = tmp / fname
    return out, tmp / "epsilon_train.svm"


def _flight_files(tmp: Path, scale: float) -> dict[str, Path]:
    train, test = flight_frames(scale=scale, random_state=0)
    out = {}
    for fname, df in (("train-0.1m.csv", train), ("test.csv", test)):
        df.to_csv(tmp / fname, index=False, quoting=2)        # QUOTE_NONNUMERIC, as benchm-ml
        out[fname] = tmp / fname
    return out


def bench_libsvm_readers(svm: Path) -> dict:
    """Our parser vs scikit-learn and LightGBM on the same uncompressed LIBSVM file (all rows)."""
    import lightgbm as lgb
    from sklearn.datasets import load_svmlight_file

    n = sum(1 for _ in open(svm, "rb"))
    with open(svm, "rb") as f:
        _, ours = _timed(lambda: read_libsvm_rows(f, n, 2000, np.arange(n)))
    _, sk = _timed(lambda: load_svmlight_file(str(svm), n_features=2000))
    _, lg = _timed(lambda: lgb.Dataset(str(svm), params={"verbose": -1, "num_threads": 2,
                                                          "max_bin": 255}).construct())
    mb = svm.stat().st_size / 2**20
    return {"rows": n, "text_mb": mb, "ours_s": ours, "sklearn_s": sk, "lightgbm_s": lg,
            "ours_mb_s": mb / ours, "ratio_vs_sklearn": ours / sk, "ratio_vs_lightgbm": ours / lg}


def bench_bz2_stream(path: Path, n_rows: int) -> dict:
    """Decompress-and-count rate (what a 400 000-row Epsilon file costs before any parsing)."""
    _, secs = _timed(lambda: read_libsvm_bz2(path, n_rows, 2000, n_keep=n_rows // 5, seed=0, progress=False))
    return {"bz2_mb": path.stat().st_size / 2**20, "stream_parse_20pct_s": secs}


def run(args) -> int:
    rows = {}
    with tempfile.TemporaryDirectory(prefix="gbfs-bench-data-") as tmpdir:
        tmp, root = Path(tmpdir), Path(tmpdir) / "root"
        for name in ("gisette", "epsilon", "flight"):
            (root / name / "raw").mkdir(parents=True)
        g = GENERATORS["gisette_like"](scale=args.scale, random_state=0)
        _write_manifest(root, "gisette", _gisette_files(tmp, args.scale),
                        splits={"train": {"n_rows": len(g.y_train)}, "test": {"n_rows": len(g.y_test)}})
        eps_files, svm = _epsilon_files(tmp, args.epsilon_rows)
        n_test = len(GENERATORS["epsilon_like"](scale=args.epsilon_rows / 80000, random_state=0).y_test)
        bz2_train = bench_bz2_stream(eps_files["epsilon_normalized.bz2"], args.epsilon_rows)
        _write_manifest(root, "epsilon", eps_files, splits={
            "train": {"file": "epsilon_normalized.bz2", "n_rows_raw": args.epsilon_rows,
                      "n_rows": args.epsilon_rows // 5},
            "test": {"file": "epsilon_normalized.t.bz2", "n_rows_raw": n_test, "n_rows": n_test // 5}})
        f = GENERATORS["flight_like"](scale=args.scale, random_state=0)
        _write_manifest(root, "flight", _flight_files(tmp, args.scale),
                        splits={"train": {"file": "train-0.1m.csv", "n_rows": len(f.y_train)},
                                "test": {"file": "test.csv", "n_rows": len(f.y_test)}})
        for name in ("gisette", "epsilon", "flight"):
            ds, first = _timed(lambda n=name: load_dataset(n, root=root, progress=False))
            _, cached = _timed(lambda n=name: load_dataset(n, root=root, progress=False))
            cache = next((root / name / "prepared").glob("*.npz"))
            rows[name] = {"prepare_and_load_s": first, "cached_load_s": cached,
                          "cache_mb": cache.stat().st_size / 2**20,
                          "shape_train": list(ds.X_train.shape), "shape_test": list(ds.X_test.shape),
                          "n_features": len(ds.feature_names)}
            print(json.dumps({name: rows[name]}), flush=True)
        rows["epsilon"].update(bz2_train)
        rows["libsvm_readers"] = bench_libsvm_readers(svm)
        print(json.dumps({"libsvm_readers": rows["libsvm_readers"]}), flush=True)
    rows["synthetic_generation_s"] = {name: _timed(lambda n=name: GENERATORS[n](scale=args.scale,
                                                                               random_state=0))[1]
                                      for name in ("gisette_like", "epsilon_like", "flight_like")}
    print_summary(rows, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({**rows, **provenance()}, indent=2))
    print(f"\nwrote {args.out}")
    return 0


def print_summary(rows: dict, args) -> None:
    print("\n| dataset | train / test shape | prepare + load (s) | cached load (s) | cache (MiB) |")
    print("| --- | --- | --- | --- | --- |")
    for name in ("gisette", "epsilon", "flight"):
        r = rows[name]
        print(f"| {name} | {r['shape_train']} / {r['shape_test']} | {r['prepare_and_load_s']:.1f} | "
              f"{r['cached_load_s']:.2f} | {r['cache_mb']:.0f} |")
    r = rows["libsvm_readers"]
    print(f"\nLIBSVM text, {r['rows']} rows x 2000 ({r['text_mb']:.0f} MiB), all rows parsed: ours "
          f"{r['ours_s']:.1f} s ({r['ours_mb_s']:.0f} MiB/s), scikit-learn {r['sklearn_s']:.1f} s, LightGBM "
          f"(parse + bin) {r['lightgbm_s']:.1f} s -> ours/sklearn {r['ratio_vs_sklearn']:.2f}, "
          f"ours/LightGBM {r['ratio_vs_lightgbm']:.2f}")
    e = rows["epsilon"]
    rate = args.epsilon_rows / e["stream_parse_20pct_s"]
    print(f"Epsilon bz2 stream (decompress all, parse 20 %): {e['stream_parse_20pct_s']:.1f} s for "
          f"{args.epsilon_rows} rows -> about {500000 / rate / 60:.0f} min for the real "
          f"400 000 + 100 000 rows")
    print(f"synthetic generation at scale {args.scale} (s): " +
          ", ".join(f"{k} {v:.1f}" for k, v in rows["synthetic_generation_s"].items()))


def add_parser(sub) -> None:
    p = sub.add_parser("data", help="dataset preparation, cached loads, parsers vs scikit-learn/LightGBM")
    p.add_argument("--epsilon-rows", type=int, default=20000,
                   help="raw rows of the Epsilon-format train file written for the benchmark (20 %% kept)")
    p.add_argument("--scale", type=float, default=1.0,
                   help="rows of the Gisette and Flight files and of the stand-ins (0.05: a quick look)")
    p.add_argument("--out", type=Path, default=Path("results/bench/data.json"))
    p.set_defaults(handler=run)
