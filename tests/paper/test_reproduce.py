"""runners.reproduce: the K rule, the settings' checks, the skip-without-data path, the table builder
against hand-made runs in a real SQLite MLflow store, and a whole reproduction (tiny) that resumes."""

from __future__ import annotations

import json
import math
import re
import zlib
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
from harness_utils import CONF, paper_rows, reproduction_parent, unit_tags
from hydra import compose, initialize_config_dir
from mlflow.tracking import MlflowClient

from runners import reproduce as rp
from runners.paper import claims as paper_claims
from runners.paper import tables as paper_tables
from runners.paper.reproduction.plan import Row, sampler_seed, topk_k
from runners.tracking import runs as tracking

pytestmark = pytest.mark.usefixtures("restore_mlflow")

# five small rows (the paper's three needed by the K rule, GBDT-topK and A-GBM's exact-search twin) on
# 300 rows x 100 columns
TINY_ROWS = [
    "~reproduce.rows.gtgbm",
    "~reproduce.rows.gtgbm_exact",
    "~reproduce.rows.lgbm_cegb",
    "~reproduce.rows.agbm_refit",
    "~reproduce.rows.gbfs_topk",
    "~reproduce.rows.agbm_budget",
    "method.params.n_estimators=10",
    "method.params.early_stopping_rounds=5",
]
TINY_SCALE = [
    "reproduce.scale=tiny",
    "+reproduce.scales.tiny={seeds: [0, 1], n_trials: 1, mvs: null, datasets: "
    "{gisette_like: {scale: 0.05, kwargs: {feature_scale: 0.02}}, gisette: {scale: 0.1}}}",
]


def _scale(datasets: str, seeds: str = "[0]") -> list[str]:
    return [
        "reproduce.scale=tiny",
        f"+reproduce.scales.tiny={{seeds: {seeds}, n_trials: 1, mvs: null, datasets: {datasets}}}",
    ]


def _run(root: Path, overrides: list[str], capsys=None):
    base = [f"paths.root_dir={root}", f"paths.data_dir={root}/data", *overrides]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="reproduce", overrides=base)
        return rp.run(cfg, lambda ov: compose(config_name="reproduce", overrides=[*base, *ov]))


def _all_runs(root: Path):
    client = MlflowClient(tracking_uri=f"sqlite:///{root}/mlflow.db")
    exp = client.get_experiment_by_name("reproduction")
    return client, client.search_runs([exp.experiment_id], max_results=5000)


def test_topk_k_is_the_largest_selector_count():
    assert topk_k({"gbfs": 12.0, "agbm": 30.0, "gtgbm": 7.0}) == 30
    assert topk_k({"gbfs": 0.0}) == 1
    with pytest.raises(ValueError, match="selectors"):
        topk_k({})


@pytest.mark.parametrize(
    "overrides, match",
    [
        (["reproduce.scale=huge"], "reproduce.scale must be one of"),
        (["reproduce.scales.quick.seeds=[0,0]"], "seeds must be distinct"),
        (["reproduce.scales.quick.n_trials=0"], "n_trials must be a positive"),
        (["reproduce.scales.quick.n_startup_trials=0"], "n_startup_trials must be a positive"),
        (_scale("{nope: {}}"), r"unknown \['nope'\]"),
        (["reproduce.datasets=[gisette_like, nope]"], r"reproduce.datasets: \['nope'\] not in"),
        (["~reproduce.rows.gbfs", "~reproduce.rows.agbm", "~reproduce.rows.gtgbm"], "selector: true"),
        (["~reproduce.rows.agbm"], r"reproduce.rows.agbm_exact.tuned_as: 'agbm' must name a tuned row"),
        (["+reproduce.rows.twin={overrides: ['method=agbm'], tuned_as: gbdt_topk}"], "rows.twin.tuned_as"),
    ],
)
def test_bad_settings_fail_before_any_run(tmp_path, overrides, match):
    with pytest.raises(ValueError, match=match):
        _run(tmp_path, overrides)
    assert not (tmp_path / "mlflow.db").exists()


