"""A payment link in production through the reference connector (examples/processor-http; the fixtures of
tests/processors/test_http_connector.py): the VA bank numbers the link's VA, no staging pay is served, and
the bank's signed notification of the payment makes the link SUCCESS with its payment-page callback."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from kasir.config import Settings
from kasir.db import Database, upgrade_schema
from tests.conftest import TEST_ADMIN_TOKEN, TEST_SECRET_KEY
from tests.links.test_flow import choose
from tests.processors.connector import install_connector
from tests.processors.fake_money_mover import FakeMoneyMover
from tests.processors.test_http_connector import SECRET, Production, fake  # noqa: F401  (the fake, module-scoped)
from tests.support.forms import page_forms
from tests.support.postgres import PostgresCluster
from tests.support.receiver import CallbackReceiver
from tests.support.server import ServedKasir
from tests.support.wire.links import check_callback, create

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
async def production(
    tmp_path_factory: pytest.TempPathFactory,
    postgres: PostgresCluster | None,
    fake: FakeMoneyMover,  # noqa: F811
    app: FastAPI,
) -> AsyncIterator[Production]:
    """tests/processors/test_http_connector.py's production, on a database of this module's own."""
    directory = tmp_path_factory.mktemp("links-production")
    if postgres is not None:
        url = postgres.create_database("kasir_links_production")
    else:
        url = f"sqlite+aiosqlite:///{directory / 'kasir.db'}"
    database = Database(Settings(env="production", data_dir=directory, database_url=url, secret_key=TEST_SECRET_KEY))
    await upgrade_schema(database)
    env = {
        "KASIR_ENV": "production",
        "KASIR_DATA_DIR": str(directory),
        "KASIR_DATABASE_URL": url,
        "KASIR_SECRET_KEY": TEST_SECRET_KEY,
        "KASIR_ADMIN_TOKEN": TEST_ADMIN_TOKEN,
        "KASIR_CALLBACK_POLL_SECONDS": "0.1",
        "KASIR_CALLBACK_TIMEOUT_SECONDS": "2",
        "KASIR_CALLBACK_ALLOWED_NETWORKS": "127.0.0.0/8",
        "KASIR_PROCESSORS": "card=http,wallet=http,bnpl=http,va=http",
        "KASIR_PROCESSOR_HTTP_URL": fake.base_url,
        "KASIR_PROCESSOR_HTTP_SECRET": SECRET,
        "PYTHONPATH": install_connector(directory / "site"),
    }
    server = ServedKasir(env)
    await asyncio.to_thread(server.start)
    fake.kasir_url = server.base_url
    try:
        yield Production(server, database)
    finally:
        await asyncio.to_thread(server.stop)
        await database.dispose()


async def test_the_banks_notification_pays_the_links_va(
    production: Production,
    fake: FakeMoneyMover,  # noqa: F811
    receiver: CallbackReceiver,
) -> None:
    merchant = await production.merchant()
    async with httpx.AsyncClient(base_url=production.url) as http:
        link = await create(http, merchant, receiver.url("/prod-link"), channels=[{"channel": "VA", "acq": "BCA"}])
        va_page = await choose(http, link, "VA")
        page = await http.get(va_page)
        assert page.status_code == 200
        assert 'id="pay-form"' not in page.text  # production never simulates
        assert "pay-form" not in await page_forms(http, va_page)
        [va_id] = [reference for (reference, _draw) in fake.accounts if reference.startswith("VA")][-1:]
        paid = {"product": "va", "reference": va_id, "event": "paid", "amount": link["amount"],
                "bank_reference": "BCA-LINK-1"}  # fmt: skip
        assert await fake.notify(paid) == 200
        [callback] = await receiver.wait_for(1, path="/prod-link")
        payload = check_callback(callback, merchant, link)
        assert payload["transaction_status"] == "SUCCESS"
        assert (payload["payment_method"], payload["payment_channel"], payload["acq"]) == (
            "VIRTUAL_ACCOUNT",
            "VA",
            "BCA",
        )
        assert (await http.get(va_page)).status_code == 200
