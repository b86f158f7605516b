"""The node's ResourceSlices: published, kept current with the chips' health, put back after any wipe.

One pool, named after the node, in as few slices as the API allows. The
controller keeps a copy of this driver's slices on this node (a
:class:`~ascend_plugin.kubeapi.reflector.Reflector` with field selectors on
``spec.driver`` and ``spec.nodeName``) and, after every change of the chips or
of the slices, compares them with what they should be; only a difference is
written:

* an existing slice is updated in place, a missing one created (with
  ``generateName`` ``<driver>-<node>-`` and the Node as owner, so the slices go
  with the Node), a superfluous one deleted (with its UID and resourceVersion
  as preconditions);
* every change bumps the pool's generation, so the scheduler never mixes
  slices of two states of the pool;
* the kubelet deletes a node's slices when it starts and 30 s after it lost
  the driver's socket: the watch sees them go and they are created again;
* a restarted plugin lists first and adopts the slices it finds, so it
  never publishes a second copy; what it writes goes into its copy at once
  and stays there until the watch shows it, so a change that arrives before
  the watch has caught up cannot create a duplicate either;
* when the API server is away, writes wait with backoff and the latest state
  is written once it answers: the slices catch up, nothing queues.

Unhealthy chips leave the slice. Where the cluster has ``DRADeviceTaints``
(``dra_device_taints``), they stay with a taint instead; if the API server
drops the taints anyway (the gate is off), that is said once and unhealthy
chips leave the slice again.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping, Sequence
from contextlib import suppress

import anyio

from ascend_plugin.changes import Changes
from ascend_plugin.faces.dra.devices import DeviceCatalog, split
from ascend_plugin.kubeapi.client import (
    NODES,
    RESOURCE_SLICES,
    WATCH_TIMEOUT,
    JsonObject,
    Kube,
    mapping_field,
    string_field,
)
from ascend_plugin.kubeapi.errors import Conflict, KubeError, NotFound
from ascend_plugin.kubeapi.reflector import Reflector, unchanged
from ascend_plugin.kubeapi.retry import Retrier

log = logging.getLogger(__name__)

API_VERSION = "resource.k8s.io/v1"


def _spec(slice_: JsonObject) -> JsonObject:
    return mapping_field(slice_, "spec")


def _pool(slice_: JsonObject) -> JsonObject:
    return mapping_field(_spec(slice_), "pool")


def _generation(slice_: JsonObject) -> int:
    value = _pool(slice_).get("generation")
    return value if isinstance(value, int) else 0


def _devices(slice_: JsonObject) -> list[JsonObject]:
    devices = _spec(slice_).get("devices")
    return [device for device in devices if isinstance(device, dict)] if isinstance(devices, list) else []


def _without_time_added(devices: Sequence[JsonObject]) -> list[JsonObject]:
    """The devices as we describe them: the API server stamps ``timeAdded`` on taints itself."""
    result = []
    for device in devices:
        taints = device.get("taints")
        if isinstance(taints, list):
            stripped = [
                {k: v for k, v in t.items() if k != "timeAdded"} for t in taints if isinstance(t, dict)
            ]
            result.append({**device, "taints": stripped})
        else:
            result.append(device)
    return result


def _taints(device: JsonObject) -> list[JsonObject]:
    taints = device.get("taints")
    return [taint for taint in taints if isinstance(taint, dict)] if isinstance(taints, list) else []


def _taint_key(device: JsonObject, taint: JsonObject) -> tuple[str, ...]:
    return (string_field(device, "name"), *(string_field(taint, key) for key in ("key", "value", "effect")))


def _keep_time_added(desired: Sequence[JsonObject], stored: Sequence[JsonObject]) -> list[JsonObject]:
    """``desired`` with each taint's ``timeAdded`` from the same taint of the same device in ``stored``."""
    stamps = {
        _taint_key(device, taint): taint["timeAdded"]
        for device in stored
        for taint in _taints(device)
        if "timeAdded" in taint
    }
    result = []
    for device in desired:
        taints = _taints(device)
        if taints:
            stamped = [
                {**taint, "timeAdded": stamps[key]} if (key := _taint_key(device, taint)) in stamps else taint
                for taint in taints
            ]
            result.append({**device, "taints": stamped})
        else:
            result.append(device)
    return result


def _has_taints(devices: Sequence[JsonObject]) -> bool:
    return any(device.get("taints") for device in devices)


