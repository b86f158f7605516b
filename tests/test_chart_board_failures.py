"""The ways a deployment of Huawei's plugin on an Atlas 200I A2 (310B1) fails, each made impossible
or explained by the chart.

Deploying Huawei's plugin on such a board takes eight hand edits (the AI-core range, the board's files,
/dev/shm, glibc, two RBAC rules, the node's identity, the image's registry). RBAC is tested in
test_chart_rbac.py; the rest are here, followed by the working board deployment from values-310b.yaml
alone.
"""

from __future__ import annotations

import re
from typing import Any

import helm_python as helm
import pytest
import yaml
from chart_harness import (
    CHART_DIR,
    DEFAULTS,
    FAMILY_FILES,
    VALUES_FILES,
    ChartRenderer,
    Rendering,
    load_values_file,
)

from backends.families import family_named

# What an Atlas 200I A2 needs from the board, all of them regular files.
SEED_HOST_FILES = (
    "/etc/hdcBasic.cfg",
    "/etc/sys_version.conf",
    "/etc/ascend_install.info",
    "/var/slogd",
    "/var/dmp_daemon",
    "/var/queue_schedule",
)

# Directories whose host copy holds the host's C library.
SYSTEM_LIBRARY_DIR = re.compile(r"^/(usr/)?lib(64)?(/[a-z0-9_]+-linux-gnu)?/?$")


