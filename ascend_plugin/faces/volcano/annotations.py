"""The annotation writer: what each pod holds, written on the pod, and the kubelet-ID map kept whole.

A sweep runs when the node's pods change (a choice marks one) and every :data:`SWEEP_INTERVAL` seconds.
Each active pod's kubelet IDs come from the kubelet (:class:`~ascend_plugin.holdings.held.HeldChips`), else
this run's Allocates, else its ``huawei.com/kltDev``; its chips go into the map, onto the pod (``kltDev``,
``AscendReal``, the rank table, the consumed mark) and into the held chips. The rank table, on the nodes
whose family writes one (``ChipBackend.has_rank_table``), is compact JSON in the field order Huawei's
plugin writes; ``device_ip`` "-1" where DCMI gives none, ``super_device_id`` "-2" (super-pod facts are not
read here). docs/volcano.md.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import anyio

from ascend_plugin.chip_calls import ChipCallError, ChipCalls
from ascend_plugin.faces.volcano.chooser import VolcanoChooser
from ascend_plugin.faces.volcano.pods import (
    ASCEND_REAL,
    CONSUMED,
    KUBELET_IDS,
    PREDICATE_TIME,
    RANK_TABLE,
    Pod,
    chips_of,
)
from ascend_plugin.holdings.held import PodIds
from ascend_plugin.inventory.inventory import Inventory
from backends.backend import ChipBackend
from backends.errors import ChipError

log = logging.getLogger(__name__)

SWEEP_INTERVAL = 5.0  # seconds between sweeps when nothing happens
SWEEP_GAP = 0.2  # at least this long between sweeps: a burst of pod events costs one PodResources call
NO_DEVICE_IP = "-1"
UNKNOWN_SUPER_DEVICE = "-2"


@dataclass(frozen=True)
class RankDevice:
    """One chip of the pod: its physical id and RoCE address."""

    phy_id: int
    device_ip: str


def rank_table(pod: Pod, host_ip: str, devices: Sequence[RankDevice]) -> str:
    """The annotation's value for ``pod`` holding ``devices``."""
    document = {
        "pod_name": pod.name,
        "server_id": pod.uid,
        "host_ip": host_ip,
        "devices": [
            {
                "device_id": str(device.phy_id),
                "device_ip": device.device_ip,
                "super_device_id": UNKNOWN_SUPER_DEVICE,
            }
            for device in sorted(devices, key=lambda device: device.phy_id)
        ],
    }
    return json.dumps(document, separators=(",", ":"))


def usable_address(text: str | None) -> str:
    """A RoCE address other nodes can reach, else NO_DEVICE_IP (none, loopback or link-local)."""
    if not text:
        return NO_DEVICE_IP
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return NO_DEVICE_IP
    if address.is_loopback or address.is_link_local or address.is_unspecified:
        return NO_DEVICE_IP
    return str(address)


class DeviceIps:
    """Reads a chip's RoCE address on that chip's call lane, when a rank table needs it."""

    def __init__(self, calls: ChipCalls, backend: ChipBackend, inventory: Inventory) -> None:
        self.calls = calls
        self.backend = backend
        self.inventory = inventory

    async def of(self, phy_id: int) -> str:
        """The chip's address for the rank table; NO_DEVICE_IP where DCMI does not give one."""
        state = self.inventory.get(phy_id)
        if state is None:
            return NO_DEVICE_IP
        try:
            text = await self.calls.call(phy_id, "device_ip", self.backend.device_ip, state.chip)
        except (ChipCallError, ChipError) as error:
            log.warning("cannot read the device IP of %s: %s", state.chip.label, error)
            return NO_DEVICE_IP
        return usable_address(text)


