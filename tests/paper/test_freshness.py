"""Committed results are what the code produces today: a slice of each, regenerated and compared.

Each test reruns a few cells of a file under ``results/`` with the settings that made it (read from
the file, from the command it records or from ``conf/reproduce.yaml``'s quick scale) and compares
the numbers as written.  Times are never compared.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
from pathlib import Path

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from gbfs.data.ovr import ENV_SHARED_DATA
from runners.bench.speed import core as bench_core
from runners.bench.speed import shapes as bench_shapes
from runners.core import experiment
from runners.paper import figure1 as gtgbm_figure1
from runners.paper.gbfs_kdd import experiments as gbfs_experiments
from runners.paper.reproduction.plan import data_overrides, rows_of
from runners.paper.utility_kb import experiments as utility_experiments

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"

pytestmark = pytest.mark.slow


def _quick(part: str) -> dict:
    cfg = OmegaConf.load(ROOT / "conf" / "reproduce.yaml")
    return OmegaConf.to_container(cfg.reproduce.scales.quick[part], resolve=True)


def _written(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` as the CSV writers write it (six significant digits), read back."""
    from io import StringIO

    return pd.read_csv(StringIO(df.to_csv(index=False, float_format="%.6g")), dtype={"features": str})


def test_gtgbm_figure1_cells_are_reproduced():
    committed = pd.read_csv(RESULTS / "figure1.csv")
    cells = committed[(committed.d == 50) & committed.n.isin([80, 160, 320])]
    rows = gtgbm_figure1.run([50], [80, 160, 320], replications=int(cells.replications.iloc[0]), seed=0)
    assert [r["successes"] for r in rows] == cells.successes.tolist()


def test_gbfs_paper_figure1_is_reproduced():
    cfg = _quick("gbfs")
    committed = pd.read_csv(RESULTS / "reproduction" / "gbfs" / "figure1.csv", dtype={"features": str})
    shared = {k: v for k, v in cfg.items() if k not in ("figure1", "figure2", "curves")}
    fresh = gbfs_experiments.figure1({**shared, **cfg["figure1"], "shapes": ["disc"]})
    want = committed[committed["shape"] == "disc"].reset_index(drop=True)
    got = _written(fresh)
    pd.testing.assert_frame_equal(got.fillna(""), want.fillna(""), check_dtype=False)


def test_utility_paper_folds_are_reproduced():
    cfg = _quick("utility")
    committed = pd.read_csv(RESULTS / "reproduction" / "utility" / "folds.csv")
    fresh = _written(utility_experiments.ablation("diabetes", cfg))
    want = committed[committed.dataset == "diabetes"].reset_index(drop=True)
    pd.testing.assert_frame_equal(fresh, want, check_dtype=False)


@pytest.mark.parametrize("part", ["gbfs", "utility"])
def test_committed_parts_say_what_made_them(part):
    text = (RESULTS / "reproduction" / part / "README.md").read_text()
    assert "Made by `python -m runners.reproduce" in text and "at commit `" in text
    assert "From MLflow run `" in text


#: Table 3's numbers of a run, as ``runs.csv`` writes them
TABLE3_METRICS = ("n_selected_features", "test_auc", "test_rmse")


def _reproduction_cfg(overrides: list[str]):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name="reproduce", overrides=overrides)


@pytest.mark.parametrize("dataset, row", [("gisette_like", "agbm"), ("flight_like", "gbdt_topk")])
def test_gtgbm_table3_first_seed_run_is_reproduced(dataset, row):
    """The first seed's run of one row (its study's refit) fitted again at the tuned parameters
    ``runs.csv`` has for it (and its K, for a row held to GBDT-topK's K), as the reproduction fits
    them on its further seeds; its Table 3 numbers as written."""
    repro = OmegaConf.load(ROOT / "conf" / "reproduce.yaml")
    spec = next(r for r in rows_of(repro) if r.name == row)
    runs = pd.read_csv(RESULTS / "reproduction" / dataset / "runs.csv", dtype=str, keep_default_na=False)
    seed = runs.seed.iloc[0]
    logged = runs[(runs.row == row) & (runs.seed == seed)].iloc[0]
    settings = repro.reproduce.scales.quick.datasets[dataset]
    base = [*spec.overrides, *data_overrides(dataset, settings), f"seed={seed}", "tune=off"]
    space = _reproduction_cfg(base).method.get("search_space") or {}
    tuned = [f"method.params.{k}={logged[k]}" for k in space]
    if spec.k_param:
        tuned.append(f"{spec.k_param}={logged[spec.k_param.removeprefix('method.params.')]}")
    cfg = _reproduction_cfg([*base, *tuned])
    out = experiment.fit_evaluate(cfg, experiment.load_data(cfg), experiment.method_params(cfg.method))
    got = {k: format(out.metrics[k], ".6g") for k in TABLE3_METRICS}
    assert got == {k: logged[k] for k in TABLE3_METRICS}


#: the fields of a core benchmark row that do not depend on timing
CORE_DETERMINISTIC = ("n_classes", "n_train", "n_features", "n_test", "nonzero_share", "ours_auc",
                      "ours_leaves_per_tree", "binned_mb", "penalty_n_features", "penalty_auc",
                      "paper_mode_auc", "lgb_auc", "lgb_leaves_per_tree")


def _core_args(command: str) -> argparse.Namespace:
    """The settings of the recorded ``python -m runners.bench core ...`` command, as it parsed them."""
    ap = argparse.ArgumentParser()
    bench_core.add_parser(ap.add_subparsers())
    words = shlex.split(command)
    return ap.parse_args(words[words.index("core"):])


@pytest.mark.parametrize("shape", ["text_zipf", "isolet"])
def test_core_benchmark_shape_is_reproduced(shape):
    committed = json.loads((RESULTS / "bench" / "core.json").read_text())
    args = _core_args(committed["command"])
    want = next(r for r in committed["rows"] if r["shape"] == shape)
    data_dir = args.data_dir if args.data_dir.is_absolute() else ROOT / args.data_dir   # run from the root
    if not data_dir.is_dir() and os.environ.get(ENV_SHARED_DATA):   # a clone elsewhere: the shared folder
        data_dir = Path(os.environ[ENV_SHARED_DATA])
    data = bench_shapes.load_shape(shape, args.row_scale, data_dir)
    if data is None:
        pytest.skip(f"{shape}'s data file is not in {data_dir}")
    got = bench_core.measure(shape, *data, args.trees, args.threads)
    assert {k: got[k] for k in CORE_DETERMINISTIC} == {k: want[k] for k in CORE_DETERMINISTIC}
