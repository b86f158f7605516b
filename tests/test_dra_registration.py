"""Registration through the plugin watcher: what GetInfo says, the kubelet's verdict, and staying found."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import anyio.to_thread
import pytest
from dra_harness import DRIVER, NODE, DraNode, put_claim, registered, result, running_driver, standin
from fake_apiserver import FakeApiServer
from log_records import records
from waiting import until, wait_for

from ascend_plugin.instance_lock import InstanceLock
from ascend_plugin.testing.dra_standin import DraKubeletStandIn
from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio


async def test_get_info_names_the_driver_its_socket_and_v1_first(
    dra_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path, dra_kubelet: DraKubeletStandIn
) -> None:
    apiserver.add_node(NODE)
    async with running_driver(dra_node.settings(kubeconfig)) as app:
        await wait_for(dra_kubelet, registered, "the driver registered")
        view = dra_kubelet.drivers[DRIVER]
        assert view.socket == dra_node.registry_dir / "npu.huawei.com-reg.sock"
        assert view.endpoint == str(dra_node.plugin_dir / "dra.sock")
        assert Path(view.endpoint).is_absolute()
        assert view.supported == ("v1.DRAPlugin", "v1beta1.DRAPlugin", "v1alpha1.DRAResourceHealth")
        assert view.service == "v1.DRAPlugin"
        await until(lambda: app.ready, "ready once the kubelet confirmed the registration")
        assert dra_kubelet.refusals == []


async def test_a_kubelet_that_knows_no_dra_v1_or_v1beta1_refuses_and_the_driver_says_why(
    dra_node: DraNode,
    apiserver: FakeApiServer,
    kubeconfig: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A 1.31 kubelet speaks v1alpha4 only: its refusal is logged with its own words and keeps /readyz red."""
    kubelet = standin(dra_node, apiserver, kubelet_services=("v1alpha4.Node",))
    await anyio.to_thread.run_sync(kubelet.start)
    try:
        async with running_driver(dra_node.settings(kubeconfig)) as app:
            await wait_for(kubelet, lambda k: bool(k.refusals), "the registration refused")
            (record,) = await until(
                lambda: records(caplog, "ascend_plugin.faces.dra.services", level=logging.ERROR),
                "the refusal logged",
            )
            # In the kubelet's own words: what it supports.
            assert "none of services supported by the plugin" in record.__dict__["error"]
            assert "v1alpha4.Node" in record.__dict__["error"]
            probe = app.readiness()
            assert not probe.ok
            assert "not registered with the kubelet" in probe.detail
            assert "none of services supported by the plugin" in probe.detail
            assert DRIVER not in kubelet.drivers
    finally:
        await anyio.to_thread.run_sync(kubelet.stop)


