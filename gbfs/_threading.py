"""How numba's worker threads wait: passively, unless the user chose otherwise.

numba's parallel kernels run on its OpenMP threading layer (GNU libgomp on Linux).  By default
libgomp's idle workers spin for a while before they sleep, so between two parallel kernels --
a grower launches several per node -- each worker burns a core.  On a machine shared with other
work (a tuning study running trials side by side, a CPU-bound neighbour) the spinning threads
steal the cores the next kernel needs: the same fit measured 41.8 s with the default policy and
5.0 s with ``OMP_WAIT_POLICY=PASSIVE`` under load.  Passive waiting costs a futex wake-up per
kernel launch instead, which the grower keeps rare (small nodes run serial kernels).

The variable is read once, when libgomp starts, so it is set here, before numba is imported by
any module of the package; a value the user exported (``ACTIVE`` for a dedicated machine) is
kept.  numba's other layers were weighed: ``workqueue`` does not spin but aborts when two Python
threads run kernels at once (Optuna's ``n_jobs``), and ``tbb`` needs a package numba does not
install.
"""

from __future__ import annotations

import os


def configure_waiting() -> str:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` unless already set; return the policy in effect."""
    return os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
