"""Every setting the README offers, run with a value other than its default (the defaults run everywhere).

A setting CI never runs does not work: each test here sets one the way an operator would, from
the environment where that is how it is read, and checks what it promises.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic import SecretStr

from kasir.app import create_app
from kasir.callbacks.dispatcher import retry_delay
from kasir.config import Settings, configure
from kasir.db import Database, fetch_one
from kasir.db.postgres import PostgresStrategy
from kasir.db.sqlite import SqliteStrategy
from kasir.errors import Unauthorized
from kasir.kit.crypto import SecretBox
from kasir.kit.logs import configure_logging
from kasir.snap.headers import check_timestamp
from tests.support.cli import run_kasir
from tests.support.process import HANG_GUARD_SECONDS
from tests.support.server import ServedKasir
from tests.support.wire.snap import snap_timestamp


def test_the_environment_is_read_with_the_kasir_prefix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KASIR_CALLBACK_SCHEDULE", "1,2,3")
    monkeypatch.setenv("KASIR_CLOCK_SKEW_SECONDS", "10")
    monkeypatch.setenv("KASIR_CALLBACK_CONCURRENCY", "3")
    monkeypatch.setenv("KASIR_SQLITE_GROUP_COMMIT_MAX", "5")
    monkeypatch.setenv("KASIR_IDEMPOTENCY_WAIT_SECONDS", "0.25")
    monkeypatch.setenv("KASIR_DEBUG_WRITE_SEAT_SECONDS", "1.5")
    monkeypatch.setenv("KASIR_DB_POOL_SIZE", "3")
    monkeypatch.setenv("KASIR_LOG_FORMAT", "text")
    monkeypatch.setenv("KASIR_BENCH_MODE", "true")
    monkeypatch.setenv("KASIR_MAX_BODY_BYTES", "2048")
    monkeypatch.setenv("KASIR_MAX_HEADER_BYTES", "4096")
    monkeypatch.setenv("KASIR_HEADER_TIMEOUT_SECONDS", "3")
    monkeypatch.setenv("KASIR_BODY_TIMEOUT_SECONDS", "4")
    monkeypatch.setenv("KASIR_MAX_CONNECTIONS", "50")
    monkeypatch.setenv("KASIR_PUBLIC_DOCS", "false")
    monkeypatch.setenv("KASIR_PUBLIC_METRICS", "true")
    monkeypatch.setenv("KASIR_ADMIN_API", "false")
    monkeypatch.setenv("KASIR_CONSOLE", "false")
    monkeypatch.setenv("KASIR_CONSOLE_SESSION_HOURS", "2")
    monkeypatch.setenv("KASIR_CONSOLE_IDLE_MINUTES", "10")
    monkeypatch.setenv("KASIR_CONSOLE_LOCK_AFTER", "3")
    monkeypatch.setenv("KASIR_CONSOLE_LOCK_MINUTES", "30")
    monkeypatch.setenv("KASIR_CONSOLE_SIGN_IN_DELAY_SECONDS", "0.1")
    monkeypatch.setenv("KASIR_CALLBACK_ALLOWED_NETWORKS", " 10.20.0.0/16, 192.168.7.8,fd12:3456::/48")
    monkeypatch.setenv("KASIR_RATE_LIMIT_TOKEN_REQUESTS_PER_IP", "7")
    monkeypatch.setenv("KASIR_RATE_LIMIT_TOKENS_PER_CLIENT", "0")
    monkeypatch.setenv("KASIR_RATE_LIMIT_TOKEN_WINDOW_SECONDS", "30")
    monkeypatch.setenv("KASIR_RATE_LIMIT_FAILURES_PER_IP", "9")
    monkeypatch.setenv("KASIR_RATE_LIMIT_FAILURES_PER_MERCHANT", "4")
    monkeypatch.setenv("KASIR_RATE_LIMIT_FAILURE_WINDOW_SECONDS", "600")
    monkeypatch.setenv("KASIR_TRUSTED_PROXIES", "10.0.0.1,10.0.0.2")
    settings = Settings(data_dir=tmp_path)
    assert settings.callback_schedule == [1, 2, 3]
    assert settings.clock_skew_seconds == 10
    assert settings.callback_concurrency == 3
    assert settings.sqlite_group_commit_max == 5
    assert settings.idempotency_wait_seconds == 0.25
    assert settings.debug_write_seat_seconds == 1.5
    assert settings.db_pool_size == 3
    assert settings.log_format == "text"
    assert settings.bench_mode is True
    assert settings.max_body_bytes == 2048
    assert (settings.max_header_bytes, settings.header_timeout_seconds, settings.body_timeout_seconds) == (4096, 3, 4)
    assert settings.max_connections == 50
    assert (settings.serves_docs, settings.serves_metrics, settings.admin_api) == (False, True, False)
    assert settings.console is False
    assert (settings.console_session_hours, settings.console_idle_minutes) == (2, 10)
    assert (settings.console_lock_after, settings.console_lock_minutes) == (3, 30)
    assert settings.console_sign_in_delay_seconds == 0.1
    assert (settings.rate_limit_token_requests_per_ip, settings.rate_limit_tokens_per_client) == (7, 0)
    assert settings.rate_limit_token_window_seconds == 30
    assert (settings.rate_limit_failures_per_ip, settings.rate_limit_failures_per_merchant) == (9, 4)
    assert settings.rate_limit_failure_window_seconds == 600
    assert settings.trusted_proxies == "10.0.0.1,10.0.0.2"
    assert [str(network) for network in settings.callback_allowed_networks] == [
        "10.20.0.0/16",
        "192.168.7.8/32",
        "fd12:3456::/48",
    ]


def test_previous_secret_keys_open_what_they_sealed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KASIR_SECRET_KEY", "the-new-key")
    monkeypatch.setenv("KASIR_SECRET_KEY_PREVIOUS", " the-old-key , the-older-key,the-new-key,")
    settings = Settings(data_dir=tmp_path)
    assert settings.previous_secret_keys() == ("the-old-key", "the-older-key")  # the current one is no previous
    box = SecretBox(settings.resolved_secret_key(), settings.previous_secret_keys())
    for key in ("the-old-key", "the-older-key"):
        assert box.open(SecretBox(key).seal("hash key")) == "hash key"
    assert SecretBox("the-new-key").open(box.seal("new")) == "new"  # sealing uses the current key only
    assert "the-old-key" not in repr(settings)
    assert Settings(data_dir=tmp_path, secret_key_previous=[]).previous_secret_keys() == ()


def test_the_callback_schedule_sets_each_retrys_delay() -> None:
    settings = Settings(callback_schedule="2,30")  # type: ignore[arg-type]  # as the environment gives it
    assert 1.8 <= retry_delay(settings, 1) <= 2.2
    assert 27 <= retry_delay(settings, 2) <= 33
    assert 27 <= retry_delay(settings, 5) <= 33  # the last entry repeats


def test_the_clock_skew_bounds_x_timestamp() -> None:
    assert check_timestamp(snap_timestamp(-5), 10) is not None
    with pytest.raises(Unauthorized, match="allowed 10 s"):
        check_timestamp(snap_timestamp(-60), 10)


async def test_the_sqlite_group_commit_max_bounds_a_batch(tmp_path: Path) -> None:
    database = Database(Settings(data_dir=tmp_path, secret_key="k", sqlite_group_commit_max=2))
    try:
        async with database.unit_of_work() as session:
            await session.count_rows("CREATE TABLE item (name TEXT)", ())

        async def write(n: int) -> None:
            async with database.unit_of_work() as session:
                await session.count_rows("INSERT INTO item (name) VALUES (?)", (str(n),))

        strategy = database.strategy
        assert isinstance(strategy, SqliteStrategy)
        batches_before = strategy.batches_committed
        await asyncio.gather(*(write(n) for n in range(7)))
        assert strategy.units_committed - 1 == 7  # the CREATE TABLE's unit, then the seven
        assert strategy.batches_committed - batches_before >= 4  # at most 2 units a batch
    finally:
        await database.dispose()


async def test_the_postgresql_pool_size(settings: Settings) -> None:
    if settings.resolved_database_url.startswith("sqlite"):
        pytest.skip("a PostgreSQL setting")
    database = Database(settings.model_copy(update={"db_pool_size": 3}))
    try:
        held = asyncio.Event()
        release = asyncio.Event()
        in_units = 0

        async def hold() -> None:
            nonlocal in_units
            async with database.unit_of_work(read_only=True) as session:
                await session.fetch_rows("SELECT 1", ())
                in_units += 1
                if in_units == 3:
                    held.set()
                await release.wait()

        holders = [asyncio.create_task(hold()) for _ in range(3)]
        await held.wait()
        strategy = database.strategy
        assert isinstance(strategy, PostgresStrategy)
        connections = strategy.connections()
        async with database.unit_of_work(read_only=True) as session:
            fourth = asyncio.create_task(session.fetch_rows("SELECT 1", ()))  # waits for one of the three
            await asyncio.sleep(0)  # it has asked for a connection
            assert (connections.size, connections.open, len(connections.idle)) == (3, 3, 0)
            release.set()
            assert (await fourth)[0][0] == 1
        await asyncio.gather(*holders)
        assert connections.open == 3
    finally:
        await database.dispose()


@contextlib.contextmanager
def root_logging_restored() -> Iterator[None]:
    """The root logger's handlers and level as they were: a handler made here writes to capsys's stream, which
    is closed after the test, and every later log line (the session app's worker, a `kasir` command run
    in-process) would end in a logging error on whatever stderr is current."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def test_text_logs_are_lines_for_humans(capsys: pytest.CaptureFixture[str]) -> None:
    with root_logging_restored():
        configure_logging("INFO", "text")
        logging.getLogger("kasir.test").info("hello operator")
        line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.endswith("INFO kasir.test hello operator")
    assert not line.startswith("{")


