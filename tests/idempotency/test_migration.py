"""Migration 0008: the idempotency_key table as the model says, and the card charge's answered keys moved into it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from fastapi import FastAPI
from sqlalchemy import text

from kasir.config import Settings
from kasir.db import Database, upgrade_schema
from kasir.models import metadata
from tests.support.engine import engine_of, insert_old_merchant


async def test_migration_matches_the_model(app: FastAPI) -> None:
    async with engine_of(app.state.database) as engine, engine.connect() as connection:
        diffs = await connection.run_sync(
            lambda sync: compare_metadata(MigrationContext.configure(sync, opts={"compare_type": False}), metadata)
        )
    assert [d for d in diffs if "idempotency_key" in repr(d)] == []


async def rows(database: Database, sql: str) -> list[Any]:
    async with engine_of(database) as engine, engine.connect() as connection:
        return list((await connection.execute(text(sql))).all())


async def test_the_card_charges_answered_keys_move_over_and_back(tmp_path: Path) -> None:
    database = Database(Settings(data_dir=tmp_path, secret_key="k"))
    try:
        await upgrade_schema(database, "0007")
        async with engine_of(database) as engine, engine.begin() as connection:
            await insert_old_merchant(connection)
            for key, status, answer in (("done", "complete", '{"statusCode":"00"}'), ("running", "in_progress", None)):
                await connection.execute(
                    text(
                        "INSERT INTO card_idempotency_key (merchant_id, key, request_hash, status, response_status,"
                        " response_body, created_at, expires_at) VALUES ('M1', :key, 'hash', :status, :code, :answer,"
                        " '2026-11-24 00:00:00', '2026-11-25 00:00:00')"
                    ),
                    {"key": key, "status": status, "code": 200 if answer else None, "answer": answer},
                )
        await upgrade_schema(database, "0008")
        moved = await rows(
            database,
            "SELECT merchant_id, scope, key, request_hash, response_status, response_headers, response_body"
            " FROM idempotency_key",
        )
        assert moved == [
            (
                "M1",
                "POST /card-v2/v1/charge",
                "done",
                "hash",
                200,
                '{"content-type": "application/json"}',
                '{"statusCode":"00"}',
            )
        ]  # the request that was still running left nothing: its client's retry finds the key free

        from alembic import command

        from kasir.db.database import alembic_config

        def downgrade(sync_connection: Any) -> None:
            config = alembic_config()
            config.attributes["connection"] = sync_connection
            command.downgrade(config, "0007")

        async with engine_of(database) as engine, engine.begin() as connection:
            await connection.run_sync(downgrade)
        back = await rows(database, "SELECT key, status, response_status, response_body FROM card_idempotency_key")
        assert back == [("done", "complete", 200, '{"statusCode":"00"}')]
    finally:
        await database.dispose()
