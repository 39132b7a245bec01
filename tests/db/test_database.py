"""The unit-of-work helpers of kasir.db that every room's jobs use."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from kasir.config import Settings
from kasir.db import Database, each_in_own_unit_of_work


async def test_each_key_in_its_own_unit_of_work_a_failure_rolls_back_only_its_own(tmp_path: Path):
    database = Database(Settings(data_dir=tmp_path, secret_key="k"))
    try:
        async with database.unit_of_work() as session:
            await session.execute(text("CREATE TABLE done (key TEXT PRIMARY KEY)"))

        async def action(session, key: str) -> bool:
            await session.execute(text("INSERT INTO done (key) VALUES (:k)"), {"k": key})
            if key == "bad":
                raise RuntimeError("this row fails after writing")
            return key != "skipped"

        count = await each_in_own_unit_of_work(database, ["a", "bad", "b", "skipped"], action, what="test job")
        assert count == 2  # a and b; `skipped` committed but reported False; `bad` rolled back
        async with database.unit_of_work(read_only=True) as session:
            keys = set((await session.execute(text("SELECT key FROM done"))).scalars())
        assert keys == {"a", "b", "skipped"}
    finally:
        await database.dispose()
