"""Chip backends: how the plugin reaches Ascend NPUs (ARCHITECTURE.md "The chip families").

``backends`` never imports ``ascend_plugin``.
"""
