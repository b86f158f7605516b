"""Which DRA features the API server keeps: partitions, shared devices, device taints.

An API server whose feature gate is off drops the gated fields of a
ResourceSlice silently: no error, the stored slice simply lacks them. Kubernetes
1.36 turns the three gates a node driver uses on by default; 1.34 and 1.35 have
them off unless the operator enables them. Publishing a feature the server
drops is worse than not publishing it: partitions whose counters were dropped
become independent devices the scheduler would allocate side by side on one
chip, an unhealthy chip whose taint was dropped looks healthy. So before it
relies on one, the driver asks: a dry-run create (``dryRun=All``: admitted,
defaulted, validated, nothing stored) of a slice using the feature, and a look
at what would have been stored. A server that refuses the slice (1.34 with the
gate on validates the older layout, counter sets beside their devices, which
this driver does not publish) counts as not keeping the feature, with its own
message as the reason. Every real write is compared with what came back too,
in case the server changed under the driver (an upgrade or downgrade).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ascend_plugin.faces.dra.layout import API_VERSION, spec_devices
from ascend_plugin.faces.dra.names import counter_set_name, device_name
from ascend_plugin.kubeapi.client import RESOURCE_SLICES, JsonObject, Kube, mapping_field
from ascend_plugin.kubeapi.errors import ApiError

log = logging.getLogger(__name__)


class Feature(enum.Enum):
    """A DRA feature a node driver publishes, by the API server's feature gate that keeps its fields."""

    PARTITIONS = "DRAPartitionableDevices"
    SHARES = "DRAConsumableCapacity"
    TAINTS = "DRADeviceTaints"

    @property
    def gate(self) -> str:
        return self.value

    @property
    def fields(self) -> str:
        return _FIELDS[self]

    @property
    def without(self) -> str:
        """What the driver publishes when the server does not keep the feature."""
        return _WITHOUT[self]

    @property
    def setting(self) -> str:
        """The setting that asks for the feature."""
        return _SETTINGS[self]


_FIELDS = {
    Feature.PARTITIONS: "sharedCounters and consumesCounters",
    Feature.SHARES: "allowMultipleAllocations and capacity requestPolicy",
    Feature.TAINTS: "device taints",
}
_WITHOUT = {
    Feature.PARTITIONS: "chips are published whole only, and no vNPU is made on demand",
    Feature.SHARES: "chips are published whole, one claim each, instead of shared",
    Feature.TAINTS: "unhealthy chips leave the slice instead of staying in it tainted",
}
_SETTINGS = {
    Feature.PARTITIONS: "vnpu=dynamic",
    Feature.SHARES: "share_count",
    Feature.TAINTS: "dra_device_taints (false: never ask)",
}
_GATE_DEFAULTS = "alpha and off by default in 1.34 and 1.35, beta and on from 1.36"


@dataclass(frozen=True)
class FeatureSupport:
    """Whether the server keeps a feature, and if not, why, in an operator's words."""

    feature: Feature
    kept: bool
    why: str = ""


def dropped_verdict(feature: Feature, where: str) -> FeatureSupport:
    """The verdict on a feature whose fields the server dropped from ``where``."""
    return _not_kept(
        feature,
        f"the API server drops {feature.fields} from {where}: its {feature.gate} feature gate is off "
        f"({_GATE_DEFAULTS})",
        f"Enable {feature.gate} on kube-apiserver and kube-scheduler, or upgrade to Kubernetes 1.36",
    )


def refused_verdict(feature: Feature, error: ApiError) -> FeatureSupport:
    """The verdict on a feature whose slices the server refuses."""
    return _not_kept(
        feature,
        f"the API server refuses ResourceSlices with {feature.fields} in the layout of Kubernetes 1.35 "
        f"and later ({error})",
        "This driver's partitions need Kubernetes 1.35 or later with the gate on, or 1.36",
    )


def _not_kept(feature: Feature, what: str, fix: str) -> FeatureSupport:
    return FeatureSupport(feature, False, f"{what}; {feature.without}. {fix}; {feature.setting} asks for it")


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


async def probe(
    kube: Kube, driver: str, node: str, features: Sequence[Feature]
) -> dict[Feature, FeatureSupport]:
    """Ask the API server, with dry runs, which of ``features`` it keeps; KubeError if it cannot be asked."""
    verdicts: dict[Feature, FeatureSupport] = {}
    for feature in features:
        verdict = FeatureSupport(feature, True)
        for body in _probe_bodies(feature, driver, node):
            try:
                stored = await kube.create(RESOURCE_SLICES, "", body, dry_run=True)
            except ApiError as error:
                if error.status != 422:
                    raise
                verdict = refused_verdict(feature, error)
                break
            if feature in dropped(body, stored):
                verdict = dropped_verdict(feature, "a dry-run ResourceSlice")
                break
        verdicts[feature] = verdict
        log.debug("the API server keeps %s: %s", feature.gate, verdict.kept, extra={"gate": feature.gate})
    return verdicts


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