def chart_metadata() -> dict[str, Any]:
    data = yaml.safe_load((CHART_DIR / "Chart.yaml").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


# -- AI cores: MinAICoreNum = 8 -> "invalid ai core num 1.000000" -----------------------------------


@pytest.mark.parametrize(("family", "values_file"), FAMILY_FILES.items())
def test_family_files_carry_their_familys_ai_core_bounds(
    renderings: dict[str, Rendering], family: str, values_file: str
) -> None:
    """Each family file states its family's bounds and resource name, the same as the plugin's table."""
    table = family_named(family).TABLE
    env = renderings[values_file].plain_env
    assert float(env["ASCEND_DP_AI_CORE_MIN"]) == table.ai_core_min
    assert float(env["ASCEND_DP_AI_CORE_MAX"]) == table.ai_core_max
    assert env["ASCEND_DP_RESOURCE_NAME"] == table.resource_name


def test_310b_accepts_its_single_ai_core(renderings: dict[str, Rendering]) -> None:
    env = renderings[FAMILY_FILES["310B"]].plain_env
    assert (env["ASCEND_DP_AI_CORE_MIN"], env["ASCEND_DP_AI_CORE_MAX"]) == ("1", "1")


def test_defaults_leave_ai_core_bounds_to_the_detected_family(renderings: dict[str, Rendering]) -> None:
    assert not {"ASCEND_DP_AI_CORE_MIN", "ASCEND_DP_AI_CORE_MAX"} & set(renderings[DEFAULTS].plain_env)


# -- Board files: host executables mounted as directories -> MountVolume fails --------------------------


@pytest.mark.parametrize("values_file", VALUES_FILES)
def test_host_files_are_read_only_file_mounts(renderings: dict[str, Rendering], values_file: str) -> None:
    rendering = renderings[values_file]
    host_paths = rendering.host_paths()
    for path in load_values_file(values_file).get("hostFiles", []):
        mount, source = host_paths[path]
        assert mount["mountPath"] == path
        assert mount["readOnly"] is True, path
        assert source["type"] == "File", path


@pytest.mark.parametrize("values_file", VALUES_FILES)
def test_every_host_path_states_its_type(renderings: dict[str, Rendering], values_file: str) -> None:
    """An untyped hostPath mounts whatever is there, or creates an empty directory in its place."""
    untyped = [
        path for path, (_, source) in renderings[values_file].host_paths().items() if not source.get("type")
    ]
    assert untyped == []


def test_310b_mounts_every_file_of_the_board(renderings: dict[str, Rendering]) -> None:
    host_paths = renderings[FAMILY_FILES["310B"]].host_paths()
    for path in SEED_HOST_FILES:
        mount, source = host_paths[path]
        assert (source["type"], mount["readOnly"]) == ("File", True), path


# -- Shared memory: /dev/shm as emptyDir -> "dm_send_msg fail:2" -----------------------------------------


@pytest.mark.parametrize("values_file", VALUES_FILES)
def test_dev_shm_is_the_hosts(renderings: dict[str, Rendering], values_file: str) -> None:
    mount, volume = renderings[values_file].volume_at("/dev/shm")
    assert volume.get("hostPath", {}).get("path") == "/dev/shm", volume
    assert "emptyDir" not in volume
    assert not mount.get("readOnly"), "dmp_daemon's peers write their message files there"


def test_dev_shm_cannot_be_replaced_by_an_empty_dir(chart: ChartRenderer) -> None:
    with pytest.raises(helm.HelmRenderError, match=r"dm_send_msg fail:2.*#the-hosts-shared-memory"):
        chart.render(
            {
                "extraVolumes": [{"name": "shm", "emptyDir": {"medium": "Memory"}}],
                "extraVolumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}],
            }
        )


# -- glibc: the container's vs the host's libdcmi.so -> SIGBUS, exit 135 -------------------------


@pytest.mark.parametrize("values_file", VALUES_FILES)
def test_host_glibc_stays_off_the_library_path(renderings: dict[str, Rendering], values_file: str) -> None:
    """Under the image's loader, no host directory holding the host's libc is searched for libraries."""
    rendering = renderings[values_file]
    assert "command" not in rendering.container, "the image's entrypoint, under the image's loader"
    searched = rendering.plain_env["LD_LIBRARY_PATH"].split(":")
    host_directories = set(rendering.host_paths())
    assert [d for d in searched if d in host_directories and SYSTEM_LIBRARY_DIR.match(d)] == []


def test_host_glibc_on_the_library_path_is_refused_with_the_reason(chart: ChartRenderer) -> None:
    values = load_values_file(FAMILY_FILES["310B"])
    values["libraryPath"] = ["/usr/lib64", "/usr/local/Ascend/driver/lib64"]
    with pytest.raises(helm.HelmRenderError, match=r"SIGBUS, exit 135 .*the-librarys-glibc.*hostLoader"):
        chart.render(values)


def test_host_loader_runs_the_plugin_on_the_hosts_glibc(chart: ChartRenderer) -> None:
    """The board's own loader, as an opt-in: the host's loader starts the image's Python."""
    values = load_values_file(FAMILY_FILES["310B"])
    values["hostLoader"]["enabled"] = True
    rendering = chart.render(values)
    loader = chart.chart.merge_values(values)["hostLoader"]
    assert rendering.container["command"] == [loader["path"], loader["python"], "-m", "ascend_plugin", "run"]
    assert "args" not in rendering.container
    mount, source = rendering.host_paths()["/usr/lib64"]
    assert (mount["readOnly"], source["type"]) == (True, "Directory")
    searched = rendering.plain_env["LD_LIBRARY_PATH"].split(":")
    assert searched[:2] == [loader["pythonLibraryDir"], "/usr/lib64"], "the image's libpython first"


def test_host_loader_mounts_its_own_directory(chart: ChartRenderer) -> None:
    rendering = chart.render({"hostLoader": {"enabled": True, "path": "/lib64/ld-linux-x86-64.so.2"}})
    mount, _ = rendering.host_paths()["/lib64"]
    assert mount["readOnly"] is True


def test_host_loader_without_a_path_is_refused(chart: ChartRenderer) -> None:
    with pytest.raises(helm.HelmRenderError, match=r"hostLoader\.path is empty"):
        chart.render({"hostLoader": {"enabled": True}})


# -- Identity: kubelet address unknown -> "host ip is invalid" --------------------------------------


@pytest.mark.parametrize("values_file", VALUES_FILES)
def test_node_name_and_host_ip_come_from_the_downward_api(
    renderings: dict[str, Rendering], values_file: str
) -> None:
    env = renderings[values_file].env
    fields = {
        name: env[name]["valueFrom"]["fieldRef"]["fieldPath"]
        for name in ("NODE_NAME", "HOST_IP", "POD_NAMESPACE")
    }
    assert fields == {
        "NODE_NAME": "spec.nodeName",
        "HOST_IP": "status.hostIP",
        "POD_NAMESPACE": "metadata.namespace",
    }


# -- Image: base image pulls time out -> the image is the operator's to choose --------------------


@pytest.mark.parametrize(
    ("image", "reference"),
    [
        ({}, "ascend-device-plugin:{app}"),
        ({"registry": "registry.example.com:5000"}, "registry.example.com:5000/ascend-device-plugin:{app}"),
        (
            {"registry": "mirror.example.com/ascend/", "tag": "0.1.0-rc1"},
            "mirror.example.com/ascend/ascend-device-plugin:0.1.0-rc1",
        ),
        ({"repository": "npu/plugin", "digest": "sha256:" + "ab" * 32}, "npu/plugin@sha256:" + "ab" * 32),
    ],
)
def test_image_reference_is_built_from_values(
    chart: ChartRenderer, image: dict[str, str], reference: str
) -> None:
    rendering = chart.render({"image": {**image, "pullPolicy": "Never"}})
    assert rendering.container["image"] == reference.format(app=chart_metadata()["appVersion"])
    assert rendering.container["imagePullPolicy"] == "Never"


def test_pull_secrets_reach_the_pod(chart: ChartRenderer) -> None:
    rendering = chart.render({"imagePullSecrets": [{"name": "mirror-credentials"}]})
    assert rendering.pod_spec["imagePullSecrets"] == [{"name": "mirror-credentials"}]


# -- The working board deployment, from values-310b.yaml alone -----------------------------

# A working board's `docker run` mounts, host path -> read-only. /sys is left
# out on purpose: a privileged container sees the host's sysfs anyway.
SEED_DOCKER_RUN_MOUNTS = {
    "/usr/local/Ascend/driver": True,  # often mounted writable; nothing needs to write it
    "/usr/lib64": True,
    "/dev": False,
    "/dev/shm": False,
    **dict.fromkeys(SEED_HOST_FILES, True),
}


def test_values_310b_alone_is_a_working_board_deployment(renderings: dict[str, Rendering]) -> None:
    """No hand edits: every fix a board deployment needs is in the rendered objects."""
    rendering = renderings[FAMILY_FILES["310B"]]
    env = rendering.plain_env

    assert env["ASCEND_DP_RESOURCE_NAME"] == "huawei.com/Ascend310"
    assert (env["ASCEND_DP_AI_CORE_MIN"], env["ASCEND_DP_AI_CORE_MAX"]) == ("1", "1")
    assert env["ASCEND_DP_DCMI_LIBRARY"] == "/usr/lib64/libdcmi.so"
    assert rendering.pod_spec["nodeSelector"]["accelerator"] == "huawei-Ascend310"
    assert {"NODE_NAME", "HOST_IP"} <= set(rendering.env)
    assert rendering.container["securityContext"]["privileged"] is True

    host_paths = rendering.host_paths()
    for path, read_only in SEED_DOCKER_RUN_MOUNTS.items():
        mount, source = host_paths[path]
        assert mount["mountPath"] == path
        assert bool(mount.get("readOnly")) is read_only, path
        assert source["type"] == ("File" if path in SEED_HOST_FILES else "Directory"), path
    assert "emptyDir" not in rendering.volume_at("/dev/shm")[1]

    assert rendering.allows("get", "", "nodes", None)
    assert rendering.allows("patch", "", "nodes", None)
    assert rendering.allows("update", "", "configmaps", "kube-system")
