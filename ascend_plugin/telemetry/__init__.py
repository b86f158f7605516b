"""Chip telemetry: what each chip measures, read on its own cadence and kept for /metrics.

Beside the inventory, not in it: nothing decides on these figures, and the layer contract keeps
them from ever reaching a verdict.
"""