def test_at_debug_the_settings_are_logged_with_every_secret_masked(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    shown = settings.model_copy(
        update={
            "log_level": "DEBUG",
            "database_url": "postgresql+asyncpg://kasir:db-password-1@db.internal:5432/kasir",
            "secret_key": SecretStr("secret-key-that-must-not-show"),
            "admin_token": SecretStr("admin-token-that-must-not-show"),
        }
    )
    try:
        with root_logging_restored():
            create_app(shown)
            err = capsys.readouterr().err
    finally:
        configure(settings)
    [line] = [json.loads(text) for text in err.splitlines() if '"message": "settings"' in text]
    assert line["level"] == "debug"
    assert line["settings"]["database_url"] == "postgresql+asyncpg://kasir:…@db.internal:5432/kasir"
    assert line["settings"]["secret_key"] == line["settings"]["admin_token"] == "**********"
    assert line["settings"]["log_level"] == "DEBUG"
    for secret in ("db-password-1", "secret-key-that-must-not-show", "admin-token-that-must-not-show"):
        assert secret not in err
    with root_logging_restored():
        create_app(settings)  # at INFO: no settings line
        assert '"message": "settings"' not in capsys.readouterr().err


async def test_bench_mode_is_the_only_way_to_the_ceiling_endpoint(settings: Settings, migrated: None) -> None:
    for bench_mode, statuses in ((False, {404, 405}), (True, {200})):
        app: FastAPI = create_app(settings.model_copy(update={"bench_mode": bench_mode}))
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://kasir.test") as client:
                answer = await client.post("/bench/ceiling", json={}, headers={"Content-Type": "application/json"})
        assert answer.status_code in statuses, (bench_mode, answer.text)
    configure(settings)


async def test_the_console_can_be_switched_off(settings: Settings, migrated: None) -> None:
    for console, status in ((True, 200), (False, 404)):
        app: FastAPI = create_app(settings.model_copy(update={"console": console}))
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://kasir.test") as client:
                answer = await client.get("/console/sign-in")
        assert answer.status_code == status, (console, answer.text[:200])
    configure(settings)


@pytest.mark.slow  # starts a process
async def test_serve_answers_503_past_its_connection_limit(settings_env: dict[str, str], migrated: None) -> None:
    server = ServedKasir({**settings_env, "KASIR_MAX_CONNECTIONS": "2"}, args=("--no-worker",))
    await asyncio.to_thread(server.start)
    held = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(2)]
    try:
        async with httpx.AsyncClient(base_url=server.base_url) as client:
            assert (await client.get("/healthz")).status_code == 503
        for _reader, writer in held:
            writer.close()
        async with httpx.AsyncClient(base_url=server.base_url) as client:
            # 503 while it still counts the connections their clients closed: it serves once it has seen them go.
            async with asyncio.timeout(HANG_GUARD_SECONDS):
                while (answer := await client.get("/healthz")).status_code == 503:
                    await asyncio.sleep(0.05)
            assert answer.status_code == 200
    finally:
        await asyncio.to_thread(server.stop)


