"""TtlCache: a process-local map whose entries are kept for a few seconds."""

from __future__ import annotations

import time

from kasir.kit.ttl_cache import TtlCache


def test_an_entry_is_answered_until_its_time_is_up() -> None:
    cache: TtlCache[str, int] = TtlCache(ttl=lambda: 0.2)
    cache.put("a", 1)
    assert cache.get("a") == 1
    assert cache.get("b") is None
    time.sleep(0.3)
    assert cache.get("a") is None


def test_a_ttl_of_zero_keeps_nothing() -> None:
    cache: TtlCache[str, int] = TtlCache(ttl=lambda: 0)
    cache.put("a", 1)
    assert cache.get("a") is None


def test_the_ttl_is_read_at_each_put() -> None:
    seconds = [0.0]
    cache: TtlCache[str, int] = TtlCache(ttl=lambda: seconds[0])
    cache.put("a", 1)
    seconds[0] = 60
    cache.put("b", 2)
    assert (cache.get("a"), cache.get("b")) == (None, 2)


def test_forget_drops_an_entry_at_once() -> None:
    cache: TtlCache[str, int] = TtlCache(ttl=lambda: 60)
    cache.put("a", 1)
    cache.forget("a")
    cache.forget("never put")
    assert cache.get("a") is None


def test_a_full_cache_starts_over() -> None:
    cache: TtlCache[int, int] = TtlCache(ttl=lambda: 60, limit=3)
    for key in range(3):
        cache.put(key, key)
    assert [cache.get(key) for key in range(3)] == [0, 1, 2]
    cache.put(3, 3)
    assert [cache.get(key) for key in range(4)] == [None, None, None, 3]
