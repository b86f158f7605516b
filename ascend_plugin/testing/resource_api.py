"""resource.k8s.io/v1 ResourceSlices as API servers of Kubernetes 1.34 to 1.37 admit them (loopback server).

What the real server does to a ResourceSlice on create and update, in its
order (``pkg/registry/resource/resourceslice/strategy.go``, then
``pkg/apis/resource/validation``), for the fields a node driver writes:

1. **drop** the fields of a feature whose gate is off, unless the stored
   object already uses them (ratcheting): ``DRAPartitionableDevices``
   (``sharedCounters``, ``perDeviceNodeSelection``, ``consumesCounters``, the
   per-device node fields), ``DRAConsumableCapacity``
   (``allowMultipleAllocations``, capacity ``requestPolicy``),
   ``DRADeviceTaints`` (``taints``). The gates are beta and on from 1.36,
   alpha and off before (:data:`GATES_ON_FROM`);
2. **default**: a taint without ``timeAdded`` gets the time;
3. **canonicalise** quantities (``65536Mi`` is stored as ``64Gi``);
4. **validate**, by the rules of the server's version: the 1.34 layout (counter
   sets beside the devices that consume them, at most 32 counters in all and 32
   consumption entries a device, 128 devices a slice, 4 taints a device) or the
   1.35+ one (counter sets or devices in a slice, never both; at most 8 sets,
   32 counters a set, 2 consumption entries a device, 64 devices once any
   carries taints or consumes counters, 16 taints; effect ``None`` allowed),
   and consumable capacity's request policies.

:func:`pool_problems` is the scheduler's view of a whole pool (the allocator
of ``k8s.io/dynamic-resource-allocation``): the newest generation only, every
slice of it present, counter-set names unique across the pool, and every
consumed counter defined.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Final

PARTITIONS: Final = "DRAPartitionableDevices"
CONSUMABLE_CAPACITY: Final = "DRAConsumableCapacity"
DEVICE_TAINTS: Final = "DRADeviceTaints"
# The release from which each gate is on by default (beta); off before it (alpha).
GATES_ON_FROM: Final = {PARTITIONS: (1, 36), CONSUMABLE_CAPACITY: (1, 36), DEVICE_TAINTS: (1, 36)}

MAX_DEVICES = 128
MAX_DEVICES_ADVANCED = 64  # 1.35+: any device with taints or consumesCounters
MAX_ATTRIBUTES_AND_CAPACITIES = 32
MAX_VALUE_LENGTH = 64
MAX_COUNTER_SETS = 8  # 1.35+
MAX_COUNTERS = 32  # per set (1.35+); across all sets of a slice (1.34)
MAX_CONSUMPTIONS = 2  # per device, 1.35+ (32 in 1.34)
MAX_CONSUMPTIONS_1_34 = 32
MAX_SLICE_CONSUMPTIONS_1_34 = 1024
MAX_VALID_VALUES = 10

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")
_QUANTITY = re.compile(r"^(?P<number>[0-9]+(\.[0-9]+)?)(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$")
_BINARY = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL = {"m": Decimal("0.001"), "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9)}
_DECIMAL |= {"T": Decimal(10**12), "P": Decimal(10**15), "E": Decimal(10**18)}


@dataclass(frozen=True)
class ServerVersion:
    """A Kubernetes API server: its release, and feature gates set against their defaults."""

    release: tuple[int, int] = (1, 34)
    gates: Mapping[str, bool] = field(default_factory=dict)

    @classmethod
    def of(cls, version: str, gates: Mapping[str, bool] | None = None) -> ServerVersion:
        """``ServerVersion.of("1.36")``."""
        major, minor = (int(part) for part in version.split(".")[:2])
        return cls((major, minor), dict(gates or {}))

    def gate(self, name: str) -> bool:
        """Whether the feature gate ``name`` is on."""
        return self.gates.get(name, self.release >= GATES_ON_FROM[name])

    @property
    def split_layout(self) -> bool:
        """1.35+: counter sets and devices in slices of their own."""
        return self.release >= (1, 35)


def quantity_value(text: object) -> Decimal | None:
    """A quantity's value, or None when it does not parse."""
    if not isinstance(text, str):
        return None
    found = _QUANTITY.match(text)
    if found is None:
        return None
    try:
        number = Decimal(found["number"])
    except InvalidOperation:
        return None
    suffix = found["suffix"] or ""
    scale: Decimal = Decimal(1024 ** _BINARY.index(suffix)) if suffix in _BINARY else _DECIMAL[suffix]
    return number * scale


