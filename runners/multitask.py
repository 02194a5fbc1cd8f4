"""Every multitask variant on one dataset, compared as in the GT-GBM paper's Figures 4-5.

    python -m runners.multitask dataset=multitask
    python -m runners.multitask dataset=isolet_ovr tune=optuna tune.n_trials=10 method.params.max_features=20

``main`` only calls :func:`compare`, importable, on the configs of
:func:`runners.paper.multitask_comparison.variant_configs`: each variant of
``compare.variants`` (``conf/multitask.yaml``; Multitask A-GBM and GT-GBM, GroupSparse, SingleTask,
Independent) is one ``runners.run`` run, or with ``tune=optuna`` one study of ``tune.n_trials``
trials on the validation split and its refit (:mod:`runners.tune`); the command line's overrides
(``method.params.max_features=20``, ``method.params.n_estimators=50``, ``tune.n_trials=8``) apply to
every variant alike, so every variant is tuned the same way, or fitted with the documented settings
of its method config.  ``max_features`` bounds every variant's features over all tasks
(:mod:`runners.core.multitask_variants`): the comparison is at equal total feature budgets.

Then the test AUPRC and AUC of each variant per task and their Total are drawn as grouped bars
(:func:`runners.tracking.multitask_figure.task_bars`) and written with a summary to ``compare.out_dir``
(``results/multitask/``): ``<name>_auprc.png``, ``<name>_auc.png`` (and their CSVs), ``<name>.md``
(the table, the settings, each variant against the best baseline) and ``<name>.json``.  The same
files are the artifacts of one MLflow run (tag ``role=comparison``; metrics ``<variant>.test_auprc``,
``<variant>.test_auc``, ``<variant>.n_selected_features``; tags ``run.<variant>``, the run each
variant's numbers come from, which in turn gets the tag ``comparison_run``).  The comparison itself
is :mod:`runners.paper.multitask_comparison`'s; this command gives it ``runners.run``'s ``run``.
"""

from __future__ import annotations

from collections.abc import Mapping

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from runners import run
from runners.paper import multitask_comparison
from runners.tracking import runs as tracking


def compare(cfg: DictConfig, variants: Mapping[str, DictConfig]) -> dict:
    """Fit (or tune) ``variants``, each by ``runners.run``'s ``run`` (which hands a ``tune=optuna``
    variant to ``runners.tune``), draw and write the comparison, log it as one MLflow run; return
    and raise what :func:`runners.paper.multitask_comparison.compare` returns and raises."""
    return multitask_comparison.compare(cfg, variants, fit=run.run)


@hydra.main(version_base="1.3", config_path="../conf", config_name="multitask")
def main(cfg: DictConfig) -> float | None:
    with tracking.sigterm_as_interrupt():   # SIGTERM ends the runs KILLED, then exits with status 143
        overrides = HydraConfig.get().overrides.task
        variants = multitask_comparison.variant_configs(overrides, list(cfg.compare.variants))
        results = compare(cfg, variants)["variants"]
        return results[cfg.compare.variants[0]]["metrics"]["test_auc"]


if __name__ == "__main__":
    main()
