"""Checks of what the pod must be told about its node: NODE_NAME and HOST_IP (from the downward API).

Outside a pod (no KUBERNETES_SERVICE_HOST) nothing sets them, so their absence is reported as not checked.
"""

from __future__ import annotations

import ipaddress

from ascend_plugin.doctor.check import check
from ascend_plugin.doctor.context import Context
from ascend_plugin.doctor.findings import Finding, Guide

NODE_NAME = "node-name"
HOST_IP = "host-ip"


@check("node-identity")
async def node_identity(context: Context) -> list[Finding]:
    """NODE_NAME is set; HOST_IP is set and an IP address (outside a pod: only when given)."""
    in_pod = "KUBERNETES_SERVICE_HOST" in context.environ
    return [_node_name(context.settings.node_name, in_pod), _host_ip(context.settings.host_ip, in_pod)]


def _outside_a_pod(name: str, variable: str, flag: str) -> Finding:
    return Finding.skipped(
        name,
        f"not checked: not in a pod (no KUBERNETES_SERVICE_HOST), where the chart sets {variable} from the "
        f"downward API; give {flag} to check it here",
    )


def _node_name(value: str | None, in_pod: bool) -> Finding:
    if value:
        return Finding.ok(NODE_NAME, f"NODE_NAME={value}")
    if not in_pod:
        return _outside_a_pod(NODE_NAME, "NODE_NAME", "--node-name <node>")
    return Finding.problem(
        NODE_NAME,
        "NODE_NAME is not set: the plugin serves the kubelet, but keeps no node labels, no device-info "
        "ConfigMap, no config reload and no node Events",
        fix="the chart sets it from the downward API (fieldRef spec.nodeName); by hand: "
        "env NODE_NAME=<node name> or --node-name",
        see=Guide.NODE_IDENTITY,
    )


def _host_ip(value: str | None, in_pod: bool) -> Finding:
    if not value and not in_pod:
        return _outside_a_pod(HOST_IP, "HOST_IP", "--host-ip <node IP>")
    fix = (
        "the chart sets it from the downward API (fieldRef status.hostIP); by hand: "
        "env HOST_IP=<node IP> or --host-ip"
    )
    if not value:
        return Finding.problem(
            HOST_IP,
            "HOST_IP is not set: the node's address is unknown ('host ip is invalid')",
            fix=fix,
            see=Guide.NODE_IDENTITY,
        )
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return Finding.problem(
            HOST_IP,
            f"HOST_IP={value!r} is not an IP address ('host ip is invalid')",
            fix=fix,
            see=Guide.NODE_IDENTITY,
        )
    return Finding.ok(HOST_IP, f"HOST_IP={address}")
