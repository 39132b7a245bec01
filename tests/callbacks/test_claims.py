"""The workers' claim on PostgreSQL: a backlog that arrives after a quiet time (statistics taken while nothing
was pending) is claimed by one index look-up per due callback, not by joining every due callback with every
unsettled one (kasir.callbacks.repository's claim). The plan is the one PostgreSQL executed for the claim the
repository sent, as auto_explain logs it: the statement, its parameters and its prepared or generic plan as they
really are, not an EXPLAIN of a copy."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from kasir.callbacks.repository import CLAIMED_COLUMNS, callback_repository
from kasir.config import Settings
from kasir.db import Database, run, upgrade_schema
from kasir.merchants.service import merchant_service
from tests.support.builders import public_pem, rsa_key, unique_name
from tests.support.postgres import PostgresCluster

SETTLED, WAITING = 400, 400


@pytest.fixture
async def quiet_then_backlog(settings: Settings, postgres: PostgresCluster | None) -> AsyncIterator[Database]:
    """A database of its own whose statistics were taken with every callback delivered, then a backlog.

    Every statement run on it has its plan written to the cluster's log (auto_explain, loaded by each of its
    sessions): nothing else in the suite asks for that.
    """
    if postgres is None:
        pytest.skip("PostgreSQL's planner")
    name = f"claims_{uuid.uuid4().hex[:10]}"
    url = postgres.create_database(name)
    database = Database(settings.model_copy(update={"database_url": url}))
    async with database.unit_of_work() as session:
        for setting, value in (
            ("session_preload_libraries", "auto_explain"),
            ("auto_explain.log_min_duration", "0"),
            ("auto_explain.log_format", "text"),
        ):
            await run(session, text(f"ALTER DATABASE {name} SET {setting} = '{value}'"))
    await database.dispose()  # the sessions made from now on load it
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


def plans_logged(log: str) -> list[str]:
    """auto_explain's entries in a piece of the server's log: each from its log line to the next one."""
    entries = re.split(r"\n(?=\d{4}-\d\d-\d\d )", log)
    return [entry for entry in entries if "plan:" in entry and "Query Text:" in entry]


async def test_a_backlog_after_a_quiet_time_is_claimed_by_look_ups_not_a_join(
    quiet_then_backlog: Database, postgres: PostgresCluster
) -> None:
    now = datetime.now(UTC)
    logged_before = postgres.log_path.stat().st_size
    async with quiet_then_backlog.unit_of_work() as session:
        claimed = await callback_repository.claim(session, now, 50, "w1", now + timedelta(seconds=30))
    with postgres.log_path.open(errors="replace") as log:  # the backend wrote it before the claim's answer
        log.seek(logged_before)
        [plan] = [entry for entry in plans_logged(log.read()) if "UPDATE callback SET" in entry]
    assert "Anti Join" not in plan, plan
    assert "ix_callback_transaction" in plan, plan

    refs = [row[CLAIMED_COLUMNS.index("transaction_ref")] for row in claimed]
    # The oldest due, each the first unsettled callback of its transaction (NEW-1's second one waits).
    assert refs == [f"NEW-{n}" for n in range(1, 51)]
