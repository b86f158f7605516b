"""Checks of the kubelet's side: its device-plugin directory, its registration socket, the instance lock.

Only one instance serves a directory (:mod:`ascend_plugin.instance_lock`): the doctor names the holder.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ascend_plugin.doctor.check import check
from ascend_plugin.doctor.context import Context
from ascend_plugin.doctor.findings import Finding, how_to_set
from ascend_plugin.instance_lock import lock_state
from ascend_plugin.path_facts import PathUnusable
from ascend_plugin.settings import served_directory

DIRECTORY = "kubelet-directory"
SOCKET = "kubelet-socket"
INSTANCE = "instance-lock"

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
            _instance(context.host(str(served_directory(context.settings)))),
        ]
    if os.access(directory, os.W_OK | os.X_OK):
        found = Finding.ok(DIRECTORY, f"{directory} exists and this process may create its socket there")
    else:
        found = Finding.problem(
            DIRECTORY,
            f"this process (uid {os.geteuid()}) cannot create its socket in {directory}",
            fix="run the plugin as root with the directory mounted read-write (the chart does both)",
        )
    return [
        found,
        _socket(directory / "kubelet.sock"),
        _instance(context.host(str(served_directory(context.settings)))),
    ]


def _instance(directory: Path) -> Finding:
    """Who holds the instance lock on the served directory: informational, a held lock is the normal case."""
    if not directory.is_dir():
        return Finding.skipped(INSTANCE, f"not checked: {directory} is not a directory")
    try:
        state = lock_state(directory)
    except PathUnusable as error:
        return Finding.skipped(INSTANCE, f"not checked: {error}")
    if not state.held:
        return Finding.ok(
            INSTANCE, f"no plugin instance holds the lock on {directory}: one started now serves it"
        )
    holder = state.holder.describe() if state.holder is not None else "a process that left no holder note"
    return Finding.ok(
        INSTANCE,
        f"the lock on {directory} is held by {holder}: that instance serves this node, and one started now "
        "waits until it exits",
    )


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
