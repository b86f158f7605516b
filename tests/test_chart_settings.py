"""The chart's `settings` and `runtimeConfig` mean to the plugin exactly what they say.

The program is the single source of defaults and rules: every Settings field is
either a chart value (null by default, so the program's default holds) or set by
the chart itself; what the chart renders is read back through the plugin's own
settings loader and config-ConfigMap watcher, not through a re-implementation.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_harness import CHART_DIR, DEFAULTS, RELEASE, VALUES_FILES, ChartRenderer, Rendering

from ascend_plugin.app import PluginApp
from ascend_plugin.faces.kube.config_watch import FAULT_LEVELS_KEY, ConfigWatcher
from ascend_plugin.fault_policy.faults import FaultLevel
from ascend_plugin.settings import ENV_PREFIX, RELOADABLE, Settings, load_settings

# Settings the chart sets itself, and from what.
CHART_OWNED = {
    "node_name": "NODE_NAME from spec.nodeName",
    "host_ip": "HOST_IP from status.hostIP",
    "pod_namespace": "POD_NAMESPACE from metadata.namespace",
    "config_configmap": "the chart's config ConfigMap",
    "config_configmap_namespace": "the release namespace",
    "http_address": "httpPort",
    "device_plugin_path": "kubeletDevicePluginPath, mounted at the program's default path",
    "serve": "the top-level value serve (it also decides what the chart installs)",
}

# What the downward API would put into the pod on a node.
DOWNWARD = {"NODE_NAME": "atlas-200i-a2-01", "HOST_IP": "192.0.2.10", "POD_NAMESPACE": "kube-system"}

# One valid value for every settings key; a new setting needs one here too.
EVERY_SETTING: dict[str, Any] = {
    "configFile": None,  # set per test to a real file: the loader reads it
    "backend": "fake",
    "fakeScenario": "/etc/ascend-device-plugin/scenario.json",
    "dcmiLibrary": "/usr/local/Ascend/driver/lib64/driver/libdcmi.so",
    "dcmiAllowUntrustedLibrary": True,
    "dcmiCallTimeout": 2.5,
    "chipFamily": "310B",
    "resourceName": "example.com/npu",
    "deviceIdPrefix": "NPU",
    "aiCoreMin": 1,
    "aiCoreMax": 4,
    "managerNodes": ["/dev/davinci_manager_docker", "/dev/davinci_manager"],
    "sharedNodes": ["/dev/hisi_hdc", "/dev/devmm_svm"],
    "driverMounts": ["/usr/local/Ascend/driver"],
    "socketName": "npu.sock",
    "kubeletWatchInterval": 0.5,
    "preferredAllocation": False,
    "allocateMode": "device",
    "cdiSpecDir": "/var/run/cdi",
    "cdiKind": "example.com/npu",
    "draDriverName": "npu.example.com",
    "draRegistryPath": "/var/lib/k0s/kubelet/plugins_registry",
    "draPluginPath": "/var/lib/k0s/kubelet/plugins/npu.example.com",
    "draDeviceTaints": True,
    "draTaintEffect": "NoSchedule",
    "hostRoot": "/host",
    "healthInterval": 2,
    "healthFailureThreshold": 5,
    "healthFlapThreshold": 4,
    "healthFlapWindow": 120,
    "healthFlapHold": 0,
    "faultLevelsFile": "/etc/ascend-device-plugin/faults.json",
    "hotReset": True,
    "hotResetIdle": 120,
    "shareCount": 4,
    "vnpu": "off",
    "draPartitionPlaces": 2,
    "kubeconfig": "/etc/kubeconfig",
    "nodeLabels": False,
    "labelPrefix": "npu.example.com",
    "deviceInfoConfigmap": False,
    "deviceInfoNamespace": "volcano-system",
    "deviceInfoNamePrefix": "deviceinfo-",
    "deviceInfoRefresh": 60,
    "nodeEvents": False,
    "faultConfigConfigmap": False,
    "volcano": False,  # true needs node_name, which this test leaves out: tests/test_chart_volcano.py
    "podResourcesSocket": "/var/lib/kubelet/pod-resources/kubelet.sock",
    "telemetry": False,
    "telemetryInterval": 10,
    "telemetrySlowInterval": 120,
    "telemetryCallTimeout": 0.5,
    "logLevel": "DEBUG",
    "logFormat": "json",
}


def snake(name: str) -> str:
    """aiCoreMin -> ai_core_min: the field a chart value stands for."""
    return "".join(f"_{char.lower()}" if char.isupper() else char for char in name)


def camel(field: str) -> str:
    """ai_core_min -> aiCoreMin: the chart value of a Settings field."""
    first, *rest = field.split("_")
    return first + "".join(part.title() for part in rest)


def chart_defaults() -> dict[str, Any]:
    data = yaml.safe_load((CHART_DIR / "values.yaml").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def settings_from_pod_env(rendering: Rendering, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """What the plugin loads in the rendered pod: its environment and nothing else."""
    clear_settings_env(monkeypatch)
    for name, value in {**rendering.plain_env, **DOWNWARD}.items():
        monkeypatch.setenv(name, value)
    return load_settings()


def clear_settings_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No setting may leak in from the environment the tests run in."""
    import os

    for name in list(os.environ):
        if name.startswith(ENV_PREFIX) or name in DOWNWARD:
            monkeypatch.delenv(name)


