"""ascend-device-plugin: a Kubernetes device plugin for Huawei Ascend NPUs."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("ascend-device-plugin")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"
