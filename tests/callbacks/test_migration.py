"""Migration 0017: the callback and grace columns as the models say, and existing replays made deliveries of their
event, on the session's database (SQLite or PostgreSQL)."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from fastapi import FastAPI
from sqlalchemy import text

from kasir.db import Database, upgrade_schema
from kasir.models import metadata
from tests.support.engine import engine_of, insert_old_merchant


async def test_migration_matches_the_models(app: FastAPI) -> None:
    async with engine_of(app.state.database) as engine, engine.connect() as connection:
        diffs = await connection.run_sync(
            lambda sync: compare_metadata(MigrationContext.configure(sync, opts={"compare_type": False}), metadata)
        )
    assert [d for d in diffs if "callback" in repr(d) or "merchant_credential_grace" in repr(d)] == []


async def test_existing_replays_become_deliveries_of_their_event(settings, postgres, data_dir) -> None:
    if postgres is not None:
        url = await asyncio.to_thread(postgres.create_database, f"events_{secrets.token_hex(4)}")
    else:
        url = f"sqlite+aiosqlite:///{data_dir / f'events-{secrets.token_hex(4)}.db'}"
    database = Database(settings.model_copy(update={"database_url": url}))
    try:
        await upgrade_schema(database, "0012")
        async with engine_of(database) as engine, engine.begin() as connection:
            await insert_old_merchant(connection)
            # An event given up (3 attempts), a replay of it given up (3), a replay of that replay not sent yet,
            # and an event of its own: as operators left them before events had one id.
            for callback_id, status, made, replay_of in (
                (1, "failed", 3, None),
                (2, "failed", 3, 1),
                (3, "pending", 0, 2),
                (4, "delivered", 1, None),
            ):
                await connection.execute(
                    text(
                        "INSERT INTO callback (id, merchant_id, kind, transaction_ref, event, url, payload,"
                        " svc_signature, status, attempts_made, max_attempts, next_attempt_at, fence, replay_of,"
                        " created_at) VALUES (:id, 'M1', 'wallet', 'TX', 'PAID', 'http://shop/cb', '{}', 'sig',"
                        " :status, :made, 3, '2026-11-24 00:00:00', 0, :replay_of, '2026-11-24 00:00:00')"
                    ),
                    {"id": callback_id, "status": status, "made": made, "replay_of": replay_of},
                )
            await connection.execute(
                text(
                    "INSERT INTO merchant_credential_grace (merchant_id, kind, value, created_at, expires_at)"
                    " VALUES ('M1', 'hash_key', 'sealed', '2026-11-24 00:00:00', '2026-11-25 00:00:00')"
                )
            )
        await upgrade_schema(database)
        async with engine_of(database) as engine, engine.connect() as connection:
            found: list[Any] = list(
                (
                    await connection.execute(
                        text("SELECT id, event_id, attempt_offset, svc_signature, signed_ids FROM callback ORDER BY id")
                    )
                ).all()
            )
            grace = list((await connection.execute(text("SELECT confirmed_at FROM merchant_credential_grace"))).all())
        assert [tuple(row) for row in found] == [
            (1, None, 0, "sig", None),
            (2, 1, 0, "sig", None),  # attempts 1 to 3 already went out with its own numbering
            (3, 1, 3, "sig", None),  # not sent yet: it starts after the event's attempts
            (4, None, 0, "sig", None),
        ]
        assert [tuple(row) for row in grace] == [(None,)]  # a rotation in grace before: not confirmed
    finally:
        await database.dispose()
