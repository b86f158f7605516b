"""CDI specs per prepared claim (``<vendor>-<class>-claim-<uid>.json``, a device per ``<uid>-<device>``),
so no runtime cache serves one claim another's; content and atomic write are ``handover.cdi``'s.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

from ascend_plugin.grpc_guard.refusals import BadRequest
from ascend_plugin.handover.cdi import spec_content, write_spec
from ascend_plugin.handover.host_devices import HostDevices
from ascend_plugin.offers.base import DeviceNode

# What a claim UID may be to name a file and a CDI device: CDI's device-name alphabet (no '/', no
# leading '.'). API servers assign UUIDs, well inside it.
_CLAIM_UID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")


class ClaimSpecs:
    """The per-claim specs of one CDI kind in one directory."""

    def __init__(self, kind: str, spec_dir: Path, host: HostDevices) -> None:
        self.kind = kind
        self.spec_dir = spec_dir
        self.host = host
        self._prefix = f"{kind.replace('/', '-')}-claim-"

    def path(self, uid: str) -> Path:
        """The spec file of a claim; BadRequest for a UID that cannot name one."""
        if not _CLAIM_UID.fullmatch(uid):
            raise BadRequest(
                "malformed",
                f"claim UID {uid!r} cannot name a CDI spec file and device: a claim UID here is letters, "
                "digits, '_', '.', ':' and '-', beginning with a letter or digit (API servers assign UUIDs)",
            )
        return self.spec_dir / f"{self._prefix}{uid}.json"

    def device_id(self, uid: str, device: str) -> str:
        """The fully qualified CDI ID of a device of a claim, ``<kind>=<uid>-<device>``."""
        return f"{self.kind}={uid}-{device}"

    def write(self, uid: str, nodes: Mapping[str, DeviceNode]) -> Mapping[str, str]:
        """Write the claim's spec, a CDI device per device with its node (blocking); their CDI IDs. OSError
        when the directory refuses."""
        named = {f"{uid}-{device}": node for device, node in nodes.items()}
        write_spec(self.path(uid), spec_content(self.kind, named, self.host))
        return {device: self.device_id(uid, device) for device in nodes}

    def remove(self, uid: str) -> None:
        """Remove the claim's spec, if there is one (blocking). OSError when it cannot be removed."""
        if _CLAIM_UID.fullmatch(uid):  # a UID that cannot name a spec has none
            self.path(uid).unlink(missing_ok=True)

    def listed(self) -> set[str]:
        """The UIDs of the claims with a spec file in the directory; OSError when it cannot be listed."""
        if not self.spec_dir.exists():
            return set()
        names = [path.name for path in self.spec_dir.iterdir() if path.name.startswith(self._prefix)]
        uids = {
            name.removeprefix(self._prefix).removesuffix(".json") for name in names if name.endswith(".json")
        }
        return {uid for uid in uids if _CLAIM_UID.fullmatch(uid)}

    def nodes(self, uid: str) -> dict[str, str]:
        """What the claim's spec hands over: device -> its node's host path (blocking). OSError when it
        cannot be read, ValueError when it is not ours."""
        spec = json.loads(self.path(uid).read_text(encoding="utf-8"))
        found: dict[str, str] = {}
        for device in spec.get("devices", []) if isinstance(spec, dict) else ():
            name = device.get("name") if isinstance(device, dict) else None
            edits = device.get("containerEdits", {}) if isinstance(device, dict) else {}
            nodes = edits.get("deviceNodes") if isinstance(edits, dict) else None
            host = (
                nodes[0].get("hostPath")
                if isinstance(nodes, list) and nodes and isinstance(nodes[0], dict)
                else None
            )
            if not isinstance(name, str) or not name.startswith(f"{uid}-") or not isinstance(host, str):
                raise ValueError(f"{self.path(uid)}: device {device!r} is not one this driver writes")
            found[name.removeprefix(f"{uid}-")] = host
        if not found:
            raise ValueError(f"{self.path(uid)} names no device")
        return found
