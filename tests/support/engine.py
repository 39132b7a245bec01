"""SQLAlchemy's engine on a test's database, for what Kasir itself does only in migrations.

Kasir's units of work run on the drivers (kasir.db); a test that creates tables of its own,
reflects the schema, or runs a migration step by step does it on an engine made here, as
`kasir.db.run_migrations` does, and disposed after.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
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


async def insert_old_merchant(connection: AsyncConnection, merchant_id: str = "M1") -> None:
    """A merchant row as every schema since the first migration has it, for a migration test's old rows."""
    await connection.execute(
        text(
            "INSERT INTO merchant (id, name, client_id, client_secret_encrypted, secret_encrypted,"
            " hash_key_encrypted, public_key_pem, created_at, updated_at)"
            " VALUES (:id, 'm', 'c', 'x', 'x', 'x', 'pem', '2026-11-24 00:00:00', '2026-11-24 00:00:00')"
        ),
        {"id": merchant_id},
    )
