"""ContainerGrant -> the kubelet's ContainerAllocateResponse."""

from __future__ import annotations

from ascend_plugin.handover.grant import ContainerGrant
from ascend_plugin.kubelet_api.v1beta1 import CdiDevice, ContainerAllocateResponse, DeviceSpec, Mount


def allocate_response(grant: ContainerGrant) -> ContainerAllocateResponse:
    """The answer for one container."""
    return ContainerAllocateResponse(
        envs=dict(grant.envs),
        devices=[
            DeviceSpec(
                container_path=node.container_path, host_path=node.host_path, permissions=node.permissions
            )
            for node in grant.devices
        ],
        mounts=[
            Mount(container_path=mount.container_path, host_path=mount.host_path, read_only=mount.read_only)
            for mount in grant.mounts
        ],
        cdi_devices=[CdiDevice(name=name) for name in grant.cdi_devices],
        annotations=dict(grant.annotations),
    )