def canonical_quantity(value: str) -> str:
    """A binary-suffixed integer quantity as the server writes it back (65536Mi -> 64Gi); others as given."""
    found = _QUANTITY.match(value)
    if found is None or "." in found["number"] or (found["suffix"] or "") not in _BINARY:
        return value
    number = int(found["number"]) * 1024 ** _BINARY.index(found["suffix"] or "")
    if not found["suffix"]:
        return str(number)
    power = 0
    while number and number % 1024 == 0 and power < len(_BINARY) - 1:
        number //= 1024
        power += 1
    return f"{number}{_BINARY[power]}"


# -- admission ----------------------------------------------------------------------------------------


def _devices(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    devices = spec.get("devices")
    return [d for d in devices if isinstance(d, dict)] if isinstance(devices, list) else []


def _uses_partitions(spec: Mapping[str, Any]) -> bool:
    node_fields = ("consumesCounters", "nodeName", "nodeSelector", "allNodes")
    return bool(spec.get("sharedCounters") or spec.get("perDeviceNodeSelection")) or any(
        device.get(key) not in (None, False, "", []) for device in _devices(spec) for key in node_fields
    )


def _uses_consumable_capacity(spec: Mapping[str, Any]) -> bool:
    return any(
        device.get("allowMultipleAllocations") is not None
        or any(isinstance(c, dict) and "requestPolicy" in c for c in (device.get("capacity") or {}).values())
        for device in _devices(spec)
    )


def _uses_taints(spec: Mapping[str, Any]) -> bool:
    return any(device.get("taints") for device in _devices(spec))


def drop_disabled_fields(spec: dict[str, Any], old: Mapping[str, Any] | None, server: ServerVersion) -> None:
    """``dropDisabledFields``: what a gate that is off does not let in (unless the old object has it)."""
    old = old or {}
    if not server.gate(PARTITIONS) and not _uses_partitions(old):
        spec.pop("sharedCounters", None)
        spec.pop("perDeviceNodeSelection", None)
        for device in _devices(spec):
            for key in ("consumesCounters", "nodeName", "nodeSelector", "allNodes"):
                device.pop(key, None)
    if not server.gate(CONSUMABLE_CAPACITY) and not _uses_consumable_capacity(old):
        for device in _devices(spec):
            device.pop("allowMultipleAllocations", None)
            for capacity in (device.get("capacity") or {}).values():
                if isinstance(capacity, dict):
                    capacity.pop("requestPolicy", None)
    if not server.gate(DEVICE_TAINTS) and not _uses_taints(old):
        for device in _devices(spec):
            device.pop("taints", None)


def _canonical_counters(counters: object) -> None:
    for counter in counters.values() if isinstance(counters, dict) else ():
        if isinstance(counter, dict) and isinstance(counter.get("value"), str):
            counter["value"] = canonical_quantity(counter["value"])


def default_and_canonicalise(spec: dict[str, Any]) -> None:
    """Taints get ``timeAdded``; quantities take the form the server stores them in."""
    for counter_set in spec.get("sharedCounters") or []:
        if isinstance(counter_set, dict):
            _canonical_counters(counter_set.get("counters"))
    for device in _devices(spec):
        for taint in device.get("taints") or []:
            if isinstance(taint, dict):
                taint.setdefault("timeAdded", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        for consumption in device.get("consumesCounters") or []:
            if isinstance(consumption, dict):
                _canonical_counters(consumption.get("counters"))
        for capacity in (device.get("capacity") or {}).values():
            if not isinstance(capacity, dict):
                continue
            if isinstance(capacity.get("value"), str):
                capacity["value"] = canonical_quantity(capacity["value"])
            policy = capacity.get("requestPolicy")
            if isinstance(policy, dict):
                for key in ("default",):
                    if isinstance(policy.get(key), str):
                        policy[key] = canonical_quantity(policy[key])
                if isinstance(policy.get("validValues"), list):
                    policy["validValues"] = [
                        canonical_quantity(v) if isinstance(v, str) else v for v in policy["validValues"]
                    ]
                bounds = policy.get("validRange")
                if isinstance(bounds, dict):
                    for key in ("min", "max", "step"):
                        if isinstance(bounds.get(key), str):
                            bounds[key] = canonical_quantity(bounds[key])


# -- validation -----------------------------------------------------------------------------------------


def _name_problems(where: str, name: str) -> list[str]:
    domain, _, identifier = name.rpartition("/")
    problems = []
    if domain and (len(domain) > 63 or not _DNS_SUBDOMAIN.match(domain)):
        problems.append(
            f"{where}[{name}]: Invalid value: {domain!r}: a domain must be a DNS subdomain of at most 63"
        )
    if len(identifier) > 32 or not _C_IDENTIFIER.match(identifier):
        problems.append(
            f"{where}[{name}]: Invalid value: {identifier!r}: must be a C identifier of at most 32"
        )
    return problems


def _attribute_problems(where: str, attributes: Mapping[str, Any]) -> list[str]:
    problems = []
    for key, value in attributes.items():
        problems += _name_problems(f"{where}.attributes", key)
        kinds = [kind for kind in ("bool", "int", "string", "version") if kind in (value or {})]
        if len(kinds) != 1:
            problems.append(f"{where}.attributes[{key}]: Invalid value: exactly one value must be specified")
            continue
        text = value[kinds[0]]
        if kinds[0] in ("string", "version") and (not isinstance(text, str) or len(text) > MAX_VALUE_LENGTH):
            problems.append(f"{where}.attributes[{key}].{kinds[0]}: Too long: may not be more than 64 bytes")
        if kinds[0] == "version" and isinstance(text, str) and not _SEMVER.match(text):
            problems.append(
                f"{where}.attributes[{key}].version: Invalid value: {text!r}: must be a semantic version"
            )
        if kinds[0] == "int" and (isinstance(text, bool) or not isinstance(text, int)):
            problems.append(f"{where}.attributes[{key}].int: Invalid value: {text!r}: must be an integer")
    return problems


def _policy_problems(where: str, value: Decimal, policy: Mapping[str, Any]) -> list[str]:
    """``validateRequestPolicy`` (consumable capacity)."""
    problems = []
    default = quantity_value(policy.get("default")) if "default" in policy else None
    values, bounds = policy.get("validValues"), policy.get("validRange")
    if values is not None and bounds is not None:
        problems.append(f"{where}: Invalid value: only one of validValues or validRange may be set")
    if (values is not None or bounds is not None) and default is None:
        problems.append(f"{where}.default: Required value: required when validValues or validRange is set")
    if default is not None and default > value:
        problems.append(f"{where}.default: Invalid value: must not exceed the capacity value")
    if isinstance(values, list):
        parsed = [quantity_value(v) for v in values]
        if len(values) > MAX_VALID_VALUES:
            problems.append(
                f"{where}.validValues: Too many: {len(values)}: must have at most {MAX_VALID_VALUES} items"
            )
        if any(v is None for v in parsed):
            problems.append(f"{where}.validValues: Invalid value: must be quantities")
        else:
            numbers = [v for v in parsed if v is not None]
            if numbers != sorted(set(numbers)):
                problems.append(
                    f"{where}.validValues: Invalid value: must be sorted ascending, without duplicates"
                )
            if any(v > value for v in numbers):
                problems.append(f"{where}.validValues: Invalid value: must not exceed the capacity value")
            if default is not None and default not in numbers:
                problems.append(f"{where}.default: Invalid value: must be one of validValues")
    if isinstance(bounds, dict):
        low = quantity_value(bounds.get("min"))
        high = quantity_value(bounds.get("max")) if "max" in bounds else None
        step = quantity_value(bounds.get("step")) if "step" in bounds else None
        if low is None:
            problems.append(f"{where}.validRange.min: Required value")
            return problems
        if low < 0 or low > value:
            problems.append(
                f"{where}.validRange.min: Invalid value: must be between 0 and the capacity value"
            )
        if default is not None and default < low:
            problems.append(f"{where}.default: Invalid value: must not be less than validRange.min")
        if high is not None and (high > value or high < low):
            problems.append(
                f"{where}.validRange.max: Invalid value: must be between min and the capacity value"
            )
        if high is not None and default is not None and default > high:
            problems.append(f"{where}.default: Invalid value: must not exceed validRange.max")
        if step is not None:
            if step <= 0 or low + step > value:
                problems.append(
                    f"{where}.validRange.step: Invalid value: must be positive, min+step within the value"
                )
            elif (default is not None and (default - low) % step) or (
                high is not None and (high - low) % step
            ):
                problems.append(
                    f"{where}.validRange.step: Invalid value: default-min and max-min must be multiples"
                )
    return problems


def _capacity_problems(where: str, device: Mapping[str, Any]) -> list[str]:
    problems = []
    multiple = device.get("allowMultipleAllocations") is True
    for key, entry in (device.get("capacity") or {}).items():
        problems += _name_problems(f"{where}.capacity", key)
        value = quantity_value(entry.get("value")) if isinstance(entry, dict) else None
        if value is None:
            problems.append(f"{where}.capacity[{key}].value: Invalid value: {entry!r}: must be a quantity")
            continue
        policy = entry.get("requestPolicy")
        if policy is None:
            continue
        if not multiple:
            problems.append(
                f"{where}.capacity[{key}].requestPolicy: Forbidden: allowMultipleAllocations must be true"
            )
        elif isinstance(policy, dict):
            problems += _policy_problems(f"{where}.capacity[{key}].requestPolicy", value, policy)
    return problems


def _taint_problems(where: str, taints: Sequence[Any], server: ServerVersion) -> list[str]:
    limit = 16 if server.split_layout else 4
    effects = ("None", "NoExecute", "NoSchedule") if server.split_layout else ("NoExecute", "NoSchedule")
    problems = []
    if len(taints) > limit:
        problems.append(f"{where}.taints: Too many: {len(taints)}: must have at most {limit} items")
    for index, taint in enumerate(taints):
        key = taint.get("key", "")
        prefix, _, short = key.rpartition("/")
        if (
            not short
            or not _QUALIFIED_NAME.match(short)
            or len(short) > 63
            or (prefix and not _DNS_SUBDOMAIN.match(prefix))
        ):
            problems.append(f"{where}.taints[{index}].key: Invalid value: {key!r}: must be a qualified name")
        value = taint.get("value", "")
        if value and (len(value) > 63 or not _QUALIFIED_NAME.match(value)):
            problems.append(f"{where}.taints[{index}].value: Invalid value: {value!r}: must be a label value")
        if taint.get("effect") not in effects:
            supported = ", ".join(f'"{effect}"' for effect in effects)
            problems.append(
                f"{where}.taints[{index}].effect: Unsupported value: {taint.get('effect')!r}: "
                f"supported values: {supported}"
            )
    return problems


def _counters_problems(where: str, counters: object) -> list[str]:
    if not isinstance(counters, dict) or not counters:
        return [f"{where}: Required value"]
    problems = []
    if len(counters) > MAX_COUNTERS:
        problems.append(f"{where}: Too many: {len(counters)}: must have at most {MAX_COUNTERS} items")
    for name, counter in counters.items():
        if not _DNS_LABEL.match(name) or len(name) > 63:
            problems.append(f"{where}[{name}]: Invalid value: {name!r}: must be a DNS label")
        if not isinstance(counter, dict) or quantity_value(counter.get("value")) is None:
            problems.append(f"{where}[{name}].value: Invalid value: {counter!r}: must be a quantity")
    return problems


def _unique_labels(where: str, field: str, items: Sequence[Any]) -> list[str]:
    """Each item's ``field`` a DNS label, no two alike (counter-set names, consumption entries)."""
    names = [item.get(field, "") if isinstance(item, dict) else "" for item in items]
    problems = [
        f"{where}[].{field}: Duplicate value: {duplicate!r}"
        for duplicate in sorted({name for name in names if names.count(name) > 1})
    ]
    for index, name in enumerate(names):
        if not isinstance(name, str) or not _DNS_LABEL.match(name) or len(name) > 63:
            problems.append(f"{where}[{index}].{field}: Invalid value: {name!r}: must be a DNS label")
    return problems


def _counter_set_problems(sets: Sequence[Any], server: ServerVersion) -> list[str]:
    problems = []
    if server.split_layout and len(sets) > MAX_COUNTER_SETS:
        problems.append(
            f"spec.sharedCounters: Too many: {len(sets)}: must have at most {MAX_COUNTER_SETS} items"
        )
    total = sum(len(s.get("counters") or {}) for s in sets if isinstance(s, dict))
    if not server.split_layout and total > MAX_COUNTERS:
        problems.append(
            f"spec.sharedCounters: Too many: {total}: must have at most {MAX_COUNTERS} counters in all sets"
        )
    problems += _unique_labels("spec.sharedCounters", "name", sets)
    for index, counter_set in enumerate(sets):
        counters = counter_set.get("counters") if isinstance(counter_set, dict) else None
        problems += _counters_problems(f"spec.sharedCounters[{index}].counters", counters)
    return problems


def _consumption_problems(
    where: str, device: Mapping[str, Any], sets: Mapping[str, Mapping[str, Any]], server: ServerVersion
) -> list[str]:
    consumptions = device.get("consumesCounters") or []
    limit = MAX_CONSUMPTIONS if server.split_layout else MAX_CONSUMPTIONS_1_34
    problems = []
    if len(consumptions) > limit:
        problems.append(
            f"{where}.consumesCounters: Too many: {len(consumptions)}: must have at most {limit} items"
        )
    problems += _unique_labels(f"{where}.consumesCounters", "counterSet", consumptions)
    for index, consumption in enumerate(consumptions):
        at = f"{where}.consumesCounters[{index}]"
        counter_set = consumption.get("counterSet", "") if isinstance(consumption, dict) else ""
        counters = consumption.get("counters") if isinstance(consumption, dict) else None
        problems += _counters_problems(f"{at}.counters", counters)
        if server.split_layout or not isinstance(counters, dict):
            continue  # 1.35+: the set lives in another slice; only the allocator can check the names
        known = sets.get(counter_set)
        if known is None:
            problems.append(
                f"{at}.counterSet: Invalid value: {counter_set!r}: must reference a counter set of this slice"
            )
            continue
        for name in counters:
            if name not in (known.get("counters") or {}):
                problems.append(
                    f"{at}.counters[{name}]: Invalid value: must reference a counter of set {counter_set!r}"
                )
    return problems


def _device_problems(
    where: str,
    device: dict[str, Any],
    sets: Mapping[str, Mapping[str, Any]],
    server: ServerVersion,
    per_device_nodes: bool,
) -> list[str]:
    problems = []
    name = device.get("name", "")
    if not _DNS_LABEL.match(name) or len(name) > 63:
        problems.append(
            f"{where}.name: Invalid value: {name!r}: a lowercase RFC 1123 label must consist of ..."
        )
    attributes = device.get("attributes") or {}
    capacity = device.get("capacity") or {}
    if len(attributes) + len(capacity) > MAX_ATTRIBUTES_AND_CAPACITIES:
        problems.append(
            f"{where}: Too many: {len(attributes) + len(capacity)}: must have at most "
            f"{MAX_ATTRIBUTES_AND_CAPACITIES} attributes and capacities combined"
        )
    problems += _attribute_problems(where, attributes)
    problems += _capacity_problems(where, device)
    problems += _taint_problems(where, device.get("taints") or [], server)
    problems += _consumption_problems(where, device, sets, server)
    chosen = [
        key for key in ("nodeName", "nodeSelector", "allNodes") if device.get(key) not in (None, False, "")
    ]
    if per_device_nodes and len(chosen) != 1:
        problems.append(
            f"{where}: Invalid value: exactly one of `nodeName`, `nodeSelector`, `allNodes` is required"
        )
    if not per_device_nodes and chosen:
        problems.append(f"{where}.{chosen[0]}: Forbidden: only with spec.perDeviceNodeSelection")
    return problems


def _device_limit(devices: Sequence[Mapping[str, Any]], server: ServerVersion) -> int:
    advanced = any(device.get("taints") or device.get("consumesCounters") for device in devices)
    return MAX_DEVICES_ADVANCED if server.split_layout and advanced else MAX_DEVICES


def slice_problems(obj: dict[str, Any], server: ServerVersion | None = None) -> list[str]:
    """What ``ValidateResourceSlice`` of ``server`` (default 1.34) finds wrong with ``obj``."""
    server = server or ServerVersion()
    spec = obj["spec"]
    problems = []
    driver = spec.get("driver", "")
    if not driver or len(driver) > 63 or not _DNS_SUBDOMAIN.match(driver):
        problems.append(
            f"spec.driver: Invalid value: {driver!r}: must be a DNS subdomain of at most 63 characters"
        )
    pool = spec.get("pool") or {}
    pool_name = pool.get("name", "")
    if (
        not pool_name
        or len(pool_name) > 253
        or not all(_DNS_SUBDOMAIN.match(part) for part in pool_name.split("/"))
    ):
        problems.append(f"spec.pool.name: Invalid value: {pool_name!r}: must be DNS subdomains joined by /")
    if not isinstance(pool.get("generation"), int) or pool["generation"] < 0:
        problems.append("spec.pool.generation: Invalid value: must be greater than or equal to 0")
    if not isinstance(pool.get("resourceSliceCount"), int) or pool["resourceSliceCount"] <= 0:
        problems.append("spec.pool.resourceSliceCount: Invalid value: must be greater than zero")
    chosen = [
        key
        for key in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection")
        if spec.get(key) not in (None, False, "")
    ]
    if len(chosen) != 1:
        problems.append(
            "spec: Invalid value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
            f"`perDeviceNodeSelection` is required, got {chosen or 'none'}"
        )
    if spec.get("perDeviceNodeSelection") is False:
        problems.append("spec.perDeviceNodeSelection: Invalid value: false: must be true if set")
    node = spec.get("nodeName")
    if node is not None and (not isinstance(node, str) or not _DNS_SUBDOMAIN.match(node)):
        problems.append(f"spec.nodeName: Invalid value: {node!r}: must be a DNS subdomain")
    sets = [s for s in spec.get("sharedCounters") or [] if isinstance(s, dict)]
    devices = _devices(spec)
    if server.split_layout and sets and "devices" in spec and spec["devices"] is not None and devices:
        problems.append("spec: Invalid value: only one of `sharedCounters` or `devices` is allowed")
    problems += _counter_set_problems(sets, server)
    limit = _device_limit(devices, server)
    if len(devices) > limit:
        problems.append(f"spec.devices: Too many: {len(devices)}: must have at most {limit} items")
    names = [str(device.get("name", "")) for device in devices]
    for duplicate in sorted({name for name in names if names.count(name) > 1}):
        problems.append(f"spec.devices[].name: Duplicate value: {duplicate!r}")
    by_name = {s.get("name", ""): s for s in sets}
    per_device_nodes = spec.get("perDeviceNodeSelection") is True
    for index, device in enumerate(devices):
        problems += _device_problems(f"spec.devices[{index}]", device, by_name, server, per_device_nodes)
    if not server.split_layout:
        consumed = sum(
            len(c.get("counters") or {})
            for d in devices
            for c in d.get("consumesCounters") or []
            if isinstance(c, dict)
        )
        if consumed > MAX_SLICE_CONSUMPTIONS_1_34:
            problems.append(
                f"spec.devices: Too many: {consumed} counter consumptions: "
                f"at most {MAX_SLICE_CONSUMPTIONS_1_34}"
            )
    for index, owner in enumerate(obj["metadata"].get("ownerReferences") or []):
        for key in ("apiVersion", "kind", "name", "uid"):
            if not owner.get(key):
                problems.append(f"metadata.ownerReferences[{index}].{key}: Invalid value: must not be empty")
    return problems


def admit(obj: dict[str, Any], previous: Mapping[str, Any] | None, server: ServerVersion) -> list[str]:
    """Drop, default, canonicalise ``obj`` in place as the server would; the validation problems left."""
    spec = obj["spec"]
    drop_disabled_fields(spec, (previous or {}).get("spec"), server)
    default_and_canonicalise(spec)
    return slice_problems(obj, server)


# -- the scheduler's view of a pool ------------------------------------------------------------------------


def pool_problems(slices: Iterable[Mapping[str, Any]]) -> list[str]:
    """Why the allocator would not allocate from these slices' pools (empty: every pool is usable).

    Per pool (driver, pool name): only the highest generation counts; it must
    have ``resourceSliceCount`` slices; counter-set names are unique across
    them; every device's consumption names a set of the pool and counters of
    that set; device names are unique.
    """
    pools: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for slice_ in slices:
        spec = slice_["spec"]
        pools.setdefault((spec["driver"], spec["pool"]["name"]), []).append(spec)
    problems = []
    for (driver, name), specs in sorted(pools.items()):
        newest = max(spec["pool"]["generation"] for spec in specs)
        current = [spec for spec in specs if spec["pool"]["generation"] == newest]
        where = f"pool {driver}/{name} generation {newest}"
        counts = {spec["pool"]["resourceSliceCount"] for spec in current}
        if counts != {len(current)}:
            problems.append(f"{where}: {len(current)} slice(s), resourceSliceCount says {sorted(counts)}")
        sets: dict[str, Mapping[str, Any]] = {}
        for spec in current:
            for counter_set in spec.get("sharedCounters") or []:
                if counter_set["name"] in sets:
                    problems.append(f"{where}: counter set {counter_set['name']} defined twice")
                sets[counter_set["name"]] = counter_set.get("counters") or {}
        names: list[str] = []
        for spec in current:
            for device in _devices(spec):
                names.append(device["name"])
                for consumption in device.get("consumesCounters") or []:
                    known = sets.get(consumption["counterSet"])
                    if known is None:
                        problems.append(
                            f"{where}: {device['name']} consumes missing set {consumption['counterSet']}"
                        )
                        continue
                    for counter in consumption["counters"]:
                        if counter not in known:
                            problems.append(f"{where}: {device['name']} consumes missing counter {counter}")
        for duplicate in sorted({n for n in names if names.count(n) > 1}):
            problems.append(f"{where}: device {duplicate} published twice")
    return problems
