"""A process-local map whose entries are kept for a few seconds.

What the authenticated hot paths know of merchants is held this way (kasir.merchants.service
`credential_cache_seconds`): it skips a query per request, and for Basic auth three decryptions.
"""

from __future__ import annotations

import time
from collections.abc import Callable
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