@pytest.mark.slow  # starts a process
async def test_serve_believes_x_forwarded_for_only_from_trusted_proxies(
    app: FastAPI, settings_env: dict[str, str], migrated: None
) -> None:
    """KASIR_TRUSTED_PROXIES: by default the TCP peer is the source address the rate limits count,
    whatever X-Forwarded-For says; from a trusted proxy the address it names is. Seen through the
    per-merchant lockout (KASIR_RATE_LIMIT_FAILURES_PER_MERCHANT=1, non-default too)."""
    from tests.support.builders import make_merchant
    from tests.support.wire.snap import token_headers

    env = {**settings_env, "KASIR_RATE_LIMIT_FAILURES_PER_MERCHANT": "1"}
    plain = ServedKasir(env, args=("--no-worker",))
    proxied = ServedKasir({**env, "KASIR_TRUSTED_PROXIES": "127.0.0.1"}, args=("--no-worker",))
    await asyncio.gather(asyncio.to_thread(plain.start), asyncio.to_thread(proxied.start))

    async def token(server: ServedKasir, merchant: Any, forwarded_for: str, *, wrong: bool = False) -> int:
        headers = token_headers(merchant, wrong=wrong, X_Forwarded_For=forwarded_for)
        async with httpx.AsyncClient(base_url=server.base_url) as client:
            response = await client.post(
                "/auth/merchants/v1.0/access-token/b2b", headers=headers, content='{"grantType":"client_credentials"}'
            )
        return response.status_code

    try:
        merchant = await make_merchant(app)
        assert await token(plain, merchant, "203.0.113.1", wrong=True) == 401
        assert await token(plain, merchant, "203.0.113.2") == 429  # both were 127.0.0.1

        merchant = await make_merchant(app)
        assert await token(proxied, merchant, "203.0.113.1", wrong=True) == 401
        assert await token(proxied, merchant, "203.0.113.2") == 200
        assert await token(proxied, merchant, "203.0.113.1") == 429
    finally:
        await asyncio.gather(asyncio.to_thread(plain.stop), asyncio.to_thread(proxied.stop))


