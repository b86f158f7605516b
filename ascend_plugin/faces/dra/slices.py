"""The node's ResourceSlices: published, kept as the chips are, put back after any wipe.

A reflector keeps a copy of this driver's slices on this node; after each change it is compared with
what it should be and only a difference is written, under a new pool generation. A restarted plugin adopts
the slices it finds. docs/dra.md: "ResourceSlices", "What the API server keeps".
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress

import anyio

from ascend_plugin.changes import Changes, Followed
from ascend_plugin.faces.dra.devices import (
    API_VERSION,
    COUNTERS,
    DEVICES,
    DeviceCatalog,
    Publishing,
    slice_contents,
    spec_devices,
)
from ascend_plugin.faces.dra.server_features import (
    Feature,
    Support,
    dropped,
    dropped_support,
    features_used,
    probe,
    refused_support,
)
from ascend_plugin.holdings.held import HeldChips
from ascend_plugin.holdings.pod_resources import ContainerRef
from ascend_plugin.kubeapi.client import NODES, RESOURCE_SLICES, JsonObject, Kube, mapping_field, string_field
from ascend_plugin.kubeapi.errors import ApiError, Conflict, KubeError, NotFound
from ascend_plugin.kubeapi.reflector import Reflector, unchanged
from ascend_plugin.kubeapi.retry import Retrier

log = logging.getLogger(__name__)


def _spec(slice_: JsonObject) -> JsonObject:
    return mapping_field(slice_, "spec")


def _pool(slice_: JsonObject) -> JsonObject:
    return mapping_field(_spec(slice_), "pool")


def _generation(slice_: JsonObject) -> int:
    value = _pool(slice_).get("generation")
    return value if isinstance(value, int) else 0


def first_difference(sent: object, stored: object, path: str = "") -> str:
    """Where two JSON values first differ, for a message:
    ``devices[3].capacity.memory.value: sent "1536Mi", stored "1.5Gi"``."""
    if isinstance(sent, dict) and isinstance(stored, dict):
        for key in sorted(sent.keys() | stored.keys()):
            if sent.get(key, _ABSENT) != stored.get(key, _ABSENT):
                return first_difference(sent.get(key, _ABSENT), stored.get(key, _ABSENT), f"{path}.{key}")
    elif isinstance(sent, list) and isinstance(stored, list) and len(sent) == len(stored):
        for index, (a, b) in enumerate(zip(sent, stored, strict=True)):
            if a != b:
                return first_difference(a, b, f"{path}[{index}]")
    where = path.lstrip(".") or "the content"
    return f"{where}: sent {_shown(sent)}, stored {_shown(stored)}"


_ABSENT = object()


def _shown(value: object) -> str:
    if value is _ABSENT:
        return "nothing"
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 120 else f"{text[:117]}..."


def _without_time_added(devices: Sequence[JsonObject]) -> list[JsonObject]:
    """The devices as we describe them: the API server stamps ``timeAdded`` on taints itself."""
    return [
        {**device, "taints": [{k: v for k, v in t.items() if k != "timeAdded"} for t in _taints(device)]}
        if isinstance(device.get("taints"), list)
        else device
        for device in devices
    ]


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


def _content(slice_: JsonObject) -> JsonObject:
    """What a stored slice holds, as :func:`.devices.slice_contents` describes it."""
    spec = _spec(slice_)
    if spec.get(COUNTERS):
        return {COUNTERS: spec[COUNTERS]}
    return {DEVICES: _without_time_added(spec_devices(spec))}


_INVALID = 422
FEATURE_RECHECK = 600.0  # seconds between two asks about a feature the API server did not keep


Holds = Callable[[JsonObject, JsonObject], bool]  # (stored slice, chunk): the slice holds the chunk


def _paired(
    ours: Sequence[JsonObject], chunks: Sequence[JsonObject], holds: Holds
) -> list[JsonObject | None]:
    """The stored slice each chunk is written into (None: a new one): a slice keeps the chunk it holds, the
    rest go to slices of the same kind of content, then any, in name order (no trading back and forth)."""
    free = list(ours)
    paired: list[JsonObject | None] = [None] * len(chunks)
    for index, chunk in enumerate(chunks):
        same = next((slice_ for slice_ in free if holds(slice_, chunk)), None)
        if same is not None:
            paired[index] = same
            free.remove(same)
    for index, chunk in enumerate(chunks):
        if paired[index] is not None or not free:
            continue
        kind = next((slice_ for slice_ in free if _content(slice_).keys() == chunk.keys()), free[0])
        paired[index] = kind
        free.remove(kind)
    return paired


class SliceController:
    """Keeps this node's pool of this driver published as the chips are."""

    def __init__(
        self,
        kube: Kube,
        catalog: DeviceCatalog,
        node: str,
        *,
        taints: bool | None = None,
        held: HeldChips | None = None,
    ) -> None:
        """``taints``: None where the server keeps them, True insisting (a warning where not), False never;
        ``held``: left out of the pool."""
        self.kube = kube
        self.held = held
        self._withheld: Mapping[int, tuple[ContainerRef, ...]] = {}  # as last published, said once each
        self.catalog = catalog
        self.driver = catalog.driver
        self.node = node
        # The features the settings ask for, and what the server was found to keep of them.
        self.wanted: dict[Feature, bool] = {}  # feature -> insisted on (a warning when not kept)
        if catalog.splits:
            self.wanted[Feature.PARTITIONS] = True
        if catalog.share_count > 1:
            self.wanted[Feature.SHARES] = True
        if taints is not False:
            self.wanted[Feature.TAINTS] = taints is True
        self.support: dict[Feature, Support] = {}
        self._recheck_at = float("inf")  # when (loop clock) to ask again about the features not kept
        self._mismatch_said = False
        # slice name -> (its resourceVersion as our write stored it, the chunk written): a slice the
        # server stored otherwise than sent still holds that chunk while nobody else has changed it.
        self._stored_as: dict[str, tuple[str, JsonObject]] = {}
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
        return self._slices.store

    # -- running -------------------------------------------------------------------------

    async def run(self) -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(self._slices.run, name="ResourceSlice watch")
            group.start_soon(self._look_on_change, self.catalog.inventory, name="ResourceSlice chips")
            if self.held is not None:
                group.start_soon(self._look_on_change, self.held, name="ResourceSlice held chips")
            await self._reconcile_forever()

    def wake(self) -> None:
        """Something changed: look again."""
        self._looks.bump()

    async def _look_on_change(self, state: Followed) -> None:
        """Look again at every change of ``state`` (the chips, the chips pods hold) until the chips close."""
        version = state.version
        while not self.catalog.inventory.closed:
            version = await state.wait_for_change(version)
            self.wake()

    async def _reconcile_forever(self) -> None:
        retry = Retrier("ResourceSlices")
        await self._slices.wait_synced()
        if self.held is not None:
            await self.held.tried.wait()  # no chip a device-plugin pod holds is ever offered
            if not self.held.answered:  # the client said why, at warning level; this is what follows
                log.info(
                    "the kubelet's PodResources API did not answer, so the chips pods of the device plugin "
                    "still hold cannot be told: pool %s is published whole (such a chip leaves it once the "
                    "kubelet answers; see the log of the pod holdings for why)",
                    self.node,
                    extra={"pool": self.node},
                )
        while True:
            seen = self._looks.version
            try:
                await self._ask_the_server()
                again = await self._reconcile()
            except Conflict as conflict:
                log.debug("a ResourceSlice changed under us (%s); reading it again", conflict)
                try:
                    # A create has no name (generateName): its conflict is read by listing them all.
                    await (self._slices.read(conflict.name) if conflict.name else self._slices.relist())
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
                with anyio.move_on_after(max(self._recheck_at - anyio.current_time(), 0.0)):
                    await self._looks.wait_for_change(seen)

    async def _ask_the_server(self) -> None:
        """Ask the API server (dry runs) about the wanted features not asked yet, and every FEATURE_RECHECK s
        about those it did not keep: a gate turned on later is used without a restart."""
        due = anyio.current_time() >= self._recheck_at
        asked = [f for f in self.wanted if f not in self.support or (due and not self.support[f].kept)]
        if not asked:
            return
        answers = await probe(self.kube, self.driver, self.node, asked)
        if due:
            self._recheck_at = float("inf")  # set again below by each feature still not kept
        for support in answers.values():
            self._judged(support)

    def _judged(self, support: Support) -> None:
        """Record what the server keeps; a wanted feature taken away, or given back, is said once."""
        earlier = self.support.get(support.feature)
        self.support[support.feature] = support
        if support.kept:
            if earlier is not None and not earlier.kept:
                log.info(
                    "the API server keeps %s now: pool %s publishes with it",
                    support.feature.fields,
                    self.node,
                    extra={"feature": support.feature.gate, "pool": self.node},
                )
            return
        self._recheck_at = min(self._recheck_at, anyio.current_time() + FEATURE_RECHECK)
        if earlier is not None and not earlier.kept:
            return
        log.log(
            logging.WARNING if self.wanted.get(support.feature, False) else logging.INFO,
            "%s",
            support.why,
            extra={"feature": support.feature.gate, "pool": self.node},
        )

    @property
    def publishing(self) -> Publishing:
        """What the pool holds now besides whole chips: what is wanted and the server keeps."""

        def kept(feature: Feature) -> bool:
            support = self.support.get(feature)
            return feature in self.wanted and support is not None and support.kept

        return Publishing(
            taints=kept(Feature.TAINTS), partitions=kept(Feature.PARTITIONS), shares=kept(Feature.SHARES)
        )

    @property
    def notes(self) -> list[str]:
        """Why the pool lacks a feature the settings ask for (/readyz, doctor), one line each; taints left to
        the default are not asked for, so a server without them is nothing to report."""
        return [
            support.why
            for feature, support in sorted(self.support.items(), key=lambda item: item[0].value)
            if not support.kept and self.wanted.get(feature, False)
        ]

    # -- one comparison ------------------------------------------------------------------------

    def desired(self) -> list[JsonObject]:
        """The content of each slice (counter sets or devices), as the chips are now."""
        return slice_contents(self.catalog.pool(self.publishing, self._held_now()))

    def _held_now(self) -> Mapping[int, tuple[ContainerRef, ...]]:
        """The chips device-plugin pods hold now; each change is said once (left out, published again)."""
        held = self.held.device_plugin_holders() if self.held is not None else {}
        for phy in sorted(held.keys() - self._withheld.keys()):
            pods = ", ".join(sorted({f"{ref.namespace}/{ref.pod}" for ref in held[phy]}))
            log.warning(
                "chip %d is held by device-plugin pod(s) %s: it is left out of pool %s until they end",
                phy,
                pods,
                self.node,
                extra={"chip": phy, "pool": self.node, "pods": pods},
            )
        for phy in sorted(self._withheld.keys() - held.keys()):
            log.info(
                "chip %d is no longer held by a device-plugin pod: pool %s offers it again",
                phy,
                self.node,
                extra={"chip": phy, "pool": self.node},
            )
        self._withheld = held
        return held

    def _ours(self) -> tuple[list[JsonObject], list[JsonObject]]:
        """(this node's pool's slices by name, slices of ours under another pool name)."""
        slices = [self.slices[name] for name in sorted(self.slices)]
        ours = [slice_ for slice_ in slices if string_field(_pool(slice_), "name") == self.node]
        strays = [slice_ for slice_ in slices if string_field(_pool(slice_), "name") != self.node]
        return ours, strays

    def _up_to_date(self, ours: Sequence[JsonObject], chunks: Sequence[JsonObject]) -> bool:
        if len(ours) != len(chunks) or len({_generation(slice_) for slice_ in ours}) != 1:
            return False
        for slice_, chunk in zip(_paired(ours, chunks, self._holds), chunks, strict=True):
            if slice_ is None:
                return False
            pool = _pool(slice_)
            if (
                pool.get("resourceSliceCount") != len(chunks)
                or string_field(_spec(slice_), "nodeName") != self.node
                or not self._holds(slice_, chunk)
            ):
                return False
        return True

    def _holds(self, slice_: JsonObject, chunk: JsonObject) -> bool:
        """Whether a stored slice holds ``chunk``: it says so, or it is our write of it, untouched since (a
        server that normalises a field we do not mirror would otherwise make every look a write)."""
        if _content(slice_) == chunk:
            return True
        metadata = mapping_field(slice_, "metadata")
        stored = self._stored_as.get(string_field(metadata, "name"))
        return stored == (string_field(metadata, "resourceVersion"), chunk)

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
        paired = _paired(ours, chunks, self._holds)
        for current, chunk in zip(paired, chunks, strict=True):
            pool = {"name": self.node, "generation": generation, "resourceSliceCount": len(chunks)}
            if not await self._written(current, pool, chunk):
                self.generation = generation
                return True  # publish again, without what the server dropped or refused
        for slice_ in [slice_ for slice_ in ours if not any(slice_ is kept for kept in paired)]:
            await self._delete(slice_)
        self.generation = generation
        self._showed(version)
        self._said_published(chunks, generation)
        return False

    async def _written(self, current: JsonObject | None, pool: JsonObject, content: JsonObject) -> bool:
        """Write one slice; False when the server dropped or refused a feature it holds (now given up)."""
        try:
            if current is None:
                sent, stored = await self._create(pool, content)
            else:
                sent, stored = await self._update(current, pool, content)
        except ApiError as error:
            used = features_used(content) & self.wanted.keys()
            if error.status != _INVALID or not used:
                raise
            for feature in used:
                self._judged(refused_support(feature, error))
            return False
        gone = dropped(sent, stored) & self.wanted.keys()
        metadata = mapping_field(stored, "metadata")
        name = string_field(metadata, "name")
        for feature in gone:
            self._judged(dropped_support(feature, f"ResourceSlice {name}"))
        if gone:
            return False
        self._stored_as[name] = (string_field(metadata, "resourceVersion"), content)
        if _content(stored) != content:
            self._stored_otherwise(name, content, _content(stored))
        return True

    def _stored_otherwise(self, name: str, sent: JsonObject, stored: JsonObject) -> None:
        """Say once that the server keeps a slice otherwise than sent (it is not written again for that)."""
        if self._mismatch_said:
            return
        self._mismatch_said = True
        log.warning(
            "the API server stored ResourceSlice %s otherwise than it was sent (%s); the plugin takes the "
            "stored form as this content and writes the slice again only when the chips change or "
            "someone else changes it",
            name,
            first_difference(sent, stored),
            extra={"slice": name, "pool": self.node},
        )

    def _said_published(self, chunks: Sequence[JsonObject], generation: int) -> None:
        published = {string_field(device, "name") for chunk in chunks for device in spec_devices(chunk)}
        left_out = [entry.name for entry in self.catalog.entries.values() if entry.name not in published]
        publishing = self.publishing
        log.info(
            "published pool %s generation %d: %d device(s) in %d slice(s)%s",
            self.node,
            generation,
            len(published),
            len(chunks),
            f"; unhealthy, split or held by device-plugin pods, left out: {', '.join(left_out)}"
            if left_out
            else "",
            extra={
                "pool": self.node,
                "generation": generation,
                "devices": sorted(published),
                "partitions": publishing.partitions,
                "shares": publishing.shares,
                "taints": publishing.taints,
            },
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

    async def _create(self, pool: JsonObject, content: JsonObject) -> tuple[JsonObject, JsonObject]:
        """Create a slice; (what was sent, what the server stored)."""
        body: JsonObject = {
            "apiVersion": API_VERSION,
            "kind": "ResourceSlice",
            "metadata": {
                "generateName": f"{self.driver}-{self.node}-",
                "ownerReferences": [await self._node_owner()],
            },
            "spec": {"driver": self.driver, "nodeName": self.node, "pool": pool, **content},
        }
        stored = await self._slices.record_write(self.kube.create(RESOURCE_SLICES, "", body))
        self.writes += 1
        return body, stored

    async def _update(
        self, current: JsonObject, pool: JsonObject, content: JsonObject
    ) -> tuple[JsonObject, JsonObject]:
        """Replace a slice's content in place; (what was sent, what the server stored)."""
        body = copy.deepcopy(current)
        spec = {
            key: value for key, value in mapping_field(body, "spec").items() if key not in (COUNTERS, DEVICES)
        }
        devices = content.get(DEVICES)
        if isinstance(devices, list):
            content = {DEVICES: _keep_time_added(devices, spec_devices(_spec(current)))}
        spec.update(pool=pool, **content)
        body["spec"] = spec
        name = string_field(mapping_field(current, "metadata"), "name")
        try:
            stored = await self._slices.record_write(self.kube.replace(RESOURCE_SLICES, name, "", body))
        except NotFound:
            self._slices.record_gone(name)
            return await self._create(pool, content)
        self.writes += 1
        return body, stored

    async def _delete(self, slice_: JsonObject) -> None:
        metadata = mapping_field(slice_, "metadata")
        name = string_field(metadata, "name")
        self._stored_as.pop(name, None)
        preconditions: JsonObject = {
            "uid": string_field(metadata, "uid"),
            "resourceVersion": string_field(metadata, "resourceVersion"),
        }
        with suppress(NotFound):
            await self.kube.delete(RESOURCE_SLICES, name, None, preconditions)
        self.writes += 1
        self._slices.record_gone(name)
