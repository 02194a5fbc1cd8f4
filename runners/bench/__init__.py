"""Benchmarks printed side by side with LightGBM in one run: ``python -m runners.bench <suite>``.

Every module of this package that defines ``add_parser(subparsers)`` is a suite: it adds its
sub-command, its arguments and its handler (``set_defaults(handler=...)``).  A new benchmark is
one module; nothing else lists it.  Every suite fits our booster and LightGBM with matched
settings (:mod:`runners.bench.matched`) and prints each of its targets as MET or NOT MET; the
targets live in the suites, never as timed assertions in tests.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from pathlib import Path

from runners.tracking.runs import git_commit


def suites() -> list:
    """The modules of this package that add a sub-command, in name order."""
    package = importlib.import_module(__name__.rpartition(".")[0] or __name__)
    found = []
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        if info.name.endswith(".__main__"):   # the command itself
            continue
        module = importlib.import_module(info.name)
        if callable(getattr(module, "add_parser", None)):
            found.append(module)
    return found


def provenance() -> dict[str, str]:
    """What made a benchmark's results: its command line and the checkout's commit."""
    return {"command": " ".join(["python -m runners.bench", *sys.argv[1:]]), "git_commit": git_commit()}


def default_out(name: str, quick: bool = False) -> Path:
    """Where suite ``name`` writes its JSON summary unless ``--out`` says: ``results/bench/<name>.json``,
    which is committed (the documentation quotes it); a ``--quick`` smoke run writes
    ``results/bench/quick/<name>.json`` (git-ignored), so it never replaces a measured summary."""
    return Path("results/bench") / ("quick" if quick else "") / f"{name}.json"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m runners.bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="suite", required=True)
    for module in suites():
        module.add_parser(sub)
    args = ap.parse_args(argv)
    return args.handler(args)
