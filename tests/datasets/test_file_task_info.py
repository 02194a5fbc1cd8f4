"""``python -m gbfs.data info --path`` says the task of every file the harness accepts, as the harness
detects it (``--task`` sets it, ``--query-path`` gives a ranking file's group sizes)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gbfs.data.__main__ import main
from gbfs.data.reading import files

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))
from test_file_tasks import write_multiclass, write_ranking, write_regression  # noqa: E402


@pytest.fixture
def data(tmp_path):
    write_multiclass(tmp_path / "m.csv")
    write_regression(tmp_path / "r.csv")
    write_ranking(tmp_path / "rank.train")  # LightGBM's layout: + rank.train.query
    (tmp_path / "b.csv").write_text("x,y\n" + "\n".join(f"{i},{'yes' if i % 3 else 'no'}" for i in range(30)))
    return tmp_path


@pytest.mark.parametrize("name, extra, lines", [
    ("m.csv", ["--target", "animal"], ["task: multiclass (detected", "4 classes", "codes 0 .. 3"]),
    ("r.csv", ["--target", "price"], ["task: regression (detected", "distinct real values, from"]),
    ("rank.train", [], ["task: ranking (detected", "queries: 40 from", "rank.train.query"]),
    ("b.csv", ["--target", "y"], ["task: binary (detected", "'yes' -> 1 (the positive class)"]),
    ("b.csv", ["--target", "y", "--task", "multiclass"], ["task: multiclass\n", "codes 0 .. 1"]),
])
def test_info_prints_the_task_the_harness_detects(data, capsys, name, extra, lines):
    assert main(["info", "--path", str(data / name), "--root", str(data / "root"), *extra]) == 0
    out = capsys.readouterr().out
    for line in lines:
        assert line in out
    target = extra[1] if extra else None
    task = extra[3] if "--task" in extra else "auto"
    assert f"task: {files.file_task(data / name, target, task=task, root=data / 'root')}" in out


def test_info_takes_a_query_path_and_refuses_a_wrong_task(data, capsys):
    (data / "sizes.txt").write_text((data / "rank.train.query").read_text())
    (data / "rank.txt").write_text((data / "rank.train").read_text())    # no rank.txt.query: given
    assert main(["info", "--path", str(data / "rank.txt"), "--query-path", str(data / "sizes.txt")]) == 0
    assert "queries: 40 from" in capsys.readouterr().out
    (data / "ranks").write_text((data / "rank.train").read_text())     # no extension, no ranks.query
    assert main(["info", "--path", str(data / "ranks"), "--query-path", str(data / "sizes.txt")]) == 0
    assert "task: ranking" in capsys.readouterr().out
    assert files.file_task(data / "ranks", query_path=data / "sizes.txt") == "ranking"
    assert main(["info", "--path", str(data / "ranks")]) == 1          # nothing says it is LIBSVM
    assert "unknown file type" in capsys.readouterr().err
    assert main(["info", "--path", str(data / "m.csv"), "--target", "animal", "--task", "binary",
                 "--root", str(data / "root")]) == 1
    err = capsys.readouterr().err
    assert "task='binary'" in err and "4 classes" in err
    assert main(["info", "--path", str(data / "r.csv"), "--target", "price", "--task", "ranking"]) == 1
    assert "no ranking file" in capsys.readouterr().err
