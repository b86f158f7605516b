"""The device-info ConfigMap: this node's devices in Huawei's format, kept current.

Volcano's Ascend plugin schedules NPU jobs from ``<prefix><node>`` (by default
``kube-system/mindx-dl-deviceinfo-<node>``), so it must follow the inventory
closely, yet a flapping chip must not turn into a stream of writes to etcd:

* an inventory change that alters the content is written, at most once per
  second: changes within that second are coalesced into one write of the latest
  state; the time stamp (UpdateTime, and the CheckCode over it) is no change;
* a chip that flaps while flap damping holds it out does not alter the content:
  its verdict keeps the faults it flapped with for as long as it is held
  (:mod:`~ascend_plugin.inventory.damping`), so it costs no writes;
* with no change it is rewritten every ``device_info_refresh`` seconds, so its
  UpdateTime shows readers the plugin is alive;
* in Volcano mode the free list leaves out the chips of active pods
  (:class:`~ascend_plugin.offers.assignments.HeldChips`), rewritten like any
  other change when a pod starts or ends;
* it is created when missing, and replaced with the resourceVersion last seen;
  on a conflict (someone else wrote it) it is read again and the write retried.

Failures are retried with backoff, each attempt writing the state of that moment.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import anyio

from ascend_plugin.faces.kube.chips import chip_views
from ascend_plugin.faces.kube.huawei_format import (
    CONSUMER_LABEL,
    DeviceInfoContent,
    FaultClock,
    device_info_content,
)
from ascend_plugin.inventory.inventory import Inventory
from ascend_plugin.kubeapi.client import CONFIGMAPS, JsonObject, Kube, labels_of, mapping_field
from ascend_plugin.kubeapi.errors import Conflict, KubeError, NotFound
from ascend_plugin.kubeapi.retry import Retrier
from ascend_plugin.offers.assignments import HeldChips

log = logging.getLogger(__name__)

MIN_WRITE_INTERVAL = 1.0  # seconds between two writes, however fast the inventory changes
CONFLICT_RETRIES = 5  # immediate re-reads after 409 before backing off


class DeviceInfoPublisher:
    """Writes the device-info ConfigMap whenever its content changes, and periodically."""

    def __init__(
        self,
        kube: Kube,
        inventory: Inventory,
        namespace: str,
        name: str,
        refresh: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        held: HeldChips | None = None,
    ) -> None:
        self.kube = kube
        self.inventory = inventory
        self.namespace = namespace
        self.name = name
        self.refresh = refresh
        self.clock = clock
        self.wall_clock = wall_clock
        self.faults = FaultClock(wall_clock)
        self.held = held
        self._written: DeviceInfoContent | None = None
        self._last_write = -float("inf")
        self._current: JsonObject | None = None  # the object as the server last returned it

    @property
    def where(self) -> str:
        """namespace/name of the ConfigMap."""
        return f"{self.namespace}/{self.name}"

    async def run(self) -> None:
        """Keep the ConfigMap current until the inventory closes."""
        retry = Retrier(f"device-info ConfigMap {self.where}")
        version = self.inventory.version
        while not self.inventory.closed:
            held_version = self.held.version if self.held is not None else 0
            content = self._content()
            since_write = self.clock() - self._last_write
            if content != self._written or since_write >= self.refresh:
                if since_write < MIN_WRITE_INTERVAL:
                    # Coalesce: wait out the second, then write whatever the state is by then.
                    await anyio.sleep(MIN_WRITE_INTERVAL - since_write)
                    continue
                try:
                    await self._write(content)
                except KubeError as error:
                    await retry.failed(error)
                    continue
                retry.succeeded()
            with anyio.move_on_after(max(self._last_write + self.refresh - self.clock(), 0.0)):
                version = await self._wait_for_change(version, held_version)

    async def _wait_for_change(self, version: int, held_version: int) -> int:
        """The inventory's version once it changed from ``version`` or the held chips from theirs."""
        held = self.held
        if held is None:
            return await self.inventory.wait_for_change(version)
        async with anyio.create_task_group() as group:

            async def inventory_changed() -> None:
                await self.inventory.wait_for_change(version)
                group.cancel_scope.cancel()

            async def held_changed() -> None:
                await held.wait_for_change(held_version)
                group.cancel_scope.cancel()

            group.start_soon(inventory_changed)
            group.start_soon(held_changed)
        return self.inventory.version

    def _content(self) -> DeviceInfoContent:
        devices = chip_views(self.inventory)
        resource = self.inventory.table.resource_name
        held = self.held.chips if self.held is not None else frozenset()
        return device_info_content(devices, resource, self.faults.observe(devices), held)

    async def _write(self, content: DeviceInfoContent) -> None:
        data = content.data(int(self.wall_clock()))
        for attempt in range(1, CONFLICT_RETRIES + 1):
            try:
                await self._put(data)
                break
            except (Conflict, NotFound) as error:
                # Someone else wrote (or deleted) it since we last looked: look again.
                if attempt == CONFLICT_RETRIES:
                    raise
                log.debug("device-info ConfigMap %s: %s; reading it again", self.where, error)
                self._current = None
        if content != self._written:
            log.info(
                "device-info ConfigMap %s written: %s",
                self.where,
                ", ".join(
                    f"{key}={value or '-'}"
                    for key, value in content.device_list.items()
                    if not value.startswith("[")
                ),
                extra={"configmap": self.where},
            )
        self._written = content
        self._last_write = self.clock()

    async def _put(self, data: dict[str, str]) -> None:
        """Replace the object with ``data``, or create it when it does not exist."""
        if self._current is None:
            try:
                self._current = await self.kube.get(CONFIGMAPS, self.name, self.namespace)
            except NotFound:
                self._current = await self.kube.create(CONFIGMAPS, self.namespace, self._body(data))
                log.info("device-info ConfigMap %s created", self.where)
                return
        self._current = await self.kube.replace(CONFIGMAPS, self.name, self.namespace, self._body(data))

    def _body(self, data: dict[str, str]) -> JsonObject:
        """The full object to send: ours, keeping labels and annotations others put on it."""
        current = self._current or {}
        metadata = mapping_field(current, "metadata")
        body_metadata: JsonObject = {
            "name": self.name,
            "namespace": self.namespace,
            "labels": {**labels_of(current), CONSUMER_LABEL[0]: CONSUMER_LABEL[1]},
        }
        for key in ("resourceVersion", "annotations"):
            if key in metadata:
                body_metadata[key] = metadata[key]
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": body_metadata, "data": data}
