"""TtlCache: a process-local map whose entries are kept for a few seconds."""

from __future__ import annotations

import asyncio
import time

from kasir.kit.ttl_cache import TtlCache


def test_an_entry_is_answered_until_its_time_is_up() -> None:
    # Wall-clock time: the cache keeps time by the monotonic clock. A minute is the time an entry is sure
    # to be answered in; a twentieth of a second, after a tenth, the time it is sure to be gone.
    kept: TtlCache[str, int] = TtlCache(ttl=lambda: 60)
    kept.put("a", 1)
    assert kept.get("a") == 1
    assert kept.get("b") is None
    brief: TtlCache[str, int] = TtlCache(ttl=lambda: 0.05)
    brief.put("a", 1)
    time.sleep(0.1)
    assert brief.get("a") is None


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


async def test_concurrent_misses_share_one_load() -> None:
    cache: TtlCache[str, int] = TtlCache(ttl=lambda: 60)
    loads = 0
    release = asyncio.Event()

    async def load() -> int:
        nonlocal loads
        loads += 1
        await release.wait()
        return 7

    waiting = [asyncio.ensure_future(cache.load_once("a", load)) for _ in range(10)]
    await asyncio.sleep(0)
    release.set()
    assert await asyncio.gather(*waiting) == [7] * 10
    assert loads == 1
    assert cache.get("a") is None  # load_once keeps nothing: the caller puts what it trusts
    assert await cache.load_once("a", load) == 7
    assert loads == 2  # a later miss loads again


async def test_a_cancelled_caller_leaves_the_load_to_the_others() -> None:
    cache: TtlCache[str, int] = TtlCache(ttl=lambda: 60)
    release = asyncio.Event()

    async def load() -> int:
        await release.wait()
        return 7

    first = asyncio.ensure_future(cache.load_once("a", load))
    second = asyncio.ensure_future(cache.load_once("a", load))
    await asyncio.sleep(0)
    first.cancel()
    await asyncio.sleep(0)
    release.set()
    assert await second == 7
    assert first.cancelled()


async def test_a_failed_load_fails_every_caller_and_is_tried_again_next_time() -> None:
    cache: TtlCache[str, int] = TtlCache(ttl=lambda: 60)
    attempts = 0

    async def load() -> int:
        nonlocal attempts
        attempts += 1
        await asyncio.sleep(0)
        if attempts == 1:
            raise ConnectionError("database unreachable")
        return 7

    outcomes = await asyncio.gather(*(cache.load_once("a", load) for _ in range(3)), return_exceptions=True)
    assert all(isinstance(outcome, ConnectionError) for outcome in outcomes)
    assert await cache.load_once("a", load) == 7
    assert attempts == 2
