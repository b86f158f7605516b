"""The chart refuses at `helm install` what the plugin would refuse at start, in the plugin's words.

Otherwise the install succeeds and every node's pod crash-loops with exit code 2.
Each refusal's message is held to the one the plugin itself gives for the same
settings (``load_settings``), so the two cannot drift apart.
"""

from __future__ import annotations

from typing import Any

import helm_python as helm
import pytest
from chart_harness import ChartRenderer

from ascend_plugin.settings import SettingsError, load_settings

PLUGIN = {"backend": "fake", "fake_scenario": "/s.json", "node_name": "node-1"}


def plugins_words(**settings: Any) -> str:
    with pytest.raises(SettingsError) as refused:
        load_settings({**PLUGIN, **settings})
    return str(refused.value)


def test_vnpu_dynamic_without_dra(chart: ChartRenderer) -> None:
    words = plugins_words(vnpu="dynamic", serve="device-plugin")
    assert words.startswith("invalid settings: vnpu 'dynamic' makes vNPUs when their DRA claims are prepared")
    with pytest.raises(helm.HelmRenderError) as refused:
        chart.render({"settings": {"vnpu": "dynamic"}})
    assert f"settings.vnpu: dynamic with serve: device-plugin: {words}" in str(refused.value)


def test_dra_with_volcano(chart: ChartRenderer) -> None:
    words = plugins_words(serve="dra", volcano=True, kubeconfig="/k")
    assert words.startswith("invalid settings: serve 'dra' lets the scheduler allocate devices")
    with pytest.raises(helm.HelmRenderError) as refused:
        chart.render({"serve": "dra", "settings": {"volcano": True}})
    assert f"settings.volcano with serve: dra: {words}" in str(refused.value)


@pytest.mark.parametrize("serve", ["dra", "by-node-label"])
@pytest.mark.parametrize("kube_version", ["1.32", "1.33"])
def test_dra_below_1_34(chart: ChartRenderer, serve: str, kube_version: str) -> None:
    with pytest.raises(helm.HelmRenderError) as refused:
        chart.render({"serve": serve}, kube_version=kube_version)
    assert (
        f"serve: {serve} needs Kubernetes 1.34 or later: the DRA driver publishes ResourceSlices and reads "
        f"claims of resource.k8s.io/v1, which this cluster (v{kube_version}.0) does not serve; keep serve: "
        "device-plugin"
    ) in str(refused.value)


@pytest.mark.parametrize("kube_version", ["1.34", "1.36"])
def test_dra_from_1_34_renders(chart: ChartRenderer, kube_version: str) -> None:
    assert chart.render({"serve": "dra"}, kube_version=kube_version).of_kind("DeviceClass")


def test_what_each_mode_of_a_per_node_release_refuses_goes_to_the_other(chart: ChartRenderer) -> None:
    """serve: by-node-label: Volcano mode is the device plugin's nodes', vnpu: dynamic the driver's."""
    rendering = chart.render({"serve": "by-node-label", "settings": {"volcano": True, "vnpu": "dynamic"}})
    env = {
        daemonset["metadata"]["name"]: {
            entry["name"]: entry.get("value")
            for entry in daemonset["spec"]["template"]["spec"]["containers"][0]["env"]
        }
        for daemonset in rendering.of_kind("DaemonSet")
    }
    plugin, driver = env["ascend-device-plugin"], env["ascend-device-plugin-dra"]
    assert (plugin["ASCEND_DP_SERVE"], plugin["ASCEND_DP_VOLCANO"], plugin.get("ASCEND_DP_VNPU")) == (
        "device-plugin",
        "true",
        None,
    )
    assert (driver["ASCEND_DP_SERVE"], driver.get("ASCEND_DP_VOLCANO"), driver["ASCEND_DP_VNPU"]) == (
        "dra",
        None,
        "dynamic",
    )
    load_settings({**PLUGIN, "serve": "dra", "vnpu": "dynamic"})  # the driver's pods start
