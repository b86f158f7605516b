"""/healthz fails once a part has failed for longer than the bound without serving again (only a restart
can help then), and passes again once it serves; /readyz names the failed part and its error meanwhile."""

from __future__ import annotations

import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import anyio.to_thread
import pytest
from plugin_harness import FakeNode, registered, running_plugin
from waiting import until, wait_for

from ascend_plugin.faces.operations.probes import ProbeLimits
from ascend_plugin.resilience import Supervision
from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio

RESOURCE = "huawei.com/Ascend310"


@pytest.fixture
def taken_port() -> Iterator[socket.socket]:
    """A loopback port something else listens on."""
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    yield holder
    holder.close()


async def test_a_part_that_keeps_failing_fails_liveness_after_the_bound_and_passes_once_it_serves(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path, taken_port: socket.socket
) -> None:
    port = taken_port.getsockname()[1]
    settings = node.settings(plugin_dir, http_address=f"127.0.0.1:{port}")
    supervision = Supervision(recovered_after=0.5)
    async with running_plugin(
        settings, supervision=supervision, limits=ProbeLimits(failed_is_dead=1.0)
    ) as app:
        await wait_for(kubelet, registered(RESOURCE), "registered: the kubelet side serves")
        await until(lambda: "operations endpoint failed:" in app.readiness().detail, "/readyz names the part")
        assert "address already in use" in app.readiness().detail
        assert app.liveness().ok, "not dead yet: within the bound"
        await until(lambda: not app.liveness().ok, "dead once it failed for longer than the bound")
        assert app.liveness().detail.startswith("operations endpoint has failed for ")
        assert "without serving again" in app.liveness().detail
        (part,) = [part for part in supervision.parts() if part.name == "operations endpoint"]
        assert not part.running
        assert part.failing_since is not None

        taken_port.close()
        await until(lambda: app.liveness().ok, "alive once the endpoint served for a while")
        await until(lambda: app.ready, f"ready (last: {app.readiness().detail})")
        answer = await anyio.to_thread.run_sync(
            lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10).read()
        )
        assert answer == b"ok\n"
