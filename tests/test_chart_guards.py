"""Value combinations the schema cannot judge fail in the templates, naming the values and the fix.

templates/_validate.tpl runs before anything renders; `helm install` stops with
its message and nothing reaches the cluster.
"""

from __future__ import annotations

from typing import Any

import helm_python as helm
import pytest
from chart_harness import ChartRenderer

from ascend_plugin.naming import extended_resource_problem

RESOURCE_NAMES = [
    "huawei.com/Ascend310",
    "huawei.com/Ascend910-4c",
    "npu.example.com/a_b.c",
    "Ascend310",
    "requests.huawei.com/Ascend310",
    "kubernetes.io/npu",
    "npu.kubernetes.io/ascend",
    "Huawei.com/Ascend310",
    "huawei.com/-Ascend310",
    "huawei.com/Ascend310-",
    "huawei.com/" + "A" * 64,
    "huawei.com/",
]


@pytest.mark.parametrize("name", RESOURCE_NAMES)
def test_resource_name_follows_the_plugins_own_rule(chart: ChartRenderer, name: str) -> None:
    """The chart refuses exactly the names ascend_plugin.naming refuses, with the same reason."""
    problem = extended_resource_problem(name)
    if problem is None:
        rendering = chart.render({"settings": {"resourceName": name}})
        assert rendering.plain_env["ASCEND_DP_RESOURCE_NAME"] == name
    else:
        with pytest.raises(helm.HelmRenderError) as raised:
            chart.render({"settings": {"resourceName": name}})
        assert f"settings.resourceName {name!r}" in str(raised.value)
        assert problem in str(raised.value)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        pytest.param(
            {"settings": {"aiCoreMin": 8, "aiCoreMax": 1}},
            "settings.aiCoreMin (8) is above settings.aiCoreMax (1)",
            id="ai core bounds crossed",
        ),
        pytest.param(
            {"settings": {"backend": "fake"}},
            "settings.fakeScenario is empty",
            id="fake backend without scenario",
        ),
        pytest.param(
            {"settings": {"dcmiLibrary": "/usr/lib64/libdcmi.so"}},
            "settings.dcmiLibrary /usr/lib64/libdcmi.so is not under any host path the chart mounts",
            id="library not mounted",
        ),
        pytest.param(
            {"hostDirectories": ["/usr/local"]},
            "host directory /usr/local would be mounted over the image's /usr/local/bin/python3.11",
            id="host directory over the image's python",
        ),
        pytest.param(
            {"hostFiles": ["/usr/local/Ascend/driver"]},
            "/usr/local/Ascend/driver is mounted twice",
            id="file over the driver mount",
        ),
        pytest.param(
            {
                "hostFiles": ["/etc/localtime"],
                "extraVolumes": [{"name": "tz", "hostPath": {"path": "/etc/localtime"}}],
                "extraVolumeMounts": [{"name": "tz", "mountPath": "/etc/localtime"}],
            },
            "/etc/localtime is mounted twice",
            id="extra mount over a host file",
        ),
        pytest.param(
            {"serviceAccount": {"create": False}},
            "serviceAccount.name is required when serviceAccount.create is false",
            id="no service account",
        ),
    ],
)
def test_impossible_combination_is_refused(
    chart: ChartRenderer, values: dict[str, Any], message: str
) -> None:
    with pytest.raises(helm.HelmRenderError) as raised:
        chart.render(values)
    assert message in str(raised.value)


@pytest.mark.parametrize(
    "values",
    [
        pytest.param(
            {"settings": {"dcmiLibrary": "/usr/local/Ascend/driver/lib64/driver/libdcmi.so"}}, id="driver"
        ),
        pytest.param(
            {"hostDirectories": ["/usr/lib64"], "settings": {"dcmiLibrary": "/usr/lib64/libdcmi.so"}},
            id="host directory",
        ),
        pytest.param(
            {
                "extraVolumes": [
                    {"name": "dcmi", "hostPath": {"path": "/usr/local/dcmi", "type": "Directory"}}
                ],
                "extraVolumeMounts": [{"name": "dcmi", "mountPath": "/usr/local/dcmi", "readOnly": True}],
                "settings": {"dcmiLibrary": "/usr/local/dcmi/libdcmi.so"},
            },
            id="extra mount",
        ),
        pytest.param(
            {
                "hostDirectories": ["/usr/lib64"],
                "extraVolumes": [
                    {"name": "hal", "hostPath": {"path": "/usr/lib64/libascend_hal.so", "type": "File"}}
                ],
                "extraVolumeMounts": [
                    {"name": "hal", "mountPath": "/opt/host-lib/libascend_hal.so", "readOnly": True}
                ],
                "libraryPath": ["/opt/host-lib", "/usr/local/Ascend/driver/lib64"],
            },
            id="host libraries one by one, without the host's glibc (docs/deployment.md)",
        ),
        pytest.param({"settings": {"aiCoreMin": 1, "aiCoreMax": 1}}, id="equal ai core bounds"),
        pytest.param({"hostDirectories": ["/usr/local/lib64"]}, id="sibling of the python directory"),
    ],
)
def test_sound_combination_renders(chart: ChartRenderer, values: dict[str, Any]) -> None:
    """The guards above refuse only what cannot work."""
    chart.render(values)
