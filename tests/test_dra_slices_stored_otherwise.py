"""A server that stores a ResourceSlice otherwise than sent: the slice is written once, not in a loop.

A newer API server may default a field, or normalise a quantity, that the
plugin does not mirror. The stored slice then never equals what the plugin
would send, and a controller that compares the two rewrites it at every look,
each rewrite being the next look: a write storm and a pool generation that
never settles. The plugin takes its own write, untouched by anyone since, as
holding the content it sent.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from dra_harness import DRIVER, NODE, DraNode, running_driver
from fake_apiserver import FakeApiServer
from waiting import until

from ascend_plugin.app import PluginApp
from ascend_plugin.faces.dra.slices import SliceController, first_difference
from ascend_plugin.testing import resource_api

pytestmark = pytest.mark.anyio


async def published(app: PluginApp, apiserver: FakeApiServer) -> SliceController:
    """The driver's slice controller, once the node's slice is published."""

    def in_sync() -> bool:
        return app.dra is not None and app.dra.slices is not None and app.dra.slices.in_sync

    await until(lambda: in_sync() and len(apiserver.slices(DRIVER, NODE)) == 1, "published")
    assert app.dra is not None
    assert app.dra.slices is not None
    return app.dra.slices


@pytest.fixture
def server_adds_an_attribute(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake API server, as a newer one might, stores every device with an attribute of its own."""
    stamp = resource_api.stamp_defaults

    def adding(spec: dict[str, Any]) -> None:
        stamp(spec)
        for device in spec.get("devices") or []:
            device.setdefault("attributes", {})["serverDefault"] = {"bool": True}

    monkeypatch.setattr(resource_api, "stamp_defaults", adding)


@pytest.mark.usefixtures("server_adds_an_attribute")
async def test_a_slice_stored_otherwise_is_not_rewritten_at_every_look(
    dra_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path, caplog: pytest.LogCaptureFixture
) -> None:
    apiserver.add_node(NODE)
    async with running_driver(dra_node.settings(kubeconfig)) as app:
        slices = await published(app, apiserver)
        writes, generation = slices.writes, slices.generation
        for _ in range(5):
            looks = slices.looks
            slices.wake()
            await until(lambda looks=looks: slices.looks > looks, "another look")  # type: ignore[misc]
        assert (slices.writes, slices.generation) == (writes, generation)
        stored = apiserver.slices(DRIVER, NODE)[0]
        assert all("serverDefault" in device["attributes"] for device in stored["spec"]["devices"])
    said = [r for r in caplog.records if "otherwise than it was sent" in r.getMessage()]
    assert len(said) == 1
    assert said[0].levelno == logging.WARNING
    assert "serverDefault: sent nothing, stored" in said[0].getMessage()


async def test_a_slice_changed_by_someone_else_is_written_again(
    dra_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path, server_adds_an_attribute: None
) -> None:
    apiserver.add_node(NODE)
    async with running_driver(dra_node.settings(kubeconfig)) as app:
        slices = await published(app, apiserver)
        writes = slices.writes
        apiserver.wipe_slices(NODE)
        # The server stores the slice before the driver has its answer and counts the write: wait for both.
        await until(
            lambda: len(apiserver.slices(DRIVER, NODE)) == 1 and slices.writes > writes, "written again"
        )


def test_first_difference_names_the_path_and_both_values() -> None:
    sent = {"devices": [{"name": "npu-0"}, {"name": "npu-1", "capacity": {"memory": {"value": "1536Mi"}}}]}
    stored = {"devices": [{"name": "npu-0"}, {"name": "npu-1", "capacity": {"memory": {"value": "1.5Gi"}}}]}
    assert first_difference(sent, stored) == 'devices[1].capacity.memory.value: sent "1536Mi", stored "1.5Gi"'
    assert first_difference([1], [1, 2]) == "the content: sent [1], stored [1, 2]"
