"""BackToBack: the calls of one event-loop iteration run together in the next, each answered to its caller."""

from __future__ import annotations

import asyncio
from contextvars import ContextVar

import pytest

from kasir.kit.back_to_back import BackToBack


async def test_calls_from_several_requests_run_together_after_all_have_made_them() -> None:
    calls = BackToBack()
    events: list[str] = []

    def double(value: int) -> int:
        events.append(f"run {value}")
        return value * 2

    async def request(value: int) -> int:
        events.append(f"reached {value}")
        result = await calls.run(double, value)
        events.append(f"answered {value}")
        return result

    assert await asyncio.gather(request(1), request(2), request(3)) == [2, 4, 6]
    # All three reach the call before any runs; all run before any caller goes on.
    assert events[:6] == ["reached 1", "reached 2", "reached 3", "run 1", "run 2", "run 3"]
    assert sorted(events[6:]) == ["answered 1", "answered 2", "answered 3"]


_request_id: ContextVar[str] = ContextVar("request_id", default="none")


async def test_each_call_runs_in_its_own_callers_context() -> None:
    calls = BackToBack()

    async def request(request_id: str) -> str:
        _request_id.set(request_id)
        return await calls.run(_request_id.get)

    assert await asyncio.gather(request("a"), request("b"), request("c")) == ["a", "b", "c"]


async def test_an_exception_reaches_its_own_caller_only() -> None:
    calls = BackToBack()

    def check(value: int) -> int:
        if value < 0:
            raise ValueError(f"negative: {value}")
        return value

    results = await asyncio.gather(
        calls.run(check, 1), calls.run(check, -1), calls.run(check, 2), return_exceptions=True
    )
    assert results[0::2] == [1, 2]
    assert isinstance(results[1], ValueError)
    assert str(results[1]) == "negative: -1"


async def test_a_call_whose_caller_gave_up_is_not_run() -> None:
    calls = BackToBack()
    ran: list[int] = []
    kept = calls.run(ran.append, 1)
    given_up = calls.run(ran.append, 2)
    given_up.cancel()
    await kept
    assert ran == [1]


async def test_the_next_iteration_starts_a_new_batch() -> None:
    calls = BackToBack()
    assert await calls.run(len, "ab") == 2
    assert await calls.run(len, "abc") == 3  # a batch that already ran does not swallow this call


def test_a_loop_that_stopped_before_its_calls_ran_does_not_hold_up_the_next_loop() -> None:
    calls = BackToBack()
    first = asyncio.new_event_loop()
    left: list[asyncio.Future[int]] = []

    def call_and_stop() -> None:
        left.append(calls.run(len, "never run"))
        first.stop()  # the loop ends with this iteration, before the next one would run the call

    first.call_soon(call_and_stop)
    first.run_forever()
    first.close()
    assert not left[0].done()

    async def call_and_wait() -> int:
        return await asyncio.wait_for(calls.run(len, "abcd"), timeout=2)

    second = asyncio.new_event_loop()
    try:
        assert second.run_until_complete(call_and_wait()) == 4
    finally:
        second.close()


@pytest.mark.parametrize("count", [1, 64])
async def test_each_caller_gets_its_own_result(count: int) -> None:
    calls = BackToBack()
    results = await asyncio.gather(*(calls.run(str, n) for n in range(count)))
    assert results == [str(n) for n in range(count)]
