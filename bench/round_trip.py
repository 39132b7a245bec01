"""What one PostgreSQL round trip costs the client, on this machine: asyncpg alone, no Kasir.

    .venv/bin/python bench/round_trip.py

Starts a throw-away cluster (fsync on) and times, over its Unix socket, a prepared point SELECT, the
same through asyncpg's statement cache, a simple query, and 64 tasks sharing a pool of 16 connections.
It prints the client's CPU (user and kernel) per round trip: the floor under every kasir.db statement
on PostgreSQL, which no change inside Kasir lowers. A card charge with a key makes five.
"""

from __future__ import annotations

import asyncio
import resource
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import asyncpg  # noqa: E402
from tests.support.postgres import PostgresCluster  # noqa: E402

ROUND_TRIPS = 5000
WARM_UP = 500


def _cpu() -> tuple[float, float]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


async def _one_at_a_time(label: str, round_trip: Callable[[], Awaitable[Any]]) -> None:
    for _ in range(WARM_UP):
        await round_trip()
    (user0, kernel0), wall0 = _cpu(), time.perf_counter()
    for _ in range(ROUND_TRIPS):
        await round_trip()
    (user1, kernel1), wall1 = _cpu(), time.perf_counter()
    per = 1e6 / ROUND_TRIPS
    print(
        f"{label:<28} client CPU {(user1 - user0) * per:5.1f} µs user + {(kernel1 - kernel0) * per:5.1f} µs kernel,"
        f" {(wall1 - wall0) * per:6.1f} µs wall per round trip"
    )


async def _measure(cluster: PostgresCluster) -> None:
    where = {"host": str(cluster.root), "port": cluster.port, "user": "kasir", "database": "kasir"}
    connection = await asyncpg.connect(**where)
    await connection.execute("CREATE TABLE probe (id text PRIMARY KEY, value int)")
    point_select = "SELECT value FROM probe WHERE id = $1"
    prepared = await connection.prepare(point_select)
    await _one_at_a_time("prepared SELECT", lambda: prepared.fetch("x"))
    await _one_at_a_time("SELECT, asyncpg's cache", lambda: connection.fetch(point_select, "x"))
    await _one_at_a_time("simple query", lambda: connection.execute("SELECT 1"))
    await connection.close()

    pool = await asyncpg.create_pool(**where, min_size=16, max_size=16)
    tasks, each = 64, 200

    async def task() -> None:
        for _ in range(each):
            async with pool.acquire() as pooled:
                await pooled.fetch(point_select, "x")

    (user0, kernel0), wall0 = _cpu(), time.perf_counter()
    await asyncio.gather(*(task() for _ in range(tasks)))
    (user1, kernel1), wall1 = _cpu(), time.perf_counter()
    count = tasks * each
    print(
        f"{'64 tasks, pool of 16':<28} client CPU {(user1 - user0) * 1e6 / count:5.1f} µs user"
        f" + {(kernel1 - kernel0) * 1e6 / count:5.1f} µs kernel per round trip, {count / (wall1 - wall0):,.0f}/s"
    )
    await pool.close()


def main() -> None:
    cluster = PostgresCluster(durable=True)
    cluster.start()
    try:
        asyncio.run(_measure(cluster))
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
