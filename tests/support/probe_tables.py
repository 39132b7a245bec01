"""A Database with a test's own tables, made before the test and dropped after it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import MetaData

from kasir.config import Settings
from kasir.db import Database, current_revision, run_migrations


@asynccontextmanager
async def database_with_tables(settings: Settings, metadata: MetaData) -> AsyncIterator[Database]:
    """The tables are made and dropped the way migrations run (kasir.db.run_migrations): Database
    itself runs statements, not DDL of a whole schema."""
    database = Database(settings)
    url = settings.resolved_database_url
    try:
        # As `kasir db upgrade` does before it migrates: a new SQLite file is made by Kasir's own
        # connection, in WAL mode, which every process sharing the file then opens without a lock.
        await current_revision(database)
        await run_migrations(url, metadata.create_all)
        yield database
    finally:
        await database.dispose()
        await run_migrations(url, metadata.drop_all)
