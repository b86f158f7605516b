"""The reflector: a local copy of some objects, kept current by a list and then a watch, as client-go's.

410 Gone lists again; every failure waits with jittered backoff; a part's own writes show in the store at
once (:meth:`Reflector.record_write`). docs/kubernetes.md, "Resilience".
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import aclosing, contextmanager
from dataclasses import dataclass
from types import MappingProxyType
from typing import Generic, TypeVar

import anyio

from ascend_plugin.changes import Changes
from ascend_plugin.kubeapi.client import (
    WATCH_TIMEOUT,
    JsonObject,
    Kube,
    Resource,
    WatchEvent,
    mapping_field,
    string_field,
)
from ascend_plugin.kubeapi.errors import Gone, KubeError, NotFound, Unreachable
from ascend_plugin.kubeapi.retry import Retrier

log = logging.getLogger(__name__)

# Seconds a watch must last, or send something, to count as one (client-go's "very short watch"): one
# that ends sooner was cut off, and opening it again at once would hammer the API server.
MIN_WATCH = 1.0

T = TypeVar("T")


def object_key(namespace: str | None, name: str) -> str:
    """The store's key of an object: ``namespace/name``, or ``name`` for a cluster-scoped one."""
    return f"{namespace}/{name}" if namespace else name


def key_of(obj: Mapping[str, object]) -> str:
    metadata = mapping_field(obj, "metadata")
    return object_key(string_field(metadata, "namespace") or None, string_field(metadata, "name"))


def version_of(obj: Mapping[str, object]) -> str:
    """``obj``'s resourceVersion (opaque: compare it for equality only)."""
    return string_field(mapping_field(obj, "metadata"), "resourceVersion")


def unchanged(obj: JsonObject) -> JsonObject:
    """The transform of a reflector that keeps the objects as the API server sends them."""
    return obj


@dataclass(frozen=True)
class _Answer(Generic[T]):
    """An API server's answer about one object that the watch has not shown yet."""

    value: T | None  # None: the object is gone
    version: str  # its resourceVersion ("" when gone)
    lists_begun: int  # how many lists had begun when the answer came


