"""CPU-bound library calls of many requests, run back to back instead of one per request.

Under load a request runs its whole path at once: headers, body, signature, response, log
line. A call into a library with code and tables of its own (an RSA verification in
OpenSSL) then finds them evicted from the CPU's caches by everything else the request did,
and costs about half as much again as it does in a tight loop (a 2048-bit verification in
the token endpoint under load: the figures are in the commit that brought this module).

`BackToBack.run` defers the call instead: every call made during one event-loop iteration
runs in the next one, one after the other, and each caller gets its own result (or
exception) back. The requests of an iteration all reach the call, then all make it warm,
then all go on. With 64 connections the token endpoint's verifications ran 64 at a time,
each at its tight-loop cost; the request waits one loop iteration longer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextvars import Context, copy_context
from typing import Any, TypeVar
from weakref import WeakKeyDictionary

T = TypeVar("T")

_Call = tuple[asyncio.Future[Any], Context, Callable[..., Any], tuple[Any, ...]]


class BackToBack:
    """Calls of one kind, deferred to the next loop iteration and run there together."""

    def __init__(self) -> None:
        # Per event loop: tests and the CLI run several loops in one process, and a loop that
        # stopped before its calls ran must not leave them in the way of the next loop's.
        self._waiting: WeakKeyDictionary[asyncio.AbstractEventLoop, list[_Call]] = WeakKeyDictionary()

    def run(self, function: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """`function(*args)`'s result, once the calls made in this loop iteration have run."""
        loop = asyncio.get_running_loop()
        waiting = self._waiting.get(loop)
        if waiting is None:
            waiting = self._waiting[loop] = []
        if not waiting:
            loop.call_soon(_run_all, waiting)
        future: asyncio.Future[T] = loop.create_future()
        # In its caller's context, not that of the request that happened to schedule the batch: what
        # the call logs or notes for the request's log line belongs to its own request.
        waiting.append((future, copy_context(), function, args))
        return future


def _run_all(waiting: list[_Call]) -> None:
    calls = waiting[:]
    waiting.clear()
    for future, context, function, args in calls:
        if future.cancelled():  # its caller gave up (a client that hung up): nothing to compute
            continue
        try:
            result = context.run(function, *args)
        except Exception as exc:
            future.set_exception(exc)
        else:
            future.set_result(result)
