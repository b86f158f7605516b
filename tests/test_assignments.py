"""The kubelet-ID map: one to one, and every kubelet ID reporting exactly one real chip's health."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ascend_plugin.holdings.held import Assignments
from ascend_plugin.offers.base import DeviceNode, IdForm, OfferedDevice

RESOURCE = "huawei.com/Ascend910"
FORM = IdForm("Ascend910", ("physical id",))


def devices(count: int, unhealthy: frozenset[int] = frozenset()) -> list[OfferedDevice]:
    return [
        OfferedDevice(
            id=f"Ascend910-{phy}",
            resource=RESOURCE,
            form=FORM,
            chips=(phy,),
            node=DeviceNode(f"/dev/davinci{phy}", f"/dev/davinci{phy}"),
            visible=str(phy),
            cdi_name=str(phy),
            healthy=phy not in unhealthy,
        )
        for phy in range(count)
    ]


def test_recording_replaces_pairs_that_share_a_kubelet_id_or_a_chip() -> None:
    assignments = Assignments()
    assignments.record(RESOURCE, ["Ascend910-0", "Ascend910-1"], ["Ascend910-2", "Ascend910-3"])
    assignments.record(RESOURCE, ["Ascend910-4"], ["Ascend910-2"])
    assert dict(assignments.mapping(RESOURCE)) == {"Ascend910-1": "Ascend910-3", "Ascend910-4": "Ascend910-2"}
    assert assignments.real_of(RESOURCE, ["Ascend910-4", "Ascend910-1"]) == ("Ascend910-2", "Ascend910-3")
    assert assignments.real_of(RESOURCE, ["Ascend910-0"]) is None


def test_a_change_bumps_the_version_and_the_same_pairs_do_not() -> None:
    assignments = Assignments()
    assignments.record(RESOURCE, ["Ascend910-0"], ["Ascend910-1"])
    version = assignments.changes.version
    assignments.record(RESOURCE, ["Ascend910-0"], ["Ascend910-1"])
    assert assignments.changes.version == version


def test_uneven_pairs_are_refused() -> None:
    with pytest.raises(ValueError, match="same length"):
        Assignments().record(RESOURCE, ["Ascend910-0"], ["Ascend910-1", "Ascend910-2"])


@given(
    st.lists(
        st.tuples(st.lists(st.integers(0, 7), min_size=1, max_size=4, unique=True), st.randoms()),
        max_size=6,
    ),
    st.frozensets(st.integers(0, 7)),
)
def test_pairing_is_a_bijection_that_reports_each_mapped_chip_on_its_kubelet_id(
    allocations: list[tuple[list[int], object]], unhealthy: frozenset[int]
) -> None:
    assignments = Assignments()
    for chips, rng in allocations:
        kubelet = list(chips)
        rng.shuffle(kubelet)  # type: ignore[attr-defined]
        assignments.record(RESOURCE, [f"Ascend910-{k}" for k in kubelet], [f"Ascend910-{c}" for c in chips])
    offered = devices(8, unhealthy)
    paired = assignments.paired(RESOURCE, offered)
    assert [kubelet_id for kubelet_id, _ in paired] == [device.id for device in offered]
    assert sorted(device.id for _, device in paired) == sorted(device.id for device in offered)
    for kubelet_id, real in assignments.mapping(RESOURCE).items():
        assert {k: d.id for k, d in paired}[kubelet_id] == real
    healthy_ids = sum(1 for _, device in paired if device.healthy)
    assert healthy_ids == 8 - len(unhealthy)


def test_pairs_naming_devices_the_node_no_longer_offers_are_ignored() -> None:
    assignments = Assignments()
    assignments.record(RESOURCE, ["Ascend910-9"], ["Ascend910-0"])
    paired = assignments.paired(RESOURCE, devices(2))
    assert [(k, d.id) for k, d in paired] == [("Ascend910-0", "Ascend910-0"), ("Ascend910-1", "Ascend910-1")]