class AnnotationWriter:
    """Keeps pods' annotations, the kubelet-ID map and the held chips in step with the node."""

    def __init__(self, chooser: VolcanoChooser, *, device_ips: DeviceIps | None, host_ip: str) -> None:
        self.chooser = chooser
        self.resource = chooser.resource
        self.book = chooser.book
        self.pods = chooser.pods
        self.patcher = chooser.patcher
        self.served = chooser.served
        self.held = chooser.held
        self.assignments = chooser.assignments
        self.device_ips = device_ips  # None: this node has no rank table
        self.host_ip = host_ip

    async def run(self) -> None:
        """Sweep whenever pods change (a choice marks one), and every SWEEP_INTERVAL seconds."""
        while True:
            pods_version = self.pods.changes.version
            await self.sweep()
            with anyio.move_on_after(SWEEP_INTERVAL):
                await self.pods.changes.wait_for_change(pods_version)
            await anyio.sleep(SWEEP_GAP)

    async def sweep(self) -> None:
        await self.held.refresh()
        listed = self.held.device_ids(self.resource) if self.held.answered else None
        active = [pod for pod in self.pods.pods() if pod.active]
        for gone in self.served.keys() - {pod.uid for pod in active}:
            del self.served[gone]
        devices = self.book.devices(self.resource)
        order = {device.id: index for index, device in enumerate(devices)}
        chips = {device.id: device.chips for device in devices}
        held_chips: set[int] = set()
        for pod in active:
            real = await self._settle(pod, self._kubelet_ids(pod, listed), order)
            held_chips.update(chip for device_id in real for chip in chips.get(device_id, ()))
        # With the kubelet's record, resolved through the map this sweep may have rebuilt.
        self.held.also_held(frozenset(held_chips))

    def _kubelet_ids(self, pod: Pod, listed: PodIds | None) -> tuple[str, ...]:
        if listed is not None:
            return listed.get((pod.namespace, pod.name), ())
        served = self.served.get(pod.uid)
        if served is not None:
            return served.kubelet_ids
        return chips_of(pod.annotations.get(KUBELET_IDS)) or ()

    async def _settle(
        self, pod: Pod, kubelet_ids: Sequence[str], order: Mapping[str, int]
    ) -> tuple[str, ...]:
        """The pod's real chips, with the map and the pod's annotations brought in line."""
        served = self.served.get(pod.uid)
        if pod.real is not None:
            if len(pod.real) == len(kubelet_ids):
                self.assignments.record(self.resource, _sorted(kubelet_ids, order), _sorted(pod.real, order))
            return pod.real
        if not kubelet_ids:  # not admitted yet, or the kubelet does not say
            return served.real_ids if served is not None else ()
        ids = _sorted(kubelet_ids, order)
        real = self.assignments.real_of(self.resource, ids)
        if real is None:
            chosen = pod.chosen(self.resource)
            if chosen is None or len(chosen) != len(ids) or any(chip not in order for chip in chosen):
                log.warning(
                    "pod %s holds %s %s but neither this plugin's map nor its annotations say which chips",
                    pod.key,
                    self.resource,
                    ",".join(ids),
                    extra={"pod": pod.key},
                )
                return ()
            real = _sorted(chosen, order)
            self.assignments.record(self.resource, ids, real)
            log.info("pod %s: kubelet IDs %s stand for %s again", pod.key, ",".join(ids), ",".join(real))
        await self._annotate(pod, ids, _sorted(real, order))
        return tuple(real)

    async def _annotate(self, pod: Pod, kubelet_ids: Sequence[str], real: Sequence[str]) -> None:
        """Queue whatever of kltDev, AscendReal, the rank table and the mark the pod lacks."""
        wanted = {KUBELET_IDS: ",".join(kubelet_ids), ASCEND_REAL: ",".join(real)}
        if pod.annotations.get(PREDICATE_TIME) != str(CONSUMED):
            wanted[PREDICATE_TIME] = str(CONSUMED)
        if self.device_ips is not None:
            found = [self.book.get(self.resource, device_id) for device_id in real]
            phys = [chip for device in found if device is not None for chip in device.chips]
            devices = [RankDevice(phy, await self.device_ips.of(phy)) for phy in phys]
            wanted[RANK_TABLE] = rank_table(pod, self.host_ip, devices)
        missing = {
            key: value
            for key, value in wanted.items()
            if pod.annotations.get(key) != value and self.patcher.pending(pod.uid).get(key) != value
        }
        if missing:
            self.patcher.want(pod, missing)


def _sorted(ids: Sequence[str], order: Mapping[str, int]) -> tuple[str, ...]:
    return tuple(sorted(ids, key=lambda device_id: (order.get(device_id, len(order)), device_id)))
