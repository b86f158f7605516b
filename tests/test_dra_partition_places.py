"""How many partitions of each template a chip publishes: ``dra_partition_places``.

Every partition is a device the scheduler weighs, for every claim, on every node
(docs/dra.md, "What partitions cost the scheduler"), so a chip publishes each
template at most that many times (1 by default); 0 publishes every place the
template fits. The chip's counter set stays whole: it is what the chip holds,
whatever is published.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from dra_harness import (
    A2_SERVER,
    DRIVER,
    EVERY_PLACE_310P3,
    NODE,
    DraNode,
    device_names,
    prepare,
    put_claim,
    registered,
    result,
    running_driver,
    split_inventory,
    unprepare,
)
from waiting import until, wait_for

from ascend_plugin.faces.dra.devices import DeviceCatalog, Publishing
from ascend_plugin.settings import SettingsError, load_settings
from ascend_plugin.testing.dra_standin import DraKubeletStandIn
from ascend_plugin.testing.kube_apiserver import FakeApiServer
from backends.fake.library import FakeLibrary


def published(short_tmp: Path, places: int) -> tuple[Counter[str], list[dict[str, object]]]:
    """The templates of chip 0's partitions on a 310P3 node at ``places``, and its devices."""
    inventory, splits = split_inventory(short_tmp, "310P", "310P3", 8.0, 24576, 2)
    capped = {phy: replace(split, places=places) for phy, split in splits.items()}
    pool = DeviceCatalog(inventory, DRIVER, splits=capped).pool(Publishing(partitions=True))
    whole, *partitions = pool.chips[0]
    return Counter(p["attributes"]["vnpuTemplate"]["string"] for p in partitions), [whole, *partitions]  # type: ignore[index]


@pytest.mark.parametrize("places", [1, 2, 3])
def test_each_template_is_published_at_most_places_times(short_tmp: Path, places: int) -> None:
    templates, _ = published(short_tmp, places)
    assert templates == {name: min(most, places) for name, most in EVERY_PLACE_310P3.items()}


def test_zero_publishes_every_place_a_template_fits(short_tmp: Path) -> None:
    templates, _ = published(short_tmp, 0)
    assert templates == EVERY_PLACE_310P3


def test_the_chip_keeps_its_whole_counter_set_and_the_whole_chip_takes_it_all(short_tmp: Path) -> None:
    _, devices = published(short_tmp, 1)
    whole = devices[0]
    assert whole["name"] == "npu-0"
    consumed = whole["consumesCounters"][0]["counters"]  # type: ignore[index]
    assert consumed["aicore"] == {"value": "8"}  # type: ignore[index]
    assert consumed["aicpu"] == {"value": "7"}  # type: ignore[index]
    assert [d["name"] for d in devices[1:3]] == ["npu-0-vir01-0", "npu-0-vir02-0"], "numbered from 0"


def test_by_default_a_chip_publishes_one_of_each_template(short_tmp: Path) -> None:
    """What docs/dra.md chose from bench/cluster_scale.py's figures ("What partitions cost the scheduler")."""
    default = load_settings({"backend": "fake", "fake_scenario": "/s.json"}).dra_partition_places
    templates, _ = published(short_tmp, default)
    assert templates == dict.fromkeys(EVERY_PLACE_310P3, 1)


@pytest.mark.parametrize("value", [-1, 65, "many"])
def test_a_bad_count_is_refused_naming_the_setting_and_what_is_allowed(value: object) -> None:
    with pytest.raises(SettingsError, match="dra_partition_places") as refused:
        load_settings({"backend": "fake", "fake_scenario": "/s.json", "dra_partition_places": value})
    assert str(value) in str(refused.value)
    assert "must be 0-64" in str(refused.value)


@pytest.mark.anyio
async def test_the_setting_reaches_the_driver_s_slices(
    dra_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path, dra_kubelet: DraKubeletStandIn
) -> None:
    apiserver.kube_version = "1.37"
    apiserver.add_node(NODE)
    settings = dra_node.settings(kubeconfig, vnpu="dynamic", dra_partition_places=3)
    three_vir05 = [f"-vir05-1c-16g-{n}" for n in range(3)]
    three_at_most = [
        f"npu-{phy}{suffix}"
        for phy in range(8)
        for suffix in ("", *three_vir05, "-vir10-3c-32g-0", "-vir10-3c-32g-1")
    ]
    async with running_driver(settings):
        await until(
            lambda: sorted(device_names(apiserver.slices(DRIVER, NODE))) == sorted(three_at_most),
            "each chip whole, three of its four vir05_1c_16g and both vir10_3c_32g",
        )


@pytest.mark.anyio
async def test_a_claim_prepared_on_a_place_no_longer_published_keeps_its_vnpu_until_unprepared(
    dra_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path, dra_kubelet: DraKubeletStandIn
) -> None:
    """The count lowered across a restart while a pod runs on a partition it no longer publishes: the
    claim is prepared again as it was (a kubelet restart asks), and its vNPU goes only at Unprepare."""
    dra_node.write({**A2_SERVER, "vdev_node_dir": str(dra_node.host_root / "dev")})
    apiserver.kube_version = "1.36"
    apiserver.add_node(NODE)
    second = "npu-3-vir10-3c-32g-1"
    claim = put_claim(apiserver, "infer", [result(second)])
    driver = FakeLibrary(dra_node.scenario)
    driver.init()
    async with running_driver(dra_node.settings(kubeconfig, vnpu="dynamic", dra_partition_places=2)):
        await wait_for(dra_kubelet, registered, "registered")
        first = (await prepare(dra_kubelet, claim)).claims[claim[2]]
    assert first.error == ""
    made = driver.vdev_ids(3, 0)
    assert len(made) == 1
    async with running_driver(dra_node.settings(kubeconfig, vnpu="dynamic", dra_partition_places=1)):
        await wait_for(dra_kubelet, lambda kubelet: registered(kubelet, 2), "registered again")
        await until(
            lambda: (
                {"npu-3-vir10-3c-32g-0", second} & set(device_names(apiserver.slices(DRIVER, NODE)))
                == {"npu-3-vir10-3c-32g-0"}
            ),
            f"{second} no longer published",
        )
        assert (await prepare(dra_kubelet, claim)).claims[claim[2]] == first, "prepared as it was"
        assert driver.vdev_ids(3, 0) == made
        assert (await unprepare(dra_kubelet, claim)).claims[claim[2]].error == ""
        assert driver.vdev_ids(3, 0) == [], "destroyed at Unprepare"
