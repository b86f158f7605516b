"""The API server's bad days: 403, 409, 410, 500, wrong credentials, no config, or not there at all.

Each part retries with backoff and says clearly what is wrong; none of it ever
reaches the kubelet side.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from fake_apiserver import FakeApiServer
from kube_harness import NODE, make_inventory, running, set_faults
from log_records import records
from plugin_harness import FakeNode, health_of, registered, running_plugin
from waiting import until, wait_for

from ascend_plugin.faces.kube.device_info import DeviceInfoPublisher
from ascend_plugin.faces.kube.labels import NodeLabeller, node_reflector, plan_labels
from ascend_plugin.fault_policy.faults import FaultLevel
from ascend_plugin.kubeapi.client import Kube, connect
from ascend_plugin.kubeapi.errors import KubeConfigError
from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio

RESOURCE = "huawei.com/Ascend310"
CONFIGMAP = f"mindx-dl-deviceinfo-{NODE}"
RETRY = "ascend_plugin.kubeapi.retry"  # every part's failed attempts and recoveries


def labeller(kube: Kube, short_tmp: Path) -> tuple[Callable[[], Awaitable[None]], ...]:
    """The node labels' parts: the Node's reflector and the labeller reading it."""
    plan = plan_labels(make_inventory(short_tmp), "ascend-device-plugin.io")
    labels = NodeLabeller(kube, node_reflector(kube, NODE), NODE, plan)
    return labels.node.run, labels.run


async def test_missing_rbac_names_the_rule_to_add_and_recovers_once_granted(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ascend_plugin")
    apiserver.add_node(NODE)
    forbidden = apiserver.inject(403, "patch", "nodes")
    async with running(*labeller(kube, short_tmp)):
        refusals = await until(
            lambda: records(caplog, RETRY, level=logging.ERROR, part="node labels", error="Forbidden"),
            "the refusal logged, at ERROR: only an operator can fix it",
        )
        # What the operator acts on: the object refused, the rule to add, where the docs explain it.
        message = refusals[0].getMessage()
        assert f"patch nodes {NODE}" in message
        assert '{apiGroups: [""], resources: ["nodes"], verbs: ["patch"]}' in message
        assert "docs/kubernetes.md#rbac" in message
        # Granted (the injection is spent): the next attempt goes through.
        forbidden.times = forbidden.hits
        await until(lambda: apiserver.node_labels(NODE).get("accelerator") == "huawei-Ascend310", "labels")
        # The labeller logs its recovery once the patch's answer is back, which may be after the
        # server already shows the labels: wait for the line, not for a moment.
        await until(
            lambda: records(caplog, RETRY, level=logging.INFO, part="node labels"), "the recovery logged"
        )


async def test_forbidden_configmap_writes_name_their_verb(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    apiserver.inject(403, "create", "configmaps", times=1)
    inventory = make_inventory(short_tmp)
    async with running(DeviceInfoPublisher(kube, inventory, "kube-system", CONFIGMAP, 300).run):
        await until(
            lambda: apiserver.get("configmaps", CONFIGMAP, "kube-system") is not None, "the ConfigMap"
        )
    (refusal,) = records(
        caplog,
        RETRY,
        level=logging.ERROR,
        part=f"device-info ConfigMap kube-system/{CONFIGMAP}",
        error="Forbidden",
    )
    assert '{apiGroups: [""], resources: ["configmaps"], verbs: ["create"]}' in refusal.getMessage()


async def test_server_errors_are_retried(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=RETRY)
    apiserver.inject(500, "get", "configmaps", times=2)
    inventory = make_inventory(short_tmp)
    async with running(DeviceInfoPublisher(kube, inventory, "kube-system", CONFIGMAP, 300).run):
        await until(
            lambda: apiserver.get("configmaps", CONFIGMAP, "kube-system") is not None, "the ConfigMap"
        )
    assert len(apiserver.requests_of("get", "configmaps", 500)) == 2
    # The first failure at WARNING, the same one again only at DEBUG: one line per distinct problem.
    said = records(caplog, RETRY, error="ServerError")
    assert [(record.levelno, record.attempt) for record in said] == [  # type: ignore[attr-defined]
        (logging.WARNING, 1),
        (logging.DEBUG, 2),
    ]


async def test_repeated_conflicts_end_in_a_write(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path
) -> None:
    inventory = make_inventory(short_tmp)
    async with running(DeviceInfoPublisher(kube, inventory, "kube-system", CONFIGMAP, 300).run):
        await until(
            lambda: apiserver.get("configmaps", CONFIGMAP, "kube-system") is not None, "the ConfigMap"
        )
        apiserver.inject(409, "update", "configmaps", times=3)
        set_faults(inventory, "Ascend310-0", (0x80E01801, FaultLevel.SeparateNPU))
        await until(lambda: bool(apiserver.requests_of("update", "configmaps", 200)), "the update")
    assert len(apiserver.requests_of("update", "configmaps", 409)) == 3


async def test_an_expired_watch_lists_again_and_misses_nothing(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path
) -> None:
    apiserver.add_node(NODE)
    async with running(*labeller(kube, short_tmp)):
        await until(lambda: "accelerator" in apiserver.node_labels(NODE), "labels")
        lists = len(apiserver.requests_of("list", "nodes"))
        apiserver.expire_watches()
        await until(lambda: len(apiserver.requests_of("list", "nodes")) > lists, "a new list after 410")
        assert any(r.verb == "watch" and r.resource == "nodes" for r in apiserver.requests)

        node = apiserver.get("nodes", NODE)
        assert node is not None
        del node["metadata"]["labels"]["accelerator"]
        apiserver.put("nodes", node)
        await until(
            lambda: "accelerator" in apiserver.node_labels(NODE), "the label put back after the relist"
        )


async def test_an_injected_watch_error_410_leads_to_a_relist(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path
) -> None:
    apiserver.add_node(NODE)
    apiserver.inject(410, "watch", "nodes", times=1)
    async with running(*labeller(kube, short_tmp)):
        await until(lambda: len(apiserver.requests_of("list", "nodes")) >= 2, "the relist")
        node = apiserver.get("nodes", NODE)
        assert node is not None
        node["metadata"]["labels"]["accelerator"] = "someone-else"
        apiserver.put("nodes", node)
        await until(lambda: apiserver.node_labels(NODE).get("accelerator") == "huawei-Ascend310", "put back")


async def test_wrong_credentials_are_an_error_not_a_crash(
    apiserver: FakeApiServer, short_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    apiserver.add_node(NODE)
    impostor = FakeApiServer(token="not-the-token", port=apiserver.port)
    kube = await connect(impostor.write_kubeconfig(short_tmp / "impostor.kubeconfig"))
    try:
        async with running(*labeller(kube, short_tmp)):
            await until(
                lambda: records(caplog, RETRY, level=logging.ERROR, part="node labels", error="Unauthorized"),
                "the 401 logged, at ERROR",
            )
    finally:
        await kube.close()
    assert not apiserver.requests_of("patch", "nodes")


async def test_api_server_absent_the_kubelet_side_carries_on_and_catches_up(
    apiserver: FakeApiServer,
    kubeconfig: Path,
    kubelet: KubeletStandIn,
    node: FakeNode,
    *,
    plugin_dir: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    apiserver.add_node(NODE)
    await apiserver.stop()
    settings = node.settings(plugin_dir, node_name=NODE, kubeconfig=kubeconfig)
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        await until(lambda: records(caplog, RETRY, error="Unreachable"), "the kube side noticing")
        # The kubelet side works as ever: health changes reach the kubelet.
        node.write({"chip_name": "310B1", "chips": [{"phy_id": 0, "health": 0, "fault_codes": ["80E01801"]}]})
        await wait_for(kubelet, lambda k: health_of(RESOURCE, "Ascend310-0")(k) == "Unhealthy", "unhealthy")
        assert app.ready
        assert kubelet.resources[RESOURCE].stream_open

        await apiserver.start()
        await until(lambda: apiserver.node_labels(NODE).get("accelerator") == "huawei-Ascend310", "labels")
        await until(
            lambda: (
                "Ascend310-0"
                in (apiserver.get("configmaps", CONFIGMAP, "kube-system") or {})
                .get("data", {})
                .get("DeviceInfoCfg", "")
            ),
            "the ConfigMap",
        )
    assert len(kubelet.registrations) == 1


async def test_no_cluster_config_is_explained_and_the_plugin_serves_anyway(
    kubelet: KubeletStandIn,
    node: FakeNode,
    plugin_dir: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    async with running_plugin(node.settings(plugin_dir, node_name=NODE)) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        explained = await until(
            lambda: records(
                caplog, RETRY, level=logging.ERROR, part="Kubernetes client", error="KubeConfigError"
            ),
            "the explanation",
        )
        assert app.ready
    # The settings that fix it, named.
    assert "--kubeconfig" in explained[0].getMessage()
    assert "ASCEND_DP_KUBECONFIG" in explained[0].getMessage()


async def test_a_broken_kubeconfig_is_a_typed_error_naming_the_file(short_tmp: Path) -> None:
    broken = short_tmp / "broken.kubeconfig"
    broken.write_text("clusters: [", encoding="utf-8")
    with pytest.raises(KubeConfigError, match=f"cannot load the kubeconfig {broken}"):
        await connect(broken)
    with pytest.raises(KubeConfigError, match="cannot load the kubeconfig"):
        await connect(short_tmp / "missing.kubeconfig")
