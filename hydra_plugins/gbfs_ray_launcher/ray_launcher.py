"""``hydra/launcher=ray`` (``conf/hydra/launcher/ray.yaml``): each job of a multirun as a Ray task.

Hydra imports every module of ``hydra_plugins`` at start-up to find its plugins, so this one imports
neither Ray nor the harness until a sweep is launched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


class RayLauncher(Launcher):
    """Run the jobs of a multirun as Ray tasks: :func:`runners.tuning.ray_launcher.launch`.

    Parameters
    ----------
    address : str or None
        The Ray cluster (``host:port`` of its head, ``ray://host:port``, ``auto``); None starts a
        local one (or connects to the cluster ``RAY_ADDRESS`` names, as ``ray.init`` does).
    num_cpus : int
        The CPUs Ray reserves for each job.
    init : mapping or None
        Further keyword arguments of ``ray.init`` (``runtime_env``, ``include_dashboard``, ...).
    """

    def __init__(self, address: str | None = None, num_cpus: int = 1,
                 init: Mapping[str, Any] | None = None) -> None:
        self.settings = {"address": address, "num_cpus": num_cpus, "init": init}
        self.config: DictConfig | None = None
        self.task_function: TaskFunction | None = None
        self.hydra_context: HydraContext | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.task_function, self.hydra_context = config, task_function, hydra_context

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from runners.tuning import ray_launcher

        return ray_launcher.launch(self, job_overrides, initial_job_idx)
