"""What a client sends the DRA driver's sockets is bounded: size, claims, name lengths, malformed bytes.

A raw grpcio client on ``dra.sock`` or the registration socket sends what no
kubelet would: a 5 MiB claim name, 1,000 claims, names longer than Kubernetes
allows, bytes that are not protobuf, random bytes. Each gets its status
(RESOURCE_EXHAUSTED, INVALID_ARGUMENT) with a short reason before anything is
decoded, nothing reaches the API server, the log says so in one rate-limited
line without a traceback, and the driver serves the kubelet as before.
"""

from __future__ import annotations

import logging
import random
import uuid
from dataclasses import dataclass
from pathlib import Path

import anyio.to_thread
import grpc
import pytest
from dra_harness import DRIVER, DraNode, prepare, put_claim, result
from fake_apiserver import FakeApiServer

from ascend_plugin.app import PluginApp
from ascend_plugin.kubelet_api.k8s.io.kubelet.pkg.apis.dra import v1
from ascend_plugin.kubelet_api.pluginregistration import RegistrationStatus
from ascend_plugin.logs import JsonFormatter
from ascend_plugin.testing.dra_standin import DraKubeletStandIn

pytestmark = pytest.mark.anyio

REFUSALS = "ascend_plugin.grpc_guard.refusal_log"
FOUR_MIB = 4 * 1024 * 1024
V1 = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/"
V1BETA1 = "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/"
PREPARE = V1 + "NodePrepareResources"
UNPREPARE = V1 + "NodeUnprepareResources"
CLAIM_METHODS = (PREPARE, UNPREPARE, V1BETA1 + "NodePrepareResources", V1BETA1 + "NodeUnprepareResources")
HEALTH = "/v1alpha1.DRAResourceHealth/NodeWatchResources"
GET_INFO = "/pluginregistration.Registration/GetInfo"
NOTIFY = "/pluginregistration.Registration/NotifyRegistrationStatus"


@dataclass
class Sockets:
    """The driver's two sockets, called raw: answers' bytes or the gRPC error."""

    dra: Path
    registration: Path

    def call(self, method: str, payload: bytes, times: int = 1) -> list[grpc.RpcError | bytes]:
        socket = self.registration if method.startswith("/pluginregistration.") else self.dra
        answers: list[grpc.RpcError | bytes] = []
        with grpc.insecure_channel(f"unix:{socket}") as channel:
            call = channel.unary_unary(method)
            for _ in range(times):
                try:
                    answers.append(call(payload, timeout=10))
                except grpc.RpcError as error:
                    answers.append(error)
        return answers

    async def refused(self, method: str, payload: bytes) -> grpc.RpcError:
        [answer] = await anyio.to_thread.run_sync(self.call, method, payload)
        assert isinstance(answer, grpc.RpcError), f"{method} answered {answer!r}"
        return answer


@pytest.fixture
def sockets(dra_node: DraNode) -> Sockets:
    return Sockets(dra_node.plugin_dir / "dra.sock", dra_node.registry_dir / f"{DRIVER}-reg.sock")


def claims(*named: tuple[str, ...]) -> bytes:
    """The bytes of a request naming these (namespace, name, uid) claims: Prepare and Unprepare alike."""
    return bytes(
        v1.NodePrepareResourcesRequest(
            claims=[v1.Claim(namespace=namespace, name=name, uid=uid) for namespace, name, uid in named]
        )
    )


def refusal_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name == REFUSALS]


async def still_serves(apiserver: FakeApiServer, kubelet: DraKubeletStandIn) -> None:
    claim = put_claim(apiserver, f"train-{uuid.uuid4().hex[:6]}", [result("npu-0")])
    answer = await prepare(kubelet, claim)
    assert answer.claims[claim[2]].devices, answer.claims[claim[2]].error


def no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    assert not any(record.exc_info for record in caplog.records), "a traceback was logged"
    assert not [record for record in caplog.records if record.name.startswith("grpclib")]


