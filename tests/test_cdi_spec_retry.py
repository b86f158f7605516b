"""A CDI spec that cannot be written is tried again with backoff until it is, while nothing else changes;
/readyz says so meanwhile (containers given NPUs would not start)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from log_records import records
from plugin_harness import FakeNode, not_ready_with, registered, running_plugin
from read_only import read_only
from waiting import until, wait_for

from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio

RESOURCE = "huawei.com/Ascend310"
CDI = "ascend_plugin.handover.cdi"


def spec_devices(path: Path) -> list[str] | None:
    try:
        return [device["name"] for device in json.loads(path.read_text())["devices"]]
    except (OSError, ValueError):
        return None


async def test_a_spec_directory_blocked_by_a_file_is_written_once_the_file_goes(
    kubelet: KubeletStandIn,
    node: FakeNode,
    plugin_dir: Path,
    short_tmp: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, CDI)
    blocker = short_tmp / "cdi"
    blocker.write_text("in the way")
    spec = blocker / "huawei.com-npu.json"
    async with running_plugin(node.settings(plugin_dir, allocate_mode="cdi", cdi_spec_dir=blocker)) as app:
        await wait_for(kubelet, registered(RESOURCE), "registered without the spec")
        await until(
            lambda: not_ready_with(
                app,
                f"CDI spec: cannot write the CDI spec {spec}: cannot create {blocker}: ",
                f"{blocker} is a regular file where a directory belongs",
            ),
            "/readyz names the spec and why it cannot be written",
        )
        retries = await until(
            lambda: records(caplog, CDI, level=logging.DEBUG, path=str(spec)), "a retry, at DEBUG"
        )
        assert retries[0].attempt == 2  # type: ignore[attr-defined]
        inventory = app.inventory
        assert inventory is not None
        version = inventory.version
        blocker.unlink()
        await until(lambda: spec_devices(spec) == ["0"], "the spec written")
        assert inventory.version == version, "without any change of the chips or the offers"
        await until(lambda: app.ready, f"ready (last: {app.readiness().detail})")
    errors = records(caplog, CDI, level=logging.ERROR, path=str(spec))
    assert [error.attempt for error in errors] == [1], "said once, however often retried"  # type: ignore[attr-defined]
    assert "cdi_spec_dir" in errors[0].getMessage()  # the setting that moves the spec elsewhere


async def test_a_spec_directory_not_writable_for_a_while_gets_the_spec_once_it_is(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path, short_tmp: Path
) -> None:
    directory = short_tmp / "cdi"
    spec = directory / "huawei.com-npu.json"
    with read_only(directory) as switch:
        async with running_plugin(
            node.settings(plugin_dir, allocate_mode="cdi", cdi_spec_dir=directory)
        ) as app:
            await wait_for(kubelet, registered(RESOURCE), "registered without the spec")
            await until(
                lambda: not_ready_with(app, f"CDI spec: cannot write the CDI spec {spec}"), "not ready"
            )
            switch.off()
            await until(
                lambda: spec_devices(spec) == ["0"], "the spec written once the directory is writable"
            )
            await until(lambda: app.ready, f"ready (last: {app.readiness().detail})")
