"""NodePrepareResources and NodeUnprepareResources: the answer, the CDI spec, the checkpoint, the refusals."""

from __future__ import annotations

import json

import pytest
from dra_harness import CDI_KIND, NODE, DraNode, prepare, put_claim, result, unprepare
from fake_apiserver import FakeApiServer
from waiting import until

from ascend_plugin.app import PluginApp
from ascend_plugin.testing.dra_standin import DraKubeletStandIn

pytestmark = pytest.mark.anyio


def claim_gets(apiserver: FakeApiServer) -> int:
    return len(apiserver.requests_of("get", "resourceclaims"))


async def test_a_two_chip_claim_gets_its_devices_and_their_cdi_ids(
    dra_driver: PluginApp, dra_kubelet: DraKubeletStandIn, dra_node: DraNode, apiserver: FakeApiServer
) -> None:
    claim = put_claim(apiserver, "train", [result("npu-2"), result("npu-3")])
    uid = claim[2]
    answer = await prepare(dra_kubelet, claim)
    assert list(answer.claims) == [uid]
    prepared = answer.claims[uid]
    assert prepared.error == ""
    assert [(d.request_names, d.pool_name, d.device_name, d.cdi_device_ids) for d in prepared.devices] == [
        (["npus"], NODE, "npu-2", [f"{CDI_KIND}={uid}-npu-2"]),
        (["npus"], NODE, "npu-3", [f"{CDI_KIND}={uid}-npu-3"]),
    ]
    spec = dra_node.spec_files()[f"huawei.com-npu-claim-{uid}.json"]
    assert spec["kind"] == CDI_KIND
    assert spec["cdiVersion"] == "0.5.0"  # device nodes with hostPath: the lowest version that has them
    assert [(d["name"], d["containerEdits"]["deviceNodes"][0]["path"]) for d in spec["devices"]] == [
        (f"{uid}-npu-2", "/dev/davinci2"),
        (f"{uid}-npu-3", "/dev/davinci3"),
    ]
    assert [node["path"] for node in spec["containerEdits"]["deviceNodes"]] == [
        "/dev/davinci_manager",
        "/dev/hisi_hdc",
    ]
    assert spec["containerEdits"]["mounts"][0]["hostPath"] == "/usr/local/Ascend/driver"
    checkpoint = json.loads(dra_node.checkpoint.read_text())
    assert checkpoint["claims"][uid] == {
        "namespace": "default",
        "name": "train",
        "pool": NODE,
        "state": "prepared",
        "devices": [
            {
                "device": "npu-2",
                "requests": ["npus"],
                "cdiDeviceIDs": [f"{CDI_KIND}={uid}-npu-2"],
                "adminAccess": False,
            },
            {
                "device": "npu-3",
                "requests": ["npus"],
                "cdiDeviceIDs": [f"{CDI_KIND}={uid}-npu-3"],
                "adminAccess": False,
            },
        ],
    }


async def test_preparing_again_answers_the_same_without_asking_the_api_server(
    dra_driver: PluginApp, dra_kubelet: DraKubeletStandIn, apiserver: FakeApiServer
) -> None:
    claim = put_claim(apiserver, "train", [result("npu-0"), result("npu-1")])
    first = await prepare(dra_kubelet, claim)
    reads = claim_gets(apiserver)
    again = await prepare(dra_kubelet, claim)
    assert bytes(again) == bytes(first)
    assert claim_gets(apiserver) == reads


async def test_request_names_are_the_base_requests_and_one_device_serves_several(
    dra_driver: PluginApp, dra_kubelet: DraKubeletStandIn, apiserver: FakeApiServer
) -> None:
    """A result of a firstAvailable subrequest names it ``npus/big``: the kubelet wants ``npus``."""
    claim = put_claim(
        apiserver,
        "mixed",
        [
            result("npu-4", "npus/big"),
            result("npu-5", "npus/big"),
            result("npu-5", "monitor", adminAccess=True),
        ],
    )
    prepared = (await prepare(dra_kubelet, claim)).claims[claim[2]]
    assert [(d.device_name, d.request_names) for d in prepared.devices] == [
        ("npu-4", ["npus"]),
        ("npu-5", ["npus", "monitor"]),
    ]