async def test_a_5_mib_claim_name_is_refused_from_its_length_prefix_and_never_reaches_the_api(
    dra_driver: PluginApp,
    sockets: Sockets,
    apiserver: FakeApiServer,
    dra_kubelet: DraKubeletStandIn,
    caplog: pytest.LogCaptureFixture,
) -> None:
    uid = str(uuid.uuid4())
    five_mib = claims(("default", "x" * (5 * 1024 * 1024), uid))
    for method in (PREPARE, V1BETA1 + "NodePrepareResources"):
        error = await sockets.refused(method, five_mib)
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert error.details() == (
            f"a message of {len(five_mib)} bytes is over the limit of {FOUR_MIB} bytes "
            "(4 MiB, the most a kubelet sends)"
        )
    # Under the cap, the name meets its own bound: a DNS subdomain.
    under_cap = claims(("default", "x" * (FOUR_MIB - 64), uid))
    error = await sockets.refused(PREPARE, under_cap)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == (
        f"NodePrepareResourcesRequest.claims[0].name ('xxxxxxxxxxxxxxxxxxxx'...) is {FOUR_MIB - 64} bytes "
        "long; claim names have at most 253 characters (a DNS subdomain)"
    )
    assert apiserver.requests_of("get", "resourceclaims") == []
    lines = refusal_lines(caplog)
    assert len(lines) == 1  # one peer within 10 s
    assert len(JsonFormatter().format(lines[0])) < 1000  # the line, fields and all, carries no 5 MiB name
    no_traceback(caplog)
    await still_serves(apiserver, dra_kubelet)


@pytest.mark.parametrize(
    ("claim", "reason"),
    [
        (("n" * 64, "train", "UID"), "claims[0].namespace ('nnnnnnnnnnnnnnnnnnnn'...) is 64 bytes long; "
         "namespaces have at most 63 characters (a DNS label)"),
        (("default", "c" * 254, "UID"), "claims[0].name ('cccccccccccccccccccc'...) is 254 bytes long; "
         "claim names have at most 253 characters (a DNS subdomain)"),
        (("default", "train", "u" * 129), "claims[0].uid ('uuuuuuuuuuuuuuuuuuuu'...) is 129 bytes long; "
         "claim UIDs have at most 128 characters"),
        (("default", "train", ""), "claims[0].uid is missing or empty; a kubelet always sends it"),
        (("", "train", "UID"), "claims[0].namespace is missing or empty; a kubelet always sends it"),
        (("default", "", "UID"), "claims[0].name is missing or empty; a kubelet always sends it"),
    ],
)  # fmt: skip
async def test_claim_fields_beyond_what_kubernetes_allows_are_refused_on_every_claim_method(
    dra_driver: PluginApp,
    sockets: Sockets,
    apiserver: FakeApiServer,
    claim: tuple[str, str, str],
    reason: str,
) -> None:
    named = tuple(str(uuid.uuid4()) if part == "UID" else part for part in claim)
    for method in CLAIM_METHODS:
        error = await sockets.refused(method, claims(named))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        request = method.rsplit("/", 1)[1] + "Request."
        assert error.details() == request + reason
    assert apiserver.requests_of("get", "resourceclaims") == []


async def test_a_name_at_the_bound_passes_to_the_preparer(
    dra_driver: PluginApp, sockets: Sockets, apiserver: FakeApiServer
) -> None:
    """253 characters is a valid claim name: the driver asks the API server, which has no such claim."""
    uid = str(uuid.uuid4())
    [answer] = await anyio.to_thread.run_sync(sockets.call, PREPARE, claims(("default", "c" * 253, uid)))
    assert isinstance(answer, bytes)
    assert "does not exist" in v1.NodePrepareResourcesResponse.parse(answer).claims[uid].error
    assert len(apiserver.requests_of("get", "resourceclaims")) == 1


async def test_more_claims_than_one_call_may_name_are_refused_and_the_bound_itself_is_served(
    dra_driver: PluginApp, sockets: Sockets, apiserver: FakeApiServer
) -> None:
    many = [("default", f"c{n}", str(uuid.uuid4())) for n in range(129)]
    error = await sockets.refused(PREPARE, claims(*many))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == (
        "NodePrepareResourcesRequest.claims has more entries than the 128 claims one call may name "
        "(a kubelet sends one pod's)"
    )
    # 128 claims the driver never prepared: Unprepare answers each (no API server needed).
    [answer] = await anyio.to_thread.run_sync(sockets.call, UNPREPARE, claims(*many[:128]))
    assert isinstance(answer, bytes)
    assert len(v1.NodeUnprepareResourcesResponse.parse(answer).claims) == 128
    assert apiserver.requests_of("get", "resourceclaims") == []


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"", ".claims names no entry; a kubelet always sends it"),
        (b"\x0a\xff\x01", " is malformed: field 1 at byte 1 claims 255 bytes, 0 are left"),
        (b"\x08\x01", ".claims is malformed: wire type 0 at byte 0, expected 2"),
        (b"\x0b\x00", " is malformed: field 1 has wire type 3 at byte 0"),
        (b"\x0a\x03\x1a\x01\xff", ".claims[0].name is malformed: not UTF-8 (b'\\xff')"),
        (b"\x10" + b"\xff" * 11, " is malformed: a number longer than 10 bytes at byte 1"),
    ],
)  # fmt: skip
async def test_malformed_bytes_get_invalid_argument_with_a_short_reason_and_no_traceback(
    dra_driver: PluginApp,
    sockets: Sockets,
    apiserver: FakeApiServer,
    dra_kubelet: DraKubeletStandIn,
    caplog: pytest.LogCaptureFixture,
    payload: bytes,
    reason: str,
) -> None:
    error = await sockets.refused(PREPARE, payload)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == "NodePrepareResourcesRequest" + reason
    [line] = refusal_lines(caplog)
    assert line.__dict__["peer"].startswith("pid ")
    assert (line.__dict__["status"], line.__dict__["reason"]) == ("INVALID_ARGUMENT", "shape")
    assert line.__dict__["socket"] == str(sockets.dra)
    no_traceback(caplog)
    await still_serves(apiserver, dra_kubelet)