@pytest.mark.slow  # starts a process
async def test_serve_runs_on_uvloop_when_asked(settings_env: dict[str, str], migrated: None) -> None:
    server = ServedKasir(settings_env, args=("--loop", "uvloop", "--no-worker"))
    await asyncio.to_thread(server.start)
    try:
        async with httpx.AsyncClient(base_url=server.base_url) as client:
            assert (await client.get("/healthz")).status_code == 200
    finally:
        await asyncio.to_thread(server.stop)


def test_the_kasir_command_reads_a_bad_setting_as_an_error(tmp_path: Path) -> None:
    result = run_kasir("db", "current", env={"KASIR_DATA_DIR": str(tmp_path), "KASIR_LOG_FORMAT": "xml"})
    assert result.exit_code == 2
    assert "KASIR_LOG_FORMAT" in result.stderr  # the variable the operator sets, in one line, no traceback
    assert "Traceback" not in result.output


@pytest.mark.slow  # starts a process
async def test_kasir_processors_switches_products_off(settings: Settings, migrated: None) -> None:
    """KASIR_PROCESSORS, read from the environment: a staging deployment with only a BNPL processor."""
    os.environ["KASIR_PROCESSORS"] = "bnpl=simulator"
    try:
        configured = Settings(
            data_dir=settings.data_dir, database_url=settings.database_url, secret_key=settings.resolved_secret_key()
        )
    finally:
        del os.environ["KASIR_PROCESSORS"]
    assert configured.processors == "bnpl=simulator"
    app = create_app(configured)
    try:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://kasir.test") as http:
                ready = (await http.get("/readyz")).json()
    finally:
        configure(settings)
    assert ready["products"] == {"card": None, "wallet": None, "bnpl": "simulator", "va": None, "payout": None}


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("0.0.0.0/0", "is not inside a private network"),  # everything: the SSRF rules switched off
        ("::/0", "is not inside a private network"),
        ("8.8.8.0/24", "is not inside a private network"),  # public: needs no allowance, would take http
        ("169.254.0.0/16", "is not inside a private network"),  # link-local: cloud metadata
        ("10.0.0.0/7", "is not inside a private network"),  # wider than 10/8
        ("100.64.0.0/10", "contains a cloud metadata address (100.100.100.200)"),
        ("fd00::/8", "contains a cloud metadata address (fd00:ec2::254)"),
        ("10.0.0.1/8", "has host bits set (the network is 10.0.0.0/8)"),
        ("10.0.0.0/33", "is not a CIDR network"),
        ("intranet.local", "is not a CIDR network"),
        ("10.0.0.0/8;192.168.0.0/16", "is not a CIDR network"),
    ],
)
def test_the_callback_allow_list_refuses_nonsense(value: str, reason: str) -> None:
    with pytest.raises(ValueError, match=re.escape(reason)):
        Settings(callback_allowed_networks=value)  # type: ignore[arg-type]  # as the environment gives it


