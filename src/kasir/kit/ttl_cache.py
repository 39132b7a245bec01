"""A process-local map whose entries are kept for a few seconds.

What the authenticated hot paths know of merchants is held this way (kasir.merchants.service
`credential_cache_seconds`): it skips a query per request, and for Basic auth three decryptions.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class TtlCache(Generic[K, V]):
    """key -> value for `ttl()` seconds from when it was put; a ttl of 0 keeps nothing.

    The ttl is read at each put, so a changed setting applies to the next entry. At most
    `limit` entries: when full it starts over (entries are cheap to load again).
    """

    def __init__(self, ttl: Callable[[], float], limit: int = 10_000) -> None:
        self._ttl = ttl
        self._limit = limit
        self._entries: dict[K, tuple[float, V]] = {}
        self._loading: dict[K, asyncio.Future[V | None]] = {}

    def get(self, key: K) -> V | None:
        entry = self._entries.get(key)
        if entry is None or entry[0] < time.monotonic():
            return None
        return entry[1]

    def put(self, key: K, value: V) -> None:
        ttl = self._ttl()
        if ttl > 0:
            if len(self._entries) >= self._limit:
                self._entries.clear()
            self._entries[key] = (time.monotonic() + ttl, value)

    def forget(self, key: K) -> None:
        self._entries.pop(key, None)

    async def load_once(self, key: K, load: Callable[[], Awaitable[V | None]]) -> V | None:
        """`load()`'s answer, with every concurrent call for `key` sharing one `load()`.

        When an entry expires under load, every request in flight misses it at once: without
        this each would read the database (on PostgreSQL, 64 access-token requests each took a
        connection and a transaction, and held the event loop up for ~150 ms every few seconds).
        The load runs as a task of its own, so a caller that is cancelled does not cancel it
        for the others; its exception reaches all of them. Nothing is put: the caller decides
        what to keep (Basic auth keeps only credentials it proved).
        """
        loading = self._loading.get(key)
        if loading is None:
            loading = asyncio.ensure_future(load())
            self._loading[key] = loading
            loading.add_done_callback(lambda done: self._loaded(key, done))
        return await asyncio.shield(loading)

    def _loaded(self, key: K, done: asyncio.Future[V | None]) -> None:
        if self._loading.get(key) is done:
            del self._loading[key]
        if not done.cancelled():
            done.exception()  # retrieved: when every caller was cancelled, nobody else reads it
