"""The device-info ConfigMap while a chip flaps held out: it is not rewritten on every flip.

The chip flaps on either fake, held out by flap damping or by an escalation
(ManuallySeparateNPU by FaultFrequency), and the publisher writes to the
loopback API server through the real kubernetes-asyncio client. Damping's
clock stands still, so its hold lasts the whole test; an escalation's time
moves with each occurrence, which is written, but at most every 10 s.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from fake_apiserver import FakeApiServer
from fake_dcmi.players import ScenarioPlayer
from health_harness import Monitored, monitored
from kube_harness import running
from waiting import WAIT, until

from ascend_plugin.faces.kube.device_info import TIMES_INTERVAL, DeviceInfoPublisher
from ascend_plugin.faces.kube.huawei_format import encode_upgrade_reasons
from ascend_plugin.inventory.damping import DampingPolicy
from ascend_plugin.inventory.monitor import HealthPolicy
from ascend_plugin.kubeapi.client import Kube
from ascend_plugin.testing.kube_apiserver import Recorded
from backends.fake import FakeScenario

pytestmark = pytest.mark.anyio

NAMESPACE, NAME = "kube-system", "mindx-dl-deviceinfo-npu-node-1"
DEVICE = "Ascend910-0"
FLAPPING = 3.0  # seconds the chip keeps flapping once it is held
POLICY = HealthPolicy(damping=DampingPolicy(flap_threshold=3, flap_window=60.0, flap_hold=30.0))


def _server(faulty: bool) -> FakeScenario:
    chips = [
        {"phy_id": n, "card_id": n + 1, "fault_codes": ["80818C00"] if faulty and n == 0 else []}
        for n in range(4)
    ]
    return FakeScenario.model_validate({"chip_name": "910B3", "chips": chips})


def _writes(apiserver: FakeApiServer) -> list[Recorded]:
    return [
        request
        for request in apiserver.requests
        if request.resource == "configmaps" and request.verb in ("create", "update") and request.status < 300
    ]


def _device_list(write: Recorded) -> dict[str, str]:
    listed: dict[str, str] = json.loads(write.body["data"]["DeviceInfoCfg"])["DeviceInfo"]["DeviceList"]
    return listed


async def _flip(node: ScenarioPlayer[Any], watched: Monitored, faulty: bool) -> None:
    """Fault or clear the chip, and wait until the monitor has seen it (held or not)."""
    node.update(_server(faulty))
    seen: Callable[[str], bool] = (
        (lambda reason: reason.startswith("fault 80818C00"))
        if faulty
        else (lambda reason: reason == "" or reason.startswith("flapping ("))
    )
    await until(lambda: seen(watched.device(DEVICE).reason), f"{DEVICE} {'faulty' if faulty else 'clear'}")


async def test_a_chip_held_by_damping_does_not_rewrite_the_configmap_however_it_flaps(
    any_fake: ScenarioPlayer[Any], apiserver: FakeApiServer, kube: Kube
) -> None:
    with monitored(any_fake.open(_server(False)), policy=POLICY) as watched:
        await watched.monitor.poll_all()
        await watched.monitor.subscribe()  # fault events: each flip is seen at once
        publisher = DeviceInfoPublisher(kube, watched.inventory, NAMESPACE, NAME, refresh=300.0)
        async with running(watched.monitor.run, publisher.run):
            await until(lambda: len(_writes(apiserver)) == 1, "the first write")
            with anyio.fail_after(WAIT):  # damped within a few flips, or a failure instead of a hang
                while not watched.device(DEVICE).reason.startswith("flapping ("):
                    await _flip(any_fake, watched, faulty=True)
                    await _flip(any_fake, watched, faulty=False)
            held = time.monotonic()
            flips = 0
            while time.monotonic() - held < FLAPPING:  # flipping as fast as the monitor sees it
                await _flip(any_fake, watched, faulty=flips % 2 == 0)
                flips += 1

    writes = _writes(apiserver)
    after_hold = [write for write in writes if write.at >= held]
    assert flips > 10
    # The state that got it held may still go out (writes are a second apart); nothing after that.
    assert len(after_hold) <= 1, [round(write.at - held, 2) for write in after_hold]
    assert len(writes) <= 4
    listed = _device_list(writes[-1])
    assert listed["huawei.com/Ascend910-Unhealthy"] == DEVICE
    assert DEVICE not in listed["huawei.com/Ascend910"].split(",")
    (fault,) = json.loads(listed["huawei.com/Ascend910-Fault"])
    # Held, the chip keeps the fault it flapped with (and its first-seen time), flip or no flip.
    assert (fault["npu_name"], fault["fault_code"], fault["fault_handling"]) == (
        DEVICE,
        "80818C00",
        "SeparateNPU",
    )


def _separating(faulty: bool) -> FakeScenario:
    chips = [
        {"phy_id": n, "card_id": n + 1, "fault_codes": ["80E01801"] if faulty and n == 0 else []}
        for n in range(4)
    ]
    return FakeScenario.model_validate({"chip_name": "910B3", "chips": chips})


async def test_a_chip_held_by_an_escalation_does_not_rewrite_the_configmap_however_it_flaps(
    any_fake: ScenarioPlayer[Any], apiserver: FakeApiServer, kube: Kube
) -> None:
    """80E01801 twice within a day: ManuallySeparateNPU (FaultFrequency); then it keeps coming and going."""
    with monitored(any_fake.open(_separating(False)), policy=POLICY) as watched:
        await watched.monitor.poll_all()
        await watched.monitor.subscribe()
        publisher = DeviceInfoPublisher(
            kube, watched.inventory, NAMESPACE, NAME, refresh=300.0, policy=watched.faults.policy
        )

        async def flip(faulty: bool) -> None:
            watched.clock.advance(1.0)  # the policy's time passes as the chip flaps: each occurrence's own
            any_fake.update(_separating(faulty))
            await until(
                lambda: (0x80E01801 in {f.code for f in watched.device(DEVICE).faults}) == faulty,
                f"{DEVICE} {'faulty' if faulty else 'clear'}",
            )

        async with running(watched.monitor.run, publisher.run):
            await until(lambda: len(_writes(apiserver)) == 1, "the first write")
            with anyio.fail_after(WAIT):
                while not watched.faults.policy.manually_separated():
                    await flip(True)
                    await flip(False)
            await until(
                lambda: "Ascend910-0" in _data(apiserver)["ManuallySeparateNPU"], "the separation written"
            )
            held = time.monotonic()
            flips = 0
            while time.monotonic() - held < FLAPPING:
                await flip(flips % 2 == 0)
                flips += 1
            writes = _writes(apiserver)
            # The times it moved (Huawei's release window counts from the last occurrence) follow later.
            latest = encode_upgrade_reasons(watched.faults.policy.reasons(), "Ascend910")
            await until(
                lambda: _data(apiserver)["UpgradeFaultReason"] == latest,
                "the escalation's latest time written",
                within=TIMES_INTERVAL + WAIT,
            )

    after_hold = [write for write in writes if write.at >= held]
    assert flips > 10
    assert len(after_hold) <= 1, [round(write.at - held, 2) for write in after_hold]
    listed = _device_list(writes[-1])
    assert listed["huawei.com/Ascend910-Unhealthy"] == DEVICE
    (fault,) = json.loads(listed["huawei.com/Ascend910-Fault"])
    assert (fault["npu_name"], fault["fault_code"], fault["fault_handling"]) == (
        DEVICE,
        "80E01801",
        "ManuallySeparateNPU",
    )


def _data(apiserver: FakeApiServer) -> dict[str, str]:
    stored = apiserver.get("configmaps", NAME, NAMESPACE)
    return dict(stored["data"]) if stored else {}
