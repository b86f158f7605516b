"""An API server outage: the kubelet still gets what needs no API server, and the slices catch up after."""

from __future__ import annotations

import pytest
from dra_harness import DRIVER, NODE, DraNode, device_names, prepare, put_claim, result, unprepare
from fake_apiserver import FakeApiServer
from waiting import until

from ascend_plugin.app import PluginApp
from ascend_plugin.testing.dra_standin import DraKubeletStandIn

pytestmark = pytest.mark.anyio

EIGHT = [f"npu-{phy}" for phy in range(8)]


async def test_prepared_claims_and_unprepare_need_no_api_server_and_slices_catch_up(
    dra_driver: PluginApp, dra_kubelet: DraKubeletStandIn, dra_node: DraNode, apiserver: FakeApiServer
) -> None:
    await until(lambda: device_names(apiserver.slices(DRIVER, NODE)) == EIGHT, "published")
    prepared = put_claim(apiserver, "prepared", [result("npu-0")])
    leaving = put_claim(apiserver, "leaving", [result("npu-1")])
    new = put_claim(apiserver, "new", [result("npu-2")])
    before = await prepare(dra_kubelet, prepared, leaving)
    generation = apiserver.slices(DRIVER, NODE)[0]["spec"]["pool"]["generation"]
    dra = dra_driver.dra
    assert dra is not None

    await apiserver.stop()
    again = await prepare(dra_kubelet, prepared)
    assert again.claims[prepared[2]] == before.claims[prepared[2]]
    assert (await unprepare(dra_kubelet, leaving)).claims[leaving[2]].error == ""
    refused = (await prepare(dra_kubelet, new)).claims[new[2]].error
    assert "cannot read ResourceClaim default/new: cannot reach the API server" in refused
    assert "the kubelet retries" in refused
    assert dra.preparer.stats.errors == {"api": 1}  # the API server away: a refusal of its own label
    dra_node.set_faults({5: ["80E01801"]})
    await until(lambda: dra.slices is not None and not dra.slices.in_sync, "the slices cannot be written")

    await apiserver.start()
    without_five = [name for name in EIGHT if name != "npu-5"]
    await until(lambda: device_names(apiserver.slices(DRIVER, NODE)) == without_five, "the slices caught up")
    assert apiserver.slices(DRIVER, NODE)[0]["spec"]["pool"]["generation"] > generation
    assert (await prepare(dra_kubelet, new)).claims[new[2]].error == ""
