"""Fixtures of the end-to-end suite: the built components, a cluster per test module, the chart."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the suite's own modules: build, cluster, api, ...

from build import VERSIONS, Binaries, BuildFailed, build_all
from cluster import Cluster, ClusterError, running_cluster

# Gates a release leaves off by default that the DRA scenarios use; everything else runs at the
# release's defaults (on 1.34, partitionable devices stay off: the baseline drops partitions).
FEATURE_GATES: dict[str, dict[str, bool]] = {
    "1.34": {},
    "1.35": {},
    "1.36": {"DRADeviceTaintRules": True},
    "1.37": {"DRADeviceTaintRules": True},
}


@pytest.fixture(scope="session")
def kubernetes_version(request: pytest.FixtureRequest) -> str:
    version: str = request.config.getoption("--kubernetes") or VERSIONS["kubernetes"]["default"]
    return version


@pytest.fixture(scope="session")
def binaries(kubernetes_version: str) -> Binaries:
    """Every component, built from the module proxy once per version (a failure fails, never skips)."""
    if os.geteuid() != 0:
        pytest.fail("the end-to-end suite runs a kubelet and makes device nodes: it needs root")
    try:
        return build_all(kubernetes_version)
    except BuildFailed as failed:
        pytest.fail(str(failed), pytrace=False)


def feature_gates(version: str) -> dict[str, bool]:
    return FEATURE_GATES[".".join(version.split(".")[:2])]


@pytest.fixture(scope="module")
def cluster(binaries: Binaries) -> Iterator[Cluster]:
    """A fresh one-node cluster for each test module (a failure to start fails with the log tail).

    Its folder is not pytest's: the kubelet mounts inside it, which pytest's clean-up of old folders
    cannot remove. The cluster unmounts and removes all but its logs when it stops.
    """
    folder = Path(tempfile.mkdtemp(prefix="ascend-e2e-", dir="/tmp"))
    try:
        with running_cluster(
            binaries, folder, feature_gates=feature_gates(binaries.kubernetes_version)
        ) as running:
            yield running
    except ClusterError as failed:
        pytest.fail(str(failed), pytrace=False)


@pytest.fixture(scope="module")
def control_plane(binaries: Binaries) -> Iterator[Cluster]:
    """etcd, the API server, the controller manager and the scheduler: no node (tests of the API alone)."""
    folder = Path(tempfile.mkdtemp(prefix="ascend-e2e-api-", dir="/tmp"))
    gates = feature_gates(binaries.kubernetes_version)
    try:
        with running_cluster(binaries, folder, feature_gates=gates, with_node=False) as running:
            yield running
    except ClusterError as failed:
        pytest.fail(str(failed), pytrace=False)
