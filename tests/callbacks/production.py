"""A production app of its own for SSRF tests: its own database, so the session app's callback
worker (staging, which allows loopback) never delivers what production is to refuse."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from kasir.app import create_app
from kasir.config import Settings, configure
from kasir.db import Database, upgrade_schema
from kasir.simulator import Simulator
from tests.support.postgres import PostgresCluster

STAND_IN = "card=simulator,wallet=simulator,bnpl=simulator"


async def isolated_database(settings: Settings, postgres: PostgresCluster | None, data_dir: Path) -> str:
    """A new, migrated database on the test session's server (or a new SQLite file)."""
    if postgres is not None:
        url = await asyncio.to_thread(postgres.create_database, f"ssrf_{secrets.token_hex(4)}")
    else:
        url = f"sqlite+aiosqlite:///{data_dir / f'ssrf-{secrets.token_hex(4)}.db'}"
    database = Database(settings.model_copy(update={"database_url": url}))
    try:
        await upgrade_schema(database)
    finally:
        await database.dispose()
    return url


@contextlib.asynccontextmanager
async def production_app(settings: Settings, database_url: str, allowed: str, **more: Any) -> AsyncIterator[FastAPI]:
    """`create_app` with KASIR_ENV=production and the allow-list as the environment would give it."""
    environment = {"env": "production", "database_url": database_url, "callback_allowed_networks": allowed, **more}
    # Production serves a product only with a processor, never the simulator (kasir.processors): here the
    # simulator stands in for real ones, so that requests get as far as their callback URL's check. The
    # registry keeps what it resolved by environment and configuration: this configuration stays resolved
    # for the session, which only these production apps name (the refusal of the simulator in production
    # is tested with configurations of its own, tests/processors/test_registry.py).
    environment.setdefault("processors", STAND_IN)
    environment.setdefault("embedded_worker", True)  # as `kasir serve` runs (the session's app has none)
    Simulator.simulates = False
    try:
        application = create_app(Settings(**{**settings.model_dump(), **environment}))
        async with application.router.lifespan_context(application):
            yield application
    finally:
        Simulator.simulates = True
        configure(settings)  # create_app installed the production settings process-wide
