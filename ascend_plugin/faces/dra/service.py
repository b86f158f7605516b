"""The DRAPlugin gRPC service, v1 and v1beta1: the kubelet's calls on the DRA socket, for the preparer.

Kubelets of 1.34 and later speak v1, 1.32 and 1.33 speak v1beta1; the
messages of the two are wire-identical, so the v1beta1 service reads its
request as the v1 message and sends the v1 answer's bytes as its own.
"""

from __future__ import annotations

from ascend_plugin.faces.dra.claims import ClaimRef
from ascend_plugin.faces.dra.prepare import ClaimPreparer, Outcome
from ascend_plugin.kubelet_api.k8s.io.kubelet.pkg.apis.dra import v1, v1beta1


def _refs(claims: list[v1.Claim]) -> list[ClaimRef]:
    return [ClaimRef(claim.namespace, claim.name, claim.uid) for claim in claims]


def _prepared(outcome: Outcome) -> v1.NodePrepareResourceResponse:
    if outcome.claim is None:
        return v1.NodePrepareResourceResponse(error=outcome.error)
    return v1.NodePrepareResourceResponse(
        devices=[
            v1.Device(
                request_names=list(device.requests),
                pool_name=outcome.claim.pool,
                device_name=device.device,
                cdi_device_ids=list(device.cdi_ids),
                share_id=device.share_id,
            )
            for device in outcome.claim.devices
        ]
    )


class DraPluginV1(v1.DraPluginBase):
    """``/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin``."""

    def __init__(self, preparer: ClaimPreparer) -> None:
        self.preparer = preparer

    async def node_prepare_resources(
        self, message: v1.NodePrepareResourcesRequest
    ) -> v1.NodePrepareResourcesResponse:
        outcomes = await self.preparer.prepare(_refs(message.claims))
        return v1.NodePrepareResourcesResponse(
            claims={uid: _prepared(outcome) for uid, outcome in outcomes.items()}
        )

    async def node_unprepare_resources(
        self, message: v1.NodeUnprepareResourcesRequest
    ) -> v1.NodeUnprepareResourcesResponse:
        errors = await self.preparer.unprepare(_refs(message.claims))
        return v1.NodeUnprepareResourcesResponse(
            claims={uid: v1.NodeUnprepareResourceResponse(error=error) for uid, error in errors.items()}
        )


class DraPluginV1beta1(v1beta1.DraPluginBase):
    """``/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin``: the v1 service under the older name."""

    def __init__(self, v1_service: DraPluginV1) -> None:
        self.v1 = v1_service

    async def node_prepare_resources(
        self, message: v1beta1.NodePrepareResourcesRequest
    ) -> v1beta1.NodePrepareResourcesResponse:
        answer = await self.v1.node_prepare_resources(v1.NodePrepareResourcesRequest.parse(bytes(message)))
        return v1beta1.NodePrepareResourcesResponse.parse(bytes(answer))

    async def node_unprepare_resources(
        self, message: v1beta1.NodeUnprepareResourcesRequest
    ) -> v1beta1.NodeUnprepareResourcesResponse:
        answer = await self.v1.node_unprepare_resources(
            v1.NodeUnprepareResourcesRequest.parse(bytes(message))
        )
        return v1beta1.NodeUnprepareResourcesResponse.parse(bytes(answer))
