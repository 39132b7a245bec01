"""The three ways a repository can run a statement, measured in process on the embedded SQLite:
the ORM (objects through the session's unit of work), a Core statement through `session.execute`,
and the same statement as a `kasir.db.Statement` (compiled once, run on the unit's connection).

    .venv/bin/python bench/data_access.py [rounds]

Each way writes one card-order-sized row and reads it back by primary key, `rounds` times, each
in its own unit of work (as a request would); prints microseconds per write and per read, the
median of 5 alternating passes. README "Data access" quotes it.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from sqlalchemy import bindparam, insert, select

from kasir.config import Settings
from kasir.db import Database, Statement, binds, upgrade_schema
from kasir.kit.clock import clock
from kasir.kit.ids import new_sortable_id
from kasir.merchants.models import Merchant

PASSES = 5


async def main(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        database = Database(Settings(data_dir=Path(directory), secret_key="bench"))
        await upgrade_schema(database)
        table = Merchant.__table__
        now = clock.now()

        def row() -> dict[str, Any]:
            id_ = new_sortable_id("MER", 20)
            return {
                "id": id_,
                "name": id_,
                "client_id": id_,
                "client_secret_encrypted": "x" * 120,
                "secret_encrypted": "x" * 120,
                "hash_key_encrypted": "x" * 120,
                "public_key_pem": "-----BEGIN PUBLIC KEY-----\n" + "A" * 392 + "\n-----END PUBLIC KEY-----\n",
                "callback_url": "https://merchant.example/cb",
                "created_at": now,
                "updated_at": now,
            }

        columns = [c.name for c in table.columns if c.name in row()]
        core_insert = insert(table).values(binds(table, columns))
        core_select = select(*table.c).where(table.c.id == bindparam("id"))
        compiled_insert, compiled_select = Statement(core_insert), Statement(core_select)

        async def orm(values: dict[str, Any]) -> None:
            async with database.unit_of_work() as session:
                session.add(Merchant(**values))
            async with database.unit_of_work(read_only=True) as session:
                assert (await session.get(Merchant, values["id"])) is not None

        async def core(values: dict[str, Any]) -> None:
            async with database.unit_of_work() as session:
                await session.execute(core_insert, values)
            async with database.unit_of_work(read_only=True) as session:
                assert (await session.execute(core_select, {"id": values["id"]})).first() is not None

        async def statement(values: dict[str, Any]) -> None:
            async with database.unit_of_work() as session:
                await compiled_insert.execute(session, **values)
            async with database.unit_of_work(read_only=True) as session:
                assert (await compiled_select.first(session, id=values["id"])) is not None

        ways: dict[str, Callable[[dict[str, Any]], Awaitable[None]]] = {
            "ORM (session.add / session.get)": orm,
            "Core through session.execute": core,
            "kasir.db.Statement": statement,
        }
        wall: dict[str, list[float]] = {name: [] for name in ways}
        cpu: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(PASSES):
            for name, way in ways.items():
                for _warm in range(50):
                    await way(row())
                started, started_cpu = time.perf_counter(), time.process_time()
                for _round in range(rounds):
                    await way(row())
                wall[name].append((time.perf_counter() - started) / rounds * 1e6)
                cpu[name].append((time.process_time() - started_cpu) / rounds * 1e6)
        await database.dispose()
    print(f"one write unit (its own COMMIT) + one read unit per round, {rounds} rounds, median of {PASSES} passes:")
    print(f"  {'':<34} {'wall µs':>8} {'CPU µs':>8}")
    for name in ways:
        print(f"  {name:<34} {statistics.median(wall[name]):8.0f} {statistics.median(cpu[name]):8.0f}")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 500))
