"""The device-info ConfigMap: this node's chips in Huawei's format, kept current without flooding etcd.

A change of content is written at most once a second (a change of times alone every
:data:`TIMES_INTERVAL` seconds), and the ConfigMap rewritten every ``device_info_refresh`` seconds
regardless. With a fault policy it is also where manual separation lives: read back into the policy at
start, followed so an operator's release applies within seconds, never overwritten with an older state.
Another process that rewrites it is named once and not fought. docs/kubernetes.md, "The device-info
ConfigMap"; docs/faults.md, "Manual separation".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import anyio

from ascend_plugin.changes import Changes, Followed, first_change
from ascend_plugin.faces.kube.huawei_format import (
    CONSUMER_LABEL,
    DATA_KEY,
    MANUALLY_SEPARATED_KEY,
    UPGRADE_REASON_KEY,
    DeviceInfoContent,
    FaultClock,
    SuperPodPlace,
    build_device_info,
    chip_report,
    chip_views,
    decode_upgrade_reasons,
    device_names,
    encode_upgrade_reasons,
    parse_device_names,
    without_times,
)
from ascend_plugin.fault_policy.policy import FaultPolicy
from ascend_plugin.holdings.held import HeldChips
from ascend_plugin.inventory.inventory import Inventory
from ascend_plugin.kubeapi.client import CONFIGMAPS, JsonObject, Kube, labels_of, mapping_field, string_map
from ascend_plugin.kubeapi.errors import Conflict, KubeError, NotFound
from ascend_plugin.kubeapi.reflector import named_object, object_key, version_of
from ascend_plugin.kubeapi.retry import Retrier
from ascend_plugin.other_plugins import OtherWriter, foreign_writer

log = logging.getLogger(__name__)

MIN_WRITE_INTERVAL = 1.0  # seconds between two writes, however fast the inventory changes
TIMES_INTERVAL = 10.0  # seconds between two writes that change nothing but times
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
        held: HeldChips | None = None,
        policy: FaultPolicy | None = None,
        announce: Callable[[str, str], None] | None = None,
    ) -> None:
        self.kube = kube
        self.announce = announce  # a node Event, when another process writes the ConfigMap
        self.other = OtherWriter(DATA_KEY)
        self.inventory = inventory
        self.namespace = namespace
        self.name = name
        self.refresh = refresh
        self.clock = clock
        self.faults = FaultClock(time.time)
        self.held = held
        self.policy = policy
        self.prefix = inventory.table.device_id_prefix
        self.super_pod = SuperPodPlace.of(inventory.facts.super_pod)
        self.where = object_key(namespace, name)  # the ConfigMap's namespace/name
        # Bumped by the ConfigMap's changes and the policy's: either may call for a write.
        self._nudges = Changes()
        self.reflector = named_object(
            kube,
            CONFIGMAPS,
            namespace,
            name,
            part=f"device-info ConfigMap {self.where} (followed)",
            changes=self._nudges,
        )
        self._written: DeviceInfoContent | None = None
        self._last_write = -float("inf")
        self._taken = ""  # resourceVersion of the last version whose ManuallySeparateNPU the policy has

    async def run(self) -> None:
        """Read back what the ConfigMap recorded, then keep it current until the inventory closes."""
        stop = self.policy.on_change(self._nudges.bump) if self.policy is not None else None
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(self.reflector.run, name="device-info ConfigMap reflector")
                retry = Retrier(f"device-info ConfigMap {self.where}")
                await self._read_back(retry)
                await self._publish(retry)
                tasks.cancel_scope.cancel()
        finally:
            if stop is not None:
                stop()

    async def _read_back(self, retry: Retrier) -> None:
        """Take what the ConfigMap recorded into the policy, before anything is written over it."""
        current = await retry.until_answered(lambda: self.reflector.read(self.name))
        if current is not None and self.policy is not None:
            self._restore(self.policy, current)

    def _restore(self, policy: FaultPolicy, current: JsonObject) -> None:
        data = string_map(current, "data")
        separated, problems = parse_device_names(data.get(MANUALLY_SEPARATED_KEY, ""), self.prefix)
        reasons, skipped = decode_upgrade_reasons(data.get(UPGRADE_REASON_KEY, ""), self.prefix)
        chips = {state.phy_id for state in self.inventory.chips()}
        strangers = sorted((set(separated) | set(reasons)) - chips)
        if strangers:
            problems.append(
                "names chips this node does not have ("
                + ", ".join(f"{self.prefix}-{phy}" for phy in strangers)
                + "); they are dropped"
            )
        for problem in [*problems, *skipped]:
            log.warning("device-info ConfigMap %s read back: %s", self.where, problem)
        separated = [phy for phy in separated if phy in chips]
        reasons = {phy: chip_reasons for phy, chip_reasons in reasons.items() if phy in chips}
        policy.restore(separated, reasons)
        self._taken = version_of(current)
        if separated or reasons:
            log.info(
                "device-info ConfigMap %s read back: manually separated %s; escalations of %s",
                self.where,
                device_names(self.prefix, separated) or "none",
                device_names(self.prefix, reasons) or "none",
                extra={"configmap": self.where, "separated": separated},
            )

    async def _publish(self, retry: Retrier) -> None:
        while not self.inventory.closed:
            # Taken before the look: the chips, the held chips, the ConfigMap or the policy changing.
            seen: list[tuple[Followed, int]] = [
                (self.inventory, self.inventory.version),
                (self._nudges, self._nudges.version),
            ]
            if self.held is not None:
                seen.append((self.held, self.held.version))
            if self._other_writes():  # not fought: looked at again on a change, or once it is quiet
                await first_change(*seen, within=self.other.quiet_in(self.clock()))
                continue
            self._take_operator_edits()
            content, separated = self._content()
            since_write = self.clock() - self._last_write
            due = self._due(content)
            if since_write >= due or self._stored_differs() or since_write >= self.refresh:
                if since_write < MIN_WRITE_INTERVAL:
                    # Coalesce: wait out the second, then write whatever the state is by then.
                    await anyio.sleep(MIN_WRITE_INTERVAL - since_write)
                    continue
                try:
                    await self._write(content, separated)
                except KubeError as error:
                    await retry.failed(error)
                    continue
                retry.succeeded()
            wake = self._last_write + min(self.refresh, self._due(content))
            await first_change(*seen, within=max(wake - self.clock(), 0.0))

    def _due(self, content: DeviceInfoContent) -> float:
        """Seconds after the last write that ``content`` is due: at once, after TIMES_INTERVAL, or never."""
        if content == self._written:
            return float("inf")
        if self._written is not None and without_times(content) == without_times(self._written):
            return TIMES_INTERVAL
        return 0.0

    def _content(self) -> tuple[DeviceInfoContent, tuple[int, ...]]:
        """The content to write, and the chips it names in ManuallySeparateNPU."""
        devices = chip_views(self.inventory)
        first_seen = self.faults.observe(
            device for device in devices if device.state.health.judgement is None
        )
        held = self.held.chips if self.held is not None else frozenset()
        separated: tuple[int, ...] = ()
        reasons = "{}"
        if self.policy is not None:
            separated = self.policy.manually_separated()
            reasons = encode_upgrade_reasons(self.policy.reasons(), self.prefix)
        content = build_device_info(
            [chip_report(device, first_seen) for device in devices],
            self.inventory.table,
            held=held,
            manually_separated=device_names(self.prefix, separated),
            upgrade_reasons=reasons,
            super_pod=self.super_pod,
        )
        return content, separated

    def _take_operator_edits(self) -> None:
        """Hand the policy a version of the ConfigMap newer than what it has: an operator's releases (the
        store holds our own last write until the watch shows it, so anything else came after it)."""
        current = self.reflector.get(self.where)
        if self.policy is None or current is None or version_of(current) == self._taken:
            return
        self._taken = version_of(current)
        text = string_map(current, "data").get(MANUALLY_SEPARATED_KEY, "")
        listed, problems = parse_device_names(text, self.prefix)
        for problem in problems:
            log.warning("device-info ConfigMap %s: %s", self.where, problem)
        self.policy.sync_manual_separation(listed)

    def _stored_differs(self) -> bool:
        """Whether the ConfigMap lost what we last wrote there (deleted, or its keys edited by hand)."""
        if self._written is None:
            return False
        current = self.reflector.get(self.where)
        if current is None:
            return True
        data = string_map(current, "data")
        return (data.get(MANUALLY_SEPARATED_KEY), data.get(UPGRADE_REASON_KEY)) != (
            self._written.manually_separated,
            self._written.upgrade_reasons,
        )

    def _other_writes(self) -> bool:
        """Whether another process rewrites the device list now; each spell of it said once."""
        now = self.clock()
        manager = self.other.observe(self.reflector.get(self.where))
        if manager is not None:
            said = self.other.active(now)
            self.other.last_seen = now
            if not said:
                message = foreign_writer(self.where, manager)
                log.warning("%s", message, extra={"configmap": self.where, "manager": manager})
                if self.announce is not None:
                    self.announce("OtherPluginWrites", message)
        elif self.other.last_seen is not None and not self.other.active(now):
            self.other.last_seen = None
            log.info("device-info ConfigMap %s: the other writer is quiet; writing it again", self.where)
        return self.other.active(now)

    async def _write(self, content: DeviceInfoContent, separated: tuple[int, ...]) -> None:
        for attempt in range(1, CONFLICT_RETRIES + 1):
            try:
                sent = content.data(int(time.time()))
                written = await self._put(sent)
                break
            except (Conflict, NotFound) as error:
                # Someone else wrote (or deleted) it since we last looked: look again, and take in
                # what they changed before writing the state of now.
                if attempt == CONFLICT_RETRIES:
                    raise
                log.debug("device-info ConfigMap %s: %s; reading it again", self.where, error)
                await self.reflector.read(self.name)
                self._take_operator_edits()
                content, separated = self._content()
        self._taken = version_of(written)
        self.other.wrote(self._taken, sent.get(DATA_KEY))
        if self.policy is not None:
            self.policy.mark_written(separated)
        if content != self._written:
            log.info(
                "device-info ConfigMap %s written: %s",
                self.where,
                ", ".join(
                    f"{key}={value or '-'}"
                    for key, value in content.device_list.items()
                    if not value.startswith("[")
                )
                + f", {MANUALLY_SEPARATED_KEY}={content.manually_separated or '-'}",
                extra={"configmap": self.where},
            )
        self._written = content
        self._last_write = self.clock()

    async def _put(self, data: dict[str, str]) -> JsonObject:
        """Replace the object with ``data``, or create it when it does not exist; the server's answer."""
        current = self.reflector.get(self.where)
        if current is None:
            created = await self.reflector.record_write(
                self.kube.create(CONFIGMAPS, self.namespace, self._body(data, {}))
            )
            log.info("device-info ConfigMap %s created", self.where)
            return created
        return await self.reflector.record_write(
            self.kube.replace(CONFIGMAPS, self.name, self.namespace, self._body(data, current))
        )

    def _body(self, data: dict[str, str], current: JsonObject) -> JsonObject:
        """The full object to send: ours, keeping labels and annotations others put on it."""
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