def test_a_bad_allow_list_stops_the_server_with_one_line(tmp_path: Path) -> None:
    env = {"KASIR_DATA_DIR": str(tmp_path), "KASIR_CALLBACK_ALLOWED_NETWORKS": "0.0.0.0/0"}
    result = run_kasir("serve", "--port", "9", env=env)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        "error: KASIR_CALLBACK_ALLOWED_NETWORKS: '0.0.0.0/0' is not inside a private network "
        "(127.0.0.0/8, 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, 100.64.0.0/10, ::1/128, fc00::/7)"
    ]


def test_kasir_bnpl_categories_replace_the_shipped_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """Read from the environment like every setting (it was read outside Settings); the calculation's
    use of it: tests/bnpl/test_calculation.py::test_configured_category_table."""
    monkeypatch.setenv("KASIR_BNPL_CATEGORIES", " ABCD, WXYZ ,")
    assert Settings().bnpl_categories == ["ABCD", "WXYZ"]
    monkeypatch.setenv("KASIR_BNPL_CATEGORIES", "ABCD,ELECTRONICS")
    with pytest.raises(ValueError, match="'ELECTRONICS' is not a 4-character category code"):
        Settings()


def test_a_dotenv_file_is_read_and_the_environment_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(
        "# the operator's file\nKASIR_PUBLIC_URL=https://pay.example.id/\nKASIR_CLOCK_SKEW_SECONDS=7\nOTHER=1\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KASIR_CLOCK_SKEW_SECONDS", "9")
    monkeypatch.delenv("KASIR_PUBLIC_URL", raising=False)
    configured = Settings()
    assert configured.public_url == "https://pay.example.id"  # from .env
    assert configured.clock_skew_seconds == 9  # the environment over .env


def test_a_bad_setting_in_dotenv_is_one_line_too(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("KASIR_ENV=prod\n")
    result = run_kasir("db", "current", env={"KASIR_DATA_DIR": str(tmp_path)}, cwd=tmp_path)
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: KASIR_ENV: Input should be 'staging' or 'production' (not 'prod')"


@pytest.mark.slow  # starts a process
async def test_kasir_worker_metrics_port_and_host(settings_env: dict[str, str], migrated: None) -> None:
    """KASIR_WORKER_METRICS_PORT and KASIR_WORKER_METRICS_HOST (localhost): `kasir worker` serves /metrics
    (its delivery counts: tests/ops/test_metrics.py)."""
    from tests.support.postgres import free_port
    from tests.support.process import end_with_parent

    port = free_port()
    env = {
        **os.environ,
        **settings_env,
        "KASIR_WORKER_METRICS_PORT": str(port),
        "KASIR_WORKER_METRICS_HOST": "localhost",
    }
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "kasir"), "worker"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=end_with_parent,
    )
    try:
        text = ""
        async with httpx.AsyncClient() as client, asyncio.timeout(HANG_GUARD_SECONDS):
            while process.poll() is None:  # until it answers; a worker that exited never will
                try:
                    text = (await client.get(f"http://localhost:{port}/metrics")).text
                    break
                except httpx.TransportError:
                    await asyncio.sleep(0.1)
    finally:
        process.terminate()
        await asyncio.to_thread(process.wait, 30)
    assert "# TYPE kasir_callbacks_sent_total counter" in text
    assert "# TYPE kasir_callback_attempt_seconds histogram" in text


