"""doctor, DRA features: the API server is asked with dry runs which of the wanted features it keeps."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import DoctorRoot
from fake_apiserver import FakeApiServer

from ascend_plugin.doctor.findings import Status
from ascend_plugin.testing.resource_api import CONSUMABLE_CAPACITY, DEVICE_TAINTS, PARTITIONS

pytestmark = pytest.mark.anyio

DRA = {"serve": "dra", "vnpu": "dynamic", "share_count": 2}


async def test_a_1_36_server_keeps_everything(
    doctor_py_root: DoctorRoot, apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    apiserver.kube_version = "1.36"
    found = await doctor_py_root.run(kubeconfig=kubeconfig, **DRA)
    for gate in (PARTITIONS, CONSUMABLE_CAPACITY, DEVICE_TAINTS):
        assert found[f"dra-features:{gate}"].status is Status.OK, gate
    assert apiserver.slices() == [], "dry runs only"


async def test_a_1_35_server_is_a_warning_for_what_the_settings_ask(
    doctor_py_root: DoctorRoot, apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    apiserver.kube_version = "1.35"
    found = await doctor_py_root.run(kubeconfig=kubeconfig, **DRA)
    partitions = found[f"dra-features:{PARTITIONS}"]
    assert partitions.status is Status.WARNING
    assert "chips are published whole only" in partitions.detail
    assert partitions.fix is not None
    assert PARTITIONS in partitions.fix
    assert found[f"dra-features:{CONSUMABLE_CAPACITY}"].status is Status.WARNING
    assert found[f"dra-features:{DEVICE_TAINTS}"].status is Status.OK, "taints left to the default"


async def test_taints_asked_for_and_dropped_are_a_warning(
    doctor_py_root: DoctorRoot, apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    found = await doctor_py_root.run(kubeconfig=kubeconfig, serve="dra", dra_device_taints=True)
    assert found[f"dra-features:{DEVICE_TAINTS}"].status is Status.WARNING
    assert f"dra-features:{PARTITIONS}" not in found, "not asked for"


async def test_only_with_serve_dra(doctor_py_root: DoctorRoot, kubeconfig: Path) -> None:
    found = await doctor_py_root.run(kubeconfig=kubeconfig)
    assert found["dra-features"].status is Status.SKIPPED
