"""What a PostgreSQL unit of work costs the server's process, through kasir.db and on asyncpg alone.

    .venv/bin/python bench/unit_cost.py        (UNIT_COST_UNITS per run, 5,000; UNIT_COST_ROUNDS, 3)

Starts a throw-away cluster (fsync off: the client's work is measured, not the disk's) and migrates it,
then runs the idempotency key's claim, the statement every keyed request begins with, as 64 tasks
sharing as many connections as `make bench` gives a server (20), in four shapes, round after round:

    kasir-1   a unit with atomic=False: the claim alone (1 round trip)
    raw-1     the same SQL and values on asyncpg alone, a connection taken from a queue
    kasir-3   a unit: BEGIN, the claim, COMMIT (3 round trips: wallet create's shape)
    raw-3     the same in an asyncpg transaction

It prints the process's CPU (user and kernel) per unit and units a second. What kasir.db adds to a
unit is the first of each pair less the second; HTTP, routing and the rooms' work are not in it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.postgres import PostgresCluster  # noqa: E402

UNITS = int(os.environ.get("UNIT_COST_UNITS", "5000"))
ROUNDS = int(os.environ.get("UNIT_COST_ROUNDS", "3"))
TASKS = 64
POOL_SIZE = 20
BIN = Path(sys.executable).parent


async def _measure(url: str, merchant_id: str) -> dict[str, list[tuple[float, float]]]:
    import asyncpg
    from sqlalchemy.dialects.postgresql.asyncpg import dialect
    from sqlalchemy.engine import make_url

    from kasir.config import get_settings
    from kasir.db import Database
    from kasir.idempotency import repository
    from kasir.idempotency.repository import NewKey, idempotency_repository
    from kasir.kit.clock import clock

    database = Database(get_settings())
    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    connections: asyncio.Queue[Any] = asyncio.Queue()
    for _ in range(POOL_SIZE):
        connections.put_nowait(await asyncpg.connect(dsn))
    postgres = dialect()
    numbers = itertools.count()
    prefix = secrets.token_hex(4)

    def new_key() -> NewKey:
        now = clock.now()
        return NewKey(merchant_id, "POST /bench/unit-cost", f"{prefix}-{next(numbers)}", "0" * 64, now, now)

    async def through_kasir(atomic: bool) -> None:
        async with database.unit_of_work(atomic=atomic) as session:
            await idempotency_repository.claim(session, new_key(), wait_seconds=1)

    async def on_asyncpg(atomic: bool) -> None:
        compiled = repository._CLAIM.statement("postgresql").compiled(postgres)
        values = compiled.values({**new_key().values(), "lock_wait": "1000"})
        connection = await connections.get()
        try:
            if atomic:
                async with connection.transaction():
                    await connection.execute(compiled.sql, *values)
            else:
                await connection.execute(compiled.sql, *values)
        finally:
            connections.put_nowait(connection)

    shapes: dict[str, tuple[Callable[[bool], Awaitable[None]], bool]] = {
        "kasir-1": (through_kasir, False),
        "raw-1": (on_asyncpg, False),
        "kasir-3": (through_kasir, True),
        "raw-3": (on_asyncpg, True),
    }

    async def run(unit: Callable[[bool], Awaitable[None]], atomic: bool) -> tuple[float, float]:
        remaining = iter(range(UNITS))

        async def task() -> None:
            for _ in remaining:
                await unit(atomic)

        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.gather(*(task() for _ in range(TASKS)))
        return (time.process_time() - cpu) * 1e6 / UNITS, UNITS / (time.perf_counter() - wall)

    results: dict[str, list[tuple[float, float]]] = {name: [] for name in shapes}
    for shape in shapes.values():
        await run(*shape)  # warm: connections made, statements prepared
    for _ in range(ROUNDS):
        for name, shape in shapes.items():
            results[name].append(await run(*shape))
    while not connections.empty():
        await connections.get_nowait().close()
    await database.dispose()
    return results


def main() -> int:
    workdir = Path(tempfile.mkdtemp(prefix="kasir-unit-cost-"))
    cluster = PostgresCluster(durable=False)
    try:
        cluster.start()
        url = cluster.socket_url("kasir")
        env = {
            **os.environ,
            "KASIR_DATABASE_URL": url,
            "KASIR_DATA_DIR": str(workdir / "data"),
            "KASIR_DB_POOL_SIZE": str(POOL_SIZE),
        }
        os.environ.update(env)
        subprocess.run([str(BIN / "kasir"), "db", "upgrade"], env=env, check=True, capture_output=True)
        created = subprocess.run(
            [str(BIN / "kasir"), "merchant", "create", "--name", "Unit Cost", "--generate-key", str(workdir), "--json"],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        results = asyncio.run(_measure(url, json.loads(created.stdout)["merchant_id"]))
        print(f"{TASKS} tasks, {POOL_SIZE} connections, {UNITS} units per run, fsync off")
        for name, runs in results.items():
            cpu = ", ".join(f"{c:.0f}" for c, _ in runs)
            rate = ", ".join(f"{r:,.0f}" for _, r in runs)
            print(f"{name:<8} CPU µs per unit: {cpu}   units/s: {rate}")
        return 0
    finally:
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