def test_every_scale_tunes_and_seeds_each_study_apart():
    # the committed scales leave TPE's random start-up: some trials of each study are chosen by TPE
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        cfg = compose(config_name="reproduce")
    for name, scale in cfg.reproduce.scales.items():
        assert 1 <= scale.n_startup_trials < scale.n_trials, name
    # each (seed, dataset, row) its own sampler seed, the same on every run and machine
    seeds = {sampler_seed(s, d, r) for s in (0, 1) for d in ("gisette_like", "epsilon_like")
             for r in ("gbfs", "agbm", "gtgbm")}
    assert len(seeds) == 12 and all(0 <= x < 2**31 for x in seeds)
    assert sampler_seed(0, "gisette_like", "gbfs") == zlib.crc32(b"0/gisette_like/gbfs") % 2**31


def test_real_data_not_on_disk_is_one_line_and_leaves_no_failed_run(tmp_path, capsys):
    written = _run(tmp_path, _scale("{gisette: {scale: 0.1}, epsilon: {}}"))
    out = capsys.readouterr().out
    assert written == {}
    lines = [line for line in out.splitlines() if "skipped" in line]
    assert len(lines) == 2 and "python -m gbfs.data download gisette" in lines[0]
    assert "Traceback" not in out
    _, runs = _all_runs(tmp_path)
    assert [r.data.tags["role"] for r in runs] == ["reproduction"]
    assert runs[0].info.status == "FINISHED"


def test_a_subset_of_datasets_runs_the_mvs_tables_only_when_listed(tmp_path, capsys):
    mvs = "{dataset: epsilon_like, scale: 0.01, feature_scale: 0.02, rates: [0.2, 1.0], seeds: 1, trees: 2}"
    scale = [
        "reproduce.scale=tiny",
        f"+reproduce.scales.tiny={{seeds: [0], n_trials: 1, mvs: {mvs}, datasets: {{gisette: {{}}}}}}",
    ]
    assert _run(tmp_path, [*scale, "reproduce.datasets=[gisette]"]) == {}
    _, runs = _all_runs(tmp_path)
    assert [r.data.tags["role"] for r in runs] == ["reproduction"]
    assert "gisette: skipped" in capsys.readouterr().out


# ------------------------------------------------------------------ the table builder, by hand

PAPER_ROWS = [*paper_rows("", k_param="method.params.k"), Row("peer", "A peer", ("method=lgbm_cegb",))]
#: (test_auc, test_rmse, n_selected_features, fit_seconds) of each row at seeds 0 and 1
HAND = {
    "gbdt_full": [(0.95, 0.30, 400, 2.0), (0.97, 0.28, 420, 2.2)],
    "gbfs": [(0.94, 0.31, 20, 4.0), (0.96, 0.29, 24, 4.4)],
    "agbm": [(0.93, 0.32, 30, 3.0), (0.95, 0.30, 34, 3.2)],
    "gtgbm": [(0.92, 0.33, 10, 1.0), (0.94, 0.31, 12, 1.2)],
    "gbdt_topk": [(0.90, 0.35, 30, 1.5), (0.92, 0.33, 34, 1.5)],
    "peer": [(0.99, 0.20, 5, 1.0), (0.99, 0.20, 5, 1.0)],
}


