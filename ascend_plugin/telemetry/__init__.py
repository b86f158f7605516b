"""Chip telemetry: what each chip measures, read on its own cadence and kept for /metrics to show.

Its own package, beside the inventory and not in it: the inventory is the
health verdict, which the kubelet's offers depend on; the telemetry is a
reading of figures that nothing decides on. The layer contract keeps it so:
the inventory and the health monitor cannot import this package, and what is
read here never reaches a verdict.

* :mod:`.readout`: one chip's figures, each with the time it was read, and
  which of them are fresh enough to show;
* :mod:`.collector`: :class:`~.collector.TelemetryCollector`, the rounds: the
  chip figures every ``telemetry_interval`` seconds, the slower groups every
  ``telemetry_slow_interval``, each chip's calls of a round in one background
  call on the chip's lane (:meth:`~ascend_plugin.chip_calls.ChipCalls.call`),
  beside its health calls (which never wait for it), each figure with a short timeout.

What the chips' families read differently (the 910B and A3 multi-rate
utilization, the 310P card's power, HBM or DDR, the RoCE port of a training
card) is theirs: :class:`~backends.backend.ChipBackend`'s telemetry methods.
"""
