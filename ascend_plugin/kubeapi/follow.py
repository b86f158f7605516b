"""Follow one named object: its state now, then again after every change.

The node labeller and the config watcher each care about exactly one object
(our Node, the config ConfigMap). A list with a field selector gives its
current state and a resourceVersion; a watch from there gives each change. When
the server ends the watch (its timeout) we watch again from the last version
seen; when that version has expired (410 Gone) we list again, so no change is
missed either way. Other errors leave to the caller, which backs off.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing

from ascend_plugin.kubeapi.client import WATCH_TIMEOUT, JsonObject, Kube, Resource
from ascend_plugin.kubeapi.errors import Gone

log = logging.getLogger(__name__)


async def follow(
    kube: Kube,
    resource: Resource,
    namespace: str | None,
    name: str,
    watch_timeout: int = WATCH_TIMEOUT,
) -> AsyncGenerator[JsonObject | None, None]:
    """The object's state (None while it does not exist), first now and then after each change."""
    selector = f"metadata.name={name}"
    while True:
        listing = await kube.list(resource, namespace, selector)
        yield listing.items[0] if listing.items else None
        version = listing.resource_version
        try:
            while True:
                stream = kube.watch(resource, namespace, selector, version, watch_timeout)
                async with aclosing(stream) as events:
                    async for event in events:
                        version = event.resource_version or version
                        if event.type == "BOOKMARK":
                            continue
                        yield None if event.type == "DELETED" else event.object
        except Gone:
            log.debug("watch of %s %s expired (410 Gone); listing again", resource.plural, name)
