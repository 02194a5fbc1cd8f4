"""Command line: ``python -m gbfs.data {list,info,download,verify,prepare,unlock} NAME``.

``download`` fetches the raw files (resumable; sha256-checked), ``verify`` re-hashes the
files on disk, ``prepare`` downloads if needed and writes the parsed cache, ``info``
summarises paths, sizes, checksum status (from the hash cache: files unchanged since they
were last hashed) and shapes, ``unlock`` forgets the sha256 recorded at the first use of files
without a published checksum (to accept new upstream content).  ``info --path FILE [--target COLUMN]``
describes a data file of your own (:mod:`gbfs.data.reading.files`): what ``load_dataset("file", ...)`` would
load (its task, detected or ``--task``; a ranking file with ``--query-path`` or its ``.query`` file),
and the error it would raise.  Exit status 1 on any failure.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable

from . import BUNDLED, GENERATORS, load_dataset, read_dataset_manifest
from .fetching.download import (
    ChecksumError,
    DownloadError,
    RetryPolicy,
    fetch_dataset,
    file_status,
    mismatch_note,
)
from .fetching.lockfile import lock_path, remove_lock_entries
from .fetching.manifest import (
    ENV_MIRROR,
    DataRootError,
    Manifest,
    ManifestError,
    available_manifests,
    dataset_lock,
    raw_dir,
)
from .formats import FormatError
from .prepare import CacheError, cache_status, find_prepared, prepare, prepared_shapes
from .reading import files

STATUS_TEXT = {
    "verified": "ok, matches the published sha256",
    "locked": "ok, matches the sha256 recorded at first use (not verified against a published checksum)",
    "unlocked": "present, no checksum published or recorded yet",
    "mismatch": "CHECKSUM MISMATCH",
    "missing": "missing",
}


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return ""


def _print_files(manifest, root, fresh: bool = False) -> bool:
    ok = True
    for fname in manifest.files:
        path = raw_dir(manifest, root) / fname
        status, digest = file_status(manifest, fname, root, fresh)
        ok &= status in ("verified", "locked", "unlocked")
        size = f" ({_size(path.stat().st_size)})" if path.is_file() else ""
        if manifest.size(fname) is not None:
            size += f" (expected {manifest.size(fname)} bytes)"
        print(f"  {fname}: {STATUS_TEXT[status]}\n    path: {path}{size}")
        if digest:
            print(f"    sha256: {digest}")
        if status == "mismatch":
            print(f"    {mismatch_note(manifest, path.parent, fname)}")
    return ok


def _print_prepared(manifest, root) -> None:
    path = find_prepared(manifest, root)
    if path is None:
        print(f"  prepared: none (run: python -m gbfs.data prepare {manifest.name})")
        return
    print(f"  prepared: {path} ({_size(path.stat().st_size)})\n    checksum: {cache_status(path)}")
    try:
        shapes = prepared_shapes(path)
    except CacheError as exc:
        print(f"    UNREADABLE ({exc}); the next load or `python -m gbfs.data prepare {manifest.name}` "
              f"rebuilds it")
        return
    for split in ("train", "test"):
        print(f"    {split}: X {shapes[f'X_{split}']}, y {shapes[f'y_{split}']}")


def _offline_kind(name: str) -> str | None:
    """How a dataset without a manifest comes: "synthetic", "bundled" or None (it has one)."""
    if name in GENERATORS:
        return "synthetic stand-in, generated on load"
    return "bundled with scikit-learn" if name in BUNDLED else None


def _nothing_to_fetch(args) -> int | None:
    """download / verify / prepare of a synthetic or bundled dataset: say so and succeed."""
    kind = _offline_kind(args.name)
    if kind is None:
        return None
    print(f"{args.name}: {kind}; nothing to {args.command} (see `python -m gbfs.data info {args.name}`)")
    return 0


def _on_manifest(command: Callable[[argparse.Namespace, Manifest], int]
                 ) -> Callable[[argparse.Namespace], int]:
    """A command on a real dataset: ``command(args, manifest)``; for a synthetic or bundled one,
    :func:`_nothing_to_fetch`'s answer."""
    @functools.wraps(command)
    def run(args) -> int:
        if (done := _nothing_to_fetch(args)) is not None:
            return done
        return command(args, read_dataset_manifest(args.name, args.root))
    return run


def _listed(items: list, n: int = 10) -> str:
    return ", ".join(map(str, items[:n])) + (f" ... ({len(items)} in all)" if len(items) > n else "")


