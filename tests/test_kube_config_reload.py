"""The config ConfigMap: good changes apply at once, bad ones change nothing, removed keys go back."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_apiserver import FakeApiServer
from kube_harness import running
from log_records import records
from plugin_harness import FakeNode
from waiting import until

from ascend_plugin.app import PluginApp
from ascend_plugin.faces.kube.config_watch import ConfigWatcher
from ascend_plugin.fault_policy.config import builtin_codes
from ascend_plugin.fault_policy.faults import NETWORK_CODES, FaultLevel
from ascend_plugin.kubeapi.client import Kube

pytestmark = pytest.mark.anyio

NAMESPACE = "kube-system"
NAME = "ascend-config"
CODE = 0x80E01801  # RestartBusiness in the built-in faultCode.json
WATCHER = "ascend_plugin.faces.kube.config_watch"


@pytest.fixture
def app(node: FakeNode, plugin_dir: Path) -> Iterator[PluginApp]:
    """A plugin, not started: only its settings and fault configuration matter. Restores the log level."""
    root = logging.getLogger()
    level = root.level
    plugin = PluginApp(
        node.settings(plugin_dir, config_configmap=NAME, pod_namespace=NAMESPACE, log_level="INFO")
    )
    yield plugin
    plugin.calls.shutdown()
    root.setLevel(level)


def put_config(apiserver: FakeApiServer, data: dict[str, str]) -> None:
    apiserver.put("configmaps", {"metadata": {"name": NAME, "namespace": NAMESPACE}, "data": data})


def watcher(kube: Kube, app: PluginApp) -> ConfigWatcher:
    return ConfigWatcher(kube, app.config, app.faults, NAMESPACE, NAME)


def level_of(app: PluginApp, code: int) -> FaultLevel:
    """The level the fault configuration in force gives a chip with ``code`` alone (polled)."""
    return app.faults.config.codes.chip_level([code], {})


def refusals(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The ConfigMap refused: ERROR lines naming it, whose text says the key, value and what is allowed."""
    return records(caplog, WATCHER, level=logging.ERROR, configmap=f"{NAMESPACE}/{NAME}")


async def test_keys_override_settings_and_removed_keys_return_to_startup_values(
    apiserver: FakeApiServer, kube: Kube, app: PluginApp
) -> None:
    assert app.config.settings.health_interval == 0.05
    put_config(apiserver, {"health_interval": "0.5", "log-level": "debug", "health_flap_hold": "5"})
    async with running(watcher(kube, app).run):
        await until(lambda: app.config.settings.health_interval == 0.5, "the new interval")
        assert app.config.settings.log_level == "DEBUG"
        assert app.config.settings.health_flap_hold == 5.0
        assert logging.getLogger().level == logging.DEBUG

        put_config(apiserver, {"health_interval": "2"})
        await until(lambda: app.config.settings.health_interval == 2.0, "the second change")
        second = (
            app.config.settings
        )  # a new Settings object: the keys left out are back at their start-up values
        assert second.log_level == "INFO"
        assert second.health_flap_hold == 30.0

        apiserver.delete("configmaps", NAME, NAMESPACE)
        await until(lambda: app.config.settings.health_interval == 0.05, "start-up values again")


async def test_an_invalid_value_is_refused_and_the_old_config_stays(
    apiserver: FakeApiServer, kube: Kube, app: PluginApp, caplog: pytest.LogCaptureFixture
) -> None:
    put_config(apiserver, {"health_interval": "0.5"})
    async with running(watcher(kube, app).run):
        await until(lambda: app.config.settings.health_interval == 0.5, "the good config")
        put_config(apiserver, {"health_interval": "-1", "log_level": "DEBUG"})
        (refusal,) = await until(lambda: refusals(caplog), "the refusal")
    message = refusal.getMessage()
    assert "health_interval" in message
    assert "'-1'" in message
    assert "must be above 0 and at most 3600 seconds" in message
    # Nothing of the bad change applied, not even its valid key.
    assert app.config.settings.health_interval == 0.5
    assert app.config.settings.log_level == "INFO"


