"""The telemetry's container labels come from the kubelet's PodResources: one holder, several, none.

Huawei's conventions: empty labels where no container holds the chip,
``not_displayed_for_multi_pod`` where several do; ``npu_container_info`` for
each holder; ``container_npu_*`` only where exactly one container holds it.
"""

from __future__ import annotations

from pathlib import Path

import anyio.to_thread
import pytest
from fake_dcmi.players import CFakePlayer
from plugin_harness import registered, running_plugin
from pod_resources_standin import PodResourcesStandIn
from split_nodes import duo, make_host
from telemetry_harness import of, scrape_until, telemetry_settings, value
from waiting import wait_for

from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from backends.fake import FakeScenario

pytestmark = pytest.mark.anyio

RESOURCE = "huawei.com/Ascend310P"
MULTI = "not_displayed_for_multi_pod"


@pytest.fixture
def host(short_tmp: Path) -> Path:
    return make_host(short_tmp / "host", "/dev/davinci0", "/dev/davinci1")


async def test_holders_label_their_chips_and_several_are_not_displayed(
    c_fake: CFakePlayer,
    kubelet: KubeletStandIn,
    plugin_dir: Path,
    host: Path,
    pod_resources: PodResourcesStandIn,
) -> None:
    data = duo({}).model_dump(exclude_none=True)
    data["telemetry"] = {"memory_used_mb": 2048, "utilization_pct": {"aicore": 25}}
    c_fake.update(FakeScenario.model_validate(data))
    settings = telemetry_settings(
        c_fake, plugin_dir, host, share_count=2, pod_resources_socket=pod_resources.socket
    )
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        # Chip 0: one container holds both of its shares. Chip 1: two pods hold one share each.
        await anyio.to_thread.run_sync(
            pod_resources.admit, "ml", "solo", RESOURCE, ["Ascend310P-0-0", "Ascend310P-0-1"], "infer"
        )
        await anyio.to_thread.run_sync(pod_resources.admit, "ml", "left", RESOURCE, ["Ascend310P-1-0"])
        await anyio.to_thread.run_sync(pod_resources.admit, "web", "right", RESOURCE, ["Ascend310P-1-1"])
        assert app.held.client is not None
        await app.held.refresh()
        samples = await scrape_until(
            app,
            lambda found: bool(of(found, "npu_chip_info_utilization", pod_name="solo")),
            "chip 0's figures labelled with its holder",
        )
    [solo] = of(samples, "npu_chip_info_utilization", id="0")
    assert (solo.labels["namespace"], solo.labels["pod_name"], solo.labels["container_name"]) == (
        "ml",
        "solo",
        "infer",
    )
    [shared] = of(samples, "npu_chip_info_utilization", id="1")
    assert (shared.labels["namespace"], shared.labels["pod_name"], shared.labels["container_name"]) == (
        MULTI,
        MULTI,
        MULTI,
    )
    # npu_container_info: one per holder, containerName as namespace_pod_container.
    names = {(s.labels["npuID"], s.labels["containerName"]) for s in of(samples, "npu_container_info")}
    assert names == {("0", "ml_solo_infer"), ("1", "ml_left_main"), ("1", "web_right_main")}
    assert {s.labels["containerID"] for s in of(samples, "npu_container_info")} == {""}
    # container_npu_*: the sole holder's chip only, DDR on a 310P.
    assert value(samples, "container_npu_utilization", id="0", pod_name="solo") == 25
    assert value(samples, "container_npu_used_memory", id="0") == 2048
    assert value(samples, "container_npu_total_memory", id="0") == 24576
    assert of(samples, "container_npu_utilization", id="1") == []


async def test_without_the_kubelet_the_labels_are_empty(
    c_fake: CFakePlayer, kubelet: KubeletStandIn, plugin_dir: Path, host: Path, short_tmp: Path
) -> None:
    c_fake.update(duo({}))
    settings = telemetry_settings(
        c_fake, plugin_dir, host, pod_resources_socket=short_tmp / "none" / "k.sock"
    )
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        samples = await scrape_until(
            app, lambda found: len(of(found, "npu_chip_info_temperature")) == 2, "both chips' temperature"
        )
    assert {
        (s.labels["namespace"], s.labels["pod_name"]) for s in of(samples, "npu_chip_info_temperature")
    } == {("", "")}
    assert of(samples, "npu_container_info") == []
