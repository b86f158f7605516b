"""The fake node's scenario: chips, their health and faults, injected errors.

The format is JSON. The smallest useful scenario is::

    {"chip_name": "310B1", "chips": [{"phy_id": 0, "health": 0, "fault_codes": []}]}

Everything else has a default; see the README ("Fake scenario format") for the
full list. The same model feeds the C fake ``libdcmi.so`` used by the tests.
"""

from __future__ import annotations

import json
import re
from functools import cached_property
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from backends.errors import ChipError
from backends.library import HEALTH_ABSENT

# The DeviceLibrary operations a scenario can make fail or hang.
Operation = Literal[
    "init",
    "driver_version",
    "card_list",
    "device_count",
    "logic_id",
    "phy_id",
    "chip_info",
    "total_aicore",
    "health",
    "error_codes",
    "hbm_info",
    "memory_info",
    "subscribe_faults",
]

_HEX_CODE = re.compile(r"^(0[xX])?[0-9A-Fa-f]{1,8}$")


def _parse_fault_code(value: object) -> object:
    """Fault codes are hex strings like "80E01801" (a 0x prefix is allowed)."""
    if isinstance(value, str):
        if not _HEX_CODE.match(value):
            raise ValueError(f"fault code {value!r} is not a hex string of at most 8 digits like '80E01801'")
        return int(value, 16)
    return value


FaultCode = Annotated[int, BeforeValidator(_parse_fault_code), Field(ge=0, le=0xFFFFFFFF)]
DcmiCode = Annotated[int, Field(lt=0, description="a negative DCMI return code, e.g. -8012")]

# computing.aic the driver reports per chip name, when the scenario gives none.
_DEFAULT_AICORE = (("310B", 1.0), ("310P", 8.0), ("910B2", 24.0), ("910B", 20.0), ("910", 32.0))


class FakeChip(BaseModel):
    """One NPU chip of the fake node."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    phy_id: int = Field(ge=0, le=255)
    health: int = Field(default=0, description="dcmi health: 0 ok, 1 minor, 2 major, 3 critical")
    fault_codes: tuple[FaultCode, ...] = ()
    card_id: int | None = Field(default=None, ge=0)
    device_id: int | None = Field(default=None, ge=0, le=3)
    logic_id: int | None = Field(default=None, ge=0)
    chip_name: str | None = None
    aicore: float | None = None
    memory_mb: int | None = Field(default=None, ge=0)
    fault_severity: int = Field(default=2, ge=0, le=3, description="severity of this chip's fault events")
    errors: dict[Operation, DcmiCode] = Field(default_factory=dict)
    hang: tuple[Operation, ...] = ()

    @model_validator(mode="after")
    def _health_is_dcmi_value(self) -> FakeChip:
        if self.health not in (0, 1, 2, 3, HEALTH_ABSENT):
            raise ValueError(
                f"health {self.health} is not a DCMI health value; allowed: 0, 1, 2, 3, 4294967295"
            )
        return self


class PlacedChip(BaseModel):
    """A chip with its DCMI address resolved."""

    model_config = ConfigDict(frozen=True)

    chip: FakeChip
    card_id: int
    device_id: int
    logic_id: int


class FakeScenario(BaseModel):
    """The whole fake node."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    chip_name: str = Field(min_length=1, max_length=31)
    chip_type: str = "Ascend"
    chip_ver: str = "V1"
    npu_name: str = ""
    driver_version: str = "24.1.rc1"
    aicore: float | None = Field(default=None, description="computing.aic of VDEV_MNG; default by chip name")
    aicore_cnt: int = Field(default=0, ge=0, description="chip-info aicore_cnt")
    memory_mb: int = Field(default=8192, ge=0)
    subscribe: bool | None = Field(
        default=None, description="fault subscription supported; default: 910 only"
    )
    latency_ms: float = Field(default=0.0, ge=0, le=60_000)
    errors: dict[Operation, DcmiCode] = Field(default_factory=dict)
    hang: tuple[Operation, ...] = ()
    chips: tuple[FakeChip, ...] = Field(min_length=0, max_length=1024)

    @model_validator(mode="after")
    def _ids_unique(self) -> FakeScenario:
        placed = self.placed
        keys: tuple[tuple[str, list[str]], ...] = (
            ("phy_id", [str(p.chip.phy_id) for p in placed]),
            ("logic_id", [str(p.logic_id) for p in placed]),
            ("(card_id, device_id)", [f"({p.card_id}, {p.device_id})" for p in placed]),
        )
        for what, values in keys:
            duplicates = sorted({v for v in values if values.count(v) > 1})
            if duplicates:
                raise ValueError(f"{what} must be unique across chips; repeated: {', '.join(duplicates)}")
        return self

    @cached_property
    def placed(self) -> list[PlacedChip]:
        """Chips with card, device and logic ids filled in (worked out once per scenario).

        Defaults: a chip without a card id sits alone on card ``<index>``; chips
        sharing a card id get device ids 0, 1, ... in list order; logic ids
        follow list order.
        """
        per_card: dict[int, int] = {}
        result = []
        for index, chip in enumerate(self.chips):
            card = chip.card_id if chip.card_id is not None else index
            device = chip.device_id if chip.device_id is not None else per_card.get(card, 0)
            per_card[card] = max(per_card.get(card, 0), device + 1)
            logic = chip.logic_id if chip.logic_id is not None else index
            result.append(PlacedChip(chip=chip, card_id=card, device_id=device, logic_id=logic))
        return result

    @cached_property
    def by_address(self) -> dict[tuple[int, int], PlacedChip]:
        """Chips by (card_id, device_id): every DCMI call names one."""
        return {(placed.card_id, placed.device_id): placed for placed in self.placed}

    def chip_name_of(self, chip: FakeChip) -> str:
        """The chip name reported for ``chip``."""
        return chip.chip_name or self.chip_name

    def aicore_of(self, chip: FakeChip) -> float | None:
        """computing.aic for ``chip``; None means the driver does not support the query."""
        if chip.aicore is not None:
            return chip.aicore
        if self.aicore is not None:
            return self.aicore
        name = self.chip_name_of(chip)
        return next((value for prefix, value in _DEFAULT_AICORE if name.startswith(prefix)), None)

    def subscription_supported(self) -> bool:
        """Whether dcmi_subscribe_fault_event works (Huawei: 910 family only)."""
        if self.subscribe is not None:
            return self.subscribe
        return self.chip_name.startswith(("910", "Ascend910", "A2G"))


class ScenarioError(ChipError):
    """A scenario file that cannot be read or is invalid."""


def parse_scenario(text: str, source: str) -> FakeScenario:
    """Parse scenario JSON; errors name the source, the field and the problem."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ScenarioError(f"{source}: not valid JSON: {error}") from error
    try:
        return FakeScenario.model_validate(data)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in item['loc']) or '(top level)'}: {item['msg']}"
            f" (got {item.get('input')!r})"
            for item in error.errors()
        )
        raise ScenarioError(f"{source}: invalid scenario: {problems}") from error


def load_scenario(path: Path) -> FakeScenario:
    """Read and validate a scenario file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ScenarioError(f"cannot read scenario {path}: {error.strerror}") from error
    return parse_scenario(text, str(path))
