"""The end-to-end suite's harness fails loudly: a component that cannot be built or started names itself
and shows the end of its own log (the suite never skips for want of a component)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).with_name("e2e")))

from build import BuildFailed, _run
from cluster import ClusterError, Component


def test_a_component_that_exits_while_starting_fails_with_its_log_tail(tmp_path: Path) -> None:
    component = Component(
        "kube-apiserver", ["sh", "-c", "echo 'error: etcd unreachable'; exit 3"], tmp_path / "c.log"
    )
    component.start()
    with pytest.raises(ClusterError) as failed:
        component.wait_ready(lambda: False, within=30)
    assert "kube-apiserver exited with 3 while starting" in str(failed.value)
    assert "error: etcd unreachable" in str(failed.value)


def test_a_component_never_ready_fails_with_its_log_tail(tmp_path: Path) -> None:
    component = Component(
        "kubelet", ["sh", "-c", "echo 'waiting for the runtime'; exec sleep 60"], tmp_path / "k.log"
    )
    component.start()
    try:
        with pytest.raises(ClusterError) as failed:
            component.wait_ready(lambda: False, within=0.5)
    finally:
        component.stop(grace=1)
    assert "kubelet was not ready within 0.5 s" in str(failed.value)
    assert "waiting for the runtime" in str(failed.value)


def test_a_failed_build_names_the_component_and_shows_the_end_of_its_log(tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    with pytest.raises(BuildFailed) as failed:
        _run(
            ["sh", "-c", "echo 'go: module k8s.io/api@v0.99.0: not found'; exit 1"],
            tmp_path,
            log,
            "kubernetes-1.99.0",
        )
    assert "kubernetes-1.99.0" in str(failed.value)
    assert "not found" in str(failed.value)
