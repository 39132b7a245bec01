"""Health, readiness, OpenAPI, and refusing to start on a schema that is behind."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import httpx
import pytest

from kasir.app import create_app
from kasir.config import Settings
from kasir.db import Database, current_revision, head_revision
from tests.conftest import TEST_DB
from tests.support.cli import run_kasir
from tests.support.postgres import PostgresCluster
from tests.support.server import ServedKasir


async def test_healthz_and_readyz(client):
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    ready = await client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {
        "status": "ready",
        "products": {
            "card": "simulator",
            "wallet": "simulator",
            "bnpl": "simulator",
            "va": "simulator",
            "payout": "simulator",
        },
    }


async def test_database_is_at_head(app):
    assert await current_revision(app.state.database) == head_revision()


@pytest.fixture
def empty_database_url(tmp_path: Path, postgres: PostgresCluster | None) -> str:
    if postgres is not None:
        return postgres.create_database(f"empty_{tmp_path.name.lower().replace('-', '_')}"[:60])
    return f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}"


async def test_readyz_reports_a_schema_that_is_behind(settings: Settings, empty_database_url: str):
    behind = settings.model_copy(update={"database_url": empty_database_url})
    application = create_app(behind, check_schema_on_start=False)
    async with application.router.lifespan_context(application):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=application), base_url="http://t") as http:
            response = await http.get("/readyz")
    create_app(settings)  # put the suite's settings back
    assert response.status_code == 503
    assert "kasir db upgrade" in response.json()["reason"]


async def test_app_refuses_to_start_on_an_empty_database(settings: Settings, empty_database_url: str):
    from kasir.db import SchemaBehind

    behind = settings.model_copy(update={"database_url": empty_database_url})
    application = create_app(behind)
    with pytest.raises(SchemaBehind, match="kasir db upgrade"):
        async with application.router.lifespan_context(application):
            pass
    create_app(settings)


def test_serve_refuses_to_start_with_the_command_to_run(settings_env, empty_database_url: str):
    env = {**settings_env, "KASIR_DATABASE_URL": empty_database_url}
    with socket.socket() as taken:  # a server that got past the check would stop at the port, not serve here
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        result = run_kasir("serve", "--port", str(taken.getsockname()[1]), env=env)
    assert result.exit_code == 2
    assert "kasir db upgrade" in result.stderr


async def test_sqlite_runs_wal_with_synchronous_full(app):
    database: Database = app.state.database
    if not database.url.startswith("sqlite"):
        pytest.skip("SQLite pragmas")
    for read_only in (False, True):  # the write units' connection and the readers'
        async with database.unit_of_work(read_only=read_only) as session:
            assert (await session.fetch_rows("PRAGMA journal_mode", ()))[0][0] == "wal"
            assert (await session.fetch_rows("PRAGMA synchronous", ()))[0][0] == 2  # FULL


async def test_openapi_documents_token_headers_and_errors(client):
    document = (await client.get("/openapi.json")).json()
    operation = document["paths"]["/auth/merchants/v1.0/access-token/b2b"]["post"]
    header_names = {p["name"] for p in operation["parameters"] if p["in"] == "header"}
    assert {"X-TIMESTAMP", "X-CLIENT-KEY", "X-SIGNATURE"} <= header_names
    assert {"400", "401", "200"} <= set(operation["responses"])
    assert "X-TIMESTAMP" in operation["responses"]["200"]["headers"]
    body_ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    body_schema = document["components"]["schemas"][body_ref.rsplit("/", 1)[1]]
    assert "grantType" in body_schema["properties"]
    assert "/api/v1.0/access-token/b2b" in document["paths"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "env_value", "embedded"),
    [
        ((), None, True),
        (("--no-worker",), None, False),
        ((), "false", False),
        (("--worker",), "false", True),
    ],
)
async def test_serve_runs_the_callback_worker_as_the_flag_or_else_the_setting_says(
    settings_env, migrated, tmp_path: Path, args: tuple[str, ...], env_value: str | None, embedded: bool
):
    env = {**settings_env, "KASIR_DATA_DIR": str(tmp_path)}
    env.pop("KASIR_EMBEDDED_WORKER", None)
    if env_value is not None:
        env["KASIR_EMBEDDED_WORKER"] = env_value
    server = ServedKasir(env, args=args)
    await asyncio.to_thread(server.start)
    try:
        async with httpx.AsyncClient(base_url=server.base_url) as client:
            assert (await client.get("/readyz")).status_code == 200  # the app has started up
    finally:
        await asyncio.to_thread(server.stop)
    assert ('"callback worker started"' in server.log()) is embedded


@pytest.mark.skipif(TEST_DB != "sqlite", reason="the disk of an embedded SQLite file; PostgreSQL's is its server's")
async def test_readyz_is_not_ready_while_the_database_cannot_take_a_write(client, monkeypatch):
    """Issue 43 N12: with a full disk every payment answered 503 while /readyz said ready (it only read)."""
    import sqlite3

    import kasir.db.sqlite

    def full(connection: sqlite3.Connection) -> None:
        connection.rollback()
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(kasir.db.sqlite, "_commit_sqlite", full)
    refused = await client.get("/readyz")
    assert refused.status_code == 503
    assert refused.json() == {"status": "not ready", "reason": "database cannot take writes (DatabaseUnavailable)"}
    monkeypatch.undo()
    assert (await client.get("/readyz")).status_code == 200


@pytest.mark.skipif(TEST_DB != "postgres", reason="a PostgreSQL database set read-only (a standby after a failover)")
async def test_readyz_is_not_ready_and_writes_are_an_outage_while_postgresql_is_read_only(
    app, client, settings: Settings, caplog
):
    """Issue 43 N12 on PostgreSQL: a database that cannot take a write (set read-only, or a standby a failover
    left the URL on) must fail /readyz, and a payment's write must answer an outage the client retries, not a
    500 with a traceback."""
    import asyncpg

    from kasir.db.postgres import dsn_of
    from tests.support import builders
    from tests.support.wire import wallet

    merchant = await builders.make_merchant(app)
    name = settings.resolved_database_url.rsplit("/", 1)[1]
    admin = await asyncpg.connect(dsn_of(settings.resolved_database_url))
    try:
        await admin.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
        await app.state.database.dispose()  # the next units connect anew, read-only
        refused = await client.get("/readyz")
        assert refused.status_code == 503
        assert refused.json() == {"status": "not ready", "reason": "database cannot take writes (DatabaseUnavailable)"}
        body = wallet.create_body("http://127.0.0.1:9/cb")
        answer = await wallet.post_wallet(client, merchant, wallet.CREATE, body)
        assert answer.status_code == 500, answer.text
        assert answer.json()["response_code"] == "98"
        assert answer.headers["Retry-After"] == "1"  # the outage's answer, not a bug's
        assert "unhandled error" not in caplog.text
    finally:
        await admin.execute(f'ALTER DATABASE "{name}" RESET default_transaction_read_only')
        await admin.close()
        await app.state.database.dispose()
    assert (await client.get("/readyz")).status_code == 200


async def test_an_outage_logs_its_cause_once_and_then_counts(caplog):
    """Issue 43 N12: a traceback per refused request wrote megabytes during an outage."""
    from kasir.errors import OutageLog

    outage = OutageLog("database unavailable", window=0.05)
    summarised = asyncio.Event()
    with caplog.at_level("ERROR", logger="kasir.errors"):
        for n in range(50):
            outage.failed(ConnectionRefusedError(f"refused {n}"), request_id=f"r{n}")
        asyncio.get_running_loop().call_later(0.06, summarised.set)  # after the window's summary ran
        await summarised.wait()
    lines = [record for record in caplog.records if record.name == "kasir.errors"]
    assert [record.exc_info is not None for record in lines] == [True, False]
    assert lines[0].getMessage() == "database unavailable"
    assert lines[1].getMessage() == (
        "database unavailable: 49 more requests refused in the last 0.05 s (last: ConnectionRefusedError: refused 49)"
    )