async def test_the_callback_signature_brand_names_the_header(settings: Settings, app: FastAPI, receiver: Any) -> None:
    """KASIR_CALLBACK_SIGNATURE_BRAND=mcp: a callback is sent with `mcp-signature` (and the wallet's query
    parameter of that name), which the SDK's verifier reads when told the brand.

    The attempt is sent here by the dispatcher (real HTTP to the receiver): a worker of another process
    sharing the test database (the `served` Kasir) could otherwise take the callback, with its own brand.
    """
    from dataclasses import replace

    from kasir_client import SignatureError, verify_payment_page_callback
    from sqlalchemy import select

    from kasir.callbacks.dispatcher import ClaimedCallback, send_attempt
    from kasir.callbacks.models import Callback, CallbackKind
    from kasir.callbacks.service import SignedIds
    from kasir.callbacks.signing import with_query_signature
    from kasir.merchants.service import CallbackSigning, SigningValue
    from tests.support.builders import make_merchant
    from tests.support.wire import x_req_signature
    from tests.support.wire.callbacks import callback_signature
    from tests.support.wire.dialect import DIRECT_V1, dialect_body, post_dialect

    assert Settings(callback_signature_brand="mcp").callback_signature_brand == "mcp"
    with pytest.raises(ValueError, match="callback_signature_brand"):
        Settings(callback_signature_brand="no spaces-")
    merchant = await make_merchant(app)
    body = dialect_body(callback_url=receiver.url("/branded"))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://kasir.test") as client:
        answer = (await post_dialect(client, merchant, DIRECT_V1, body)).json()
    assert answer["data"]["status"] == "SUCCESS", answer
    async with app.state.database.unit_of_work(read_only=True) as session:
        row = await fetch_one(
            session,
            select(*Callback.__table__.c).where(
                Callback.transaction_ref == answer["data"]["transaction_data"]["transaction_id"]
            ),
        )
        assert row is not None
    claimed = ClaimedCallback(
        id=row.id,
        fence=0,
        kind=CallbackKind(row.kind),
        merchant_id=row.merchant_id,
        transaction_ref=row.transaction_ref,
        url=receiver.url("/branded-here"),
        payload=row.payload.encode(),
        svc_signature=row.svc_signature,
        signed_ids=SignedIds.decoded(row.signed_ids),
        event_key=row.id,
        attempt_offset=0,
        attempt_number=1,
        max_attempts=1,
        created_at_unix=row.created_at.timestamp(),
        signing=CallbackSigning(
            SigningValue(merchant.credentials.hash_key), SigningValue(merchant.credentials.client_secret)
        ),
    )
    branded = settings.model_copy(update={"callback_signature_brand": "mcp"})
    configure(branded)
    try:
        assert with_query_signature("https://shop.example/cb?a=1", "abc") == (
            "https://shop.example/cb?a=1&mcp-signature=abc"
        )
        async with httpx.AsyncClient() as http:
            result = await send_attempt(http, claimed, branded)
        wallet = await wallet_query_signature(replace(claimed, kind=CallbackKind.WALLET))
    finally:
        configure(settings)
    assert result.accepted, result
    x_req = x_req_signature(merchant.credentials.hash_key, body["external_id"], body["order_id"])
    assert wallet == ("mcp-signature", callback_signature(row.transaction_ref, x_req))
    [callback] = await receiver.wait_for(1, path="/branded-here")
    assert "mcp-signature" in callback.headers
    assert "svc-signature" not in callback.headers
    order = (body["external_id"], body["order_id"])
    hash_key = merchant.credentials.hash_key
    event = verify_payment_page_callback(callback.body, callback.headers, hash_key=hash_key, order=order, brand="mcp")
    assert event.transaction_status == "SUCCESS"
    with pytest.raises(SignatureError, match="svc-signature is missing"):
        verify_payment_page_callback(callback.body, callback.headers, hash_key=hash_key, order=order)


async def wallet_query_signature(claimed: Any) -> tuple[str, str]:
    """The wallet callback's query parameter, as the dispatcher names it now."""
    from urllib.parse import parse_qsl, urlsplit

    from kasir.callbacks.dispatcher import request_for

    url, headers = request_for(claimed)
    [(name, value)] = [(k, v) for k, v in parse_qsl(urlsplit(url).query) if k.endswith("-signature")]
    assert headers[name] == value
    return name, value
