"""One health poll of a chip through the binding: health value, fault codes, a card gone from the bus."""

from __future__ import annotations

import pytest
from fake_dcmi.players import CFakePlayer
from node_harness import backend_of

from backends.chips import CARD_DROPPED_CODE, HealthReading
from backends.errors import DcmiError
from backends.fake import FakeScenario
from backends.library import HEALTH_ABSENT


def _readings(c_fake: CFakePlayer, chips: list[dict[str, object]]) -> list[HealthReading]:
    backend = backend_of(c_fake.open(FakeScenario.model_validate({"chip_name": "310P3", "chips": chips})))
    return [backend.read_health(chip) for chip in backend.session.discover()]


def test_health_value_and_fault_codes(c_fake: CFakePlayer) -> None:
    readings = _readings(
        c_fake, [{"phy_id": 0}, {"phy_id": 1, "health": 2, "fault_codes": ["80E18005", "80CB8006"]}]
    )
    assert readings == [HealthReading(0, ()), HealthReading(2, (0x80E18005, 0x80CB8006))]


def test_a_card_answering_not_ready_has_dropped(c_fake: CFakePlayer) -> None:
    (reading,) = _readings(c_fake, [{"phy_id": 0, "errors": {"health": -8012}}])
    assert reading == HealthReading(HEALTH_ABSENT, (CARD_DROPPED_CODE,))
    assert reading.dropped


def test_a_chip_reported_absent_has_dropped(c_fake: CFakePlayer) -> None:
    (reading,) = _readings(c_fake, [{"phy_id": 0, "health": HEALTH_ABSENT}])
    assert reading.dropped
    assert reading.codes == (CARD_DROPPED_CODE,)


def test_more_fault_codes_than_the_buffer_holds_fail_the_query(c_fake: CFakePlayer) -> None:
    # The driver refuses (-8001) rather than truncate when the 128-entry list is too short.
    library = c_fake.open(
        FakeScenario.model_validate(
            {
                "chip_name": "310P3",
                "chips": [{"phy_id": 0, "fault_codes": [f"{code:08X}" for code in range(129)]}],
            }
        )
    )
    backend = backend_of(library)
    (chip,) = backend.session.discover()
    with pytest.raises(DcmiError) as raised:
        backend.read_health(chip)
    assert (raised.value.function, raised.value.code) == ("dcmi_get_device_errorcode_v2", -8001)
