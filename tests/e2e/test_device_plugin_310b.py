"""An Atlas 200I A2 (one 310B1, one AI core) beside the real kubelet: served, and a pod runs on it.

Huawei's plugin exits on this board (``invalid ai core num 1.000000``); here the chart's 310B values
serve it as ``huawei.com/Ascend310: 1``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from chart_harness import ChartRenderer, Rendering
from cluster import Cluster
from node_plugin import NodePlugin, node_plugin, wait_for
from pods import delete, node_resources, pod, running, seen

from backends.fake import FakeChip, FakeScenario

RESOURCE = "huawei.com/Ascend310"


@pytest.fixture(scope="module")
def plugin(
    cluster: Cluster, chart: ChartRenderer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[NodePlugin]:
    rendering: Rendering = chart.render_file("values-310b.yaml")
    board = FakeScenario(chip_name="310B1", chips=(FakeChip(phy_id=0),))
    with node_plugin(cluster, rendering, board, tmp_path_factory.mktemp("plugin")) as running_plugin:
        yield running_plugin


def test_the_one_ai_core_board_is_served_and_runs_a_pod(cluster: Cluster, plugin: NodePlugin) -> None:
    api = cluster.admin()
    wait_for(lambda: node_resources(api, cluster.node, RESOURCE) == (1, 1), f"{RESOURCE}: 1")
    api.create(pod("on-the-board", {RESOURCE: "1"}))
    running(api, "on-the-board")
    inside = seen(api, "on-the-board")
    assert "davinci0" in inside.dev
    assert "davinci_manager" in inside.dev
    delete(api, "on-the-board")
