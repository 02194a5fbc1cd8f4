"""Real ``distributed.LocalCluster`` s on 127.0.0.1 (worker processes, one thread each), started
once per module that asks for them."""

from __future__ import annotations

import pytest


def _cluster(n_workers: int):
    distributed = pytest.importorskip("distributed", reason="the dask extra is not installed")
    cluster = distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address="127.0.0.1:0", silence_logs=40)
    client = distributed.Client(cluster)
    return cluster, client


@pytest.fixture(scope="module")
def client2():
    cluster, client = _cluster(2)
    yield client
    client.close()
    cluster.close()


@pytest.fixture(scope="module")
def client4():
    cluster, client = _cluster(4)
    yield client
    client.close()
    cluster.close()