def test_every_setting_is_a_chart_value_or_set_by_the_chart() -> None:
    values = {snake(key) for key in chart_defaults()["settings"]}
    fields = set(Settings.model_fields)
    assert not values & set(CHART_OWNED), "a setting the chart owns must not also be a value"
    assert values | set(CHART_OWNED) == fields, (
        f"settings without a chart value: {sorted(fields - values - set(CHART_OWNED))}; "
        f"chart values that are no setting: {sorted(values - fields)}"
    )
    assert set(EVERY_SETTING) == set(chart_defaults()["settings"])


def test_settings_default_to_null_so_the_program_decides() -> None:
    assert {key: value for key, value in chart_defaults()["settings"].items() if value is not None} == {}


def chart_schema_of(pydantic_schema: dict[str, Any]) -> dict[str, Any]:
    """The values.schema.json entry a Settings field's JSON schema calls for.

    Null is always allowed (null = the program's default); a path must be
    absolute (a relative one would be relative to the image's working directory).
    """
    schema = dict(pydantic_schema)
    for variant in schema.pop("anyOf", []):
        if variant.get("type") != "null":
            schema.update(variant)
    for key in ("default", "title", "description"):
        schema.pop(key, None)
    result: dict[str, Any] = {"type": [schema.pop("type"), "null"]}
    if schema.pop("format", None) == "path":
        result["pattern"] = "^/"
    if "enum" in schema:
        schema["enum"] = [*schema["enum"], None]
    return {**result, **schema}


@pytest.mark.parametrize("field", sorted(set(Settings.model_fields) - set(CHART_OWNED)))
def test_schema_carries_the_settings_rules(chart: ChartRenderer, field: str) -> None:
    """Types, enums, bounds and patterns of values.schema.json are the program's own."""
    schema = chart.chart.schema
    assert schema is not None
    chart_entry = dict(schema["properties"]["settings"]["properties"][camel(field)])
    chart_entry.pop("description")
    assert chart_entry == chart_schema_of(Settings.model_json_schema()["properties"][field])


