"""Chip backends: how the plugin reaches Ascend NPUs.

The public face is small:

* :class:`backends.session.LibrarySession` - a chip library opened for the
  node: init, enumerate the chips, close, the optional functions it lacks;
* :class:`backends.backend.ChipBackend` - abstract: what the plugin asks of the
  chips (health, vNPUs, memory, fault events, topology units, reset groups),
  built over a session, one implementation per family;
* :mod:`backends.families` - the families (:data:`~backends.families.FAMILIES`),
  each a row of facts (:class:`~backends.family_table.FamilyTable`) and a class,
  and :func:`~backends.families.family_for` to pick one;
* :mod:`backends.chips` - the value types (Chip, HealthReading, AiCoreFigure);
* :mod:`backends.errors` - :class:`~backends.errors.ChipError` and the few
  subclasses callers branch on;
* the libraries: :mod:`backends.dcmi` (Huawei's libdcmi.so) and
  :mod:`backends.fake` (a scenario file), both :class:`~backends.library.DeviceLibrary`.

``backends`` never imports ``ascend_plugin``.
"""
