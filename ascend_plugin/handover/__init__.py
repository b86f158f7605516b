"""Handover: what a container gets for its devices, in ``device``, ``runtime`` or ``cdi`` mode."""
