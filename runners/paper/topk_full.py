"""Whether GBDT-topK is another model than GBDT-Full: the features each row's runs use, read back.

GBDT-topK refits LightGBM on the K features its ranking fit ranked first (K = the largest number
of features a selector chose, the GT-GBM paper's Section 5.1).  When those K columns hold every
feature GBDT-Full uses, the refit can build GBDT-Full's trees again and the two rows of Table 3 are
the same model in effect; the comparison of the paper (Table 3: a smaller model on the features
an importance ranking keeps) only shows when GBDT-topK drops some of them.  This module counts,
per seed, GBDT-Full's features among the K columns GBDT-topK kept and among those its refit uses,
and says it in one line of the dataset's ``README.md``.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import mlflow
from mlflow.entities import Run
from mlflow.tracking import MlflowClient

from gbfs import load_model


@dataclass(frozen=True)
class Overlap:
    """One seed: GBDT-Full uses ``full`` features; GBDT-topK kept ``k`` columns (its K), ``kept`` of
    them used by GBDT-Full; its refit uses ``used`` features, ``shared`` of them used by GBDT-Full."""

    seed: int
    full: int
    k: int
    kept: int
    used: int
    shared: int

    @property
    def differs(self) -> bool:
        """GBDT-topK's columns leave out some of GBDT-Full's features (so it cannot be GBDT-Full)."""
        return self.kept < self.full


def used_features(run_id: str) -> set[int]:
    """The features a run's model uses (its ``selected_features.json``)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path="selected_features.json",
                                                   dst_path=tmp)
        return {int(f["index"]) for f in json.loads(Path(path).read_text())["features"]}


def kept_columns(run_id: str) -> set[int]:
    """The K columns a GBDT-topK run refitted on (its model file's ``columns_``)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path="model.json", dst_path=tmp)
        return {int(j) for j in load_model(path).columns_}


def overlaps(runs: Mapping[str, Run], rows: Sequence, seeds: Sequence[int]) -> list[Overlap]:
    """Per seed, GBDT-Full's features against GBDT-topK's (the first rows whose ``paper`` is
    ``gbdt_full`` and ``gbdt_topk``); empty when the table lacks either row or its model file."""
    full = next((r.name for r in rows if r.paper == "gbdt_full"), None)
    topk = next((r.name for r in rows if r.paper == "gbdt_topk"), None)
    if full is None or topk is None:
        return []
    out = []
    for seed in seeds:
        f_run, t_run = runs[f"{full}/{seed}"].info.run_id, runs[f"{topk}/{seed}"].info.run_id
        names = {a.path for a in MlflowClient().list_artifacts(t_run)}
        if "model.json" not in names:   # a store without model files: nothing to compare
            return []
        f, kept, used = used_features(f_run), kept_columns(t_run), used_features(t_run)
        out.append(Overlap(int(seed), len(f), len(kept), len(f & kept), len(used), len(f & used)))
    return out


def sentence(found: Sequence[Overlap]) -> str:
    """The README's line: how many of GBDT-Full's features GBDT-topK keeps, seed by seed."""
    seeds = "; ".join(
        f"seed {o.seed}: GBDT-topK (K={o.k}) keeps {o.kept} of GBDT-Full's {o.full} features, its refit "
        f"uses {o.used}, {o.shared} of them GBDT-Full's" for o in found)
    n = sum(o.differs for o in found)
    verdict = (f"GBDT-topK leaves out some of GBDT-Full's features on {n} of {len(found)} seeds"
               + ("" if n == len(found) else
                  "; where it keeps them all, its K columns hold every feature GBDT-Full uses and the "
                  "two rows are the same model in effect"))
    return f"- GBDT-topK against GBDT-Full (features each model uses): {seeds}. {verdict}."
