"""Migrations 0021 and 0022: the VA and disbursement tables as the models say; every merchant made before gets its
disbursement account number, each its own."""

from __future__ import annotations

from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from fastapi import FastAPI
from sqlalchemy import text

from kasir.config import Settings
from kasir.db import Database, upgrade_schema
from kasir.models import metadata
from tests.support.engine import engine_of, insert_old_merchant

TABLES = (
    "virtual_account",
    "va_payment",
    "disbursement_balance",
    "disbursement_top_up",
    "account_no",
    "payout_transfer",
)


async def test_migrations_match_the_models(app: FastAPI) -> None:
    async with engine_of(app.state.database) as engine, engine.connect() as connection:
        diffs = await connection.run_sync(
            lambda sync: compare_metadata(MigrationContext.configure(sync, opts={"compare_type": False}), metadata)
        )
    assert [d for d in diffs if any(name in repr(d) for name in TABLES)] == []


async def test_merchants_made_before_get_an_account_number_each(tmp_path: Path) -> None:
    database = Database(Settings(data_dir=tmp_path, secret_key="k"))
    try:
        await upgrade_schema(database, "0021")
        async with engine_of(database) as engine, engine.begin() as connection:
            await insert_old_merchant(connection)
            await connection.execute(
                text(
                    "INSERT INTO merchant (id, name, client_id, client_secret_encrypted, secret_encrypted,"
                    " hash_key_encrypted, public_key_pem, created_at, updated_at)"
                    " VALUES ('M2', 'm2', 'c2', 'x', 'x', 'x', 'pem', '2026-11-24 00:00:00', '2026-11-24 00:00:00')"
                )
            )
        await upgrade_schema(database, "0022")
        async with engine_of(database) as engine, engine.connect() as connection:
            numbers = [row[0] for row in (await connection.execute(text("SELECT account_no FROM merchant"))).all()]
        assert len(numbers) == 2
        assert len(set(numbers)) == 2
        assert all(len(number) == 16 and number.isdigit() for number in numbers)
    finally:
        await database.dispose()
