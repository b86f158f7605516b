"""Chip backends: how the plugin reaches Ascend NPUs.

The public face is small:

* :class:`backends.backend.ChipBackend` - init, close, discover, read_health,
  subscribe_faults over a device library;
* :mod:`backends.families` - one :class:`~backends.families.FamilyTable` row per
  chip family, and :func:`~backends.families.family_for` to pick one;
* :mod:`backends.chips` - the value types (Chip, HealthReading, AiCoreFigure);
* :mod:`backends.errors` - :class:`~backends.errors.ChipError` and the few
  subclasses callers branch on;
* the libraries: :mod:`backends.dcmi` (Huawei's libdcmi.so) and
  :mod:`backends.fake` (a scenario file), both :class:`~backends.library.DeviceLibrary`.

``backends`` never imports ``ascend_plugin``.
"""