async def test_a_v1beta1_kubelet_gets_the_same_answers(
    dra_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    """1.32 and 1.33 kubelets know only v1beta1.DRAPlugin: it is chosen and serves claims alike."""
    apiserver.add_node(NODE)
    kubelet = standin(dra_node, apiserver, kubelet_services=("v1beta1.DRAPlugin",))
    await anyio.to_thread.run_sync(kubelet.start)
    try:
        async with running_driver(dra_node.settings(kubeconfig)):
            await wait_for(kubelet, registered, "registered")
            assert kubelet.drivers[DRIVER].service == "v1beta1.DRAPlugin"
            claim = put_claim(apiserver, "train", [result("npu-3")])
            answer = await anyio.to_thread.run_sync(kubelet.prepare, DRIVER, [claim])
            prepared = answer.claims[claim[2]]
            assert prepared.error == ""
            assert [d.device_name for d in prepared.devices] == ["npu-3"]
            done = await anyio.to_thread.run_sync(kubelet.unprepare, DRIVER, [claim])
            assert done.claims[claim[2]].error == ""
    finally:
        await anyio.to_thread.run_sync(kubelet.stop)


async def test_a_deleted_registration_socket_comes_back_and_the_kubelet_finds_it(
    dra_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path, dra_kubelet: DraKubeletStandIn
) -> None:
    apiserver.add_node(NODE)
    async with running_driver(dra_node.settings(kubeconfig)):
        await wait_for(dra_kubelet, registered, "registered")
        (dra_node.registry_dir / "npu.huawei.com-reg.sock").unlink()
        await wait_for(dra_kubelet, lambda k: registered(k, 2), "registered again")
        assert (dra_node.registry_dir / "npu.huawei.com-reg.sock").is_socket()
        assert dra_kubelet.refusals == []


async def test_a_restarted_kubelet_asks_again_and_registers_it_again(
    dra_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path, dra_kubelet: DraKubeletStandIn
) -> None:
    apiserver.add_node(NODE)
    async with running_driver(dra_node.settings(kubeconfig)) as app:
        await wait_for(dra_kubelet, registered, "registered")
        asked = dra_kubelet.get_info_calls
        await anyio.to_thread.run_sync(dra_kubelet.restart)
        await wait_for(dra_kubelet, lambda k: registered(k, 2), "registered with the new kubelet")
        assert dra_kubelet.get_info_calls > asked
        dra = app.dra
        assert dra is not None
        await until(lambda: dra.registration.registrations == 2, "the new kubelet's confirmation heard")
        # The new kubelet wiped the slices and restarted its PodResources: ready once both are back.
        await until(lambda: app.ready, "ready with the new kubelet")


async def test_serving_dra_leaves_the_device_plugin_api_alone(
    dra_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path, dra_kubelet: DraKubeletStandIn
) -> None:
    """With serve=dra the chips are not also extended resources: the scheduler would count them twice."""
    apiserver.add_node(NODE)
    device_plugins = dra_node.root / "device-plugins"
    device_kubelet = KubeletStandIn(device_plugins)
    device_kubelet.start()
    try:
        async with running_driver(dra_node.settings(kubeconfig)) as app:
            await wait_for(dra_kubelet, registered, "registered as a DRA driver")
            await until(lambda: app.ready, "ready")
            assert app.face is None
            assert device_kubelet.registrations == []
            assert [path.name for path in device_plugins.iterdir()] == ["kubelet.sock"]
    finally:
        device_kubelet.stop()


async def test_a_second_driver_on_the_same_directory_waits_for_the_lock_and_touches_no_socket(
    dra_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path, dra_kubelet: DraKubeletStandIn
) -> None:
    """Two DRA drivers on one node (a rollout) must not replace each other's sockets: the second waits."""
    apiserver.add_node(NODE)
    holder = InstanceLock(dra_node.plugin_dir)
    await holder.acquire()
    try:
        async with running_driver(dra_node.settings(kubeconfig)) as app:
            await until(lambda: app.lock.waiting_since is not None, "the second driver waiting")
            probe = app.readiness()
            assert not probe.ok
            assert probe.detail.startswith(f"waiting for the lock held by pid {os.getpid()}")
            assert not (dra_node.plugin_dir / "dra.sock").exists()
            assert DRIVER not in dra_kubelet.drivers
            holder.release()
            await wait_for(dra_kubelet, registered, "the driver registered once the lock is free")
            assert app.lock.held
    finally:
        holder.release()


async def test_no_slice_is_published_before_the_kubelet_registers_the_driver(
    dra_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A published device must be one the kubelet can prepare: the real scheduler otherwise places a pod
    there, the kubelet answers "DRA driver ... is not registered" and the pod waits out its backoff."""
    caplog.set_level(logging.INFO, logger="ascend_plugin.faces.dra.face")
    apiserver.add_node(NODE)
    refusing = standin(dra_node, apiserver, kubelet_services=("v1alpha4.Node",))
    await anyio.to_thread.run_sync(refusing.start)
    try:
        async with running_driver(dra_node.settings(kubeconfig)):
            await wait_for(refusing, lambda k: bool(k.refusals), "the registration refused")
            await until(
                lambda: any("wait for the kubelet" in r.getMessage() for r in caplog.records),
                "the slices waiting for the registration",
            )
            assert apiserver.slices(DRIVER, NODE) == []
            await anyio.to_thread.run_sync(refusing.stop)
            kubelet = standin(dra_node, apiserver)
            await anyio.to_thread.run_sync(kubelet.start)
            try:
                await until(lambda: apiserver.slices(DRIVER, NODE), "published once a kubelet registered it")
            finally:
                await anyio.to_thread.run_sync(kubelet.stop)
    finally:
        await anyio.to_thread.run_sync(refusing.stop)
