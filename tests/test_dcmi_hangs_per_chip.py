"""A call hanging on one chip stalls that call only: the other chips keep answering, on both fakes.

The C fake serialises calls with one mutex but waits out a hang with it
released; the Python fake holds no lock while it waits. The binding releases
the GIL during the C call, so the plugin's other threads are free as well.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from fake_dcmi.players import ScenarioPlayer
from library_threads import inside_the_library
from waiting import eventually

from backends.fake import FakeScenario

WAIT = 30.0  # generous: a healthy call answers within milliseconds
ROUNDS = 20


def _node(hang: tuple[str, ...]) -> FakeScenario:
    """Four 910B3 chips on cards 0-3; chip 3 hangs the operations ``hang``."""
    chips = [{"phy_id": n, "card_id": n, "hang": list(hang) if n == 3 else []} for n in range(4)]
    return FakeScenario.model_validate({"chip_name": "910B3", "chips": chips})


def _answered_in_time(call: Callable[[], list[int]]) -> list[int] | None:
    """``call``'s answer from another thread; None if it did not answer within WAIT."""
    answers: list[list[int]] = []
    worker = threading.Thread(target=lambda: answers.append(call()), daemon=True)
    worker.start()
    worker.join(WAIT)
    return answers[0] if answers else None


def test_a_hung_chip_leaves_the_others_answering(any_fake: ScenarioPlayer[Any]) -> None:
    library = any_fake.open(_node(hang=("health",)))
    hung: list[int] = []
    stuck = threading.Thread(target=lambda: hung.append(library.health(3, 0)), daemon=True)
    stuck.start()
    try:
        eventually(
            lambda: inside_the_library(stuck),
            "chip 3's health call inside the library",
            within=WAIT,
            every=0.001,
        )
        for _ in range(ROUNDS):  # again and again while chip 3 is held
            answers = _answered_in_time(lambda: [library.health(card, 0) for card in range(3)])
            assert answers == [0, 0, 0]
            assert _answered_in_time(lambda: [library.logic_id(3, 0)]) == [3]  # chip 3's other calls too
            assert stuck.is_alive()
            assert not hung
    finally:
        any_fake.update(_node(hang=()))
    stuck.join(WAIT)
    assert hung == [0]
