"""What the plugin's container runs with: privileges, host paths, probes, resources."""

from __future__ import annotations

import pytest
from chart_harness import DEFAULTS, VALUES_FILES, ChartRenderer, Rendering

from ascend_plugin.settings import Settings


@pytest.mark.parametrize("values_file", VALUES_FILES)
def test_privileged_root_on_a_read_only_image(renderings: dict[str, Rendering], values_file: str) -> None:
    rendering = renderings[values_file]
    assert rendering.container["securityContext"] == {
        "privileged": True,
        "readOnlyRootFilesystem": True,
        "runAsUser": 0,
        "runAsGroup": 0,
    }
    _, tmp = rendering.volume_at("/tmp")
    assert "sizeLimit" in tmp["emptyDir"], "a writable /tmp on a read-only image, bounded"


@pytest.mark.parametrize("values_file", VALUES_FILES)
def test_host_directories_the_plugin_needs(renderings: dict[str, Rendering], values_file: str) -> None:
    """Written: the kubelet's socket directory and /dev; read only: the driver."""
    host_paths = renderings[values_file].host_paths()
    expected = {
        "/var/lib/kubelet/device-plugins": (str(Settings.model_fields["device_plugin_path"].default), False),
        "/dev": ("/dev", False),
        "/usr/local/Ascend/driver": ("/usr/local/Ascend/driver", True),
    }
    for host_path, (mount_path, read_only) in expected.items():
        mount, source = host_paths[host_path]
        assert (mount["mountPath"], bool(mount.get("readOnly")), source["type"]) == (
            mount_path,
            read_only,
            "Directory",
        ), host_path


@pytest.mark.parametrize("values_file", VALUES_FILES)
def test_probes_ask_the_plugins_endpoint(renderings: dict[str, Rendering], values_file: str) -> None:
    container = renderings[values_file].container
    assert container["ports"] == [{"name": "http", "containerPort": 11251, "protocol": "TCP"}]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}


def test_probe_timing_is_a_value(chart: ChartRenderer) -> None:
    timing = {"initialDelaySeconds": 30, "periodSeconds": 20, "timeoutSeconds": 5, "failureThreshold": 6}
    container = chart.render({"probes": {"liveness": timing}}).container
    assert {key: container["livenessProbe"][key] for key in timing} == timing


def test_resources_are_values(chart: ChartRenderer, renderings: dict[str, Rendering]) -> None:
    assert "cpu" not in renderings[DEFAULTS].container["resources"]["limits"], (
        "no CPU throttling of health polls"
    )
    resources = {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}}
    assert chart.render({"resources": resources}).container["resources"] == resources


def test_extra_environment_comes_after_the_charts(chart: ChartRenderer) -> None:
    rendering = chart.render({"extraEnv": [{"name": "TZ", "value": "Asia/Shanghai"}]})
    assert rendering.plain_env["TZ"] == "Asia/Shanghai"
    assert list(rendering.env)[-1] == "TZ"


@pytest.mark.parametrize("spec_dir", [None, "/run/cdi-specs"])
def test_cdi_mode_mounts_the_runtimes_cdi_directory_writable(
    chart: ChartRenderer, spec_dir: str | None
) -> None:
    rendering = chart.render({"settings": {"allocateMode": "cdi", "cdiSpecDir": spec_dir}})
    mount, source = rendering.host_paths()["/var/run/cdi"]
    assert mount["mountPath"] == (spec_dir or "/var/run/cdi")
    assert not mount.get("readOnly")
    assert source["type"] == "DirectoryOrCreate"


def test_other_modes_leave_the_cdi_directory_alone(renderings: dict[str, Rendering]) -> None:
    assert "/var/run/cdi" not in renderings[DEFAULTS].host_paths()
