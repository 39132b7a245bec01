"""Migrations 0012, 0018 and 0019 create exactly the tables and columns of the card dialect's models, the card
attempt's (its holder's name and decline reason, for the inquiry) and the simulator's wrong one-time passwords."""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from fastapi import FastAPI

from kasir.models import metadata
from tests.support.engine import engine_of

_TABLES = ("card_stored", "sub_merchant", "card_order", "card_attempt", "simulator_wrong_otp")


async def test_migration_matches_the_models(app: FastAPI) -> None:
    async with engine_of(app.state.database) as engine, engine.connect() as connection:
        diffs: list[Any] = await connection.run_sync(
            lambda sync: compare_metadata(MigrationContext.configure(sync, opts={"compare_type": False}), metadata)
        )
    assert [d for d in diffs if any(table in repr(d) for table in _TABLES)] == []
