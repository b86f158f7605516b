"""kubernetes-asyncio's ApiClient, Configuration and config loaders, without its API classes and models.

Any import from kubernetes-asyncio loads every API class and model (about 35 MiB), and there is no public
way around it: its three packages are registered as shells before the few modules needed are imported.
The private names are pinned in pyproject.toml and checked by tests/test_kube_lean_import.py.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any

_PACKAGES = ("kubernetes_asyncio", "kubernetes_asyncio.client", "kubernetes_asyncio.client.models")


def _complete(module: types.ModuleType, name: str) -> Any:
    """A submodule imported alone; anything else after the package's own ``__init__`` ran in the shell."""
    if importlib.util.find_spec(f"{module.__name__}.{name}") is not None:
        return importlib.import_module(f"{module.__name__}.{name}")
    spec = module.__spec__
    assert spec is not None
    assert spec.loader is not None
    del module.__getattr__  # from now on the package answers itself
    spec.loader.exec_module(module)
    try:
        return module.__dict__[name]
    except KeyError:
        raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}") from None


def _shell(name: str) -> types.ModuleType:
    spec = importlib.util.find_spec(name)  # its parent is a shell already
    if spec is None:
        raise ImportError(f"no module named {name!r}", name=name)
    module = importlib.util.module_from_spec(spec)
    module.__getattr__ = lambda attribute: _complete(module, attribute)  # type: ignore[method-assign]
    sys.modules[name] = module
    if "." in name:
        parent, child = name.rsplit(".", 1)
        setattr(sys.modules[parent], child, module)
    return module


def _lean() -> tuple[Any, Any]:
    """ApiClient and Configuration; shells only where kubernetes-asyncio was not imported before."""
    fresh = "kubernetes_asyncio" not in sys.modules
    if fresh:
        for name in _PACKAGES:
            _shell(name)
    configuration = importlib.import_module("kubernetes_asyncio.client.configuration").Configuration
    api_client = importlib.import_module("kubernetes_asyncio.client.api_client").ApiClient
    if fresh:  # the config loaders import both from the client package
        client = sys.modules["kubernetes_asyncio.client"]
        client.__dict__.setdefault("ApiClient", api_client)
        client.__dict__.setdefault("Configuration", configuration)
    return api_client, configuration


ApiClient, Configuration = _lean()
_config = importlib.import_module("kubernetes_asyncio.config")
ConfigException: type[Exception] = _config.ConfigException
load_incluster_config = _config.load_incluster_config
load_kube_config = _config.load_kube_config
