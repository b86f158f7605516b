"""doctor, the fault configuration: what is in force, where each part came from, what was skipped.

The ConfigMap is read through the real kubernetes-asyncio client from the
loopback API server; its denials stand in for a missing Role.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import DoctorRoot
from fake_apiserver import FakeApiServer
from fault_config_harness import put_fault_config, separate

from ascend_plugin.doctor.findings import Guide, Status

pytestmark = pytest.mark.anyio

WHERE = "kube-system/mindx-dl-fault-config"
BUILT_IN = (
    "faultCode.json from built-in faultCode.json; faultCustomization.json from built-in "
    "faultCustomization.json; PollInterval 300 s (default)"
)


async def test_the_configmap_in_force_part_by_part(
    doctor_py_root: DoctorRoot, apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    put_fault_config(apiserver, **{"faultCode.json": separate("80E21007"), "PollInterval": "60"})
    finding = (await doctor_py_root.run(kubeconfig=kubeconfig))["fault-config"]
    assert finding.status is Status.OK
    assert finding.detail == (
        f"{WHERE} read (keys: PollInterval, faultCode.json); in force: faultCode.json from faultCode.json of "
        f"{WHERE}; faultCustomization.json from built-in faultCustomization.json; PollInterval 60 s "
        f"(PollInterval of {WHERE})"
    )


async def test_no_configmap_means_the_built_in_files(
    doctor_py_root: DoctorRoot, apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    finding = (await doctor_py_root.run(kubeconfig=kubeconfig))["fault-config"]
    assert (finding.status, finding.detail) == (Status.OK, f"{WHERE} does not exist; in force: {BUILT_IN}")
    assert apiserver.requests_of("get", "configmaps", 404)


async def test_what_is_skipped_or_replaced_is_a_finding_of_its_own(
    doctor_py_root: DoctorRoot, apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    rule = {"EventId": ["81078603"], "TimeWindow": 86400, "Times": 0, "FaultHandling": "SeparateNPU"}
    put_fault_config(
        apiserver,
        **{"faultCustomization.json": json.dumps({"FaultFrequency": [rule]}), "PollInterval": "5"},
    )
    found = await doctor_py_root.run(kubeconfig=kubeconfig)
    assert found["fault-config"].status is Status.OK
    interval = found["fault-config:PollInterval"]
    assert (interval.status, interval.see) == (Status.PROBLEM, Guide.FAULT_CONFIG)
    assert interval.detail == f"{WHERE}: PollInterval: 5 is out of range 30-3600; the default 300 is used"
    assert found["fault-config:faultCode.json"].status is Status.WARNING  # no such key: the built-in file
    skipped = [name for name in found if name.startswith("fault-config:FaultFrequency[0]")]
    assert [found[name].status for name in skipped] == [Status.WARNING]


async def test_a_configmap_the_plugin_may_not_read_is_a_problem(
    doctor_py_root: DoctorRoot, apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    apiserver.deny("get", "configmaps", "kube-system")
    finding = (await doctor_py_root.run(kubeconfig=kubeconfig))["fault-config"]
    assert (finding.status, finding.see) == (Status.PROBLEM, Guide.RBAC)
    assert finding.detail.startswith(f"{WHERE} cannot be read: the API server refused to get configmaps")
    assert finding.detail.endswith(f"in force: {BUILT_IN}")
    assert finding.fix is not None
    assert finding.fix.startswith("add configmaps get, list, watch in kube-system to the plugin's Role")


async def test_an_unwell_api_server_is_a_warning(
    doctor_py_root: DoctorRoot, apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    apiserver.inject(503, "get", "configmaps")
    finding = (await doctor_py_root.run(kubeconfig=kubeconfig))["fault-config"]
    assert finding.status is Status.WARNING
    assert "cannot be read now" in finding.detail


async def test_without_a_cluster_the_base_is_shown(doctor_py_root: DoctorRoot, short_tmp: Path) -> None:
    levels = short_tmp / "faultCode.json"
    levels.write_text(json.dumps({"SeparateNPUCodes": ["80E21007"]}), encoding="utf-8")
    finding = (await doctor_py_root.run(kubeconfig=None, fault_levels_file=levels))["fault-config"]
    assert finding.status is Status.OK
    assert finding.detail.startswith(f"{WHERE} was not looked at (no cluster credentials")
    assert finding.detail.endswith(
        f"in force: faultCode.json from fault-level file {levels}; faultCustomization.json from built-in "
        "faultCustomization.json; PollInterval 300 s (default)"
    )


async def test_an_unreadable_levels_file_is_a_problem(doctor_py_root: DoctorRoot, short_tmp: Path) -> None:
    levels = short_tmp / "faultCode.json"
    levels.write_text("{not json", encoding="utf-8")
    found = await doctor_py_root.run(fault_levels_file=levels)
    finding = found["fault-config"]
    assert (finding.status, finding.see) == (Status.PROBLEM, Guide.FAULT_CONFIG)
    assert finding.detail.startswith(f"fault-level file {levels} is not valid JSON")
    # The checks that judge chips by the levels say why they could not.
    assert found["hot-reset"].status is Status.SKIPPED
    assert "the fault levels cannot be read" in found["hot-reset"].detail
