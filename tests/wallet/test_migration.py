"""Migration 0005 creates exactly the tables, columns, indexes and constraints of wallet/models.py."""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from fastapi import FastAPI

from kasir.models import metadata
from tests.support.engine import engine_of


def _wallet_diffs(diffs: list[Any]) -> list[Any]:
    def names(diff: Any) -> str:
        return repr(diff)

    return [d for d in diffs if "wallet_" in names(d)]


async def test_migration_matches_the_models(app: FastAPI) -> None:
    async with engine_of(app.state.database) as engine, engine.connect() as connection:
        diffs = await connection.run_sync(
            lambda sync: compare_metadata(MigrationContext.configure(sync, opts={"compare_type": False}), metadata)
        )
    assert _wallet_diffs(list(diffs)) == []
