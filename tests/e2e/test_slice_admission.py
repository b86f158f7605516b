"""What the real API server does to the ResourceSlices a driver publishes, and the stand-in held to it.

Each scenario of slice_scenarios.py is sent to the real kube-apiserver of the session's release and
its outcome (stored as what, or refused naming which fields) asserted; so are the slices the plugin
itself publishes for representative nodes (plugin_slices.py). The parity test sends the scenarios
the loopback stand-in plays (ascend_plugin/testing/kube_apiserver.py) to it and to the real server,
and fails naming each scenario where they answer differently, with the first difference.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest
from cluster import Cluster
from dra_harness import NODE
from plugin_slices import NODES, Publication, publication
from slice_scenarios import SCENARIOS, the_plugin_s
from slice_targets import RealServer, StandIn
from slice_writes import Json, Scenario, facts, slice_

from ascend_plugin.faces.dra.slices import first_difference
from ascend_plugin.kubeapi.client import RESOURCE_SLICES, connect
from ascend_plugin.kubeapi.errors import Forbidden

BY_NAME = {scenario.name: scenario for scenario in SCENARIOS}


@pytest.fixture(scope="module")
def real(control_plane: Cluster) -> Iterator[RealServer]:
    server = RealServer(control_plane)
    yield server
    server.close()


@pytest.fixture(scope="module")
def publish(kubernetes_version: str) -> Callable[[str], Publication]:
    """What the plugin publishes for a node of NODES, captured once per module."""
    return functools.cache(lambda node: publication(NODES[node], kubernetes_version))


def plugin_scenario(node: str, publish: Callable[[str], Publication]) -> Scenario:
    sent = publish(node)
    return the_plugin_s(node, sent.probes, sent.slices, NODE)


def differs(expected: Json, found: Json) -> str:
    return f"{first_difference(expected, found)} (sent: expected, stored: found)"


@pytest.mark.parametrize("name", list(BY_NAME))
def test_the_real_api_server(real: RealServer, name: str) -> None:
    scenario = BY_NAME[name]
    found = facts(scenario.run(real))
    expected = scenario.expected(real.release)
    assert found == expected, differs(expected, found)


@pytest.mark.parametrize("node", list(NODES))
def test_the_real_api_server_stores_the_plugin_s_slices_as_sent(
    real: RealServer, publish: Callable[[str], Publication], node: str
) -> None:
    scenario = plugin_scenario(node, publish)
    found = facts(scenario.run(real))
    expected = scenario.expected(real.release)
    assert found == expected, differs(expected, found)


def test_the_stand_in_answers_as_the_real_api_server(
    real: RealServer, control_plane: Cluster, kubernetes_version: str, publish: Callable[[str], Publication]
) -> None:
    assert control_plane.pki is not None
    stand_in = StandIn(kubernetes_version, control_plane.pki.ca)
    scenarios = [s for s in SCENARIOS if s.stand_in] + [plugin_scenario(node, publish) for node in NODES]
    try:
        differences = []
        for scenario in scenarios:
            theirs, ours = scenario.run(real), scenario.run(stand_in)
            if theirs != ours:
                differences.append(f"{scenario.name}: {first_difference(theirs, ours)}")
    finally:
        stand_in.close()
    legend = "the first difference of each (sent: the real server's answer, stored: the stand-in's)"
    assert not differences, f"the stand-in answers {len(differences)} scenario(s) otherwise; {legend}:\n" + (
        "\n".join(differences)
    )


def test_the_plugin_names_the_rule_a_refused_slice_needs(real: RealServer, control_plane: Cluster) -> None:
    """The plugin's own client turns the real server's 403 into the ClusterRole rule to add."""
    with real.without_permission() as api:
        kubeconfig = control_plane.kubeconfig_for("no-role", api.token, "no-role")
        refusal = anyio.run(_created_by_the_plugin, kubeconfig)
    assert 'in API group "resource.k8s.io"' in refusal.message
    assert '{apiGroups: ["resource.k8s.io"], resources: ["resourceslices"], verbs: ["create"]}' in str(
        refusal
    )


async def _created_by_the_plugin(kubeconfig: Path) -> Forbidden:
    kube = await connect(kubeconfig)
    try:
        with pytest.raises(Forbidden) as raised:
            await kube.create(RESOURCE_SLICES, "", slice_([{"name": "npu-0"}]))
    finally:
        await kube.close()
    return raised.value
