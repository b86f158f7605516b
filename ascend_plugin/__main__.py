"""``python -m ascend_plugin``: the same as the ``ascend-device-plugin`` command."""

from ascend_plugin.cli import main

raise SystemExit(main())