@pytest.fixture
def hand_runs(tmp_path):
    """Runs logged by hand as the runners log them (metrics, params, tags, curves, artifacts)."""
    client, exp, parent = reproduction_parent(tmp_path, "reproduction", tmp_path / "art")
    runs = {}
    for row in PAPER_ROWS:
        for seed, (auc, rmse, n, sec) in enumerate(HAND[row.name]):
            tags = {**unit_tags(parent, "gisette_like", row.name, seed), "mlflow.parentRunId": parent}
            if row.k_param:
                tags["budget"] = "34" if seed else "30"
            with mlflow.start_run(experiment_id=exp, tags=tags) as r:
                mlflow.log_metrics(
                    {
                        "test_auc": auc,
                        "test_rmse": rmse,
                        "n_selected_features": n,
                        "fit_seconds": sec,
                    },
                    step=3,
                )
                mlflow.log_params(
                    {
                        "method.params.learning_rate": 0.05 + seed,
                        "method.params.mu": "None" if row.name.startswith("gbdt") else 0.001 * (1 + seed),
                        "method.params.min_node_fraction": 0.02,
                    }
                )
                for step in range(3):
                    mlflow.log_metrics(
                        {
                            "elapsed_seconds": 0.5 * (step + 1),
                            "root_variance": 1.0 / (step + 1),
                            "val_rmse": 0.4 - 0.01 * step,
                            "val_auc": 0.8 + 0.01 * step,
                        },
                        step=step,
                    )
                mlflow.log_metric("val_auc", auc, step=3)  # the final model, after the curve
                cols = list(range(seed + row.name.__len__() % 3, 40))
                mlflow.log_text(
                    json.dumps({"features": [{"index": j} for j in cols]}), "selected_features.json"
                )
            runs[f"{row.name}/{seed}"] = client.get_run(r.info.run_id)
    return client, parent, runs


def test_table3_reads_the_runs_back_next_to_the_papers_numbers(hand_runs):
    client, parent, runs = hand_runs
    frame = paper_tables.collect(runs, PAPER_ROWS, [0, 1])
    assert len(frame) == 12 and set(frame.run_id) == {r.info.run_id for r in runs.values()}
    t3 = paper_tables.table3(paper_tables.summarize(frame), "gisette_like", {"gtgbm": 0.1, "gbdt_topk": 0.3})
    by = t3.set_index("row")
    assert by.loc["gbfs", "auc"] == pytest.approx(95.0)
    assert by.loc["gbfs", "auc_sd"] == pytest.approx(np.std([94.0, 96.0], ddof=1))
    assert by.loc["gbfs", "n_features"] == 22 and by.loc["gbfs", "n_features_paper"] == 172
    assert by.loc["gbfs", "auc_delta"] == pytest.approx(95.0 - 99.01)
    assert by.loc["gbfs", "rmse_delta"] == pytest.approx(0.30 - 0.183)
    assert by.loc["gbdt_full", "auc_paper"] == 99.33 and math.isnan(by.loc["gbdt_full", "rmse_paper"])
    assert math.isnan(by.loc["peer", "auc_paper"]) and by.loc["gbdt_topk", "budget"] == "30,34"
    assert by.loc["gtgbm", "run_ids"].split() == [runs["gtgbm/0"].info.run_id, runs["gtgbm/1"].info.run_id]
    md = paper_tables.table3_markdown(t3, "gisette_like", 20)
    assert f"`{runs['agbm/1'].info.run_id[:8]}`" in md and "95.00 ± 1.41 | 99.01 | -4.01" in md
    # Table 5: the first seed's tuned parameters; Table 6: GBDT-Full
    t5 = paper_tables.table5_markdown(frame, "gisette_like", 0)
    assert re.search(r"\| GBFS \| 0.001 \| 1.1 \| 0.05 \| 0.1 \| 0.02 \| 0.02 \|", t5)
    assert "| GBDT-Full | - | - | 0.05 | 0.1 |" in t5
    t6 = paper_tables.table6_markdown(t3, frame, "gisette_like", 0)
    assert "| GBDT-Full | 0.05 | 0.1 | 0.02 | 96.00 ± 1.41 | 99.33 | -3.33 | `" in t6


