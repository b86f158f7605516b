"""One chip's faults: its current codes, their clocks and counters, the escalations they left.

Told what happens (:class:`~.faults.Observation`), it judges at its clock's time: the chip's level and
its network's, from its codes and escalations (docs/faults.md "How a chip's level is decided").
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter, deque
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from ascend_plugin.fault_policy.accompanying import AccompanyingFaults
from ascend_plugin.fault_policy.config import FaultConfig
from ascend_plugin.fault_policy.escalations import (
    AUTOFILL_CODE,
    MS,
    DurationChange,
    DurationClock,
    DurationEdge,
    FrequencyCounter,
    Reasons,
    Release,
    ReleaseCause,
    UpgradeKind,
    UpgradeReason,
)
from ascend_plugin.fault_policy.faults import (
    NETWORK_CODES,
    POLLED_SEVERITY,
    RESET_FINISHED,
    Assertion,
    Fault,
    FaultLevel,
    Observation,
    kubelet_healthy,
    network_healthy,
)

log = logging.getLogger(__name__)

L = FaultLevel

# Lifted escalations a chip keeps for the node events part to post; with node events off nobody
# drains them, and only the latest stay (each is also logged when it is lifted).
RELEASES_KEPT = 16


@dataclass(frozen=True)
class CodeTime:
    """When a code was first seen on a chip (Unix milliseconds) and the level it stands at."""

    fault_time: int
    level: FaultLevel


@dataclass(frozen=True)
class FaultSide:
    """One of Huawei's two views of a chip's faults: the chip's own, or its network's."""

    level: FaultLevel = L.NormalNPU
    # Upper-case hex as the configuration spells it: the current codes in the order
    # they came, then codes that only an escalation still names.
    codes: tuple[str, ...] = ()
    times: Mapping[str, CodeTime] = field(default_factory=lambda: MappingProxyType({}))
    current: int = 0  # how many of ``codes`` (the first ones) are on the chip now

    @property
    def present(self) -> bool:
        """Whether the chip has a code of this side now."""
        return self.current > 0


@dataclass(frozen=True)
class ChipJudgement:
    """What the policy says of one chip at one moment."""

    level: FaultLevel  # the chip's final level
    network_level: FaultLevel
    healthy: bool  # what the kubelet is told
    network_healthy: bool
    manually_separated: bool  # named in ManuallySeparateNPU until an operator releases it
    chip: FaultSide
    network: FaultSide
    reasons: tuple[UpgradeReason, ...]  # the escalations standing, oldest first
    # Which configuration judged it (the changes counted): whether a change came from the chip or from a
    # new configuration. No part of what is judged: two judgements alike but for it are equal.
    configuration: int = field(default=0, compare=False)

    @property
    def codes(self) -> tuple[str, ...]:
        """The codes on the chip now (both sides), as the configuration spells them."""
        return (*self.chip.codes[: self.chip.current], *self.network.codes[: self.network.current])

    @property
    def faults(self) -> tuple[Fault, ...]:
        """The codes on the chip now, most severe first, each at the chip's level with that code alone."""
        faults = {
            Fault(int(code, 16), side.times[code].level)
            for side in (self.chip, self.network)
            for code in side.codes[: side.current]
        }
        return tuple(sorted(faults, key=lambda fault: (-fault.level, fault.code)))


@dataclass
class _Current:
    first_seen: int
    polled: bool  # a poll listed it: a poll that no longer does clears it
    until: int | None = None  # a one-off's hold end


