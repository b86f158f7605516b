"""What the kubelet sends the DRA driver's two sockets: the data the request guard (``grpc_guard``) checks.

UIDs are bounded at 128 to keep CDI names, file names and log lines short. Both sockets answer only the
owner of the kubelet's plugin registry directory: an Unprepare from anyone else would remove a CDI spec.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Final

from ascend_plugin.grpc_guard import wire_check as wire
from ascend_plugin.grpc_guard.peers import OwnerOf
from ascend_plugin.grpc_guard.server import RequestRules
from ascend_plugin.kubelet_api.k8s.io.kubelet.pkg.apis.dra import v1, v1beta1
from ascend_plugin.kubelet_api.pluginregistration import InfoRequest, RegistrationStatus
from ascend_plugin.kubelet_api.v1alpha1 import NodeWatchResourcesRequest

MAX_NAMESPACE: Final = 63
MAX_CLAIM_NAME: Final = 253
MAX_CLAIM_UID: Final = 128
MAX_CLAIMS_PER_CALL: Final = 128
MAX_REGISTRATION_ERROR: Final = 16 * 1024  # the kubelet's reason for refusing a registration: a sentence

CLAIMS: Final = "claims"

_CLAIM = wire.MessageShape(
    "Claim",
    {
        1: wire.text_field(
            "namespace", wire.TextLimit("namespaces", MAX_NAMESPACE, " (a DNS label)"), required=True
        ),
        2: wire.text_field("uid", wire.TextLimit("claim UIDs", MAX_CLAIM_UID), required=True),
        3: wire.text_field(
            "name", wire.TextLimit("claim names", MAX_CLAIM_NAME, " (a DNS subdomain)"), required=True
        ),
    },
)


def _claims_request(name: str) -> wire.MessageShape:
    return wire.MessageShape(name, {1: wire.message_field("claims", _CLAIM, entries=CLAIMS, required=True)})


_PREPARE = _claims_request("NodePrepareResourcesRequest")
_UNPREPARE = _claims_request("NodeUnprepareResourcesRequest")

# Every request message of the DRA socket: the DRA service, v1 and v1beta1 alike, and the health stream.
DRA_SHAPES: Mapping[type, wire.MessageShape] = {
    v1.NodePrepareResourcesRequest: _PREPARE,
    v1beta1.NodePrepareResourcesRequest: _PREPARE,
    v1.NodeUnprepareResourcesRequest: _UNPREPARE,
    v1beta1.NodeUnprepareResourcesRequest: _UNPREPARE,
    NodeWatchResourcesRequest: wire.MessageShape("NodeWatchResourcesRequest"),
}

# Every request message of the registration socket.
REGISTRATION_SHAPES: Mapping[type, wire.MessageShape] = {
    InfoRequest: wire.MessageShape("InfoRequest"),
    RegistrationStatus: wire.MessageShape(
        "RegistrationStatus",
        {
            1: wire.number_field("plugin_registered"),
            2: wire.text_field("error", wire.TextLimit("registration errors", MAX_REGISTRATION_ERROR)),
        },
    ),
}

_LIMITS: wire.RequestLimits = {
    CLAIMS: wire.EntryLimit(
        MAX_CLAIMS_PER_CALL, f"the {MAX_CLAIMS_PER_CALL} claims one call may name (a kubelet sends one pod's)"
    )
}


def kubelet_rules(shapes: Mapping[type, wire.MessageShape], registry_dir: Path) -> RequestRules:
    """What a socket of the driver accepts (DRA_SHAPES or REGISTRATION_SHAPES), from the kubelet."""
    return RequestRules(shapes, lambda: _LIMITS, OwnerOf(registry_dir, "the kubelet"))