@pytest.mark.parametrize("values_file", VALUES_FILES)
def test_pod_env_loads_as_the_values_say(
    renderings: dict[str, Rendering], values_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each values file's settings reach the plugin unchanged; unset ones keep the program's default."""
    rendering = renderings[values_file]
    loaded = settings_from_pod_env(rendering, monkeypatch)
    clear_settings_env(monkeypatch)
    values = yaml.safe_load((CHART_DIR / values_file).read_text(encoding="utf-8")).get("settings") or {}
    intended = load_settings({snake(key): value for key, value in values.items() if value is not None})
    assert loaded.model_dump(exclude=set(CHART_OWNED)) == intended.model_dump(exclude=set(CHART_OWNED))


def test_every_setting_reaches_the_plugin(
    chart: ChartRenderer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """All settings at once, lists comma-joined: the loaded Settings are the values, field by field."""
    config_file = tmp_path / "settings.yaml"
    config_file.write_text("{}\n", encoding="utf-8")
    values = {**EVERY_SETTING, "configFile": str(config_file)}
    rendering = chart.render({"settings": values})
    assert rendering.plain_env["ASCEND_DP_SHARED_NODES"] == "/dev/hisi_hdc,/dev/devmm_svm"
    loaded = settings_from_pod_env(rendering, monkeypatch)
    clear_settings_env(monkeypatch)
    intended = load_settings({snake(key): value for key, value in values.items()})
    assert loaded.model_dump(exclude=set(CHART_OWNED)) == intended.model_dump(exclude=set(CHART_OWNED))
    assert loaded.model_dump(exclude=set(CHART_OWNED)) != Settings.model_construct().model_dump(
        exclude=set(CHART_OWNED)
    )


def test_chart_owned_settings(renderings: dict[str, Rendering], monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = settings_from_pod_env(renderings[DEFAULTS], monkeypatch)
    assert loaded.node_name == DOWNWARD["NODE_NAME"]
    assert loaded.host_ip == DOWNWARD["HOST_IP"]
    assert loaded.pod_namespace == DOWNWARD["POD_NAMESPACE"]
    assert loaded.config_configmap == f"{RELEASE}-config"
    assert loaded.config_configmap_namespace == renderings[DEFAULTS].namespace
    assert str(loaded.device_plugin_path) == "/var/lib/kubelet/device-plugins"
    assert loaded.http_address.rsplit(":", 1)[1] == str(chart_defaults()["httpPort"])


def test_a_moved_http_port_reaches_the_plugin(chart: ChartRenderer, monkeypatch: pytest.MonkeyPatch) -> None:
    rendering = chart.render({"httpPort": 9400})
    assert settings_from_pod_env(rendering, monkeypatch).http_address == "0.0.0.0:9400"
    assert rendering.container["ports"][0]["containerPort"] == 9400


def test_kubelet_directory_moves_on_the_host_side_only(chart: ChartRenderer) -> None:
    """A distribution's kubelet directory needs no setting: the container path stays the default."""
    rendering = chart.render({"kubeletDevicePluginPath": "/var/lib/k0s/kubelet/device-plugins"})
    mount, volume = rendering.volume_at(str(Settings.model_fields["device_plugin_path"].default))
    assert volume["hostPath"]["path"] == "/var/lib/k0s/kubelet/device-plugins"
    assert not mount.get("readOnly"), "the plugin creates its socket there"
    assert "ASCEND_DP_DEVICE_PLUGIN_PATH" not in rendering.plain_env


# -- runtimeConfig: the ConfigMap the plugin watches ---------------------------------------

EVERY_RUNTIME_VALUE: dict[str, Any] = {
    "healthInterval": 2,
    "healthFailureThreshold": 4,
    "healthFlapThreshold": 2,
    "healthFlapWindow": 30,
    "healthFlapHold": 10,
    "logLevel": "DEBUG",
    "telemetryInterval": 10,
    "telemetrySlowInterval": 120,
    "telemetryCallTimeout": 2,
    "faultLevels": {"SeparateNPU": ["80E01802"], "NotHandleFault": ["80E21008"]},
}


def config_data(rendering: Rendering) -> dict[str, str]:
    configmap = rendering.one("ConfigMap")
    assert configmap["metadata"]["name"] == rendering.plain_env["ASCEND_DP_CONFIG_CONFIGMAP"]
    data: dict[str, str] = configmap.get("data") or {}
    return data


def test_runtime_config_keys_are_the_reloadable_settings() -> None:
    keys = set(chart_defaults()["runtimeConfig"])
    assert keys == set(EVERY_RUNTIME_VALUE)
    assert {snake(key) for key in keys - {"faultLevels"}} == set(RELOADABLE)


def test_fault_levels_schema_names_the_programs_levels(chart: ChartRenderer) -> None:
    schema = chart.chart.schema
    assert schema is not None
    levels = schema["properties"]["runtimeConfig"]["properties"]["faultLevels"]["properties"]
    assert set(levels) == set(FaultLevel.__members__)


@pytest.mark.parametrize("values_file", VALUES_FILES)
def test_unset_runtime_config_writes_no_keys(renderings: dict[str, Rendering], values_file: str) -> None:
    assert config_data(renderings[values_file]) == {}


def test_runtime_config_is_applied_by_the_plugins_watcher(
    chart: ChartRenderer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rendered ConfigMap, fed to the plugin's real ConfigWatcher, changes exactly what it says."""
    rendering = chart.render({"runtimeConfig": EVERY_RUNTIME_VALUE})
    data = config_data(rendering)
    assert set(data) == {*RELOADABLE, FAULT_LEVELS_KEY}
    assert json.loads(data[FAULT_LEVELS_KEY]) == EVERY_RUNTIME_VALUE["faultLevels"]

    app = PluginApp(settings_from_pod_env(rendering, monkeypatch))
    try:
        watcher = ConfigWatcher(None, app.config, app.faults, rendering.namespace, f"{RELEASE}-config")  # type: ignore[arg-type]
        assert watcher.apply(data), "the plugin refused the chart's ConfigMap"
        assert app.config.settings.health_interval == 2
        assert app.config.settings.health_failure_threshold == 4
        assert app.config.settings.health_flap_threshold == 2
        assert app.config.settings.health_flap_window == 30
        assert app.config.settings.health_flap_hold == 10
        assert app.config.settings.log_level == "DEBUG"
        codes = app.faults.config.codes
        assert codes.chip_level([0x80E01802], {}) is FaultLevel.SeparateNPU
        assert codes.chip_level([0x80E21008], {}) is FaultLevel.NotHandleFault
    finally:
        app.calls.shutdown()