class ChipFaults:
    def __init__(self, phy_id: int, config: FaultConfig) -> None:
        self.phy_id = phy_id
        self.config = config
        self.reasons = Reasons()
        # Whether the ConfigMap write naming this chip in ManuallySeparateNPU went out:
        # only then may its absence from the key mean an operator released it.
        self.separation_written = False
        self._current: dict[int, _Current] = {}
        # Per code, kept only while it matters (a driver may send any number of distinct codes):
        self._severities: dict[int, int | None] = {}  # of the codes current or held back
        self._event_at: dict[int, int] = {}  # when an event last spoke of it (Unix ms), since the last poll
        self._counters: dict[int, FrequencyCounter] = {}
        self._clocks: dict[int, DurationClock] = {}
        self._accompanying = AccompanyingFaults()
        # The escalations lifted and not yet drained: the latest only, if nobody drains (node events off).
        self._releases: deque[Release] = deque(maxlen=RELEASES_KEPT)
        self.escalated: Counter[UpgradeKind] = Counter()  # escalations recorded, by what escalated
        self.configuration = 0  # configurations it was judged by before this one
        self._judged_at = 0  # when it was last judged: what is due by then is consumed

    # -- what happens -------------------------------------------------------------------

    def observe(self, observation: Observation) -> bool:
        """Apply one observation; True when it asks for a fresh read of the chip's codes."""
        if observation.code == RESET_FINISHED:
            return True
        self._severities[observation.code] = observation.severity
        if not observation.polled:
            self._event_at[observation.code] = max(observation.at, self._event_at.get(observation.code, 0))
        admitted = [observation]
        if self.config.customization.drops_accompanying_faults:
            admitted = self._accompanying.offer(observation, self._current)
        for each in admitted:
            self._apply(each)
        self._forget_gone()
        return False

    def reconcile(self, listed: Collection[int], at: int) -> None:
        """A poll begun at ``at`` lists ``listed``: raise new codes, clear the polled ones it no longer lists.
        A code an event spoke of after the poll began is the event's (a recovery is not undone)."""
        stale = {code for code, event_at in self._event_at.items() if event_at > at}
        # An event older than this poll's start is older than every later poll's too.
        self._event_at = {code: self._event_at[code] for code in stale}
        for code in listed:
            current = self._current.get(code)
            if code in stale:
                continue
            if current is not None:
                current.polled = True
            elif code != RESET_FINISHED:
                self.observe(Observation(code, Assertion.RAISED, at, POLLED_SEVERITY, polled=True))
        for code, current in list(self._current.items()):
            if current.polled and current.until is None and code not in listed and code not in stale:
                self.observe(Observation(code, Assertion.RECOVERED, at, POLLED_SEVERITY, polled=True))
        self._accompanying.forget_absent(listed)

    def read_afresh(self) -> None:
        """The chip was reset: the next poll decides every current code, as if polls had listed them all
        (an event before a reset says nothing of the chip after it)."""
        for current in self._current.values():
            current.polled, current.until = True, None

    def restore(self, listed: bool, reasons: Iterable[UpgradeReason], now: int) -> None:
        """Take back what the device-info ConfigMap recorded before a restart; ``listed``: named in
        ManuallySeparateNPU (the truth, as in Huawei's plugin). A restored escalation's window starts
        ``now``."""
        for reason in reasons:
            code = reason.code
            self.reasons.newest(
                reason if code is None else dataclasses.replace(reason, fault_code=self.config.spell(code))
            )
        if listed:
            if not self.reasons.manual:
                self._escalate(UpgradeReason(AUTOFILL_CODE, L.ManuallySeparateNPU, UpgradeKind.AUTOFILL, now))
            self.separation_written = True
        else:
            self._lift(lambda reason: reason.level is L.ManuallySeparateNPU, ReleaseCause.OPERATOR)
        self._align(now)
        customization = self.config.customization
        for reason in self.reasons.all():
            code = reason.code
            if code is None:
                continue
            if reason.kind is UpgradeKind.FREQUENCY and code in customization.frequency:
                self._counter(code).restored(reason.upgrade_time, now)
            elif reason.kind is UpgradeKind.DURATION and code in customization.duration:
                self._clocks[code] = DurationClock(timed_out=True, present=False, since=now)

    def reconfigure(self, config: FaultConfig, now: int) -> None:
        """Judge by ``config`` from now on, adjusting the escalations standing to its rules."""
        self.config = config
        self.configuration += 1
        self._align(now)

    def release_manual(self) -> None:
        """An operator removed the chip from ManuallySeparateNPU: lift its manual separations."""
        self._lift(lambda reason: reason.level is L.ManuallySeparateNPU, ReleaseCause.OPERATOR)

    def drain_releases(self) -> list[Release]:
        releases = list(self._releases)
        self._releases.clear()
        return releases

    # -- judging ------------------------------------------------------------------------

    def judge(self, now: int, *, held: bool) -> ChipJudgement:
        """The chip's levels and health at ``now``; ``held``: a pod holds the chip."""
        self._advance(now)
        self._judged_at = max(self._judged_at, now)
        reasons = self.reasons.all()
        chip, network = self._side(reasons, network=False), self._side(reasons, network=True)
        return ChipJudgement(
            chip.level,
            network.level,
            kubelet_healthy(chip.level, held=held),
            network_healthy(network.level),
            self.reasons.manual,
            chip,
            network,
            reasons,
            self.configuration,
        )

    def _side(self, reasons: Sequence[UpgradeReason], *, network: bool) -> FaultSide:
        """The chip's own view (or its network's): the level of its codes and escalations, each code at
        the level of the chip with that code alone, escalations included, as Huawei lists them."""
        codes = [code for code in self._current if (code in NETWORK_CODES) == network]
        mine = [reason for reason in reasons if reason.network == network]
        raised = max((reason.level for reason in mine), default=L.NormalNPU)
        times = {
            self.config.spell(code).upper(): CodeTime(
                self._current[code].first_seen, max(self._level([code], network), raised)
            )
            for code in codes
        }
        for reason in mine:
            if reason.code is not None:  # an autofilled reason names no code
                times[reason.fault_code.upper()] = CodeTime(reason.upgrade_time, reason.level)
        return FaultSide(
            max(self._level(codes, network), raised), tuple(times), MappingProxyType(times), len(codes)
        )

    def _level(self, codes: Sequence[int], network: bool) -> FaultLevel:
        """The level ``codes`` give the chip (or, ``network``, its network) by the lists in force."""
        lists = self.config.codes
        return lists.network_level(codes) if network else lists.chip_level(codes, self._severities)

    def wake_at(self) -> int | None:
        """When judging again may answer otherwise though nothing is observed (Unix ms; None: never)."""
        customization = self.config.customization
        times: list[int | None] = [current.until for current in self._current.values()]
        if customization.drops_accompanying_faults:
            times.append(self._accompanying.deadline())
        for code, clock in self._clocks.items():
            rule = customization.duration.get(code)
            times.append(clock.deadline(rule) if rule else None)
        for code, counter in self._counters.items():
            frequency = customization.frequency.get(code)
            if frequency and self.reasons.has(
                (self.config.spell(code), frequency.handling, UpgradeKind.FREQUENCY)
            ):
                times.append(counter.release_at(frequency))
        window = customization.autofill_release_window
        if window is not None:
            times.extend(
                reason.upgrade_time + window * MS
                for reason in self.reasons.all()
                if reason.kind is UpgradeKind.AUTOFILL
            )
        return min((time for time in times if time is not None and time > self._judged_at), default=None)

    # -- the machinery ------------------------------------------------------------------

    def _apply(self, observation: Observation) -> None:
        code, at = observation.code, observation.at
        current = self._current.get(code)
        if observation.assertion is Assertion.RAISED:
            if current is None:
                self._current[code] = _Current(at, observation.polled)
                if (duration := self.config.customization.duration.get(code)) is not None:
                    self._duration_changed(code, self._clock(code).raised(at, duration))
                else:
                    self._count(code, at)
            else:  # the same fault seen again (its event after the poll that found it): one occurrence
                current.first_seen = min(current.first_seen, at)
                current.polled |= observation.polled
                current.until = None  # raised for good, not just once
        elif observation.assertion is Assertion.RECOVERED:
            if current is not None:
                del self._current[code]
                self._recovered(code, at)
        else:
            until = at + int(self._level([code], code in NETWORK_CODES).one_off_hold * MS)
            if current is None:
                self._current[code] = _Current(at, polled=False, until=until)
            elif current.until is not None:
                current.until = max(current.until, until)
            if code not in self.config.customization.duration:  # a moment has no duration
                self._count(code, at)

    def _advance(self, now: int) -> None:
        customization = self.config.customization
        if customization.drops_accompanying_faults:
            for observation in self._accompanying.release(now, self._current):
                self._apply(observation)
        for code, current in list(self._current.items()):
            if current.until is not None and current.until <= now:
                del self._current[code]
                self._recovered(code, current.until)
        self._forget_gone()
        for code, clock in self._clocks.items():
            duration = customization.duration.get(code)
            if duration is not None:
                self._duration_changed(code, clock.advance(now, duration))
        for code, counter in self._counters.items():
            self._count_up(code, counter, now)
        window = customization.autofill_release_window
        if window is not None:
            self._lift(
                lambda reason: (
                    reason.kind is UpgradeKind.AUTOFILL and now >= reason.upgrade_time + window * MS
                ),
                ReleaseCause.AUTOFILL_WINDOW,
            )

    def _forget_gone(self) -> None:
        """Drop the severities of codes neither current nor held back (by the accompanying-fault rule)."""
        if len(self._severities) > len(self._current):
            held = {observation.code for observation in self._accompanying.held}
            self._severities = {
                code: severity
                for code, severity in self._severities.items()
                if code in self._current or code in held
            }

    def _recovered(self, code: int, at: int) -> None:
        customization = self.config.customization
        duration = customization.duration.get(code)
        if duration is not None:
            self._duration_changed(code, self._clock(code).cleared(at, duration))
        elif code in customization.frequency:
            self._counter(code).recovered(at)

    def _count(self, code: int, at: int) -> None:
        if code in self.config.customization.frequency:
            self._counter(code).occurred(at)

    def _duration_changed(self, code: int, changes: Sequence[DurationChange]) -> None:
        customization = self.config.customization
        duration = customization.duration[code]
        spelled = self.config.spell(code)
        for change in changes:
            if change.edge is DurationEdge.TIMED_OUT:
                self._escalate(UpgradeReason(spelled, duration.handling, UpgradeKind.DURATION, change.at))
                self._count(code, change.at)
                continue
            self._lift(
                lambda reason: reason.kind is UpgradeKind.DURATION and reason.fault_code == spelled,
                ReleaseCause.RECOVERED,
            )
            if code in customization.frequency:
                self._counter(code).recovered(change.at)

    def _count_up(self, code: int, counter: FrequencyCounter, now: int) -> None:
        """Huawei's FaultFrequency step for one code: escalate, hold, or release."""
        rule = self.config.customization.frequency.get(code)
        if rule is None:
            return
        spelled = self.config.spell(code)
        key = (spelled, rule.handling, UpgradeKind.FREQUENCY)
        if counter.reached(rule, now):
            log.info(
                "chip %d: %s occurred %d times within %d s: escalated to %s",
                self.phy_id,
                spelled.upper(),
                len(counter.occurrences),
                rule.time_window,
                rule.handling.name,
                extra={"chip": self.phy_id, "code": spelled.upper(), "level": rule.handling.name},
            )
            self._escalate(
                UpgradeReason(spelled, rule.handling, UpgradeKind.FREQUENCY, counter.last_fault or now)
            )
            counter.restart_count()
        elif self.reasons.has(key):
            release_at = counter.release_at(rule)
            if release_at is not None and now >= release_at:
                self._lift(_key_is(key), ReleaseCause.RELEASE_WINDOW)
            else:
                # Escalated already: a further occurrence moves its time and is not counted again.
                if counter.last_fault is not None:
                    self.reasons.put(
                        UpgradeReason(spelled, rule.handling, UpgradeKind.FREQUENCY, counter.last_fault)
                    )
                counter.restart_count()

    def _align(self, now: int) -> None:
        """Fit the escalations, clocks and counters to the configuration in force."""
        customization = self.config.customization
        for reason in self.reasons.all():
            wanted = self._configured_level(reason)
            if wanted is reason.level:
                continue
            if wanted is None and reason.level is L.ManuallySeparateNPU:
                continue  # as Huawei documents: a manual separation outlives its rule; an operator lifts it
            self._lift(_key_is(reason.key), ReleaseCause.CONFIGURATION)
            if wanted is not None:
                self._escalate(dataclasses.replace(reason, level=wanted))
        self._counters = {code: c for code, c in self._counters.items() if code in customization.frequency}
        self._clocks = {code: c for code, c in self._clocks.items() if code in customization.duration}
        for code, current in self._current.items():
            duration = customization.duration.get(code)
            if duration is not None and code not in self._clocks and current.until is None:
                self._duration_changed(code, self._clock(code).raised(now, duration))
        if not customization.drops_accompanying_faults:
            for observation in self._accompanying.flush():
                self._apply(observation)

    def _configured_level(self, reason: UpgradeReason) -> FaultLevel | None:
        """The level the configuration gives ``reason``'s rule now (None: no rule); autofill keeps its own."""
        if reason.kind is UpgradeKind.AUTOFILL:
            return reason.level
        code = reason.code
        customization = self.config.customization
        rules = customization.frequency if reason.kind is UpgradeKind.FREQUENCY else customization.duration
        rule = rules.get(code) if code is not None else None
        return rule.handling if rule is not None else None

    def _escalate(self, reason: UpgradeReason) -> None:
        was_manual = self.reasons.manual
        if not self.reasons.has(reason.key):
            self.escalated[reason.kind] += 1
        self.reasons.put(reason)
        if self.reasons.manual and not was_manual:
            self.separation_written = False
            log.warning(
                "chip %d is manually separated (%s %s): it stays unhealthy until an operator removes it "
                "from ManuallySeparateNPU",
                self.phy_id,
                reason.kind.value,
                reason.fault_code.upper(),
                extra={"chip": self.phy_id, "code": reason.fault_code, "kind": reason.kind.value},
            )

    def _lift(self, matches: Callable[[UpgradeReason], bool], cause: ReleaseCause) -> None:
        gone = self.reasons.remove(matches)
        if gone:
            self._releases.append(Release(self.phy_id, gone, cause))
            log.info(
                "chip %d: escalation lifted (%s): %s",
                self.phy_id,
                cause.value,
                ", ".join(f"{reason.fault_code.upper()} {reason.level.name}" for reason in gone),
                extra={"chip": self.phy_id, "cause": cause.name},
            )

    def _counter(self, code: int) -> FrequencyCounter:
        return self._counters.setdefault(code, FrequencyCounter())

    def _clock(self, code: int) -> DurationClock:
        return self._clocks.setdefault(code, DurationClock())


def _key_is(key: tuple[str, FaultLevel, UpgradeKind]) -> Callable[[UpgradeReason], bool]:
    return lambda reason: reason.key == key
