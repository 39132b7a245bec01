"""The workers' claim on PostgreSQL: a backlog that arrives after a quiet time (statistics taken while nothing
was pending) is claimed by one index look-up per due callback, not by joining every due callback with every
unsettled one (kasir.callbacks.repository._claim_statement)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from sqlalchemy import make_url, text

from kasir.callbacks.repository import _CLAIM, CLAIMED_COLUMNS, callback_repository
from kasir.config import Settings
from kasir.db import Database, postgres, run, upgrade_schema
from kasir.merchants.service import merchant_service
from tests.support.builders import public_pem, rsa_key, unique_name
from tests.support.postgres import PostgresCluster

SETTLED, WAITING = 400, 400


@pytest.fixture
async def quiet_then_backlog(settings: Settings, postgres: PostgresCluster | None) -> AsyncIterator[Database]:
    """A database of its own whose statistics were taken with every callback delivered, then a backlog."""
    if postgres is None:
        pytest.skip("PostgreSQL's planner")
    url = postgres.create_database(f"claims_{uuid.uuid4().hex[:10]}")
    database = Database(settings.model_copy(update={"database_url": url}))
    await upgrade_schema(database)
    async with database.unit_of_work() as session:
        merchant, _ = await merchant_service.create(session, name=unique_name(), public_key=public_pem(rsa_key()))
    insert = """
        INSERT INTO callback (merchant_id, kind, transaction_ref, event, url, payload, status, attempts_made,
                              max_attempts, next_attempt_at, fence, created_at)
        SELECT :merchant, 'wallet', :prefix || n, 'PAID', 'http://127.0.0.1:9/cb', '{}', :status, 0, 6,
               now() - make_interval(secs => :count - n), 0, now()
        FROM generate_series(1, :count) AS n
    """
    async with database.unit_of_work() as session:
        old = {"merchant": merchant.id, "prefix": "OLD-", "status": "delivered", "count": SETTLED}
        await run(session, text(insert).bindparams(**old))
    async with database.unit_of_work() as session:
        await run(session, text("ANALYZE callback"))
    async with database.unit_of_work() as session:
        new = {"merchant": merchant.id, "prefix": "NEW-", "status": "pending", "count": WAITING}
        await run(session, text(insert).bindparams(**new))
        # A second callback of the first waiting transaction, due before every other: it waits for the first.
        await run(
            session,
            text(insert.replace("FROM generate_series(1, :count) AS n", "FROM generate_series(1, 1) AS n")).bindparams(
                **{**new, "count": 10 * WAITING}
            ),
        )
    yield database
    await database.dispose()


async def claim_plan(database: Database, params: dict[str, Any]) -> str:
    """PostgreSQL's plan for the workers' claim statement with `params`, as JSON text."""
    compiled = _CLAIM.compiled(postgres.DIALECT)
    values = compiled.values(params)
    dsn = make_url(database.url).set(drivername="postgresql").render_as_string(hide_password=False)
    connection = await asyncpg.connect(dsn)
    try:
        return json.dumps(await connection.fetchval(f"EXPLAIN (FORMAT JSON) {compiled.sql}", *values))
    finally:
        await connection.close()


async def test_a_backlog_after_a_quiet_time_is_claimed_by_look_ups_not_a_join(quiet_then_backlog: Database) -> None:
    now = datetime.now(UTC)
    params = {"now": now, "claim_limit": 50, "worker": "w1", "lease_until": now + timedelta(seconds=30)}
    plan = await claim_plan(quiet_then_backlog, params)
    assert "Anti Join" not in plan, plan
    assert "ix_callback_transaction" in plan, plan

    async with quiet_then_backlog.unit_of_work() as session:
        claimed = await callback_repository.claim(session, now, 50, "w1", now + timedelta(seconds=30))
    refs = [row[CLAIMED_COLUMNS.index("transaction_ref")] for row in claimed]
    # The oldest due, each the first unsettled callback of its transaction (NEW-1's second one waits).
    assert refs == [f"NEW-{n}" for n in range(1, 51)]
