"""Check of the fault configuration the plugin would judge chips by, and where each part comes from.

The plugin assembles it from ``fault_levels_file``, the built-in files and
Huawei's ConfigMap ``kube-system/mindx-dl-fault-config``
(:func:`~ascend_plugin.fault_policy.config.fault_config`); this check does the
same with the same code, reading the ConfigMap with the plugin's credentials
where it can, so an operator sees what is in force before the plugin logs it:

* ``fault-config``: each part and its source, and whether the ConfigMap
  exists and could be read (a 403 is a problem: the plugin would judge by the
  built-ins while the cluster means it to follow the ConfigMap);
* ``fault-config:<entry>``: each thing skipped or replaced inside the files,
  a warning (an error of Huawei's, a value replaced by its default, a problem).
"""

from __future__ import annotations

from ascend_plugin.doctor.check import check
from ascend_plugin.doctor.context import Context
from ascend_plugin.doctor.findings import Finding, Guide, NotApplicable, Status
from ascend_plugin.doctor.rbac import require_cluster
from ascend_plugin.fault_policy.config import CONFIGMAP_NAME, CONFIGMAP_NAMESPACE, base_config, fault_config
from ascend_plugin.fault_policy.documents import FaultConfigError

FAULT_CONFIG = "fault-config"
WHERE = f"{CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME}"
_FIX = "correct it (docs/faults.md says each file's fields and ranges); the plugin applies a change at once"


class _Unread(Exception):
    """The ConfigMap could not be read; the finding's status and what to do."""

    def __init__(self, status: Status, detail: str, fix: str, see: Guide | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.fix = fix
        self.see = see


@check(FAULT_CONFIG)
async def fault_configuration(context: Context) -> list[Finding]:
    """The fault configuration in force, its sources, and what in it was skipped."""
    settings = context.settings
    try:
        base = base_config(settings.fault_levels_file)
    except FaultConfigError as error:
        return [
            Finding.problem(
                FAULT_CONFIG,
                f"{error}; the plugin does not start with it",
                fix="correct fault_levels_file, or unset it for the built-in files",
                see=Guide.FAULT_CONFIG,
            )
        ]
    status, fix, see = Status.OK, None, None
    try:
        data, said = await _configmap(context)
    except _Unread as unread:
        data, said = None, str(unread)
        status, fix, see = unread.status, unread.fix, unread.see
    config = fault_config(base, data)
    findings = [Finding(FAULT_CONFIG, status, f"{said}; in force: {config.origin()}", fix, see)]
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


async def _configmap(context: Context) -> tuple[dict[str, str] | None, str]:
    """The ConfigMap's data (None: it does not exist) and what to say of it; _Unread when unreadable."""
    settings = context.settings
    if not settings.fault_config_configmap:
        return None, f"{WHERE} is not followed (fault_config_configmap is off)"
    try:
        require_cluster(context)
    except NotApplicable as reason:
        return None, f"{WHERE} was not looked at ({reason})"
    from ascend_plugin.kubeapi.client import CONFIGMAPS, connect, string_map
    from ascend_plugin.kubeapi.errors import Forbidden, KubeConfigError, KubeError, NotFound

    try:
        kube = await connect(settings.kubeconfig)
    except KubeConfigError as error:
        raise _Unread(
            Status.WARNING, f"{WHERE} was not read: {error}", "pass a working --kubeconfig"
        ) from error
    try:
        configmap = await kube.get(CONFIGMAPS, CONFIGMAP_NAME, CONFIGMAP_NAMESPACE)
    except NotFound:
        return None, f"{WHERE} does not exist"
    except Forbidden as error:
        raise _Unread(
            Status.PROBLEM,
            f"{WHERE} cannot be read: {error}",
            "add configmaps get, list, watch in kube-system to the plugin's Role (the chart grants "
            "them unless settings.faultConfigConfigmap is false)",
            Guide.RBAC,
        ) from error
    except KubeError as error:
        raise _Unread(
            Status.WARNING,
            f"{WHERE} cannot be read now ({error}); the plugin keeps what it has and reads it again",
            "check that the API server answers from the node",
        ) from error
    finally:
        await kube.close()
    data = string_map(configmap, "data")
    return data, f"{WHERE} read (keys: {', '.join(sorted(data)) or 'none'})"
