"""Chip backends: how the plugin reaches Ascend NPUs (ARCHITECTURE.md "The chip families").

:class:`~backends.session.LibrarySession` opens a chip library for the node;
:class:`~backends.backend.ChipBackend` is what the plugin asks of the chips, one
implementation per family (:mod:`backends.families`); the libraries are
:mod:`backends.dcmi` (Huawei's libdcmi.so) and :mod:`backends.fake`. ``backends``
never imports ``ascend_plugin``.
"""