async def test_results_of_other_drivers_are_theirs_to_prepare(
    dra_driver: PluginApp, dra_kubelet: DraKubeletStandIn, apiserver: FakeApiServer
) -> None:
    claim = put_claim(
        apiserver, "both", [result("gpu-0", "gpus", driver="gpu.example.com", pool="gpus"), result("npu-6")]
    )
    prepared = (await prepare(dra_kubelet, claim)).claims[claim[2]]
    assert (prepared.error, [d.device_name for d in prepared.devices]) == ("", ["npu-6"])


@pytest.mark.parametrize(
    ("results", "label", "error"),
    [
        (None, "claim", "is not allocated yet (no status.allocation); the kubelet retries"),
        (
            [result("npu-1", pool="npu-node-2")],
            "claim",
            "allocated devices of pool(s) npu-node-2, not of this node's pool",
        ),
        (
            [result("npu-9")],
            "device",
            "device npu-9 is not a device of pool npu-node-1 (it has npu-0, npu-1",
        ),
        ([result("gpu-0")], "device", "device gpu-0 is not a device of pool npu-node-1"),
    ],
    ids=["not allocated", "another node's pool", "no such chip", "not a chip's name"],
)
async def test_claims_that_cannot_be_prepared_here_get_an_error_of_their_own(
    dra_driver: PluginApp,
    dra_kubelet: DraKubeletStandIn,
    dra_node: DraNode,
    apiserver: FakeApiServer,
    results: list[dict[str, object]] | None,
    label: str,
    error: str,
) -> None:
    claim = put_claim(apiserver, "bad", results)
    prepared = (await prepare(dra_kubelet, claim)).claims[claim[2]]
    assert error in prepared.error
    assert dra_driver.dra is not None
    assert dra_driver.dra.preparer.stats.errors == {label: 1}  # the metrics' reason label
    assert list(prepared.devices) == []
    assert dra_node.spec_files() == {}
    assert not dra_node.checkpoint.exists() or claim[2] not in dra_node.checkpoint.read_text()


async def test_a_uid_that_is_not_the_claim_s_is_refused(
    dra_driver: PluginApp, dra_kubelet: DraKubeletStandIn, apiserver: FakeApiServer
) -> None:
    """The claim was deleted and created again under the same name: the kubelet's UID is the old one's."""
    namespace, name, uid = put_claim(apiserver, "train", [result("npu-0")])
    stale = (namespace, name, "0b9e9a7c-0000-4000-8000-000000000000")
    prepared = (await prepare(dra_kubelet, stale)).claims[stale[2]]
    assert (
        f"ResourceClaim default/train has UID {uid}, but the kubelet asked for UID {stale[2]}"
        in prepared.error
    )


async def test_a_claim_that_is_gone_is_refused(dra_driver: PluginApp, dra_kubelet: DraKubeletStandIn) -> None:
    gone = ("default", "deleted", "5d1f4c2e-0000-4000-8000-000000000000")
    prepared = (await prepare(dra_kubelet, gone)).claims[gone[2]]
    assert prepared.error == "ResourceClaim default/deleted does not exist (any more)"


async def test_a_chip_prepared_for_one_claim_is_refused_to_another_unless_admin_access(
    dra_driver: PluginApp, dra_kubelet: DraKubeletStandIn, apiserver: FakeApiServer
) -> None:
    first = put_claim(apiserver, "first", [result("npu-7")])
    second = put_claim(apiserver, "second", [result("npu-7")])
    monitor = put_claim(apiserver, "monitor", [result("npu-7", "watch", adminAccess=True)])
    assert (await prepare(dra_kubelet, first)).claims[first[2]].error == ""
    refused = (await prepare(dra_kubelet, second)).claims[second[2]].error
    assert f"device npu-7 is prepared for ResourceClaim default/first (UID {first[2]})" in refused
    assert "unless the results have adminAccess" in refused
    assert (await prepare(dra_kubelet, monitor)).claims[monitor[2]].error == ""
    await unprepare(dra_kubelet, first)
    assert (await prepare(dra_kubelet, second)).claims[second[2]].error == ""


