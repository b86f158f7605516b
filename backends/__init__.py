"""Chip backends: how the plugin reaches Ascend NPUs.

`backends` never imports `ascend_plugin`. The plugin sees chips only through
:class:`backends.base.ChipBackend`, which pairs a device library (the real DCMI
binding, or a fake) with the rules of one chip family.
"""
