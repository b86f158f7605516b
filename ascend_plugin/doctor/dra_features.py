"""Check that the API server keeps the DRA features the settings ask for (serve=dra).

Asked with dry runs, as the driver does (:mod:`ascend_plugin.faces.dra.server_features`).
"""

from __future__ import annotations

from ascend_plugin.doctor.check import Findings, check
from ascend_plugin.doctor.context import Context
from ascend_plugin.doctor.findings import Finding, NotApplicable
from ascend_plugin.doctor.rbac import require_cluster

DRA_FEATURES = "dra-features"


@check(DRA_FEATURES)
async def dra_features(context: Context) -> Findings:
    """Each DRA feature the settings ask for is kept by the API server, or the finding says what is not."""
    settings = context.settings
    if settings.serve != "dra":
        raise NotApplicable("only with serve=dra")
    require_cluster(context)
    from ascend_plugin.faces.dra.server_features import Feature, probe
    from ascend_plugin.kubeapi.client import connect
    from ascend_plugin.kubeapi.errors import KubeError

    wanted = {Feature.TAINTS: settings.dra_device_taints is True}
    if settings.dra_device_taints is False:
        del wanted[Feature.TAINTS]
    if settings.vnpu == "dynamic":
        wanted[Feature.PARTITIONS] = True
    if settings.share_count > 1:
        wanted[Feature.SHARES] = True
    assert settings.node_name  # require_cluster
    try:
        kube = await connect(settings.kubeconfig)
        try:
            verdicts = await probe(kube, settings.dra_driver_name, settings.node_name, list(wanted))
        finally:
            await kube.close()
    except KubeError as error:
        return Finding.problem(
            DRA_FEATURES,
            f"cannot ask the API server which DRA features it keeps: {error}",
            fix="the API server must be reachable, and the plugin allowed to create resourceslices "
            "(see the rbac findings)",
        )
    findings = []
    for feature, verdict in sorted(verdicts.items(), key=lambda item: item[0].value):
        name = f"{DRA_FEATURES}:{feature.gate}"
        if verdict.kept:
            findings.append(Finding.ok(name, f"the API server keeps {feature.fields} ({feature.gate})"))
        elif wanted[feature]:
            findings.append(
                Finding.warning(
                    name,
                    verdict.why,
                    fix=f"enable the {feature.gate} feature gate on kube-apiserver and kube-scheduler (on by "
                    "default from Kubernetes 1.36), or leave the setting that asks for it at its default",
                )
            )
        else:
            findings.append(Finding.ok(name, f"not kept, which the default allows: {verdict.why}"))
    return findings
