"""Check that no other plugin serves this plugin's socket names (Huawei's uses the same: Ascend910.sock).

Each socket of our names is dialled without sending anything: one served by another process is a problem.
"""

from __future__ import annotations

from pathlib import Path

from ascend_plugin.doctor.check import check
from ascend_plugin.doctor.context import Context
from ascend_plugin.doctor.findings import Finding
from ascend_plugin.other_plugins import HUAWEIS_DAEMONSETS, MIGRATION, foreign_socket, socket_server
from ascend_plugin.settings import dra_plugin_dir

OTHER_PLUGINS = "other-plugins"


def our_sockets(context: Context) -> list[Path]:
    """The sockets the plugin would serve, as far as the settings (and the family, once found) name them."""
    settings = context.settings
    if settings.serve == "dra":
        registration = context.host(str(settings.dra_registry_path)) / f"{settings.dra_driver_name}-reg.sock"
        return [registration, context.host(str(dra_plugin_dir(settings))) / "dra.sock"]
    directory = context.host(str(settings.device_plugin_path))
    if context.family is not None:  # the resource's own socket, and those of its vNPU resources
        short = context.table.resource_name.rpartition("/")[2]
        patterns = [f"{short}.sock", f"{short}-*.sock"]
    else:  # the family is not known: every name Huawei's plugin uses
        patterns = ["Ascend*.sock"]
    if settings.socket_name:
        patterns.append(settings.socket_name)
    return sorted({path for pattern in patterns for path in directory.glob(pattern)})


@check(OTHER_PLUGINS)
async def other_plugins(context: Context) -> list[Finding]:
    """No process but this plugin serves its socket names."""
    findings = []
    for path in our_sockets(context):
        server = socket_server(path)
        if server is not None and not server.ours:
            findings.append(
                Finding.problem(
                    OTHER_PLUGINS,
                    foreign_socket(path, server),
                    fix="remove the other plugin first: kubectl -n kube-system get daemonsets (Huawei's are "
                    f"named {HUAWEIS_DAEMONSETS}), then kubectl -n kube-system delete daemonset <name>; "
                    f"see {MIGRATION}",
                )
            )
    if findings:
        return findings
    where = ", ".join(str(path) for path in our_sockets(context)) or "the served directory"
    return [Finding.ok(OTHER_PLUGINS, f"no other process serves this plugin's socket names ({where})")]