class SliceController:
    """Keeps this node's pool of this driver published as the chips are."""

    def __init__(
        self,
        kube: Kube,
        catalog: DeviceCatalog,
        node: str,
        *,
        taints: bool = False,
        watch_timeout: int = WATCH_TIMEOUT,
    ) -> None:
        self.kube = kube
        self.catalog = catalog
        self.driver = catalog.driver
        self.node = node
        self.taints = taints
        self.watch_timeout = watch_timeout
        self.taints_dropped = False
        self._mismatch_said = False
        self.generation = 0  # the highest pool generation seen or written
        self.writes = 0  # creates, updates and deletes sent
        self.looks = 0  # comparisons of the slices with the chips
        self.in_sync = False  # the published slices matched the chips at the last look
        self._problem = "not published yet"
        self.published_version = -1  # the inventory version the published slices show
        self._published = Changes()
        self._looks = Changes()  # the slices or the chips changed: look again
        self._slices = Reflector(
            kube,
            RESOURCE_SLICES,
            unchanged,
            part="ResourceSlices watch",
            field_selector=f"spec.driver={self.driver},spec.nodeName={node}",
            changes=self._looks,
            watch_timeout=watch_timeout,
        )
        self._node_uid = ""

    @property
    def problem(self) -> str:
        """Why the slices are not published as the chips are now; empty while they are."""
        if not self._slices.synced and self._slices.retry.problem:
            return f"cannot list them: {self._slices.retry.problem}"
        return self._problem

    @property
    def slices(self) -> Mapping[str, JsonObject]:
        """Our copy of the node's slices of this driver, by name."""
        return self._slices.store

    # -- running -------------------------------------------------------------------------

    async def run(self) -> None:
        """Follow the slices and the chips until cancelled."""
        async with anyio.create_task_group() as group:
            group.start_soon(self._slices.run, name="ResourceSlice watch")
            group.start_soon(self._follow_chips, name="ResourceSlice chips")
            await self._reconcile_forever()

    def wake(self) -> None:
        """Something changed: look again."""
        self._looks.bump()

    async def _follow_chips(self) -> None:
        version = self.catalog.inventory.version
        while not self.catalog.inventory.closed:
            version = await self.catalog.inventory.wait_for_change(version)
            self.wake()

    async def _reconcile_forever(self) -> None:
        retry = Retrier("ResourceSlices")
        await self._slices.wait_synced()
        while True:
            seen = self._looks.version
            try:
                again = await self._reconcile()
            except Conflict as conflict:
                log.debug("a ResourceSlice changed under us (%s); reading it again", conflict)
                try:
                    await self._refresh(conflict.name)
                except KubeError as error:
                    await retry.failed(error)
                continue
            except KubeError as error:
                self.in_sync = False
                self._problem = str(error)
                await retry.failed(error)
                continue
            retry.succeeded()
            self.in_sync, self._problem = True, ""
            if not again:
                await self._looks.wait_for_change(seen)

    async def _refresh(self, name: str) -> None:
        try:
            await self._slices.record_read(self.kube.get(RESOURCE_SLICES, name))
        except NotFound:
            self._slices.record_gone(name)

    # -- one comparison ------------------------------------------------------------------------

    def desired(self) -> list[list[JsonObject]]:
        """The devices of each slice, as the chips are now."""
        return split(self.catalog.devices(tainted=self.taints and not self.taints_dropped))

    def _ours(self) -> tuple[list[JsonObject], list[JsonObject]]:
        """(this node's pool's slices by name, slices of ours under another pool name)."""
        ours: list[JsonObject] = []
        strays: list[JsonObject] = []
        slices = self.slices
        for name in sorted(slices):
            slice_ = slices[name]
            (ours if string_field(_pool(slice_), "name") == self.node else strays).append(slice_)
        return ours, strays

    def _up_to_date(self, ours: Sequence[JsonObject], chunks: Sequence[Sequence[JsonObject]]) -> bool:
        if len(ours) != len(chunks) or len({_generation(slice_) for slice_ in ours}) != 1:
            return False
        for slice_, chunk in zip(ours, chunks, strict=True):
            pool = _pool(slice_)
            if (
                pool.get("resourceSliceCount") != len(chunks)
                or string_field(_spec(slice_), "nodeName") != self.node
                or _without_time_added(_devices(slice_)) != list(chunk)
            ):
                return False
        return True

    async def published(self, version: int) -> None:
        """Return once the slices show the chips as of inventory ``version`` or later (a hot reset waits)."""
        while self.published_version < version:
            await self._published.wait_for_change(self._published.version)

    def _showed(self, version: int) -> None:
        if version > self.published_version:
            self.published_version = version
            self._published.bump()

    async def _reconcile(self) -> bool:
        """Write whatever differs; True when the desired state changed meanwhile (look again at once)."""
        self.looks += 1
        ours, strays = self._ours()
        for slice_ in strays:
            await self._delete(slice_)
        version = self.catalog.inventory.version
        chunks = self.desired()
        self.generation = max([self.generation, *(_generation(slice_) for slice_ in ours)])
        if self._up_to_date(ours, chunks):
            self._showed(version)
            return False
        generation = self.generation + 1
        for index, chunk in enumerate(chunks):
            pool = {"name": self.node, "generation": generation, "resourceSliceCount": len(chunks)}
            if index < len(ours):
                stored = await self._update(ours[index], pool, chunk)
            else:
                stored = await self._create(pool, chunk)
            self._check_taints(chunk, stored)
        for slice_ in ours[len(chunks) :]:
            await self._delete(slice_)
        self.generation = generation
        self._showed(version)
        self._said_published(chunks, generation)
        if self.taints_dropped and _has_taints([device for chunk in chunks for device in chunk]):
            return True  # publish again, without the taints the server drops
        if not self._up_to_date(self._ours()[0], chunks) and not self._mismatch_said:
            self._mismatch_said = True
            log.error(
                "the API server stored pool %s's ResourceSlices differently from what was sent (it dropped "
                "or rewrote fields); they are written again at the next change only",
                self.node,
            )
        return False

    def _said_published(self, chunks: Sequence[Sequence[JsonObject]], generation: int) -> None:
        published = {str(device["name"]) for chunk in chunks for device in chunk}
        left_out = [entry.name for entry in self.catalog.entries.values() if entry.name not in published]
        log.info(
            "published pool %s generation %d: %d device(s) in %d slice(s)%s",
            self.node,
            generation,
            len(published),
            len(chunks),
            f"; unhealthy, left out: {', '.join(left_out)}" if left_out else "",
            extra={"pool": self.node, "generation": generation, "devices": sorted(published)},
        )

    def _check_taints(self, sent: Sequence[JsonObject], stored: JsonObject) -> None:
        """Say once, and stop relying on them, when the API server dropped the taints we sent."""
        if self.taints_dropped or not _has_taints(sent) or _has_taints(_devices(stored)):
            return
        self.taints_dropped = True
        log.warning(
            "the API server dropped the device taints of ResourceSlice %s: the cluster does not have the "
            "DRADeviceTaints feature gate (alpha and off in 1.34 and 1.35). Unhealthy chips now leave the "
            "slice instead; enable the gate, or turn dra_device_taints off to silence this",
            string_field(mapping_field(stored, "metadata"), "name"),
            extra={"pool": self.node},
        )

    async def _node_owner(self) -> JsonObject:
        if not self._node_uid:
            node = await self.kube.get(NODES, self.node)
            self._node_uid = string_field(mapping_field(node, "metadata"), "uid")
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "name": self.node,
            "uid": self._node_uid,
            "controller": True,
        }

    async def _create(self, pool: JsonObject, devices: list[JsonObject]) -> JsonObject:
        body: JsonObject = {
            "apiVersion": API_VERSION,
            "kind": "ResourceSlice",
            "metadata": {
                "generateName": f"{self.driver}-{self.node}-",
                "ownerReferences": [await self._node_owner()],
            },
            "spec": {"driver": self.driver, "nodeName": self.node, "pool": pool, "devices": devices},
        }
        stored = await self._slices.record_write(self.kube.create(RESOURCE_SLICES, "", body))
        self.writes += 1
        return stored

    async def _update(self, current: JsonObject, pool: JsonObject, devices: list[JsonObject]) -> JsonObject:
        body = copy.deepcopy(current)
        spec = mapping_field(body, "spec")
        spec.update(pool=pool, devices=_keep_time_added(devices, _devices(current)))
        body["spec"] = spec
        name = string_field(mapping_field(current, "metadata"), "name")
        try:
            stored = await self._slices.record_write(self.kube.replace(RESOURCE_SLICES, name, "", body))
        except NotFound:
            self._slices.record_gone(name)
            return await self._create(pool, devices)
        self.writes += 1
        return stored

    async def _delete(self, slice_: JsonObject) -> None:
        metadata = mapping_field(slice_, "metadata")
        name = string_field(metadata, "name")
        preconditions: JsonObject = {
            "uid": string_field(metadata, "uid"),
            "resourceVersion": string_field(metadata, "resourceVersion"),
        }
        with suppress(NotFound):
            await self.kube.delete(RESOURCE_SLICES, name, None, preconditions)
        self.writes += 1
        self._slices.record_gone(name)
