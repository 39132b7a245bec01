"""Production refuses non-https and non-public callback targets (decisions.md §8)."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from kasir.app import create_app
from kasir.callbacks.dispatcher import ClaimedCallback, send_attempt
from kasir.callbacks.models import CallbackKind
from kasir.callbacks.ssrf import UnsafeCallbackUrl, check_callback_url, is_public_address
from kasir.config import Settings, configure
from kasir.db import Database, upgrade_schema
from tests.callbacks.helpers import db, load, record, wait_attempts, wait_status
from tests.conftest import TEST_ADMIN_TOKEN
from tests.support.builders import public_pem, rsa_key, unique_name


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "100.127.255.254",
        "224.0.0.1",
        "240.0.0.1",
        "0.0.0.0",
        "255.255.255.255",
        "::1",
        "fe80::1",
        "fc00::1",
        "ff02::1",
        "::",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "::ffff:169.254.169.254",
        "2001:db8::1",
        "192.0.2.1",
        # Found by the hardening audit: Python's is_global lets these through.
        "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
        "2002:7f00:1::1",  # 6to4 of 127.0.0.1
        "fec0::1",  # site-local
        "192.0.0.8",  # IETF protocol assignments
        "198.18.0.1",  # benchmarking
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
        "::7f00:1",  # IPv4-compatible 127.0.0.1
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
    ],
)
def test_non_public_addresses(address):
    assert not is_public_address(address)


@pytest.mark.parametrize(
    "address", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "2002:808:808::1", "64:ff9b::808:808"]
)
def test_public_addresses(address):
    assert is_public_address(address)


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/cb",
        "https://127.0.0.1/cb",
        "https://localhost/cb",
        "https://[::1]/cb",
        "https://10.0.0.8/cb",
        "ftp://example.com",
        "https:///nohost",
    ],
)
async def test_production_refuses_at_request_time(url):
    with pytest.raises(UnsafeCallbackUrl):
        await check_callback_url(url, production=True)


async def test_staging_allows_loopback():
    await check_callback_url("http://127.0.0.1:9/cb", production=False)


async def test_production_delivery_to_loopback_is_refused_without_connecting(settings, receiver):
    production = settings.model_copy(update={"env": "production"})
    callback = ClaimedCallback(
        id=1,
        fence=1,
        kind=CallbackKind.WALLET,
        merchant_id="M",
        transaction_ref="T",
        url=receiver.url(),
        payload=b"{}",
        svc_signature="s",
        attempt_number=1,
        max_attempts=3,
        created_at_unix=0,
        client_secret=None,
    )
    import httpx

    async with httpx.AsyncClient() as http:
        result = await send_attempt(http, callback, production)
    assert not result.accepted
    assert result.error.startswith("refused")
    assert receiver.requests == []


# --- KASIR_CALLBACK_ALLOWED_NETWORKS: a production app and a receiver on 127.0.0.1 -----------------


@pytest.fixture(scope="module")
async def production_database_url(settings, postgres, data_dir) -> str:
    """A database of its own: the session app's worker (staging, which allows loopback) must not deliver
    what the production app is to refuse."""
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
async def production_app(settings, database_url: str, allowed: str) -> AsyncIterator[FastAPI]:
    """`create_app` with KASIR_ENV=production and the allow-list as the environment would give it."""
    environment = {"env": "production", "database_url": database_url, "callback_allowed_networks": allowed}
    production = Settings(**{**settings.model_dump(), **environment})
    application = create_app(production)
    try:
        async with application.router.lifespan_context(application):
            yield application
    finally:
        configure(settings)  # create_app installed the production settings process-wide


async def create_merchant(application: FastAPI, callback_url: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://kasir.test") as http:
        return await http.post(
            "/admin/merchants",
            headers={"Authorization": f"Bearer {TEST_ADMIN_TOKEN}"},
            json={"name": unique_name(), "public_key": public_pem(rsa_key()), "callback_url": callback_url},
        )


async def test_production_delivers_to_loopback_only_when_the_operator_allows_it(
    settings, production_database_url, receiver
):
    async with production_app(settings, production_database_url, "127.0.0.1/32") as application:
        created = await create_merchant(application, receiver.url("/default"))
        assert created.status_code == 201, created.text  # http too: the operator trusts that network
        callback_id = await record(db(application), merchant_id=created.json()["merchant_id"], url=receiver.url())
        [request] = await receiver.wait_for(1, timeout=10)
        callback = await wait_status(db(application), callback_id, "delivered")
        assert callback.attempts_made == 1
    assert request.path == "/callback"
    assert request.headers["host"] == f"127.0.0.1:{receiver.port}"


@pytest.mark.parametrize("allowed", ["", "10.0.0.0/8,fd12:3456::/48", "127.0.0.2/32"])
async def test_production_refuses_loopback_outside_the_allowed_networks(
    settings, production_database_url, receiver, allowed
):
    async with production_app(settings, production_database_url, allowed) as application:
        refused = await create_merchant(application, receiver.url("/default"))
        assert refused.status_code == 400, refused.text
        assert refused.json()["message"].startswith("callback_url")
        created = await create_merchant(application, "https://[2606:4700:4700::1111]/cb")
        assert created.status_code == 201, created.text
        # Recorded while the setting allowed it (or by an older version): delivery checks again.
        callback_id = await record(db(application), merchant_id=created.json()["merchant_id"], url=receiver.url())
        callback = await wait_attempts(db(application), callback_id, 1)
        _, [attempt] = await load(db(application), callback_id)
    assert callback.status == "pending"
    assert attempt.error.startswith("refused:"), attempt.error
    assert receiver.requests == []
