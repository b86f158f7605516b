"""The refusal family: each category's status decided in one mapping, the reason capped, the fields."""

from __future__ import annotations

import importlib
import pkgutil

import pytest
from grpclib.const import Status
from grpclib.metadata import encode_grpc_message

import ascend_plugin
from ascend_plugin.grpc_guard.refusals import (
    STATUSES,
    BadRequest,
    CannotServe,
    PeerNotAdmitted,
    Refused,
    TooLarge,
    Unavailable,
    grpc_error,
    status_of,
)
from ascend_plugin.grpc_guard.status import MAX_STATUS_MESSAGE


@pytest.mark.parametrize(
    ("category", "status"),
    [
        (BadRequest, Status.INVALID_ARGUMENT),
        (CannotServe, Status.FAILED_PRECONDITION),
        (Unavailable, Status.UNAVAILABLE),
        (PeerNotAdmitted, Status.PERMISSION_DENIED),
        (TooLarge, Status.RESOURCE_EXHAUSTED),
    ],
)
def test_each_category_answers_with_its_status(category: type[Refused], status: Status) -> None:
    refused = category("label", "why")
    assert refused.status is status
    error = grpc_error(refused)
    assert (error.status, error.message) == (status, "why")


def test_a_subclass_answers_with_its_category_s_status_and_its_own_label() -> None:
    class ShapeRefused(BadRequest):
        def __init__(self, reason: str) -> None:
            super().__init__("shape", reason)

    refused = ShapeRefused("Empty is malformed: field number 0 at byte 0")
    assert isinstance(refused, BadRequest)
    assert (refused.label, refused.status) == ("shape", Status.INVALID_ARGUMENT)
    assert refused.fields() == {"reason": "shape", "status": "INVALID_ARGUMENT"}
    assert str(refused) == refused.reason == "Empty is malformed: field number 0 at byte 0"


def test_a_refusal_of_no_category_is_a_programming_error_naming_the_categories() -> None:
    class Uncategorised(Refused):
        pass

    with pytest.raises(TypeError, match="Uncategorised derives from no category of STATUSES") as raised:
        status_of(Uncategorised("label", "why"))
    assert "BadRequest, CannotServe" in str(raised.value)


def test_the_reason_is_cut_to_fit_the_status_trailer() -> None:
    error = grpc_error(CannotServe("no-candidate", "pod default/x passed over; " * 400))
    assert error.message is not None
    assert len(encode_grpc_message(error.message)) <= MAX_STATUS_MESSAGE
    assert error.message.endswith("characters in all)")


def test_every_refusal_the_plugin_defines_has_a_status() -> None:
    """A refusal added anywhere derives from a category: none reaches a caller without a status."""
    for module in pkgutil.walk_packages(ascend_plugin.__path__, "ascend_plugin."):
        if not module.name.startswith(
            ("ascend_plugin.kubelet_api", "ascend_plugin.testing", "ascend_plugin.__main__")
        ):
            importlib.import_module(module.name)
    pending, seen = list(Refused.__subclasses__()), set()
    while pending:
        kind = pending.pop()
        seen.add(kind)
        pending.extend(kind.__subclasses__())
        if kind.__module__.startswith("ascend_plugin."):
            assert any(base in STATUSES for base in kind.__mro__), kind
    assert set(STATUSES) <= seen
