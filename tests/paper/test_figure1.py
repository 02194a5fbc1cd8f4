"""The Figure 1 runner end to end on a tiny grid (the full grid is ``python -m runners.figure1``)."""

import csv
import json

import pytest

from runners.paper import figure1

ARGS = ["--d", "12", "24", "--n", "200", "3000", "--replications", "4", "--quiet"]


def _read(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("figure1")
    assert figure1.main([*ARGS, "--seed", "3", "--out-dir", str(out)]) == 0
    return out


def test_csv_columns_and_values(tiny_run):
    rows = _read(tiny_run / "figure1.csv")
    assert tuple(rows[0]) == figure1.CSV_COLUMNS
    assert {(int(r["d"]), int(r["n"])) for r in rows} == {(12, 200), (12, 3000), (24, 200), (24, 3000)}
    for r in rows:
        reps, succ, rate = int(r["replications"]), int(r["successes"]), float(r["success_rate"])
        assert reps == 4 and 0 <= succ <= reps
        assert 0.0 <= rate <= 1.0 and rate == pytest.approx(succ / reps, abs=1e-4)
        assert float(r["seconds"]) >= 0.0
    # 3000 rows on 12 features is far past the transition: the signal columns are always found
    big = next(r for r in rows if r["d"] == "12" and r["n"] == "3000")
    assert float(big["success_rate"]) >= 0.75


def test_png_and_summary(tiny_run):
    png = (tiny_run / "figure1.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000
    summary = json.loads((tiny_run / "figure1_summary.json").read_text())
    assert summary["s"] == 3 and summary["delta"] == 0.1 and summary["replications"] == 4
    assert [q["d"] for q in summary["n80"]["per_d"]] == [12, 24]


def test_same_seed_same_rates(tiny_run, tmp_path):
    assert figure1.main([*ARGS, "--seed", "3", "--out-dir", str(tmp_path)]) == 0
    again = _read(tmp_path / "figure1.csv")
    first = _read(tiny_run / "figure1.csv")
    key = ("d", "n", "successes", "success_rate")
    assert [tuple(r[k] for k in key) for r in again] == [tuple(r[k] for k in key) for r in first]


def test_seeds_are_per_cell_and_replication():
    seeds = {figure1.replication_seeds(0, d, n, rep)
             for d in (12, 24) for n in (200, 3000) for rep in range(4)}
    assert len(seeds) == 16  # fresh data and subsets for every replication
    assert figure1.replication_seeds(0, 12, 200, 0) != figure1.replication_seeds(1, 12, 200, 0)


def test_n80_interpolates_monotone_rates():
    rows = [{"d": d, "n": n, "replications": 10, "success_rate": r}
            for d, rates in ((10, (0.0, 0.6, 1.0)), (20, (0.0, 0.0, 0.6)))
            for n, r in zip((100, 200, 400), rates)]
    rows.append({"d": 40, "n": 100, "replications": 10, "success_rate": 0.9})
    s = figure1.estimate_n80(rows)
    by = {q["d"]: q for q in s["per_d"]}
    # 0.6 -> 1.0 between n = 200 and 400: 0.8 is halfway in log n
    assert by[10]["n80"] == pytest.approx(200 * 2 ** 0.5, abs=0.1)
    assert by[20]["status"] == "above grid" and by[40]["status"] == "below grid"
    assert s["n_fit"] == 1 and s["slope"] is None
