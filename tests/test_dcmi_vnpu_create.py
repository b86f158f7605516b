"""vNPUs made and destroyed through DCMI, with the driver's templates, limits and errors.

``dcmi_create_vdevice`` makes a vNPU of a template the chip's driver knows
(-8001 otherwise), where the chip has room for it (-8020 otherwise: AI cores,
AI CPUs, memory, media engines, 7 vNPUs on a 310P); the vNPU is then listed by
the VDEV_MNG queries like a static one and gets its ``/dev/vdavinci<N>``.
``dcmi_set_destroy_vdevice`` takes one away (0xFFFF: all of the chip's),
refusing one a container uses. What was made outlives the process that made
it, as on a real driver: the last test makes a vNPU in another process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_dcmi.players import CFakePlayer, ScenarioPlayer
from fake_dcmi.scenario_file import SCENARIO_ENV

from backends.errors import DcmiError
from backends.fake import FakeScenario
from backends.library import ALL_VDEVS, CreatedVdev, VdevActivity, VdevInfo

ROOT = Path(__file__).resolve().parent.parent


def _duo(tmp_path: Path, **node: Any) -> FakeScenario:
    """An Atlas 300I Duo: two 310P3 chips (24 GB) on card 0, vNPU device nodes under tmp_path/dev."""
    chips = node.pop("chips", [{"phy_id": 0, "card_id": 0}, {"phy_id": 1, "card_id": 0}])
    return FakeScenario.model_validate(
        {"chip_name": "310P3", "memory_mb": 24576, "vdev_node_dir": str(tmp_path / "dev"), "chips": chips}
        | node
    )


def _code(call: Any, *args: Any) -> int:
    with pytest.raises(DcmiError) as raised:
        call(*args)
    return raised.value.code


def test_a_made_vnpu_is_listed_described_and_has_its_node(
    any_fake: ScenarioPlayer[Any], tmp_path: Path
) -> None:
    library = any_fake.open(_duo(tmp_path))
    made = library.create_vdev(0, 1, "vir02")
    assert made == CreatedVdev(vdev_id=116, vfg_id=0, pcie_bus=0, pcie_device=0, pcie_function=0)
    assert library.vdev_ids(0, 1) == [116]
    assert library.vdev_ids(0, 0) == []
    assert library.vdev_info(0, 1, 116) == VdevInfo(116, "vir02", 2.0, 6144, vfg_id=0, status=0, in_use=False)
    assert (tmp_path / "dev" / "vdavinci116").exists()
    library.destroy_vdev(0, 1, 116)
    assert library.vdev_ids(0, 1) == []
    assert not (tmp_path / "dev" / "vdavinci116").exists()
    assert _code(library.vdev_info, 0, 1, 116) == -8001


def test_a_310p_holds_seven_vnpus_at_most(any_fake: ScenarioPlayer[Any], tmp_path: Path) -> None:
    library = any_fake.open(_duo(tmp_path))
    ids = [library.create_vdev(0, 0, "vir01").vdev_id for _ in range(7)]
    assert ids == list(range(100, 107))
    assert _code(library.create_vdev, 0, 0, "vir01") == -8020  # an AI core is left, but no AI CPU
    assert sorted(path.name for path in (tmp_path / "dev").iterdir()) == [f"vdavinci{n}" for n in ids]


def test_a_310p_splits_as_its_ai_cpus_and_media_engines_allow(
    any_fake: ScenarioPlayer[Any], tmp_path: Path
) -> None:
    library = any_fake.open(_duo(tmp_path))
    library.create_vdev(0, 0, "vir04")
    assert _code(library.create_vdev, 0, 0, "vir04") == -8020  # 4 + 4 AI CPUs of 7
    library.create_vdev(0, 0, "vir04_3c")  # 4 + 3 fit
    assert _code(library.create_vdev, 0, 0, "vir01") == -8020  # no AI core left
    library.create_vdev(0, 1, "vir04_4c_dvpp")  # takes every media engine
    assert _code(library.create_vdev, 0, 1, "vir02_1c") == -8020  # no VPC left
    library.create_vdev(0, 1, "vir04_3c_ndvpp")  # needs none


def test_only_the_family_s_templates_are_known(any_fake: ScenarioPlayer[Any], tmp_path: Path) -> None:
    library = any_fake.open(_duo(tmp_path))
    for template in ("vir16", "vir10_3c_32g", "vir03"):
        assert _code(library.create_vdev, 0, 0, template) == -8001
    b3 = FakeScenario.model_validate({"chip_name": "910B3", "memory_mb": 65536, "chips": [{"phy_id": 0}]})
    library = any_fake.open(b3)
    assert _code(library.create_vdev, 0, 0, "vir04") == -8001
    made = library.create_vdev(0, 0, "vir10_3c_32g")
    assert library.vdev_info(0, 0, made.vdev_id).memory_mb == 32768
    library.create_vdev(0, 0, "vir10_3c_32g")
    assert _code(library.create_vdev, 0, 0, "vir05_1c_16g") == -8020  # 20 AI cores taken


def test_a_scenario_may_name_the_templates(any_fake: ScenarioPlayer[Any], tmp_path: Path) -> None:
    library = any_fake.open(_duo(tmp_path, vnpu_templates=["vir02", "vir08_2c_12g"]))
    assert _code(library.create_vdev, 0, 0, "vir01") == -8001
    made = library.create_vdev(0, 0, "vir08_2c_12g")
    assert library.vdev_info(0, 0, made.vdev_id).memory_mb == 12288


def test_chips_without_vnpus_say_not_supported(any_fake: ScenarioPlayer[Any]) -> None:
    for name in ("310", "310B1"):
        library = any_fake.open(FakeScenario.model_validate({"chip_name": name, "chips": [{"phy_id": 0}]}))
        assert _code(library.create_vdev, 0, 0, "vir01") == -8255
        assert _code(library.destroy_vdev, 0, 0, 100) == -8255


def test_a_template_name_that_cannot_be_passed_is_refused_before_the_driver(
    any_fake: ScenarioPlayer[Any],
) -> None:
    library = any_fake.open(FakeScenario.model_validate({"chip_name": "310P3", "chips": [{"phy_id": 0}]}))
    for template in ("", "vir" + "0" * 40, "vír02"):
        with pytest.raises(ValueError, match="1 to 31 ASCII characters"):
            library.create_vdev(0, 0, template)


def test_ids_come_from_the_chip_s_range(any_fake: ScenarioPlayer[Any], tmp_path: Path) -> None:
    library = any_fake.open(_duo(tmp_path))
    assert library.create_vdev(0, 1, "vir01", vdev_id=120).vdev_id == 120
    assert library.create_vdev(0, 1, "vir01").vdev_id == 116
    assert _code(library.create_vdev, 0, 1, "vir01", 120) == -8020  # taken
    assert _code(library.create_vdev, 0, 1, "vir01", 124) == -8001  # chip 1's range is 116-123
    assert _code(library.create_vdev, 0, 0, "vir01", 116) == -8001
    assert library.create_vdev(0, 1, "vir01", vfg_id=3).vfg_id == 3


def test_static_vnpus_take_room_and_can_be_destroyed(any_fake: ScenarioPlayer[Any], tmp_path: Path) -> None:
    static = [{"vdev_id": 100, "template": "vir04", "memory_mb": 12288}]
    node = _duo(tmp_path, chips=[{"phy_id": 0, "card_id": 0, "vdevs": static}, {"phy_id": 1, "card_id": 0}])
    library = any_fake.open(node)
    assert _code(library.create_vdev, 0, 0, "vir04") == -8020
    made = library.create_vdev(0, 0, "vir04_3c")
    assert made.vfg_id == 1  # the static one holds group 0
    assert library.vdev_ids(0, 0) == [100, made.vdev_id]
    library.destroy_vdev(0, 0, 100)
    assert library.vdev_ids(0, 0) == [made.vdev_id]
    library.create_vdev(0, 0, "vir02_1c")


def test_a_vnpu_in_use_is_not_destroyed(any_fake: ScenarioPlayer[Any], tmp_path: Path) -> None:
    library = any_fake.open(_duo(tmp_path))
    first = library.create_vdev(0, 0, "vir02").vdev_id
    second = library.create_vdev(0, 0, "vir02").vdev_id
    usage = {str(second): {"in_use": True, "aicore_utilization": 55, "memory_used_mb": 1024}}
    any_fake.update(
        _duo(tmp_path, chips=[{"phy_id": 0, "card_id": 0, "vdev_usage": usage}, {"phy_id": 1, "card_id": 0}])
    )
    assert library.vdev_info(0, 0, second).in_use
    assert library.vdev_activity(0, 0, second) == VdevActivity(second, 55, 6144 * 1024, 5120 * 1024)
    assert library.vdev_activity(0, 0, first).memory_used_kb == 0
    assert _code(library.destroy_vdev, 0, 0, second) == -8020
    assert _code(library.destroy_vdev, 0, 0, ALL_VDEVS) == -8020  # nothing destroyed
    assert library.vdev_ids(0, 0) == [first, second]
    library.destroy_vdev(0, 0, first)
    assert _code(library.destroy_vdev, 0, 0, first) == -8001


def test_all_of_a_chip_s_vnpus_go_at_once(any_fake: ScenarioPlayer[Any], tmp_path: Path) -> None:
    library = any_fake.open(_duo(tmp_path))
    for _ in range(3):
        library.create_vdev(0, 0, "vir02_1c")
    library.create_vdev(0, 1, "vir01")
    library.destroy_vdev(0, 0, ALL_VDEVS)
    assert (library.vdev_ids(0, 0), library.vdev_ids(0, 1)) == ([], [116])
    library.destroy_vdev(0, 0, ALL_VDEVS)  # none left: nothing to do


_IN_ANOTHER_PROCESS = """
import sys
from pathlib import Path
kind, scenario, library_path, action = sys.argv[1:5]
if kind == "c-fake":
    from backends.dcmi import DcmiLibrary
    library = DcmiLibrary(Path(library_path), allow_untrusted=True)
