"""kubernetes-asyncio's API client and config loaders, without its generated API classes and models.

Importing any part of kubernetes-asyncio runs its package's ``__init__``, which
imports every API class and every model of the Kubernetes API: about 35 MiB
resident that the plugin never uses, since its calls (:mod:`.client`) go
through the :class:`ApiClient` with raw JSON in and out. So before importing
the few modules it needs, this registers the packages ``kubernetes_asyncio``,
``kubernetes_asyncio.client`` and ``kubernetes_asyncio.client.models`` as
*shells*: the real package modules, with their ``__path__``, whose ``__init__``
has not run yet. The modules under them import as usual.

Nothing else notices: the first time anything asks a shell for a name it does
not have (the doctor's ``AuthorizationV1Api``, the client deserialising into a
model), the shell runs its real ``__init__`` and answers. Where kubernetes-asyncio
was imported before this module, the shells are not needed and not made.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any

_PACKAGES = ("kubernetes_asyncio", "kubernetes_asyncio.client", "kubernetes_asyncio.client.models")


def _complete(module: types.ModuleType, name: str) -> Any:
    """Run the package's own ``__init__`` into its shell, then answer as the full package does.

    A submodule is answered by importing just it (``from package import
    submodule`` asks the package first, as does ``package.submodule``).
    """
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
    spec = importlib.util.find_spec(name)  # finds the package; its parent is a shell already
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
    """The client's ApiClient and Configuration classes, importing no API class and no model."""
    fresh = "kubernetes_asyncio" not in sys.modules
    shells = [_shell(name) for name in _PACKAGES] if fresh else []
    configuration = importlib.import_module("kubernetes_asyncio.client.configuration").Configuration
    api_client = importlib.import_module("kubernetes_asyncio.client.api_client").ApiClient
    if shells:
        # The config loaders import both from the client package: give them what the real one would.
        client = sys.modules["kubernetes_asyncio.client"]
        client.__dict__.setdefault("ApiClient", api_client)
        client.__dict__.setdefault("Configuration", configuration)
    return api_client, configuration


ApiClient, Configuration = _lean()
_config = importlib.import_module("kubernetes_asyncio.config")
ConfigException: type[Exception] = _config.ConfigException
load_incluster_config = _config.load_incluster_config
load_kube_config = _config.load_kube_config