def cmd_info_file(args) -> int:
    """``info --path FILE``: what a data file would load as; status 1 when it would not load."""
    categorical = args.categorical if args.categorical in ("auto", "none") else args.categorical.split(",")
    info = files.describe(args.path, args.target, args.test_path, args.root, categorical, args.task,
                          args.query_path)
    print(f"{info['path']}: {info['format']}, {info['rows']} rows, {info['columns']} columns")
    if info["test_path"]:
        print(f"  test file: {info['test_path']}")
    print(f"  features ({len(info['feature_names'])}): {_listed(info['feature_names'])}")
    print(f"  task: {info['task'] or 'none (see the error)'}"
          + (" (detected; --task sets it)" if args.task == "auto" and info["task"] else ""))
    _print_target(info)
    print(f"  text columns: {_listed(info['text_columns']) or 'none'}")
    if info.get("categorical") is not None:
        print(f"  categorical: {_listed(info['categorical']) or 'none'}")
    nan = [f"{k} ({v})" for k, v in info["nan"].items()]
    print(f"  NaN in features: {_listed(nan) if nan else 'none'}")
    if info.get("cache"):
        print(f"  cache: {info['cache']} ({'exists' if info['cache_exists'] else 'not yet written'})")
    if info["problem"]:
        print(f"error: {info['problem']}", file=sys.stderr)
        return 1
    return 0


def _print_target(info: dict) -> None:
    """The target of ``info`` as its task reads it: classes, a range of values or relevances and queries."""
    if info["task"] == "ranking":
        sizes = f" from {info['query_path']}" if info.get("query_path") else " (qid: of the lines)"
        print(f"  queries: {info['queries']}{sizes}")
        print("  relevance: " + ", ".join(f"{k!r}: {v}" for k, v in info["classes"].items()))
        return
    target = repr(info["target"]) if info["target"] else "(from the file)"
    if info["task"] == "regression":
        low, high = info["target_range"]
        print(f"  target {target}: {len(info['classes'])} distinct real values, from {low:.6g} to {high:.6g}")
        return
    n = len(info["classes"])
    print(f"  target {target}: {n} {'classes' if info['task'] else 'distinct values'}: "
          + ", ".join(f"{k!r}: {v}" for k, v in list(info["classes"].items())[:10]))
    if n == 2 and info["task"] == "binary":
        negative, positive = info["classes"]
        print(f"  labels: {negative!r} -> 0, {positive!r} -> 1 (the positive class)")
    elif info["task"] == "multiclass":
        print(f"  labels: the codes 0 .. {n - 1} of the sorted classes")


def cmd_info(args) -> int:
    if args.path is not None:
        if args.name not in (None, files.NAME):
            raise ValueError(f"info: give a dataset name or --path, not both (got {args.name!r})")
        return cmd_info_file(args)
    if args.name in (None, files.NAME):
        raise ValueError("info: give a dataset name (see `list`) or --path FILE for a data file")
    if _offline_kind(args.name):
        ds = load_dataset(args.name, scale=args.scale, seed=args.seed)
        source = GENERATORS.get(args.name) or BUNDLED[args.name]
        doc = (source.__doc__ or "").strip().splitlines()[0]
        print(f"{args.name}: {_offline_kind(args.name)} (nothing to download): {doc}")
        for split in ("train", "val", "test"):
            X, y = ds.split(split)
            print(f"  {split}: X {X.shape} {X.dtype}, y {y.shape}")
        if ds.relevant is not None:
            print(f"  truly relevant features: {len(ds.relevant)} ({ds.relevant[:20].tolist()}"
                  f"{' ...' if len(ds.relevant) > 20 else ''})")
        return 0
    m = read_dataset_manifest(args.name, args.root)
    print(f"{m.name} (manifest version {m.version}, {m.path})\n  {m.title}\n  citation: {m.citation}")
    for s in m.sources:
        urls = [s.url] if s.type == "zip" else list(s.urls.values())
        print(f"  source ({s.type}): " + "\n                   ".join(urls))
    print("  checksum status from the hash cache (files unchanged since they were last hashed: same "
          "size, mtime, inode and ctime); `verify` re-hashes every file")
    _print_files(m, args.root)
    _print_prepared(m, args.root)
    return 0


@_on_manifest
def cmd_download(args, m: Manifest) -> int:
    with dataset_lock(m, args.root):
        fetch_dataset(m, args.root, mirror=args.mirror, progress=not args.no_progress, policy=_policy(args))
    print(f"{m.name}: downloaded to {raw_dir(m, args.root)}")
    return 0 if _print_files(m, args.root) else 1


