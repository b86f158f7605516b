"""Follow one named object in the caller's task: its state now, then again after every change.

The node labeller and the config watcher each care about exactly one object
(our Node, the config ConfigMap) and react to it in the same task, so they drive
the reflector's loop themselves (:meth:`Reflector.updates`) rather than run it
in the background: an error of the API server leaves to the caller, which backs
off and follows again.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing

from ascend_plugin.kubeapi.client import WATCH_TIMEOUT, JsonObject, Kube, Resource
from ascend_plugin.kubeapi.reflector import named_object, object_key


async def follow(
    kube: Kube,
    resource: Resource,
    namespace: str | None,
    name: str,
    watch_timeout: int = WATCH_TIMEOUT,
) -> AsyncGenerator[JsonObject | None, None]:
    """The object's state (None while it does not exist), first now and then after each change."""
    key = object_key(namespace, name)
    reflector = named_object(
        kube, resource, namespace, name, part=f"{resource.qualified} {key}", watch_timeout=watch_timeout
    )
    async with aclosing(reflector.updates()) as updates:
        async for _ in updates:
            yield reflector.get(key)