def test_claims_say_what_holds_with_both_numbers(hand_runs):
    _, _, runs = hand_runs
    frame = paper_tables.collect(runs, PAPER_ROWS, [0, 1])
    t3 = paper_tables.table3(paper_tables.summarize(frame), "gisette_like", {"gtgbm": 0.1, "gbdt_topk": 0.3})
    claims = paper_claims.claims(t3)
    text = "\n".join(claims)
    assert "GBFS has a higher test AUC than GBDT-topK (K = 30,34): ours +4.00 pt" in text
    assert re.search(r"GBFS has a higher .* paper \+1.13 pt: \*\*holds\*\*", text)
    # GBFS - GT-GBM features: 10 and 12 on the paired seeds, mean 11, se 1
    assert "GT-GBM picks fewer features than GBFS: ours 11.0 vs 22.0 (GBFS - GT-GBM +11.0, +11.0 se over " \
           "2 paired seeds)" in text
    assert "GBFS's fit takes 3.82× GT-GBM's (+3.10 s, +31.0 se over 2 paired seeds" in text
    assert "0.100 vs 0.300" in text and "one number each, no standard error" in text
    # the best selector is 1 pt below GBDT-Full on both seeds: beyond the 0.5 pt allowed, on every seed
    assert re.search(r"best selector \(GBFS\) loses at most 0.5 pt .* ours -1.00 pt.*: \*\*does not hold\*\*",
                     text)
    assert "A peer: test AUC 99.00 %" in "\n".join(paper_claims.peers(t3))
    readme = paper_claims.readme(t3, "gisette_like", "head", 1.0, [0, 1])
    assert "## The paper's claims: 7 hold, 0 within noise, 1 does not hold here" in readme


def test_figure2_is_also_decided_on_the_twins_of_the_exact_search():
    def row(name, paper, label, seconds):
        return {"row": name, "paper": paper, "method": label, "fit_seconds": float(np.mean(seconds)),
                "fit_seconds_by_seed": dict(enumerate(seconds))}

    t3 = pd.DataFrame([row("agbm", "agbm", "A-GBM", [2.0, 2.0]), row("gtgbm", "gtgbm", "GT-GBM", [1.0, 1.0]),
                       row("agbm_exact", None, "A-GBM, exact", [9.0, 11.0]),
                       row("gtgbm_exact", None, "GT-GBM, exact", [1.0, 1.0])])
    text = "\n".join(paper_claims.claims(t3, {"agbm_exact": "agbm", "gtgbm_exact": "gtgbm"}))
    assert ("- Figure 2, their twins at the same tuned parameters (A-GBM, exact and GT-GBM, exact): GT-GBM "
            "trains faster than A-GBM: A-GBM's fit takes 10.00× GT-GBM's (+9.00 s, +9.0 se over 2 paired "
            "seeds; ") in text
    assert text.endswith("**holds**.")
    assert paper_claims.claims(t3) == []  # no twins named: no such claim


def test_curves_join_the_metrics_on_elapsed_time_by_iteration(hand_runs):
    client, _, runs = hand_runs
    c = paper_tables.curves(client, runs["gbfs/0"].info.run_id)
    assert c["root_variance"] == [(0.5, 1.0), (1.0, 0.5), (1.5, pytest.approx(1 / 3))]
    assert [v for _, v in c["val_auc"]] == pytest.approx([0.8, 0.81, 0.82])  # not the final step 3
    assert paper_tables.first_features(runs["gbfs/1"].info.run_id, 5) == [2, 3, 4, 5, 6]


# ------------------------------------------------------------------ a whole (tiny) reproduction