async def test_a_key_that_cannot_change_at_run_time_is_refused(
    apiserver: FakeApiServer, kube: Kube, app: PluginApp, caplog: pytest.LogCaptureFixture
) -> None:
    put_config(apiserver, {"allocate_mode": "runtime", "health_interval": "0.5"})
    async with running(watcher(kube, app).run):
        (refusal,) = await until(lambda: refusals(caplog), "the refusal")
    said, allowed = refusal.getMessage().split("allowed: ")
    assert "'allocate_mode'" in said
    assert "'runtime'" in said
    assert "health_interval" in allowed
    assert "fault_levels.json" in allowed
    assert app.config.settings.allocate_mode == "device"
    assert app.config.settings.health_interval == 0.05


async def test_fault_levels_lay_over_the_configuration_in_force(
    apiserver: FakeApiServer, kube: Kube, app: PluginApp
) -> None:
    startup = app.faults.config
    assert level_of(app, CODE) is FaultLevel.RestartBusiness
    put_config(apiserver, {"fault_levels.json": json.dumps({"NotHandleFault": ["80E01801"]})})
    async with running(watcher(kube, app).run):
        await until(lambda: level_of(app, CODE) is FaultLevel.NotHandleFault, "the override")
        assert app.faults.config.sources["overlay"] == f"fault_levels.json of {NAMESPACE}/{NAME}"
        # Every other code of the built-in faultCode.json is where it was.
        lists = builtin_codes()
        listed = {code for codes in lists.chip.values() for code in codes} - NETWORK_CODES - {CODE}
        others = {code: lists.chip_level([code], {}) for code in listed}
        assert others
        assert all(level_of(app, code) is level for code, level in others.items())

        put_config(apiserver, {"health_interval": "0.5"})
        await until(lambda: app.config.settings.health_interval == 0.5, "the next config")
        assert level_of(app, CODE) is FaultLevel.RestartBusiness  # the key removed: its levels are gone
        assert app.faults.config.codes == startup.codes


@pytest.mark.parametrize(
    ("table", "reason"),
    [
        ("{not json", "key 'fault_levels.json' is not valid JSON"),
        (
            json.dumps({"Broken": ["80E01801"]}),
            "unknown fault level 'Broken'; allowed: NormalNPU, NotHandleFault",
        ),
        (json.dumps({"SeparateNPU": ["xyz"]}), "'xyz' is not a hex fault code"),
    ],
)
async def test_a_bad_fault_table_is_refused_with_everything_else(
    apiserver: FakeApiServer,
    kube: Kube,
    app: PluginApp,
    caplog: pytest.LogCaptureFixture,
    *,
    table: str,
    reason: str,
) -> None:
    startup = app.faults.config
    put_config(apiserver, {"fault_levels.json": table, "health_interval": "0.5"})
    async with running(watcher(kube, app).run):
        (refusal,) = await until(lambda: refusals(caplog), "the refusal")
    assert reason in refusal.getMessage()
    assert app.faults.config is startup
    assert app.config.settings.health_interval == 0.05


async def test_a_configmap_created_later_is_applied(
    apiserver: FakeApiServer, kube: Kube, app: PluginApp
) -> None:
    async with running(watcher(kube, app).run):
        await until(lambda: bool(apiserver.requests_of("watch", "configmaps")), "the watch")
        put_config(apiserver, {"health_failure_threshold": "7"})
        await until(lambda: app.config.settings.health_failure_threshold == 7, "the new ConfigMap applied")


def test_a_huge_value_is_named_in_the_refusal_not_carried(
    app: PluginApp, caplog: pytest.LogCaptureFixture
) -> None:
    config = ConfigWatcher(None, app.config, app.faults, NAMESPACE, NAME)  # type: ignore[arg-type]
    assert not config.apply({"not_a_setting": "x" * 900_000, "health_interval": "y" * 900_000})
    (refusal,) = refusals(caplog)
    assert "not_a_setting" in refusal.getMessage()
    assert "(900000 characters)" in refusal.getMessage()
    assert len(refusal.getMessage()) < 2000
