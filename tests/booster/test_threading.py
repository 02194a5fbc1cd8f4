"""numba's OpenMP workers wait passively unless the user chose a policy (gbfs._threading)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

_SNIPPET = "import os, gbfs; print(os.environ['OMP_WAIT_POLICY'])"


@pytest.mark.slow  # a few seconds in a subprocess: the default suite stays under 5 minutes (CI runs it)
@pytest.mark.parametrize("given,expected", [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_import_sets_passive_waiting_unless_chosen(given, expected):
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if given is not None:
        env["OMP_WAIT_POLICY"] = given
    out = subprocess.run([sys.executable, "-c", _SNIPPET], env=env, capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == expected


_HOOK = """
import os, sys
seen = []
class Spy:
    def find_spec(self, name, path=None, target=None):
        if name == "numba" and not seen:
            seen.append(os.environ.get("OMP_WAIT_POLICY"))
        return None
sys.meta_path.insert(0, Spy())
import gbfs
print(seen[0])
"""


@pytest.mark.slow  # a few seconds in a subprocess: the default suite stays under 5 minutes (CI runs it)
def test_policy_is_set_before_numba_is_imported():
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", _HOOK], env=env, capture_output=True, text=True, check=True,
                         timeout=120)
    assert out.stdout.strip() == "PASSIVE"
