"""The annotation writer: what each pod holds, written on the pod, and the map kept whole.

A sweep runs when the node's pods change, after every choice, and every
:data:`SWEEP_INTERVAL` seconds (bursts coalesced: :data:`SWEEP_GAP`). For each
active pod of the node it learns the kubelet IDs the pod holds: from the
kubelet's PodResources API when it answers, else from this plugin's own record
of the Allocate (:mod:`.served`), else from the pod's ``huawei.com/kltDev``. The
kubelet is asked through the node's :class:`~ascend_plugin.holdings.holdings.PodHoldings`,
which every sweep asks for a listing newer than the sweep. Then:

* a pod that already carries ``huawei.com/AscendReal`` is left alone; its
  kubelet IDs and real chips go into the map (this is how the map comes back
  after a restart);
* otherwise its real chips are the map's entries for its kubelet IDs, or, after
  a restart before the annotation was written, the chips Volcano chose for it
  (the pod's ``huawei.com/<type>``: exactly what was handed over); the pod gets
  ``huawei.com/kltDev`` and ``huawei.com/AscendReal`` (both sorted,
  comma-joined), the rank table where the node has one, and the consumed mark if
  it lacks it;
* the chips of every active pod (Pending too) go into
  :class:`~ascend_plugin.offers.assignments.HeldChips` for the device-info free
  list, beside the kubelet's own record resolved through the map this sweep kept
  whole (:meth:`~ascend_plugin.holdings.holdings.PodHoldings.also_held`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import anyio

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
from ascend_plugin.faces.volcano.rank_table import DeviceIps, RankDevice, rank_table
from ascend_plugin.holdings.holdings import PodHoldings
from ascend_plugin.holdings.pod_resources import PodDevices, pod_devices
from ascend_plugin.offers.assignments import Assignments

log = logging.getLogger(__name__)

SWEEP_INTERVAL = 5.0  # seconds between sweeps when nothing happens
SWEEP_GAP = 0.2  # at least this long between sweeps: a burst of pod events costs one PodResources call


class AnnotationWriter:
    """Keeps pods' annotations, the kubelet-ID map and the held chips in step with the node."""

    def __init__(
        self,
        chooser: VolcanoChooser,
        *,
        holdings: PodHoldings,
        device_ips: DeviceIps | None,
        host_ip: str,
    ) -> None:
        self.chooser = chooser
        self.resource = chooser.resource
        self.book = chooser.book
        self.pods = chooser.pods
        self.patcher = chooser.patcher
        self.served = chooser.served
        self.holdings = holdings
        self.device_ips = device_ips  # None: this node has no rank table
        self.host_ip = host_ip
        self.sweeps = 0
        self._wake = anyio.Event()

    @property
    def assignments(self) -> Assignments:
        return self.chooser.assignments

    def wake(self) -> None:
        """Sweep soon (a pod was just served)."""
        self._wake.set()

    async def run(self) -> None:
        """Sweep whenever pods change, after choices, and every SWEEP_INTERVAL seconds."""
        while True:
            pods_version = self.pods.version
            await self.sweep()
            with anyio.move_on_after(SWEEP_INTERVAL):
                await self._next_change(pods_version)
            await anyio.sleep(SWEEP_GAP)
            self._wake = anyio.Event()

    async def _next_change(self, pods_version: int) -> None:
        """Return when the node's pods change from ``pods_version`` or someone wakes the writer."""
        async with anyio.create_task_group() as group:

            async def pods_changed() -> None:
                await self.pods.wait_for_change(pods_version)
                group.cancel_scope.cancel()

            async def woken() -> None:
                await self._wake.wait()
                group.cancel_scope.cancel()

            group.start_soon(pods_changed)
            group.start_soon(woken)

    async def sweep(self) -> None:
        """One pass over the node's active pods."""
        listing = await self.holdings.refresh()
        holdings = pod_devices(listing) if listing is not None else None
        active = [pod for pod in self.pods.pods() if pod.active]
        self.served.keep_only({pod.uid for pod in active})
        if holdings is not None:
            self.chooser.holders.clear()
            self.chooser.holders.update(
                f"{namespace}/{name}"
                for (namespace, name), held in holdings.items()
                if held.get(self.resource)
            )
        devices = self.book.devices(self.resource)
        order = {device.id: index for index, device in enumerate(devices)}
        chips = {device.id: device.chips for device in devices}
        held_chips: set[int] = set()
        for pod in active:
            real = await self._settle(pod, self._kubelet_ids(pod, holdings), order)
            held_chips.update(chip for device_id in real for chip in chips.get(device_id, ()))
        # With the kubelet's record, resolved through the map this sweep may have rebuilt.
        self.holdings.also_held(frozenset(held_chips))
        self.sweeps += 1

    def _chips_of(self, device_id: str) -> tuple[int, ...]:
        device = self.book.get(self.resource, device_id)
        return device.chips if device is not None else ()

    def _kubelet_ids(self, pod: Pod, holdings: PodDevices | None) -> tuple[str, ...]:
        if holdings is not None:
            return tuple(holdings.get((pod.namespace, pod.name), {}).get(self.resource, ()))
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
            phys = [chip for device_id in real for chip in self._chips_of(device_id)]
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