@pytest.mark.slow
def test_tiny_reproduction_writes_every_file_and_resumes_without_new_runs(tmp_path, capsys):
    written = _run(tmp_path, [*TINY_ROWS, *TINY_SCALE])
    folder = written["gisette_like"]
    assert {p.name for p in folder.iterdir()} == {
        "table3.md",
        "table3.csv",
        "runs.csv",
        "table5.md",
        "table6.md",
        "figure2.png",
        "README.md",
    }
    client, runs = _all_runs(tmp_path)
    assert sum(r.info.status != "FINISHED" for r in runs) == 0
    finals = [r for r in runs if r.data.tags.get("role") in ("refit", "evaluation")]
    assert len(finals) == 5 * 2
    # the twin runs no study: every seed fits A-GBM's tuned parameters with the exact split search
    twin = [r for r in finals if r.data.tags["repro_row"] == "agbm_exact"]
    source = next(r for r in finals if r.data.tags["repro_row"] == "agbm" and r.data.tags["seed"] == "0")
    assert {r.data.tags["role"] for r in twin} == {"evaluation"} and len(twin) == 2
    assert not [r for r in runs if r.data.tags.get("role") == "study" and "agbm_exact" in r.data.tags.get(
        "study_name", "")]
    for r in twin:
        assert r.data.params["method.params.split_search"] == "exact"
        for key in ("mu", "learning_rate", "min_node_fraction"):
            param = f"method.params.{key}"
            assert float(r.data.params[param]) == float(source.data.params[param])
    t3 = pd.read_csv(folder / "table3.csv")
    cited = {i for ids in t3.run_ids for i in ids.split()}
    assert cited == {r.info.run_id for r in finals}
    # runs.csv: every cited run with its parameters exactly as logged (what a refit of a cell needs)
    logged = pd.read_csv(folder / "runs.csv", dtype=str, keep_default_na=False).set_index("run_id")
    assert set(logged.index) == cited
    for r in finals:
        assert logged.loc[r.info.run_id, "learning_rate"] == r.data.params["method.params.learning_rate"]
    # GBDT-topK's K at each seed is the largest count of the selectors at that seed
    by = {(r.data.tags["repro_row"], r.data.tags["seed"]): r for r in finals}
    for seed in ("0", "1"):
        k = max(by[(m, seed)].data.metrics["n_selected_features"] for m in ("gbfs", "agbm"))
        assert by[("gbdt_topk", seed)].data.tags["budget"] == str(int(k))
    parent = next(r for r in runs if r.data.tags.get("role") == "reproduction")
    assert all(r.data.tags.get("reproduction") == parent.info.run_id for r in runs if r is not parent)
    # every study (the first seed's refit) was seeded by its dataset and row
    for r in (r for r in finals if r.data.tags["role"] == "refit"):
        wanted = sampler_seed(0, "gisette_like", r.data.tags["repro_row"])
        assert r.data.params["tune.sampler_seed"] == str(wanted), r.data.tags["repro_row"]
    assert "gisette: skipped" in capsys.readouterr().out
    # the README says, seed by seed, how many of GBDT-Full's features GBDT-topK kept at its K
    readme = (folder / "README.md").read_text()
    assert "## GBDT-topK against GBDT-Full" in readme
    for seed in ("0", "1"):
        k = by[("gbdt_topk", seed)].data.tags["budget"]
        m = int(by[("gbdt_full", seed)].data.metrics["n_selected_features"])
        assert re.search(rf"seed {seed}: GBDT-topK \(K={k}\) keeps \d+ of GBDT-Full's {m} features", readme)
    # the second invocation reuses every finished unit: no new run but the tables rewritten
    (folder / "table3.md").unlink()
    _run(tmp_path, [*TINY_ROWS, *TINY_SCALE])
    _, again = _all_runs(tmp_path)
    assert {r.info.run_id for r in again} == {r.info.run_id for r in runs}
    assert (folder / "table3.md").read_text().count("|") > 20
    # every file says what made it: the command, the commit and the date
    commit = tracking.git_commit()
    for name in ("table3.md", "table5.md", "table6.md", "README.md"):
        assert "Made by `python -m runners.reproduce " in (folder / name).read_text()
        assert f"at commit `{commit}` on " in (folder / name).read_text()
    assert {a.path for a in client.list_artifacts(parent.info.run_id)} == {"gisette_like"}