else:
    from backends.fake import FakeLibrary
    library = FakeLibrary(Path(scenario))
library.init()
if action == "create":
    print(library.create_vdev(0, 1, "vir04").vdev_id)
elif action == "fill":
    from backends.errors import DcmiError
    made = []
    for _ in range(8):
        try:
            made.append(library.create_vdev(0, 0, "vir01").vdev_id)
        except DcmiError as error:
            assert error.code == -8020, error
    print(",".join(str(n) for n in made))
else:
    print(",".join(str(n) for n in library.vdev_ids(0, 1)))
"""


def _start(player: ScenarioPlayer[Any], action: str) -> subprocess.Popen[str]:
    library = str(player.current_library()) if isinstance(player, CFakePlayer) else ""
    environment = os.environ | {"PYTHONPATH": str(ROOT), SCENARIO_ENV: str(player.scenario_path)}
    return subprocess.Popen(
        [sys.executable, "-c", _IN_ANOTHER_PROCESS, player.kind, str(player.scenario_path), library, action],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )


def _finish(process: subprocess.Popen[str]) -> str:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return out.strip()


def _other_process(player: ScenarioPlayer[Any], action: str) -> str:
    return _finish(_start(player, action))


def test_what_another_process_made_is_there_after_it_is_gone(
    any_fake: ScenarioPlayer[Any], tmp_path: Path
) -> None:
    library = any_fake.open(_duo(tmp_path))
    made = int(_other_process(any_fake, "create"))
    assert library.vdev_ids(0, 1) == [made]
    assert library.vdev_info(0, 1, made).template == "vir04"
    library.destroy_vdev(0, 1, made)
    assert _other_process(any_fake, "list") == ""


def test_processes_racing_for_the_last_room_get_no_more_than_there_is(
    any_fake: ScenarioPlayer[Any], tmp_path: Path
) -> None:
    library = any_fake.open(_duo(tmp_path))
    racers = [_start(any_fake, "fill") for _ in range(3)]
    made = [int(n) for racer in racers for n in _finish(racer).split(",") if n]
    assert sorted(made) == list(range(100, 107))  # seven, each id once
    assert library.vdev_ids(0, 0) == list(range(100, 107))
