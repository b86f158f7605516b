"""What each family's chips split into on demand: Huawei's templates, their costs, the combinations that fit.

The counts are the ones Huawei documents: a 310P holds 7 vNPUs at most (its
7 AI CPUs), after six vir01 only a vir02_1c or a vir01 still fits, two vir04
do not fit but vir04_4c_dvpp and vir04_3c_ndvpp together make the chip; a
30-core 910 holds one vir16 (a 32-core one two) and up to 15 vNPUs; the
910B and A3 templates are the ones made for the chip's bin.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import pytest

from backends.families import Ascend310, Ascend310B, Ascend310P, Ascend910A1, Ascend910A3, Ascend910B
from backends.vnpu_family import VnpuFamily
from backends.vnpu_split import AICORE, AICPU, DVPP, MEMORY, ChipSplits

M = 24576  # a 310P's memory, MiB


def splits_of(family: type[VnpuFamily], cores: float | None, memory_mb: int | None) -> ChipSplits | None:
    backend = family.__new__(family)  # the tables need no library
    return backend.splits(None, cores, memory_mb)  # type: ignore[arg-type]


def fits(splits: ChipSplits, wanted: Mapping[str, int]) -> bool:
    """Whether these vNPUs (template -> how many) fit the chip together, by its counters."""
    used: Counter[str] = Counter()
    for name, count in wanted.items():
        template = splits.template(name)
        assert template is not None, name
        for resource, amount in template.takes.items():
            used[resource] += amount * count
    return all(used[resource] <= total for resource, total in splits.totals.items())


def test_a_310p_counts_ai_cores_memory_ai_cpus_and_its_five_media_engines() -> None:
    splits = splits_of(Ascend310P, 8.0, M)
    assert splits is not None
    assert dict(splits.totals) == {
        AICORE: 8, MEMORY: M, AICPU: 7, "vpc": 12, "jpegd": 16, "jpege": 8, "venc": 3, "vdec": 12
    }  # fmt: skip
    assert [t.name for t in splits.templates] == [
        "vir01", "vir02", "vir02_1c", "vir04", "vir04_3c", "vir04_3c_ndvpp", "vir04_4c_dvpp"
    ]  # fmt: skip
    assert {t.name: t.memory_mb for t in splits.templates if t.ai_cores == 2} == {
        "vir02": M // 4,
        "vir02_1c": M // 4,
    }


@pytest.mark.parametrize(
    ("wanted", "ok"),
    [
        ({"vir01": 7}, True),
        ({"vir01": 8}, False),  # 8 AI cores, but 7 AI CPUs: 7 vNPUs at most
        ({"vir01": 6, "vir02_1c": 1}, True),
        ({"vir01": 6, "vir02": 1}, False),
        ({"vir04": 2}, False),
        ({"vir04_4c_dvpp": 1, "vir04_3c_ndvpp": 1}, True),
        ({"vir04_4c_dvpp": 1, "vir04_3c": 1}, False),  # the media engines are all taken
        ({"vir04": 1, "vir02": 1, "vir01": 1}, True),
        ({"vir02_1c": 4}, True),
    ],
)
def test_the_310p_combinations_huawei_documents(wanted: dict[str, int], ok: bool) -> None:
    splits = splits_of(Ascend310P, 8.0, M)
    assert splits is not None
    assert fits(splits, wanted) is ok


def test_as_many_partitions_per_template_as_the_chip_holds_of_it_alone() -> None:
    splits = splits_of(Ascend310P, 8.0, M)
    assert splits is not None
    most = {t.name: splits.most(t) for t in splits.templates}
    assert most == {"vir01": 7, "vir02": 3, "vir02_1c": 4, "vir04": 1, "vir04_3c": 2} | {
        "vir04_3c_ndvpp": 2,
        "vir04_4c_dvpp": 1,
    }


@pytest.mark.parametrize(("cores", "vir16", "vir02"), [(30, 1, 15), (32, 2, 16)])
def test_a_first_generation_910_by_its_ai_cores(cores: int, vir16: int, vir02: int) -> None:
    splits = splits_of(Ascend910A1, float(cores), 32768)
    assert splits is not None
    assert set(splits.totals) == {AICORE, MEMORY}, "AI CPUs are left to the driver (see the family)"
    most = {t.name: splits.most(t) for t in splits.templates}
    assert (most["vir16"], most["vir02"]) == (vir16, vir02)
    assert fits(splits, {"vir16": 1, "vir08": 1, "vir04": 1, "vir02": 1})  # Huawei's 30-core example


@pytest.mark.parametrize(
    ("family", "cores", "memory", "templates"),
    [
        (Ascend910B, 24, 65536, ["vir03_1c_8g", "vir06_1c_16g", "vir12_3c_32g"]),  # 910B1, 910B2
        (Ascend910B, 20, 65536, ["vir05_1c_16g", "vir10_3c_32g"]),  # 910B3
        (
            Ascend910B,
            20,
            32768,
            ["vir05_1c_8g", "vir10_3c_16g", "vir10_3c_16g_nm", "vir10_4c_16g_m"],
        ),  # 910B4
        (Ascend910A3, 24, 65536, ["vir06_1c_16g", "vir12_3c_32g"]),
        (Ascend910A3, 20, 65536, ["vir05_1c_16g", "vir10_3c_32g"]),
        (Ascend910B, 20, 61440, ["vir05_1c_16g", "vir10_3c_32g"]),  # a driver reporting a little less
    ],
)
def test_910b_and_a3_templates_are_the_ones_made_for_the_chip_s_bin(
    family: type[VnpuFamily], cores: int, memory: int, templates: list[str]
) -> None:
    splits = splits_of(family, float(cores), memory)
    assert splits is not None
    assert [t.name for t in splits.templates] == templates
    assert all(t.memory_mb * splits.most(t) <= memory for t in splits.templates)


def test_the_910b4_media_pair_is_counted_in_ai_core_shares() -> None:
    splits = splits_of(Ascend910B, 20.0, 32768)
    assert splits is not None
    assert splits.totals[DVPP] == 20
    assert fits(splits, {"vir10_4c_16g_m": 1, "vir10_3c_16g_nm": 1})
    assert not fits(splits, {"vir10_4c_16g_m": 1, "vir05_1c_8g": 1}), "the one with all media takes them all"
    assert fits(splits, {"vir10_3c_16g": 1, "vir05_1c_8g": 2})


def test_a_910b3_counts_no_media_without_the_pair() -> None:
    splits = splits_of(Ascend910B, 20.0, 65536)
    assert splits is not None
    assert DVPP not in splits.totals


@pytest.mark.parametrize(
    ("cores", "memory"), [(None, 65536), (20.0, None), (20.5, 65536), (20.0, 0), (7.0, 65536)]
)
def test_a_chip_whose_figures_are_unknown_or_fit_no_template_is_not_split(
    cores: float | None, memory: int | None
) -> None:
    assert splits_of(Ascend910B, cores, memory) is None


def test_families_without_vnpus_split_nothing() -> None:
    for family in (Ascend310, Ascend310B):
        backend = family.__new__(family)
        assert backend.splits(None, 8.0, 8192) is None  # type: ignore[arg-type]
        assert backend.vnpu_absence()  # its chips are never split
