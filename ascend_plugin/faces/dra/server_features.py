"""Which DRA features the API server keeps: partitions, shared devices, device taints.

A server whose gate is off drops the gated fields without an error, and a dropped feature is worse than
none (partitions without counters are independent devices on one chip), so the driver asks with a
dry-run create and compares what would be stored. docs/dra.md, "What the API server keeps".
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ascend_plugin.faces.dra.devices import API_VERSION, spec_devices
from ascend_plugin.faces.dra.names import counter_set_name, device_name
from ascend_plugin.kubeapi.client import RESOURCE_SLICES, JsonObject, Kube, mapping_field
from ascend_plugin.kubeapi.errors import ApiError

log = logging.getLogger(__name__)


class Feature(enum.Enum):
    """A DRA feature a node driver publishes: the gate that keeps its fields, the fields, what the driver
    publishes without it, and the setting that asks for it."""

    PARTITIONS = (
        "DRAPartitionableDevices",
        "sharedCounters and consumesCounters",
        "chips are published whole only, and no vNPU is made on demand",
        "vnpu=dynamic",
    )
    SHARES = (
        "DRAConsumableCapacity",
        "allowMultipleAllocations and capacity requestPolicy",
        "chips are published whole, one claim each, instead of shared",
        "share_count",
    )
    TAINTS = (
        "DRADeviceTaints",
        "device taints",
        "unhealthy chips leave the slice instead of staying in it tainted",
        "dra_device_taints (false: never ask)",
    )

    def __init__(self, gate: str, fields: str, without: str, setting: str) -> None:
        self.gate = gate
        self.fields = fields
        self.without = without
        self.setting = setting


_GATE_DEFAULTS = "alpha and off by default in 1.34 and 1.35, beta and on from 1.36"


@dataclass(frozen=True)
class Support:
    """Whether the server keeps a feature, and if not, why, in an operator's words."""

    feature: Feature
    kept: bool
    why: str = ""


def dropped_support(feature: Feature, where: str) -> Support:
    """A feature whose fields the server dropped from ``where``."""
    return _not_kept(
        feature,
        f"the API server drops {feature.fields} from {where}: its {feature.gate} feature gate is off "
        f"({_GATE_DEFAULTS})",
        f"Enable {feature.gate} on kube-apiserver and kube-scheduler, or upgrade to Kubernetes 1.36",
    )


def refused_support(feature: Feature, error: ApiError) -> Support:
    """A feature whose slices the server refuses."""
    return _not_kept(
        feature,
        f"the API server refuses ResourceSlices with {feature.fields} in the layout of Kubernetes 1.35 "
        f"and later ({error})",
        "This driver's partitions need Kubernetes 1.35 or later with the gate on, or 1.36",
    )


def _not_kept(feature: Feature, what: str, fix: str) -> Support:
    return Support(feature, False, f"{what}; {feature.without}. {fix}; {feature.setting} asks for it")


def _probe_device(feature: Feature) -> JsonObject:
    device: JsonObject = {"name": device_name(0)}
    if feature is Feature.PARTITIONS:
        device["consumesCounters"] = [
            {"counterSet": counter_set_name(0), "counters": {"aicore": {"value": "1"}}}
        ]
    elif feature is Feature.SHARES:
        device["allowMultipleAllocations"] = True
        device["capacity"] = {
            "shares": {
                "value": "2",
                "requestPolicy": {"default": "1", "validRange": {"min": "1", "max": "2", "step": "1"}},
            }
        }
    else:
        device["taints"] = [{"key": "npu.huawei.com/unhealthy", "value": "Probe", "effect": "NoSchedule"}]
    return device


def _probe_bodies(feature: Feature, driver: str, node: str) -> list[JsonObject]:
    """The slices whose dry-run creation shows whether the server keeps ``feature``."""
    contents: list[JsonObject] = [{"devices": [_probe_device(feature)]}]
    if feature is Feature.PARTITIONS:
        counters = {"name": counter_set_name(0), "counters": {"aicore": {"value": "1"}}}
        contents.insert(0, {"sharedCounters": [counters]})
    return [
        {
            "apiVersion": API_VERSION,
            "kind": "ResourceSlice",
            "metadata": {"generateName": f"{driver}-{node}-"},
            "spec": {
                "driver": driver,
                "nodeName": node,
                "pool": {"name": node, "generation": 0, "resourceSliceCount": len(contents)},
                **content,
            },
        }
        for content in contents
    ]


async def probe(kube: Kube, driver: str, node: str, features: Sequence[Feature]) -> dict[Feature, Support]:
    """Ask the API server, with dry runs, which of ``features`` it keeps; KubeError if it cannot be asked."""
    answers: dict[Feature, Support] = {}
    for feature in features:
        support = Support(feature, True)
        for body in _probe_bodies(feature, driver, node):
            try:
                stored = await kube.create(RESOURCE_SLICES, "", body, dry_run=True)
            except ApiError as error:
                if error.status != 422:
                    raise
                support = refused_support(feature, error)
                break
            if feature in dropped(body, stored):
                support = dropped_support(feature, "a dry-run ResourceSlice")
                break
        answers[feature] = support
        log.debug("the API server keeps %s: %s", feature.gate, support.kept, extra={"gate": feature.gate})
    return answers


def features_used(spec: Mapping[str, object]) -> set[Feature]:
    """The features a ResourceSlice spec (or a slice's content) relies on."""
    used: set[Feature] = set()
    if spec.get("sharedCounters"):
        used.add(Feature.PARTITIONS)
    for device in spec_devices(spec):
        if device.get("consumesCounters"):
            used.add(Feature.PARTITIONS)
        if device.get("allowMultipleAllocations"):
            used.add(Feature.SHARES)
        if device.get("taints"):
            used.add(Feature.TAINTS)
    return used


def dropped(sent: JsonObject, stored: JsonObject) -> set[Feature]:
    """The features ``sent`` used whose fields are missing from ``stored`` (both whole ResourceSlices)."""
    sent_spec, stored_spec = mapping_field(sent, "spec"), mapping_field(stored, "spec")
    kept = features_used(stored_spec)
    gone = features_used(sent_spec) - kept
    if Feature.PARTITIONS in kept:  # counters in the slice, but dropped from some device
        consumers = sum(1 for device in spec_devices(sent_spec) if device.get("consumesCounters"))
        if consumers != sum(1 for device in spec_devices(stored_spec) if device.get("consumesCounters")):
            gone.add(Feature.PARTITIONS)
    return gone
