"""Checks of the kubelet's side: its device-plugin directory and its registration socket.

The plugin creates its own socket in that directory and registers through
``kubelet.sock`` in it; without either the kubelet never hears of the NPUs,
however healthy they are.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ascend_plugin.doctor.check import check
from ascend_plugin.doctor.context import Context
from ascend_plugin.doctor.findings import Finding, how_to_set

DIRECTORY = "kubelet-directory"
SOCKET = "kubelet-socket"

_DIRECTORY_FIX = (
    "mount the kubelet's device-plugin directory into the pod read-write (Helm kubeletDevicePluginPath, "
    "default /var/lib/kubelet/device-plugins; a kubelet started with another --root-dir keeps it there), "
    f"or set {how_to_set('device_plugin_path', '<directory>', helm=False)}"
)


@check("kubelet")
async def kubelet(context: Context) -> list[Finding]:
    """The directory exists and this process may create its socket there; kubelet.sock is a socket."""
    directory = context.host(str(context.settings.device_plugin_path))
    if not directory.is_dir():
        return [
            Finding.problem(DIRECTORY, f"{directory} is not a directory", fix=_DIRECTORY_FIX),
            Finding.skipped(SOCKET, f"not checked: {DIRECTORY} did not pass"),
        ]
    if os.access(directory, os.W_OK | os.X_OK):
        found = Finding.ok(DIRECTORY, f"{directory} exists and this process may create its socket there")
    else:
        found = Finding.problem(
            DIRECTORY,
            f"this process (uid {os.geteuid()}) cannot create its socket in {directory}",
            fix="run the plugin as root with the directory mounted read-write (the chart does both)",
        )
    return [found, _socket(directory / "kubelet.sock")]


def _socket(path: Path) -> Finding:
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return Finding.problem(
            SOCKET,
            f"{path} does not exist: no kubelet is serving the device-plugin API in this directory",
            fix="check that the kubelet runs on this node (`systemctl status kubelet`) and that this is its "
            "device-plugin directory (a kubelet with another --root-dir keeps it elsewhere)",
        )
    if not stat.S_ISSOCK(mode):
        return Finding.problem(
            SOCKET,
            f"{path} exists but is not a socket",
            fix="remove it and restart the kubelet, which creates the socket at start-up",
        )
    return Finding.ok(SOCKET, f"{path} is the kubelet's registration socket")
