"""The booster's structure may change; its models may not: a fixed grid of fits (methods x samplers x
group-test scopes x budgets x losses) must give byte-identical model files (see reference_models.py),
here and on another CPU: the same seed gives the same model on every machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import reference_models as R


@pytest.fixture(scope="module")
def digests():
    return R.compute()


def test_models_are_byte_identical_to_the_reference(digests):
    expected = json.loads(R.PATH.read_text())
    assert sorted(digests) == sorted(expected)
    changed = [name for name in expected if digests[name] != expected[name]]
    assert not changed, f"{len(changed)} of {len(expected)} models changed, e.g. {changed[:3]}"


def test_the_grid_discriminates(digests):
    # the reference is only worth as much as the grid's variety: most settings give their own model
    assert len(set(digests.values())) >= 0.8 * len(digests)


def another_machine(cache_dir: Path) -> dict[str, str]:
    """Environment that makes this machine compute like one with other SIMD units: numba compiles for
    a generic x86-64 (no AVX, no FMA), numpy's run-time dispatch is limited to its baseline and
    OpenBLAS uses its oldest kernels -- what differs on a fresh machine of the same kind."""
    found = np.__config__.CONFIG["SIMD Extensions"].get("found", [])
    env = {**os.environ, "NUMBA_CPU_NAME": "generic", "NUMBA_CACHE_DIR": str(cache_dir),
           "OPENBLAS_CORETYPE": "Prescott"}
    if found:
        env["NPY_DISABLE_CPU_FEATURES"] = " ".join(found)
    return env


@pytest.mark.slow
def test_models_are_the_same_on_another_cpu(tmp_path):
    out = tmp_path / "digests.json"
    script = Path(R.__file__)
    proc = subprocess.run([sys.executable, str(script), str(out)], env=another_machine(tmp_path / "numba"),
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    expected = json.loads(R.PATH.read_text())
    other = json.loads(out.read_text())
    changed = [name for name in expected if other.get(name) != expected[name]]
    assert not changed, f"{len(changed)} of {len(expected)} models differ on another CPU, e.g. {changed[:3]}"


THREAD_CHECK = """
import sys
sys.path.insert(0, {tests!r})
import numpy as np, scipy.sparse as sp
import reference_models as R

X, y_clf, y_reg = R.data(n=4000, d=60, seed=1)
Xs = np.where(X < 0.7, 0.0, X)  # mostly zeros: the sparse-row kernels
fits = [("clf", {{}}, X), ("clf", {{"sampler": "mvs", "subsample": 0.3}}, X),
        ("clf", {{"method": "gtgbm", "mu": 0.003, "n_target_features": 4}}, X),
        ("reg", {{"method": "agbm", "mu": 0.003}}, X), ("clf", {{}}, sp.csr_matrix(np.nan_to_num(Xs)))]
for kind, params, data in fits:
    digests = set()
    for threads in (1, 2, 4):
        est = R.ESTIMATORS[kind](n_estimators=8, max_leaves=16, min_samples_leaf=10, random_state=3,
                                 n_threads=threads, **params)
        digests.add(R.digest(est.fit(data, y_clf if kind == "clf" else y_reg)))
    print(kind, params, type(data).__name__, len(digests))
"""


@pytest.mark.slow
def test_models_do_not_depend_on_the_number_of_threads():
    # shapes above the kernels' serial threshold, so the parallel kernels run; four threads on any CPU
    proc = subprocess.run([sys.executable, "-c", THREAD_CHECK.format(tests=str(Path(R.__file__).parent))],
                          env={**os.environ, "NUMBA_NUM_THREADS": "4"}, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 5 and all(line.endswith(" 1") for line in lines), proc.stdout