@_on_manifest
def cmd_verify(args, m: Manifest) -> int:
    print(f"{m.name}: {raw_dir(m, args.root)} (every file re-hashed)")
    return 0 if _print_files(m, args.root, fresh=True) else 1


@_on_manifest
def cmd_prepare(args, m: Manifest) -> int:
    prepare(m, args.root, download=True, mirror=args.mirror, progress=not args.no_progress,
            policy=_policy(args))
    print(f"{m.name}:")
    _print_files(m, args.root)
    _print_prepared(m, args.root)
    return 0


@_on_manifest
def cmd_unlock(args, m: Manifest) -> int:
    folder = raw_dir(m, args.root)
    unknown = [f for f in args.files if f not in m.files]
    published = [f for f in args.files if f in m.files and m.sha256(f)]
    if unknown or published:
        raise ValueError(f"{m.name}: files must be among those without a published checksum "
                         f"({', '.join(f for f in m.files if not m.sha256(f)) or 'none'}); got "
                         f"{', '.join(unknown + published)}")
    with dataset_lock(m, args.root, purpose="change its checksum lock file"):
        removed = remove_lock_entries(folder, args.files or None)
    print(f"{m.name}: removed from {lock_path(folder)}: {', '.join(removed) or 'nothing (no such entry)'}")
    present = [f for f in (args.files or m.files) if (folder / f).is_file() and not m.sha256(f)]
    if present:
        print("  present, checked and recorded again at the next load (delete them to download them again): "
              + ", ".join(str(folder / f) for f in present))
    return 0


def cmd_list(args) -> int:
    print("real (downloaded):   " + ", ".join(available_manifests(args.root)))
    print("bundled (offline):   " + ", ".join(sorted(BUNDLED)))
    print("synthetic (offline): " + ", ".join(sorted(GENERATORS)))
    return 0


def _policy(args) -> RetryPolicy:
    return RetryPolicy(retries=args.retries, timeout=args.timeout)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m gbfs.data", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, fn, help_ in (("list", cmd_list, "the dataset names"),
                            ("info", cmd_info, "paths, sizes, checksum status and shapes"),
                            ("download", cmd_download, "download and verify the raw files"),
                            ("verify", cmd_verify, "check the raw files against their checksums"),
                            ("prepare", cmd_prepare, "download if needed, parse and cache the arrays"),
                            ("unlock", cmd_unlock, "forget the sha256 recorded at first use (files without "
                                                   "a published checksum) to accept new upstream content")):
        p = sub.add_parser(name, help=help_)
        p.set_defaults(func=fn)
        if name != "list":
            p.add_argument("name", nargs="?" if name == "info" else None, help="dataset name (see `list`)")
        p.add_argument("--root", default=None, help="data root (default $GBFS_DATA_DIR or ./datasets)")
        if name in ("download", "prepare"):
            p.add_argument("--mirror", default=os.environ.get(ENV_MIRROR),
                           help="base URL replacing the hosts of the manifest's URLs ($GBFS_DATA_MIRROR)")
            p.add_argument("--retries", type=int, default=RetryPolicy.retries)
            p.add_argument("--timeout", type=float, default=RetryPolicy.timeout, help="seconds per read")
            p.add_argument("--no-progress", action="store_true")
        if name == "unlock":
            p.add_argument("files", nargs="*", help="the files to unlock (default: every entry)")
        if name == "info":
            p.add_argument("--scale", type=float, default=1.0, help="synthetic / bundled: row scale")
            p.add_argument("--seed", type=int, default=0, help="synthetic / bundled: seed")
            p.add_argument("--path", default=None, help="a data file of your own (.csv, .csv.gz, .parquet, "
                                                        ".svm, .libsvm, .txt, .npz) instead of a name")
            p.add_argument("--target", default=None, help="--path: the label column of a CSV or Parquet file")
            p.add_argument("--test-path", default=None, help="--path: its test file (same format, columns)")
            p.add_argument("--task", default="auto",
                           choices=("auto", "binary", "multiclass", "regression", "ranking"),
                           help="--path: the file's task (auto: detected, as the harness's dataset.task)")
            p.add_argument("--query-path", default=None,
                           help="--path: a ranking file's group sizes (default: <path>.query, else qid:)")
            p.add_argument("--categorical", default="auto",
                           help="--path: the categorical columns: auto (the text ones), none, or a "
                                "comma-separated list of names")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (DownloadError, ChecksumError, FormatError, ManifestError, DataRootError, ValueError,
            FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
