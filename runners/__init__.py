"""Entry points of the experiment harness (``python -m runners.<name>``)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from omegaconf import OmegaConf

from runners.core.command_line import check_command_line
from runners.tracking import stores

# ``python -m runners.<name>`` imports this package first: refuse, saying how to quote it, a value
# Hydra would refuse for want of quotes (a path with spaces split by the shell), before Hydra parses
check_command_line()


def data_label(name: str, path: str | None = None) -> str:
    """The dataset's part of run and study names: its name, or for a data file (``dataset=file``,
    ``dataset=ranking_file``: a ``dataset.path``) its file name and a short hash of its absolute path
    (two files named alike never share a study)."""
    if path is None:
        return str(name)
    resolved = str(Path(str(path)).expanduser().resolve())
    return f"{Path(resolved).name}-{hashlib.sha256(resolved.encode()).hexdigest()[:6]}"


def val_score(estimator: str) -> str:
    """The validation score of ``method.estimator``'s task, the default tuning objective: ``val_auc``,
    ``val_ndcg_at_10`` for a ranking estimator (an unknown estimator gets ``val_auc``: its error comes
    from :func:`runners.core.experiment.estimator_kind`, naming the known ones)."""
    from runners.core.experiment import ESTIMATORS, TASKS

    kind = ESTIMATORS.get(str(estimator))
    return "val_auc" if kind is None else TASKS[kind.task].score


# ``${data_label:${dataset.name},${oc.select:dataset.path,null}}`` in conf/ (run and study names)
OmegaConf.register_new_resolver("data_label", data_label, replace=True)
# ``${val_score:${method.estimator}}``: conf/tune/optuna.yaml's default objective
OmegaConf.register_new_resolver("val_score", val_score, replace=True)
# ``${mlflow_env:MLFLOW_HTTP_REQUEST_TIMEOUT,30}``: conf/tracking/*.yaml's timeouts default to MLflow's
# variables as the user's environment gave them (runners.tracking.stores.USER_ENV)
OmegaConf.register_new_resolver("mlflow_env", stores.env_default, replace=True)