async def test_random_bytes_are_never_taken_for_a_request(
    dra_driver: PluginApp, sockets: Sockets, caplog: pytest.LogCaptureFixture
) -> None:
    """Bytes that happen to parse as fields this driver does not know still name no claim."""
    rng = random.Random(23)
    payloads = [rng.randbytes(rng.randint(1, 512)) for _ in range(40)]
    for method in CLAIM_METHODS:
        for payload in payloads:
            error = await sockets.refused(method, payload)
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, (payload, error.details())
    for method in (GET_INFO, NOTIFY):
        answers = await anyio.to_thread.run_sync(sockets.call, method, payloads[0], 1)
        for answer in answers:
            assert isinstance(answer, grpc.RpcError)
            assert answer.code() == grpc.StatusCode.INVALID_ARGUMENT
    no_traceback(caplog)


async def test_the_registration_socket_bounds_the_kubelet_s_error_and_keeps_the_registration(
    dra_driver: PluginApp, sockets: Sockets
) -> None:
    assert dra_driver.dra is not None
    huge = bytes(RegistrationStatus(plugin_registered=False, error="e" * (17 * 1024)))
    error = await sockets.refused(NOTIFY, huge)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == (
        "RegistrationStatus.error ('eeeeeeeeeeeeeeeeeeee'...) is 17408 bytes long; registration errors "
        "have at most 16384 characters"
    )
    assert dra_driver.dra.registration.registered, "a refused request changed the registration"


async def test_the_health_stream_refuses_malformed_requests_too(
    dra_driver: PluginApp, sockets: Sockets
) -> None:
    def watch() -> grpc.RpcError:
        with grpc.insecure_channel(f"unix:{sockets.dra}") as channel:
            stream = channel.unary_stream(HEALTH)(b"\x0a\xff\x01", timeout=10)
            try:
                next(iter(stream))
            except grpc.RpcError as error:
                return error
        raise AssertionError("the health stream answered malformed bytes")

    error = await anyio.to_thread.run_sync(watch)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == (
        "NodeWatchResourcesRequest is malformed: field 1 at byte 1 claims 255 bytes, 0 are left"
    )


async def test_a_flood_of_bad_calls_logs_one_line_per_peer_per_10_s_with_the_count(
    dra_driver: PluginApp,
    sockets: Sockets,
    apiserver: FakeApiServer,
    dra_kubelet: DraKubeletStandIn,
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert dra_driver.dra is not None
    assert dra_driver.dra.sockets is not None
    now = [1000.0]
    dra_driver.dra.sockets.dra.refusals.clock = lambda: now[0]

    answers = await anyio.to_thread.run_sync(sockets.call, PREPARE, b"\x0a\xff\x01", 2000)
    assert {answer.code() for answer in answers if isinstance(answer, grpc.RpcError)} == {
        grpc.StatusCode.INVALID_ARGUMENT
    }
    assert len(answers) == 2000
    assert len(refusal_lines(caplog)) == 1

    now[0] += 9.9  # still within the 10 s of the first line
    await sockets.refused(UNPREPARE, b"")
    assert len(refusal_lines(caplog)) == 1
    now[0] += 0.1
    await sockets.refused(PREPARE, b"")
    _, second = refusal_lines(caplog)
    assert second.__dict__["suppressed"] == 2000
    await still_serves(apiserver, dra_kubelet)
