"""SQLAlchemy's engine on a test's database, for what Kasir itself does only in migrations.

Kasir's units of work run on the drivers (kasir.db); a test that creates tables of its own,
reflects the schema, or runs a migration step by step does it on an engine made here, as
`kasir.db.run_migrations` does, and disposed after.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from kasir.db import Database


@asynccontextmanager
async def engine_of(database: Database | str) -> AsyncIterator[AsyncEngine]:
    url = database if isinstance(database, str) else database.url
    engine = create_async_engine(url, poolclass=NullPool)
    try:
        yield engine
    finally:
        await engine.dispose()
