"""The papers' tables and figures in one command: ``python -m runners.reproduce``.

    python -m runners.reproduce                              # quick: the stand-ins, few trials
    python -m runners.reproduce reproduce.scale=standard     # the stand-ins at full size
    python -m runners.reproduce reproduce.scale=paper        # the real data on disk (the paper's protocol)

For every dataset of the scale (``conf/reproduce.yaml``) and every row of the GT-GBM paper's
Table 3 (GBDT-Full, GBFS, A-GBM, GT-GBM, GBDT-topK, and our peers), as the paper's Section 5.1 and
Appendix C do: the method is tuned by :mod:`runners.tune` on the 80/20 validation split of the
first seed's training rows (Table 5's search: mu, shrinkage, alpha), its best parameters are refitted
and scored once on test; every further seed fits the tuned parameters on its own draw of the data
(a stand-in's generator, the validation split, the model's random choices) with
:mod:`runners.run`.  GBDT-topK runs last, with K = the largest number of features GBFS, A-GBM and
GT-GBM selected at that seed (the paper's rule, :func:`runners.paper.reproduction.plan.topk_k`).  A real
dataset whose files are not on disk is skipped with one line.  A ranking dataset (``dataset.task:
ranking``, e.g. the stand-in ``ranking_like``) runs the rows of ``reproduce.ranking_rows`` the same
way and gives the paper's Table 4 (:mod:`runners.paper.reproduction.ranking`).  The MVS paper's
Tables 2-4 come from :mod:`runners.paper.mvs.tables`.

MLflow: one parent run per reproduction (``role=reproduction``, found again by ``reproduce.name``),
every study and fit nested under it and tagged ``reproduction`` (the parent's id),
``repro_dataset``, ``repro_row``, ``repro_config`` (a digest of the settings that made it).  The
tables are built by reading those runs back (:mod:`runners.paper.tables`), never from memory, so
a second invocation resumes: a unit whose FINISHED run exists is reused, an interrupted study
continues from its counted trials.  The parent is ended FINISHED, FAILED on an error, KILLED on
Ctrl-C or SIGTERM (exit status 143). Its datasets and parts share no unit: ``reproduce.jobs`` of
them run at once, in worker processes (:mod:`runners.paper.reproduction.jobs`). One process at a time
runs a reproduction: a second one of the same name stops before any run, naming the first
(:mod:`runners.paper.reproduction.lock`). The reproduction itself -- its parent run, its units, its
tables -- is :mod:`runners.paper.reproduction.run`'s.
"""

from __future__ import annotations

import os
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from runners import run as single_run
from runners import tune
from runners.paper.reproduction import run as reproduce_run
from runners.paper.reproduction.jobs import Workers
from runners.paper.reproduction.run import Compose
from runners.tracking import runs as tracking


def run(cfg: DictConfig, compose: Compose, workers: Workers | None = None) -> dict[str, Path]:
    """Run (or resume) the reproduction of ``cfg.reproduce``, a unit's config being ``compose`` of its
    overrides, its studies run by ``runners.tune`` and its further seeds' fits by ``runners.run``
    (with ``workers``, its independent parts first in ``reproduce.jobs`` processes at once); return
    the folders written, by dataset.  Raises what :func:`runners.paper.reproduction.run.reproduce`
    raises, before any run is created."""
    return reproduce_run.reproduce(cfg, compose, tune=tune.run, fit=single_run.run, workers=workers)


@hydra.main(version_base="1.3", config_path="../conf", config_name="reproduce")
def main(cfg: DictConfig) -> None:
    # the tables read many small artifacts back: no progress bar for each
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    with tracking.sigterm_as_interrupt():  # SIGTERM ends every open run KILLED, exits with status 143
        run(cfg, reproduce_run.hydra_compose, Workers(list(HydraConfig.get().overrides.task)))


if __name__ == "__main__":
    main()
