"""Chip telemetry: what each chip measures, read on its own cadence and kept for /metrics.

Beside the inventory, not in it: a layer contract keeps these figures from ever reaching a verdict.
"""
