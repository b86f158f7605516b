"""Volcano mode: the scheduler chooses the chips, the plugin hands over exactly those (docs/volcano.md).

Volcano binds a pod with the chips it chose (annotation ``huawei.com/<type>``);
Allocate asks for *some* n IDs and the chooser names the pod's chips, the
annotation writer puts them on the pod, and the kubelet-ID map lives with who
holds what (:mod:`ascend_plugin.holdings`). Nothing here is imported unless
``volcano`` is on (it needs kubernetes-asyncio), except :mod:`.unfollowed`.
"""

from __future__ import annotations

from ascend_plugin.settings import Settings


def checks_volcano_choices(settings: Settings) -> bool:
    """Whether to look for Volcano's choices the plugin does not follow: Volcano may place NPU pods here (it
    schedules from the device-info ConfigMap) and the device plugin serves with Volcano mode off.
    """
    return (
        settings.serve == "device-plugin"
        and not settings.volcano
        and settings.device_info_configmap
        and bool(settings.node_name)
    )
