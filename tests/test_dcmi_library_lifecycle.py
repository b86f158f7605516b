"""DcmiLibrary's life: opened at init, dlclose'd at close (kept mapped once subscribed), re-opened by init."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_dcmi.players import CFakePlayer

from backends.errors import DcmiError
from backends.fake import FakeScenario

NODE = FakeScenario.model_validate({"chip_name": "910B3", "chips": [{"phy_id": 0}]})


def _mapped(path: Path) -> bool:
    """Whether the dynamic loader has ``path`` mapped in this process."""
    return str(path) in Path("/proc/self/maps").read_text(encoding="utf-8")


def test_nothing_is_loaded_before_init(c_fake: CFakePlayer) -> None:
    library = c_fake.open(NODE, init=False)
    assert library.description == str(c_fake.library_path)
    assert not _mapped(c_fake.library_path)
    library.init()
    assert _mapped(c_fake.library_path)


def test_close_unloads_the_library_and_init_loads_it_again(c_fake: CFakePlayer) -> None:
    library = c_fake.open(NODE)
    library.close()
    assert not _mapped(c_fake.library_path)
    with pytest.raises(DcmiError) as raised:
        library.card_list()
    assert raised.value.code == -8005
    library.close()  # twice is harmless

    library.init()
    assert library.card_list() == [0]


def test_a_subscribed_library_stays_mapped_after_close(c_fake: CFakePlayer) -> None:
    # DCMI cannot unsubscribe: unmapping the driver under its event thread would crash the process.
    library = c_fake.open(NODE)
    library.subscribe_faults(lambda event: None)
    library.close()
    assert _mapped(c_fake.library_path)
    with pytest.raises(DcmiError):
        library.card_list()
