"""What hot reset tells Kubernetes: the node's ``ResetInfo`` annotation (Huawei's Go JSON, read back at
start), and an Event per stage of a reset. docs/hot-reset.md, "What Kubernetes sees".
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

import anyio

from ascend_plugin.faces.kube.events import NodeEvents
from ascend_plugin.faces.kube.huawei_format import go_json
from ascend_plugin.hot_reset.manager import HotResetManager
from ascend_plugin.hot_reset.manual import ManualReset
from ascend_plugin.kubeapi.client import NODES, Kube, mapping_field, string_map
from ascend_plugin.kubeapi.errors import KubeError, NotFound
from ascend_plugin.kubeapi.retry import Retrier

log = logging.getLogger(__name__)

ANNOTATION = "ResetInfo"
THIRD_PARTY = "ThirdPartyResetDevs"
MANUAL = "ManualResetDevs"


def encode_reset_info(entries: Sequence[ManualReset]) -> str:
    """The annotation's value for these chips, as Huawei's plugin writes it."""
    devices = [
        {
            "CardId": entry.chip.card_id,
            "DeviceId": entry.chip.device_id,
            "AssociatedCardId": entry.associated_card,
            "PhyID": entry.chip.phy_id,
            "LogicID": entry.chip.logic_id,
        }
        for entry in entries
    ]
    return go_json({THIRD_PARTY: [], MANUAL: devices})


def decode_reset_info(text: str) -> tuple[list[int], list[str]]:
    """The physical ids a ResetInfo value names (either list), and what in it could not be read."""
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as error:
        return [], [f"the node's {ANNOTATION} annotation is not JSON ({error}); it is written anew"]
    if not isinstance(document, dict):
        return [], [f"the node's {ANNOTATION} annotation is not a JSON object; it is written anew"]
    phy_ids: list[int] = []
    problems: list[str] = []
    for key in (THIRD_PARTY, MANUAL):
        devices = document.get(key) or []
        if not isinstance(devices, list):
            problems.append(f"{ANNOTATION}.{key} is not a list; skipped")
            continue
        for device in devices:
            phy = device.get("PhyID") if isinstance(device, dict) else None
            if isinstance(phy, bool) or not isinstance(phy, int):
                problems.append(f"{ANNOTATION}.{key}: {json.dumps(device)} has no PhyID; skipped")
            elif phy not in phy_ids:
                phy_ids.append(phy)
    return phy_ids, problems


class HotResetPublisher:
    """Keeps the ResetInfo annotation current and posts the Events of each reset."""

    def __init__(
        self, kube: Kube, node_name: str, manager: HotResetManager, events: NodeEvents | None
    ) -> None:
        self.kube = kube
        self.node_name = node_name
        self.manager = manager
        self.events = events
        self.written: str | None = None  # the annotation's value as last read or written

    async def run(self) -> None:
        """Keep the annotation; hand each notice to the node's Events (posted by the node events part)."""
        async with anyio.create_task_group() as tasks:
            if self.events is not None:
                tasks.start_soon(self._tell, self.events, name="hot reset notices")
            await self._keep_annotation()

    async def _tell(self, events: NodeEvents) -> None:
        """Announce every notice of the manager's log, from the oldest it still keeps."""
        sequence = 0
        while True:
            for notice in self.manager.notices.since(sequence):
                events.announce(notice.stage.value, notice.message, notice.stage.event_type)
                sequence = notice.sequence + 1
            await self.manager.notices.wait_beyond(sequence)

    async def _keep_annotation(self) -> None:
        retry = Retrier(f"{ANNOTATION} annotation of node {self.node_name}")
        await retry.until_answered(self._read_back)
        manual = self.manager.manual
        while True:
            version = manual.version
            entries = manual.entries()
            text = encode_reset_info(entries)
            if text != self.written and (entries or self.written is not None):
                try:
                    await self.kube.patch(
                        NODES, self.node_name, None, {"metadata": {"annotations": {ANNOTATION: text}}}
                    )
                except KubeError as error:
                    await retry.failed(error)
                    continue
                retry.succeeded()
                self.written = text
                log.info(
                    "node %s: %s annotation: %s",
                    self.node_name,
                    ANNOTATION,
                    text,
                    extra={"devices": [self.manager.parts.name(entry.chip.phy_id) for entry in entries]},
                )
            await manual.wait_for_change(version)

    async def _read_back(self) -> None:
        """Read the annotation a previous run left; its chips that are still unhealthy stay named."""
        try:
            node = await self.kube.get(NODES, self.node_name)
        except NotFound:
            log.warning(
                "node %s does not exist; its %s annotation is written once it does",
                self.node_name,
                ANNOTATION,
            )
            node = {}
        text = string_map(mapping_field(node, "metadata"), "annotations").get(ANNOTATION)
        phy_ids: list[int] = []
        if text is not None:
            self.written = text
            phy_ids, problems = decode_reset_info(text)
            for problem in problems:
                log.warning("%s", problem)
        await self.manager.restore(phy_ids)
