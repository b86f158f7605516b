"""A DRA driver kept from serving (a directory not writable yet, a file in a socket's place, a checkpoint
that cannot be moved aside, slices the API server will not take) says so on /readyz, naming the part and
the error, and serves again by itself once the node lets it; one that cannot recover fails /healthz."""

from __future__ import annotations

from pathlib import Path

import pytest
from dra_harness import (
    DRIVER,
    NODE,
    DraNode,
    device_names,
    prepare,
    put_claim,
    registered,
    result,
    running_driver,
)
from fake_apiserver import FakeApiServer
from plugin_harness import not_ready_with
from read_only import read_only
from waiting import until, wait_for

from ascend_plugin.app import PluginApp
from ascend_plugin.faces.operations.probes import ProbeLimits
from ascend_plugin.resilience import Supervision
from ascend_plugin.testing.dra_standin import DraKubeletStandIn

pytestmark = pytest.mark.anyio

EIGHT = [f"npu-{phy}" for phy in range(8)]


async def serves_claims(app: PluginApp, kubelet: DraKubeletStandIn, apiserver: FakeApiServer) -> None:
    """Registered, ready, and a claim prepared: the driver does its job."""
    await wait_for(kubelet, registered, "the driver registered")
    await until(lambda: app.ready, f"ready (last: {app.readiness().detail})")
    claim = put_claim(apiserver, "train", [result("npu-0")])
    assert (await prepare(kubelet, claim)).claims[claim[2]].error == ""


async def test_a_plugin_directory_not_writable_at_start_is_named_and_served_once_it_is(
    dra_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path, dra_kubelet: DraKubeletStandIn
) -> None:
    apiserver.add_node(NODE)
    socket = dra_node.plugin_dir / "dra.sock"
    with read_only(dra_node.plugin_dir) as directory:
        async with running_driver(dra_node.settings(kubeconfig)) as app:
            await until(
                lambda: not_ready_with(app, "DRA driver: cannot create", str(socket)),
                "/readyz names the DRA driver and the socket it cannot create",
            )
            assert DRIVER not in dra_kubelet.drivers
            assert app.liveness().ok, "a part that keeps trying by itself is not dead"
            directory.off()
            await serves_claims(app, dra_kubelet, apiserver)
            assert socket.is_socket()


async def test_a_file_in_place_of_the_registration_socket_is_named_and_the_socket_served_once_it_goes(
    dra_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path, dra_kubelet: DraKubeletStandIn
) -> None:
    apiserver.add_node(NODE)
    blocker = dra_node.registry_dir / f"{DRIVER}-reg.sock"
    blocker.write_text("not a socket")  # the kubelet stand-in made the directory
    async with running_driver(dra_node.settings(kubeconfig)) as app:
        await until(
            lambda: not_ready_with(
                app, "DRA driver: cannot create", str(blocker), "a regular file is in its place"
            ),
            "/readyz names the file in the registration socket's place",
        )
        assert (dra_node.plugin_dir / "dra.sock").is_socket(), "the DRA socket is served meanwhile"
        blocker.unlink()
        await serves_claims(app, dra_kubelet, apiserver)


async def test_a_start_that_fails_is_retried_until_it_serves_and_fails_liveness_while_it_lasts(
    dra_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path, dra_kubelet: DraKubeletStandIn
) -> None:
    """A directory where the checkpoint goes, in a plugin directory that cannot be written: the checkpoint
    cannot be moved aside, so the driver's run fails at start, again at every restart, until it can."""
    apiserver.add_node(NODE)
    dra_node.checkpoint.mkdir(parents=True)
    (dra_node.checkpoint / "junk").write_text("left by someone")
    supervision = Supervision(recovered_after=0.5)
    limits = ProbeLimits(failed_is_dead=1.0)
    with read_only(dra_node.plugin_dir) as directory:
        async with running_driver(
            dra_node.settings(kubeconfig), supervision=supervision, limits=limits
        ) as app:
            await until(
                lambda: not_ready_with(
                    app, "DRA driver failed:", str(dra_node.checkpoint), "cannot be moved aside"
                ),
                "/readyz names the failed part and its error",
            )
            assert "restarting it in" in app.readiness().detail
            await until(
                lambda: not app.liveness().ok, "/healthz fails once the part failed for longer than 1 s"
            )
            assert app.liveness().detail.startswith("DRA driver has failed for ")
            assert "without serving again: the prepared-claims checkpoint" in app.liveness().detail
            directory.off()
            await serves_claims(app, dra_kubelet, apiserver)
            await until(lambda: app.liveness().ok, "alive again once the driver served for a while")
    aside = list(dra_node.plugin_dir.glob("checkpoint.json.bad-*"))
    assert len(aside) == 1
    assert (aside[0] / "junk").read_text() == "left by someone", "moved aside, not deleted"


async def test_readiness_is_false_while_a_faulted_chip_cannot_be_taken_out_of_the_slices(
    dra_driver: PluginApp, dra_node: DraNode, apiserver: FakeApiServer
) -> None:
    await until(lambda: device_names(apiserver.slices(DRIVER, NODE)) == EIGHT, "published")
    await until(lambda: dra_driver.ready, "ready")
    refusal = apiserver.inject(500, "update", "resourceslices")
    dra_node.set_faults({5: ["80E01801"]})
    await until(
        lambda: not_ready_with(
            dra_driver, f"DRA driver: ResourceSlices of pool {NODE} not up to date", "HTTP 500"
        ),
        "/readyz says the slices are not what the chips are",
    )
    assert "npu-5" in device_names(apiserver.slices(DRIVER, NODE)), "still offered: the write failed"
    assert refusal.hits >= 1
    apiserver.clear_injections()
    without_five = [name for name in EIGHT if name != "npu-5"]
    await until(lambda: device_names(apiserver.slices(DRIVER, NODE)) == without_five, "the slices caught up")
    await until(lambda: dra_driver.ready, "ready again")
