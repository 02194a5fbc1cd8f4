"""Entry points of the experiment harness (``python -m runners.<name>``)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from omegaconf import OmegaConf


def data_label(name: str, path: str | None = None) -> str:
    """The dataset's part of run and study names: its name, or for a data file its file name and a
    short hash of its absolute path (two files named alike never share a study)."""
    if path is None or name != "file":
        return str(name)
    resolved = str(Path(str(path)).expanduser().resolve())
    return f"{Path(resolved).name}-{hashlib.sha256(resolved.encode()).hexdigest()[:6]}"


# ``${data_label:${dataset.name},${oc.select:dataset.path,null}}`` in conf/ (run and study names)
OmegaConf.register_new_resolver("data_label", data_label, replace=True)
