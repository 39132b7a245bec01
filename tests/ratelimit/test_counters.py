"""The in-process counters stay bounded under a flood of new addresses, and keep what locks."""

from __future__ import annotations

import pytest

from kasir.ratelimit import counters as counters_module
from kasir.ratelimit.counters import Counters


async def test_a_flood_of_new_keys_keeps_memory_bounded_and_the_locking_counters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(counters_module, "MAX_COUNTERS", 100)
    counters = Counters()
    now = 1_000_000.0
    for _ in range(5):
        await counters.hit([("fail:ip:attacker", 300)], now)
    flood = [(f"fail:ip:flood-{n}", 300) for n in range(1_000)]
    for n, counter in enumerate(flood):
        await counters.hit([counter], now)
        # What it remembers is what it still counts: never more counters than it may keep.
        remembered = sum(1 for count in await counters.read([*flood[: n + 1], ("fail:ip:attacker", 300)], now) if count)
        assert remembered <= 100
    assert await counters.read([("fail:ip:attacker", 300)], now) == [5]
    # an ended window goes first, and a new one starts from zero
    later = now + 300
    assert await counters.read([("fail:ip:attacker", 300)], later) == [0]
    assert await counters.hit([("fail:ip:attacker", 300)], later) == [1]
