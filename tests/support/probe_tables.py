"""A Database with a test's own tables, made before the test and dropped after it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import MetaData

from kasir.config import Settings
from kasir.db import Database
from tests.support.engine import engine_of


@asynccontextmanager
async def database_with_tables(settings: Settings, metadata: MetaData) -> AsyncIterator[Database]:
    database = Database(settings)
    async with engine_of(database) as engine, engine.begin() as connection:
        await connection.run_sync(metadata.create_all)
    try:
        yield database
    finally:
        await database.dispose()
        async with engine_of(database) as engine, engine.begin() as connection:
            await connection.run_sync(metadata.drop_all)
