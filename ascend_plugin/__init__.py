"""ascend-device-plugin: a Kubernetes device plugin for Huawei Ascend NPUs.

The version is kept here, the one place the package's build reads it from
(``[tool.hatch.version]``): looking it up through importlib.metadata at start
would import zipfile, email and their kin, 2-3 MiB of a daemon that idles on
every node.
"""

__version__ = "0.1.0"
