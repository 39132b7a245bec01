"""Whether this process's clock agrees with the database's: time from one clock that cannot run ahead alone.

Idempotency keys, payments' expiries and callback leases are moments one process wrote and another compares
with its own clock. A machine whose clock stepped (a day ahead, an hour behind) would take over a key a retry
still needs (a refund paid twice), expire a live payment, or take another worker's lease. Every process
therefore compares its clock with the database's (`kasir.db.database_time`, one clock for every machine on
PostgreSQL) and, while the two differ by more than KASIR_MAX_DATABASE_CLOCK_SKEW_SECONDS, acts on nothing:

- the callback worker expires, purges and claims nothing (kasir.callbacks.worker);
- `kasir serve` answers every request but the health checks with an outage (503, Retry-After), in the route's
  wire format, and `/readyz` says why (kasir.middleware, kasir.ops.endpoints): a load balancer sends the
  requests to a server whose clock is right.

On one SQLite file every process reads the same machine's clock, so they always agree; a step there moves
every process together.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from kasir.db import Database, database_time

log = logging.getLogger("kasir.clock")

# How often `kasir serve` looks again: a step is caught within this, at one small read per process.
SERVER_CHECK_SECONDS = 10.0


class ClockAgreement:
    """The last verdict of comparing this process's clock with the database's, and what it stops."""

    def __init__(self, allowed_seconds: float, *, stops: str) -> None:
        self.allowed_seconds = allowed_seconds
        self.stops = stops  # what this process does not do meanwhile, said in the log line
        # The process's own clock (a seam for the tests, whose `kasir.kit.clock` moves while the machine's
        # does not: a test that moves time to expire a payment is not a machine whose clock stepped).
        self.process_epoch: Callable[[], float] = time.time
        self.agrees = True
        self.ahead_seconds = 0.0
        self._said_at = float("-inf")

    async def check(self, database: Database) -> bool | None:
        """Compare the clocks now; the verdict, or None (and the last verdict kept) when the database cannot be read."""
        try:
            self.ahead_seconds = self.process_epoch() - (await database_time(database)).timestamp()
        except Exception:
            log.warning("reading the database's clock failed", exc_info=True)
            return None
        self.agrees = abs(self.ahead_seconds) <= self.allowed_seconds
        if not self.agrees and time.monotonic() - self._said_at >= 60:
            self._said_at = time.monotonic()
            log.error("%s: fix the machine's time (NTP)", self.disagreement())
        return self.agrees

    def disagreement(self) -> str:
        """What an operator reads: by how much, which way, and what waits until the clocks agree."""
        way = "ahead of" if self.ahead_seconds > 0 else "behind"
        return (
            f"this machine's clock is {abs(self.ahead_seconds):.0f} s {way} the database's (more than "
            f"KASIR_MAX_DATABASE_CLOCK_SKEW_SECONDS={self.allowed_seconds:g}): {self.stops} until they agree"
        )

    async def watch(self, database: Database, every: float = SERVER_CHECK_SECONDS) -> None:
        """Check every `every` seconds, until cancelled (the first check is the caller's, at start-up)."""
        while True:
            await asyncio.sleep(every)
            await self.check(database)
