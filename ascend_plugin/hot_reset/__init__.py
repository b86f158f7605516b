"""Hot reset: a chip whose fault calls for a reset is reset by the plugin once nothing uses it.

Run by :class:`~.manager.HotResetManager`: docs/hot-reset.md.
"""