@pytest.mark.slow
def test_every_row_figure3_and_the_mvs_tables(tmp_path):
    mvs = (
        "{dataset: epsilon_like, scale: 0.01, feature_scale: 0.02, rates: [0.2, 1.0], seeds: 2, trees: 5, "
        "strategies: [sgb, mvs]}"
    )
    written = _run(
        tmp_path,
        [
            "method.params.n_estimators=10",
            "method.params.early_stopping_rounds=5",
            "reproduce.scale=tiny",
            "+reproduce.scales.tiny={seeds: [0], n_trials: 1, datasets: "
            "{gisette_like: {scale: 0.05, kwargs: {feature_scale: 0.02}}}, mvs: " + mvs + "}",
        ],
    )
    assert (written["gisette_like"] / "figure3.png").read_bytes()[:4] == b"\x89PNG"
    t3 = pd.read_csv(written["gisette_like"] / "table3.csv")
    assert list(t3.row) == [
        "gbdt_full",
        "gbfs",
        "agbm",
        "gtgbm",
        "lgbm_cegb",
        "agbm_refit",
        "gbdt_topk",
        "gbfs_topk",
        "agbm_budget",
        "agbm_exact",
        "gtgbm_exact",
    ]
    budgeted = t3.set_index("row").loc["agbm_budget"]
    assert budgeted.n_features <= float(budgeted.budget)  # one seed: K is a single number
    assert not np.isnan(t3.set_index("row").corr_top[["gbdt_topk", "gtgbm"]]).any()
    assert {"table2.md", "table3.md", "table4.md", "README.md", "sampling.csv"} <= {
        p.name for p in written["mvs"].iterdir()
    }
    for name in ("table2.md", "table3.md", "table4.md", "README.md"):  # under the title: what made it
        lines = (written["mvs"] / name).read_text().splitlines()
        assert lines[0].startswith("# ") and lines[2].startswith("Made by `python -m runners.reproduce ")
    client, runs = _all_runs(tmp_path)
    (sampling,) = [r for r in runs if r.data.tags.get("role") == "sampling"]
    parent = next(r for r in runs if r.data.tags.get("role") == "reproduction")
    assert sampling.data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert {a.path for a in client.list_artifacts(parent.info.run_id)} == {"gisette_like", "mvs"}


@pytest.mark.slow
def test_sigterm_ends_every_run_and_a_rerun_resumes(tmp_path):
    import signal
    import subprocess
    import sys

    from harness_utils import wait_for

    from runners.tracking import runs as tracking

    # the store exists before the process starts, so polling it never races its schema creation
    tracking.init_store(f"sqlite:///{tmp_path}/mlflow.db", "reproduction", str(tmp_path / "mlartifacts"))
    client, _ = _all_runs(tmp_path)
    exp = client.get_experiment_by_name("reproduction").experiment_id
    argv = [sys.executable, "-m", "runners.reproduce", f"paths.root_dir={tmp_path}", *TINY_ROWS, *TINY_SCALE]
    with open(tmp_path / "log", "wb") as out:
        proc = subprocess.Popen(
            argv, cwd=Path(__file__).resolve().parents[2], stdout=out, stderr=subprocess.STDOUT
        )
    try:
        (first,) = wait_for(
            lambda: client.search_runs([exp], "tags.role = 'refit' and attributes.status = 'FINISHED'"),
            "a finished refit",
        )
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=300) == 143, (tmp_path / "log").read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    _, runs = _all_runs(tmp_path)
    assert not [r for r in runs if r.info.status == "RUNNING"]
    (parent,) = [r for r in runs if r.data.tags.get("role") == "reproduction"]
    assert parent.info.status == "KILLED"
    # the rerun reopens the parent, reuses the finished refit and completes the rest
    written = _run(tmp_path, [*TINY_ROWS, *TINY_SCALE])
    cited = " ".join(pd.read_csv(written["gisette_like"] / "table3.csv").run_ids)
    assert first.info.run_id in cited
    _, runs = _all_runs(tmp_path)
    assert client.get_run(parent.info.run_id).info.status == "FINISHED"
    assert not [r for r in runs if r.info.status == "RUNNING"]
    refits = [r for r in runs if r.data.tags.get("role") == "refit" and r.info.status == "FINISHED"]
    assert len({r.data.tags["repro_row"] for r in refits}) == len(refits) == 4


def test_progress_counts_units_and_estimates_from_the_ones_that_ran():
    from runners.paper.reproduction.run import Reproduction

    rep = Reproduction(None, None, None, None)
    rep.total, rep.reached = 10, 1
    assert rep.progress() == "unit 1 of 10"                 # nothing ran yet: no estimate
    rep.reached, rep.ran, rep.seconds = 4, 2, 30.0          # 2 units ran in 30 s; units 4..10 left
    assert rep.progress() == "unit 4 of 10, ETA 2 min"      # 7 x 15 s = 105 s
    rep.reached = 10
    assert rep.progress() == "unit 10 of 10, ETA 15 s"
