"""dcmi_get_device_ip of RoCE port 0, for Volcano's rank table: IPv4 asked first, then IPv6.

The binding sets ``ip.ip_type`` to the family it asks for, as Huawei's plugin
does; the C fake answers only the family the chip's address is in, so an
IPv6-only chip is reached through the second attempt.
"""

from __future__ import annotations

from typing import Any

import pytest
from fake_dcmi.players import CFakePlayer, ScenarioPlayer

from backends.dcmi._dcmi_cffi import ffi
from backends.errors import DcmiError
from backends.fake import FakeScenario


def _node(*addresses: str | None, chip_name: str = "910B3", **chip: Any) -> FakeScenario:
    chips = [
        {"phy_id": n, "card_id": n} | ({"device_ip": address} if address else {}) | chip
        for n, address in enumerate(addresses)
    ]
    return FakeScenario.model_validate({"chip_name": chip_name, "chips": chips})


def test_an_ipv4_address(any_fake: ScenarioPlayer[Any]) -> None:
    library = any_fake.open(_node("29.17.1.10", "29.17.1.11"))
    assert [library.device_ip(0, 0), library.device_ip(1, 0)] == ["29.17.1.10", "29.17.1.11"]


@pytest.mark.parametrize(
    ("written", "answered"),
    [
        ("2001:db8:0:0:0:0:0:7", "2001:db8::7"),
        ("fe80::a:1", "fe80::a:1"),
        ("2001:DB8::1:0:0:1", "2001:db8::1:0:0:1"),
    ],
)
def test_an_ipv6_only_chip_answers_the_second_attempt(
    any_fake: ScenarioPlayer[Any], written: str, answered: str
) -> None:
    library = any_fake.open(_node(written))
    assert library.device_ip(0, 0) == answered  # link-local included: the caller decides what it is worth


def test_a_port_without_an_address(any_fake: ScenarioPlayer[Any]) -> None:
    library = any_fake.open(_node(None, "29.17.1.11"))
    with pytest.raises(DcmiError) as raised:
        library.device_ip(0, 0)
    assert (raised.value.function, raised.value.code) == ("dcmi_get_device_ip", -8023)
    assert library.device_ip(1, 0) == "29.17.1.11"


def test_soc_boards_have_no_roce_port(any_fake: ScenarioPlayer[Any]) -> None:
    library = any_fake.open(_node(None, chip_name="310B1"))
    with pytest.raises(DcmiError, match="dcmi_get_device_ip returned -8255"):
        library.device_ip(0, 0)


def test_a_temporary_failure_is_raised_as_such(any_fake: ScenarioPlayer[Any]) -> None:
    library = any_fake.open(_node("29.17.1.10", errors={"device_ip": -8006}))
    with pytest.raises(DcmiError, match="dcmi_get_device_ip returned -8006"):
        library.device_ip(0, 0)


def _ask(lib: Any, ip_type: int, port_type: int = 1, port: int = 0) -> tuple[int, Any, Any]:
    ip = ffi.new("struct dcmi_ip_addr *", {"ip_type": ip_type})
    mask = ffi.new("struct dcmi_ip_addr *", {"ip_type": ip_type})
    return lib.dcmi_get_device_ip(0, 0, port_type, port, ip, mask), ip, mask


def test_the_c_fake_answers_the_family_asked_for(c_fake: CFakePlayer) -> None:
    c_fake.update(_node("192.0.2.44"))
    lib = ffi.dlopen(str(c_fake.library_path))
    try:
        assert lib.dcmi_init() == 0
        v4, v6, any_family = (ffi.integer_const(f"DCMI_IPADDR_TYPE_{t}") for t in ("V4", "V6", "ANY"))
        code, ip, mask = _ask(lib, v4)
        assert (code, bytes(ip.u_addr.ip4), ip.ip_type, mask.ip_type) == (0, bytes([192, 0, 2, 44]), v4, v4)
        assert _ask(lib, v6)[0] == -8023
        assert _ask(lib, any_family)[0] == 0
        assert _ask(lib, v4, port_type=ffi.integer_const("DCMI_VNIC_PORT"))[0] == -8023
        assert _ask(lib, v4, port=1)[0] == -8023
        assert _ask(lib, v4, port_type=ffi.integer_const("DCMI_INVALID_PORT"))[0] == -8001
        ip = ffi.new("struct dcmi_ip_addr *")
        assert lib.dcmi_get_device_ip(0, 0, 1, 0, ip, ffi.NULL) == -8001
    finally:
        ffi.dlclose(lib)
