"""Kubernetes naming rules the plugin must respect before the kubelet does."""

from __future__ import annotations

import re

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")

# The kubelet refuses device IDs longer than this in ListAndWatch.
MAX_DEVICE_ID_LENGTH = 63


def extended_resource_problem(name: str) -> str | None:
    """Why ``name`` is not a valid extended resource name (the kubelet's rules), or None if it is."""
    if name.startswith("requests."):
        return "must not start with 'requests.'"
    domain, slash, short = name.partition("/")
    if not slash:
        return "must be '<domain>/<name>', e.g. 'huawei.com/Ascend310'"
    if domain == "kubernetes.io" or domain.endswith(".kubernetes.io"):
        return "must not be in the kubernetes.io domain"
    if len(domain) > 253 or not _DNS_SUBDOMAIN.match(domain):
        return f"domain {domain!r} is not a DNS subdomain"
    if len(short) > 63 or not _QUALIFIED_NAME.match(short):
        return f"name {short!r} must be 1-63 characters of [A-Za-z0-9_.-], alphanumeric at both ends"
    return None
