"""The MLflow parent run of a tuning study (:mod:`runners.tune`): found again when the study is
resumed, shared by the study's workers, ended with the invocation, and the runs a killed study
left RUNNING closed.

One parent run per study (``role=study``, ``study_name``), recorded in the study's user attr
:data:`PARENT` by the first worker to start one; a parallel worker that loses that race deletes its
own run and joins the recorded one.  Each invocation counts itself in the tag ``n_invocations``
(:func:`start_parent`); its trials and its refit are nested runs of the parent.
"""

from __future__ import annotations

import logging

import mlflow
import optuna
from mlflow.tracking import MlflowClient
from optuna.trial import FrozenTrial

from runners.tracking.run_log import RunLog
from runners.tuning import study as studies
from runners.tuning.storages import SharedStorage

log = logging.getLogger(__name__)

#: study user attr: the study's MLflow parent run, shared by its workers and reused when resumed
PARENT = "mlflow_run_id"


def close_interrupted_runs(trials: list[FrozenTrial], keep: str | None = None) -> None:
    """End the MLflow runs a killed study left RUNNING: its trial runs FAILED (tagged
    ``trial_state=FAIL`` even when :func:`runners.tracking.runs.fail_dead_runs` ended them first) and its
    parent KILLED, unless that is ``keep``, the parent run this invocation resumes."""
    client = MlflowClient()
    for t in trials:
        for key, status in (("mlflow_run_id", "FAILED"), ("mlflow_parent_run_id", "KILLED")):
            run_id = t.user_attrs.get(key)
            if not run_id or run_id == keep:
                continue
            try:
                found = client.get_run(run_id)
                if key == "mlflow_run_id" and "trial_state" not in found.data.tags:
                    RunLog(run_id, client).tags({"trial_state": "FAIL",
                                                 "error": "interrupted: its process died"})
                if found.info.status == "RUNNING":
                    client.set_terminated(run_id, status)
            except mlflow.exceptions.MlflowException as err:   # e.g. logged to another tracking store
                log.warning("could not close MLflow run %s of trial %d: %s", run_id, t.number, err)


def _is_study_run(client: MlflowClient, run_id: str, exp_id: str, name: str) -> bool:
    try:
        found = client.get_run(run_id)
    except mlflow.exceptions.MlflowException:   # deleted for good, or logged to another store
        return False
    return (found.info.experiment_id == exp_id and found.info.lifecycle_stage == "active"
            and found.data.tags.get("role") == "study" and found.data.tags.get("study_name") == name)


def find_parent_run(study: optuna.Study, exp_id: str) -> str | None:
    """The MLflow run of the earlier invocations of ``study`` in experiment ``exp_id``, or None.

    The run the study recorded when it began; else, for a study that already has trials (begun
    before runs were recorded, or shared with a machine logging to another store), its first run
    tagged ``role=study`` with its name.  A study without trials never reuses a run by name: that
    would be an older study of the same name whose Optuna storage was deleted.
    """
    client, name = MlflowClient(), study.study_name
    recorded = study.user_attrs.get(PARENT)
    if recorded and _is_study_run(client, recorded, exp_id, name):
        return recorded
    if not study.get_trials(deepcopy=False) or "'" in name:
        return None
    found = client.search_runs([exp_id], filter_string=f"tags.role = 'study' and tags.study_name = '{name}'",
                               order_by=["attributes.start_time ASC"], max_results=1)
    return found[0].info.run_id if found else None


def _new_parent(storage: SharedStorage, study: optuna.Study, exp_id: str,
                tags: dict[str, str]) -> tuple[str, bool]:
    """Start the study's run and record it in the study, unless a parallel worker recorded its own
    first: return the run to use and whether this worker's run is the study's (invocation 1)."""
    client = MlflowClient()
    mine = client.create_run(exp_id, run_name=f"tune-{study.study_name}", tags=tags).info.run_id
    try:
        stored = studies.claim_attr(storage, study, PARENT, mine)
    except BaseException:
        client.set_terminated(mine, "FAILED")
        raise
    if stored == mine or not _is_study_run(client, stored, exp_id, study.study_name):
        return mine, stored == mine   # (a run of another tracking store: this store gets its own)
    log.info("study %s: a parallel worker recorded its MLflow run %s first; using it", study.study_name,
             stored)
    client.set_terminated(mine, "KILLED")
    client.delete_run(mine)
    return stored, False


def start_parent(storage: SharedStorage, study: optuna.Study, exp_id: str,
                 tags: dict[str, str]) -> tuple[mlflow.ActiveRun, int, bool]:
    """Resume the study's parent run, or start it; return it, this invocation's number and whether
    this invocation started the run (and so logs the config as params)."""
    run_id, created, first = find_parent_run(study, exp_id), False, False
    if run_id is None:
        run_id, first = _new_parent(storage, study, exp_id, {**tags, "n_invocations": "1"})
        created = first or run_id != study.user_attrs.get(PARENT)
    logged = int(MlflowClient().get_run(run_id).data.tags.get("n_invocations", "1"))
    if first:   # invocation 1 is the study run's starter: the others count from 2
        studies.claim_attr(storage, study, "invocation:1", studies.worker(), system=True)
        invocation = 1
    else:
        invocation = studies.claim_invocation(storage, study, first=max(2, logged + 1))
        log.info("study %s: resuming its MLflow run %s (invocation %d)", study.study_name, run_id, invocation)
    active = mlflow.start_run(run_id=run_id, tags={**tags, "n_invocations": str(max(logged, invocation))})
    return active, invocation, created


def end_parent(parent_id: str, status: str) -> None:
    """End the active runs down to the parent (a failure may leave a nested run active)."""
    while (active := mlflow.active_run()) is not None:
        mlflow.end_run(status=status)
        if active.info.run_id == parent_id:
            break
