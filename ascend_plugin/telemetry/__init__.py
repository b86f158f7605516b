"""Chip telemetry: what each chip measures, read on its own cadence and kept for /metrics to show.

Beside the inventory, not in it: nothing decides on these figures, and the layer
contract keeps what is read here from ever reaching a verdict. The rounds:
:mod:`.collector`; freshness: :mod:`.readout`; what each family reads
differently: :class:`~backends.backend.ChipBackend`'s telemetry methods.
"""
