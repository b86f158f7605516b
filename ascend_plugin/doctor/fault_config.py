"""Check of the fault configuration the plugin would judge chips by, and where each part comes from.

The plugin's own code (:func:`~ascend_plugin.fault_policy.config.fault_config`), on the plugin's credentials.
"""

from __future__ import annotations

import dataclasses

from ascend_plugin.doctor.check import Findings, check
from ascend_plugin.doctor.context import Context
from ascend_plugin.doctor.findings import Finding, Guide, NotApplicable, Status
from ascend_plugin.doctor.rbac import require_cluster
from ascend_plugin.fault_policy.config import CONFIGMAP_NAME, CONFIGMAP_NAMESPACE, base_config, fault_config
from ascend_plugin.fault_policy.documents import FaultConfigError

FAULT_CONFIG = "fault-config"
WHERE = f"{CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME}"
_FIX = "correct it (docs/faults.md says each file's fields and ranges); the plugin applies a change at once"


@check(FAULT_CONFIG)
async def fault_configuration(context: Context) -> Findings:
    """The fault configuration in force, its sources, and what in it was skipped."""
    settings = context.settings
    try:
        base = base_config(settings.fault_levels_file)
    except FaultConfigError as error:
        return Finding.problem(
            FAULT_CONFIG,
            f"{error}; the plugin does not start with it",
            fix="correct fault_levels_file, or unset it for the built-in files",
            see=Guide.FAULT_CONFIG,
        )
    data, read = await _configmap(context)
    config = fault_config(base, data)
    findings = [dataclasses.replace(read, detail=f"{read.detail}; in force: {config.origin()}")]
    for note in config.notes:
        findings.append(
            Finding(
                f"{FAULT_CONFIG}:{note.entry}",
                Status.PROBLEM if note.error else Status.WARNING,
                str(note),
                _FIX,
                Guide.FAULT_CONFIG,
            )
        )
    return findings


async def _configmap(context: Context) -> tuple[dict[str, str] | None, Finding]:
    """The ConfigMap's data (None: not there or not read) and the finding on reading it."""
    settings = context.settings
    if not settings.fault_config_configmap:
        return None, Finding.ok(FAULT_CONFIG, f"{WHERE} is not followed (fault_config_configmap is off)")
    try:
        require_cluster(context)
    except NotApplicable as reason:
        return None, Finding.ok(FAULT_CONFIG, f"{WHERE} was not looked at ({reason})")
    from ascend_plugin.kubeapi.client import CONFIGMAPS, connect, string_map
    from ascend_plugin.kubeapi.errors import Forbidden, KubeConfigError, KubeError, NotFound

    try:
        kube = await connect(settings.kubeconfig)
    except KubeConfigError as error:
        return None, Finding.warning(
            FAULT_CONFIG, f"{WHERE} was not read: {error}", "pass a working --kubeconfig"
        )
    try:
        configmap = await kube.get(CONFIGMAPS, CONFIGMAP_NAME, CONFIGMAP_NAMESPACE)
    except NotFound:
        return None, Finding.ok(FAULT_CONFIG, f"{WHERE} does not exist")
    except Forbidden as error:
        return None, Finding.problem(
            FAULT_CONFIG,
            f"{WHERE} cannot be read: {error}",
            "add configmaps get, list, watch in kube-system to the plugin's Role (the chart grants "
            "them unless settings.faultConfigConfigmap is false)",
            Guide.RBAC,
        )
    except KubeError as error:
        return None, Finding.warning(
            FAULT_CONFIG,
            f"{WHERE} cannot be read now ({error}); the plugin keeps what it has and reads it again",
            "check that the API server answers from the node",
        )
    finally:
        await kube.close()
    data = string_map(configmap, "data")
    return data, Finding.ok(FAULT_CONFIG, f"{WHERE} read (keys: {', '.join(sorted(data)) or 'none'})")