class Reflector(Generic[T]):
    """The objects one list and watch select, by key, current while the API server answers; ``transform``
    turns each object into what the store keeps (client-go's TransformFunc), once per change."""

    def __init__(
        self,
        kube: Kube,
        resource: Resource,
        transform: Callable[[JsonObject], T],
        *,
        part: str,
        namespace: str | None = None,
        field_selector: str = "",
        changes: Changes | None = None,
        watch_timeout: int = WATCH_TIMEOUT,
        retry: Retrier | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``clock``: what a watch's duration is measured on (tests move it)."""
        self.kube = kube
        self.resource = resource
        self.transform = transform
        self.part = part  # what the logs call it, e.g. "pods of node n1"
        self.namespace = namespace  # None: every namespace (namespaced kinds) or a cluster-scoped kind
        self.field_selector = field_selector
        self.changes = changes if changes is not None else Changes()
        self.watch_timeout = watch_timeout
        self.retry = retry if retry is not None else Retrier(part)
        self.clock = clock
        self.version = ""  # where the watch goes on from: the last list's, event's or bookmark's
        self.lists = 0  # list requests begun
        self.watches = 0  # watch requests begun
        self.bookmarks = 0  # BOOKMARK events received
        self._watched: dict[str, T] = {}  # what the list and the watch showed
        self._versions: dict[str, str] = {}  # ... and at which resourceVersion
        self._answers: dict[str, _Answer[T]] = {}  # answers the watch has not shown yet
        self._echoes: dict[str, set[str]] | None = None  # what the watch showed while answers were awaited
        self._awaited = 0  # answers awaited now
        self._synced = anyio.Event()
        self._must_list = True
        self._just_listed = False  # nothing came of the watch since the last list yet
        self._expired_at_once = False  # the last failure: 410 Gone straight after a list

    # -- reading ---------------------------------------------------------------------------------

    @property
    def store(self) -> Mapping[str, T]:
        """The objects by key: what the watch showed, with the answers it has not shown yet."""
        if not self._answers:
            return MappingProxyType(self._watched)
        merged = dict(self._watched)
        for key, answer in self._answers.items():
            if answer.value is None:
                merged.pop(key, None)
            else:
                merged[key] = answer.value
        return MappingProxyType(merged)

    def get(self, key: str) -> T | None:
        answer = self._answers.get(key)
        return answer.value if answer is not None else self._watched.get(key)

    @property
    def synced(self) -> bool:
        """True once the first list is in: the store is complete (if perhaps no longer current)."""
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    # -- following -------------------------------------------------------------------------------

    async def run(self) -> None:
        """Keep the store current until cancelled; every failure is retried with backoff."""
        said_synced = False
        while True:
            try:
                async with aclosing(self._steps()) as steps:
                    async for _ in steps:
                        if not (self._just_listed and self._expired_at_once):
                            self.retry.succeeded()  # (a list between two such 410s is no recovery)
                        if not said_synced:
                            said_synced = True
                            log.info(
                                "%s: listed %d, following them",
                                self.part,
                                len(self._watched),
                                extra={"part": self.part, "objects": len(self._watched)},
                            )
            except KubeError as error:
                await self.retry.failed(error)

    async def relist(self) -> Mapping[str, T]:
        """List now and take the list over (an open watch goes on); the store."""
        await self._list()
        return self.store

    async def _steps(self) -> AsyncGenerator[bool, None]:
        """List (when needed) and watch, forever: True after a change of the store, False after progress."""
        while True:
            if self._must_list:
                self.version = await self._list()
                self._must_list, self._just_listed = False, True
                yield True
            try:
                async with aclosing(self._watch()) as steps:
                    async for changed in steps:
                        self._just_listed = self._expired_at_once = False
                        yield changed
            except Gone:
                self._must_list = True
                if self._just_listed:
                    self._expired_at_once = True
                    raise  # the version of a list just taken: something is wrong, back off first
                log.debug(
                    "%s: the watch's resourceVersion expired (410 Gone); listing again",
                    self.part,
                    extra={"part": self.part},
                )

    async def _list(self) -> str:
        """One list, taken over into the store; its resourceVersion."""
        self.lists += 1
        begun = self.lists
        listing = await self.kube.list(self.resource, self.namespace, self.field_selector)
        self._replace(listing.items, begun)
        return listing.resource_version

    async def _watch(self) -> AsyncGenerator[bool, None]:
        """One watch from :attr:`version` until the server ends it: True per change, False per bookmark."""
        self.watches += 1
        timeout = self.watch_timeout + int(self.watch_timeout * random.random())
        stream = self.kube.watch(self.resource, self.namespace, self.field_selector, self.version, timeout)
        began, received = self.clock(), False
        async with aclosing(stream) as events:
            async for event in events:
                received = True
                self.version = event.resource_version or self.version
                if event.type == "BOOKMARK":
                    self.bookmarks += 1
                    yield False
                elif self._apply(event):
                    yield True
        if not received and self.clock() - began < MIN_WATCH:
            raise Unreachable(
                "the watch ended at once without sending anything (a watch lasts its timeout, "
                f"{self.watch_timeout}-{2 * self.watch_timeout} s here: does a proxy or load balancer "
                "close streams early?)"
            )
        yield False  # ended by the server at its timeout: watched again from self.version

    def _replace(self, items: Sequence[JsonObject], begun: int) -> None:
        self._watched = {key_of(item): self.transform(item) for item in items}
        self._versions = {key_of(item): version_of(item) for item in items}
        for key, answer in list(self._answers.items()):
            # An answer that came before this list began is in the list (a consistent read) or overtaken.
            if answer.lists_begun < begun or self._shows(key, answer):
                del self._answers[key]
        self._synced.set()
        self.changes.bump()

    def _apply(self, event: WatchEvent) -> bool:
        key, version = key_of(event.object), event.resource_version
        if event.type == "DELETED":
            self._watched.pop(key, None)
            self._versions.pop(key, None)
            version = ""
        elif event.type in ("ADDED", "MODIFIED"):
            self._watched[key] = self.transform(event.object)
            self._versions[key] = version
        else:
            log.debug("%s: watch event of type %r ignored", self.part, event.type, extra={"part": self.part})
            return False
        if self._echoes is not None:
            self._echoes.setdefault(key, set()).add(version)
        answer = self._answers.get(key)
        if answer is not None and self._shows(key, answer):
            del self._answers[key]
        self.changes.bump()
        return True

    # -- answers of our own requests ---------------------------------------------------------------

    async def record_write(self, write: Awaitable[JsonObject]) -> JsonObject:
        """Await a create or update and show the object it answers in the store at once, until the watch
        shows that resourceVersion (the watch sends every change in order: that event is the write's)."""
        with self._watching_echoes() as echoes:
            obj = await write
        key, version = key_of(obj), version_of(obj)
        self._take(key, obj, shown=version in echoes.get(key, ()) or self._versions.get(key) == version)
        return obj

    async def read(self, name: str) -> JsonObject | None:
        """Read the object called ``name`` now and show it in the store at once; None (gone) on 404. Any
        event about it meanwhile counts as the watch having it: a read may answer older than the watch."""
        try:
            with self._watching_echoes() as echoes:
                obj = await self.kube.get(self.resource, name, self.namespace)
        except NotFound:
            self.record_gone(object_key(self.namespace, name))
            return None
        key = key_of(obj)
        self._take(key, obj, shown=key in echoes or self._versions.get(key) == version_of(obj))
        return obj

    def record_gone(self, key: str) -> None:
        """The API server said the object is gone (deleted, or 404): it leaves the store at once."""
        if key in self._watched or key in self._answers:
            self._answers[key] = _Answer(None, "", self.lists)
        self.changes.bump()

    def _take(self, key: str, obj: JsonObject, *, shown: bool) -> None:
        if shown:
            self._answers.pop(key, None)
        else:
            self._answers[key] = _Answer(self.transform(obj), version_of(obj), self.lists)
        self.changes.bump()

    def _shows(self, key: str, answer: _Answer[T]) -> bool:
        """Whether the watch showed ``answer``: the object gone, or at the answer's resourceVersion."""
        if answer.value is None:
            return key not in self._watched
        return self._versions.get(key) == answer.version

    @contextmanager
    def _watching_echoes(self) -> Iterator[dict[str, set[str]]]:
        """The versions the watch shows while an answer is awaited, by key."""
        if self._echoes is None:
            self._echoes = {}
        echoes = self._echoes
        self._awaited += 1
        try:
            yield echoes
        finally:
            self._awaited -= 1
            if not self._awaited:
                self._echoes = None


def named_object(
    kube: Kube,
    resource: Resource,
    namespace: str | None,
    name: str,
    *,
    part: str,
    changes: Changes | None = None,
) -> Reflector[JsonObject]:
    """A reflector of one object by name, which may not exist (its store is then empty)."""
    return Reflector(
        kube,
        resource,
        unchanged,
        part=part,
        namespace=namespace,
        field_selector=f"metadata.name={name}",
        changes=changes,
    )
