"""The helpers of kasir.db that every room uses: one unit of work per key for the jobs, the schema check."""

from __future__ import annotations

import pytest

from kasir.config import Settings
from kasir.db import (
    Database,
    SchemaBehind,
    Session,
    check_schema,
    current_revision,
    each_in_own_unit_of_work,
    head_revision,
    ping,
)
from tests.db.probe import ADD, names


async def test_each_key_in_its_own_unit_of_work_a_failure_rolls_back_only_its_own(database: Database) -> None:
    async def action(session: Session, key: str) -> bool:
        await ADD.execute(session, name=key)
        if key == "bad":
            raise RuntimeError("this row fails after writing")
        return key != "skipped"

    count = await each_in_own_unit_of_work(database, ["a", "bad", "b", "skipped"], action, what="test job")
    assert count == 2  # a and b; `skipped` committed but reported False; `bad` rolled back
    assert await names(database) == {"a", "b", "skipped"}


async def test_the_schema_check_says_what_it_found_and_what_to_run(
    database: Database, settings: Settings, migrated: None
) -> None:
    """The tests' own database has no schema; the session's migrated one is at head."""
    assert await current_revision(database) is None
    with pytest.raises(SchemaBehind, match=r"found no schema.*run `kasir db upgrade`"):
        await check_schema(database)
    migrated_database = Database(settings)
    try:
        assert await current_revision(migrated_database) == head_revision()
        await check_schema(migrated_database)
        await ping(migrated_database)
    finally:
        await migrated_database.dispose()
