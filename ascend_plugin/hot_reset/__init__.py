"""Hot reset: a chip whose fault calls for a reset is reset by the plugin once nothing uses it.

Which chips (:mod:`.rules`), when a group is free (:mod:`.freeness`), the budget (:mod:`.budget`), the
steps (:mod:`.sequence`), what is told and counted (:mod:`.notices`, :mod:`.stats`), all run by
:class:`~.manager.HotResetManager`: docs/hot-reset.md.
"""