async def test_every_claim_of_a_call_gets_its_own_entry(
    dra_driver: PluginApp, dra_kubelet: DraKubeletStandIn, apiserver: FakeApiServer
) -> None:
    good = put_claim(apiserver, "good", [result("npu-0")])
    unallocated = put_claim(apiserver, "pending", None)
    other = put_claim(apiserver, "other", [result("npu-1")])
    answer = await prepare(dra_kubelet, good, unallocated, other)
    assert set(answer.claims) == {good[2], unallocated[2], other[2]}
    assert [answer.claims[uid].error == "" for uid in (good[2], unallocated[2], other[2])] == [
        True,
        False,
        True,
    ]


async def test_an_unhealthy_chip_is_not_prepared_until_it_is_healthy_again(
    dra_driver: PluginApp, dra_kubelet: DraKubeletStandIn, dra_node: DraNode, apiserver: FakeApiServer
) -> None:
    claim = put_claim(apiserver, "train", [result("npu-0")])
    dra_node.set_faults({0: ["80E01801"]})
    inventory = dra_driver.inventory
    assert inventory is not None
    await until(lambda: not inventory.get(0).healthy, "the chip unhealthy")
    prepared = (await prepare(dra_kubelet, claim)).claims[claim[2]]
    assert "device npu-0 is unhealthy (fault 80E01801" in prepared.error
    assert dra_driver.dra is not None
    assert dra_driver.dra.preparer.stats.errors == {"device": 1}
    dra_node.set_faults({})
    await until(lambda: inventory.get(0).healthy, "the chip healthy again")
    assert (await prepare(dra_kubelet, claim)).claims[claim[2]].error == ""


async def test_unprepare_removes_the_spec_and_the_record_and_is_idempotent(
    dra_driver: PluginApp, dra_kubelet: DraKubeletStandIn, dra_node: DraNode, apiserver: FakeApiServer
) -> None:
    claim = put_claim(apiserver, "train", [result("npu-0"), result("npu-1")])
    await prepare(dra_kubelet, claim)
    assert dra_node.spec_files()
    for _ in range(2):
        answer = await unprepare(dra_kubelet, claim)
        assert answer.claims[claim[2]].error == ""
        assert dra_node.spec_files() == {}
        assert json.loads(dra_node.checkpoint.read_text())["claims"] == {}


async def test_unpreparing_a_claim_never_prepared_succeeds(
    dra_driver: PluginApp, dra_kubelet: DraKubeletStandIn, apiserver: FakeApiServer
) -> None:
    unknown = ("default", "never", "7c1d2e3f-0000-4000-8000-000000000000")
    answer = await unprepare(dra_kubelet, unknown)
    assert answer.claims[unknown[2]].error == ""
    assert claim_gets(apiserver) == 0


async def test_metrics_count_the_claims(
    dra_driver: PluginApp, dra_kubelet: DraKubeletStandIn, apiserver: FakeApiServer
) -> None:
    good = put_claim(apiserver, "good", [result("npu-0")])
    bad = put_claim(apiserver, "bad", [result("npu-0", pool="elsewhere")])
    await prepare(dra_kubelet, good, bad)
    await unprepare(dra_kubelet, good)
    text = dra_driver.metrics.render().decode()
    assert "ascend_dra_claims_prepared_total 1.0" in text
    assert "ascend_dra_claims_unprepared_total 1.0" in text
    assert 'ascend_dra_prepare_errors_total{reason="claim"} 1.0' in text
    assert "ascend_kubelet_registrations_total 1.0" in text
