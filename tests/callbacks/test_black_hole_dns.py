"""One merchant's name that never answers slows no other merchant: a real name server that drops queries (issue 43).

`kasir serve` runs in production (the reference connector and the fake acquirer of tests/processors, as
tests/processors/test_http_connector.py does), its system resolver asking only a name server on a loopback
address that reads every query and answers none (tests/support/blackhole_dns.py: a private mount namespace
whose /etc/resolv.conf names it; root only). Merchant A's charges name the black-hole host, as do callbacks
of A's already recorded (a name that resolved when it was given and no longer answers). Merchant B's
callback URLs, let through by KASIR_CALLBACK_ALLOWED_NETWORKS, are a literal 127.0.0.1 (no lookup) and a
name of the namespace's /etc/hosts (a lookup through the same getaddrinfo that answers at once): a lookup
of B's own must not queue behind A's either.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from kasir.callbacks.models import Callback
from kasir.config import Settings
from kasir.db import Database, fetch, upgrade_schema
from tests.callbacks.helpers import load, record
from tests.conftest import TEST_ADMIN_TOKEN, TEST_SECRET_KEY
from tests.processors.connector import install_connector
from tests.processors.fake_money_mover import APPROVED, FakeMoneyMover
from tests.support import builders
from tests.support.blackhole_dns import BLACK_HOLE_NAME, BlackHoleDns, hosts_file, in_resolver_namespace
from tests.support.postgres import PostgresCluster
from tests.support.process import HANG_GUARD_SECONDS
from tests.support.receiver import CallbackReceiver
from tests.support.server import ServedKasir
from tests.support.wire.card import charge_body, post_charge

pytestmark = pytest.mark.slow

SECRET = "fake-money-mover-shared-secret"
ADMIN = {"Authorization": f"Bearer {TEST_ADMIN_TOKEN}"}
BLACK_HOLE_URL = f"http://{BLACK_HOLE_NAME}/callback"
GOOD_NAME = "hooks.good.test"  # in the namespace's /etc/hosts: 127.0.0.1
# The server's lookups wait at most kasir.callbacks.ssrf.LOOKUP_SECONDS (5 s) and its resolver 30 s per query
# (blackhole_dns.RESOLVER_OPTIONS): a request that queued behind one of them would take seconds. Its own work,
# through a connector and a fake acquirer on 127.0.0.1, takes a small part of this bound, even on a busy machine.
QUICK_SECONDS = 1.0


@pytest.fixture
def black_hole() -> Iterator[BlackHoleDns]:
    with BlackHoleDns() as dns:
        yield dns


@pytest.fixture
def fake() -> Iterator[FakeMoneyMover]:
    mover = FakeMoneyMover(SECRET)
    mover.start()
    try:
        yield mover
    finally:
        mover.stop()


@contextlib.asynccontextmanager
async def served_asking_the_black_hole(
    tmp_path: Path, postgres: PostgresCluster | None, black_hole: BlackHoleDns, env: dict[str, str]
) -> AsyncIterator[tuple[ServedKasir, Database]]:
    """`kasir serve` (with its embedded worker) on a database of its own, its resolver asking the black hole and
    its /etc/hosts naming GOOD_NAME. The test process's KASIR_SECRET_KEY seals the merchants made here."""
    if postgres is not None:
        url = await asyncio.to_thread(postgres.create_database, f"blackhole_{secrets.token_hex(4)}")
    else:
        url = f"sqlite+aiosqlite:///{tmp_path / 'kasir.db'}"
    database = Database(Settings(env=env["KASIR_ENV"], data_dir=tmp_path, database_url=url, secret_key=TEST_SECRET_KEY))
    await upgrade_schema(database)
    env = {
        **env,
        "KASIR_DATA_DIR": str(tmp_path),
        "KASIR_DATABASE_URL": url,
        "KASIR_SECRET_KEY": TEST_SECRET_KEY,
        "KASIR_ADMIN_TOKEN": TEST_ADMIN_TOKEN,
        "KASIR_CALLBACK_POLL_SECONDS": "0.1",
        "KASIR_CALLBACK_TIMEOUT_SECONDS": "3",
    }
    resolv_conf, hosts = black_hole.resolv_conf(tmp_path), hosts_file(tmp_path, {GOOD_NAME: "127.0.0.1"})
    server = ServedKasir(env, wrapper=lambda command: in_resolver_namespace(command, resolv_conf, hosts))
    await asyncio.to_thread(server.start)
    try:
        yield server, database
    finally:
        await asyncio.to_thread(server.stop)
        await database.dispose()


@pytest.fixture
async def production(
    tmp_path: Path, postgres: PostgresCluster | None, fake: FakeMoneyMover, black_hole: BlackHoleDns, app: FastAPI
) -> AsyncIterator[tuple[ServedKasir, Database]]:
    """Production, through the reference connector and the fake acquirer. `app`: the test process's settings."""
    env = {
        "KASIR_ENV": "production",
        "KASIR_CALLBACK_ALLOWED_NETWORKS": "127.0.0.0/8",
        "KASIR_PROCESSORS": "card=http",
        "KASIR_PROCESSOR_HTTP_URL": fake.base_url,
        "KASIR_PROCESSOR_HTTP_SECRET": SECRET,
        "PYTHONPATH": install_connector(tmp_path / "site"),
    }
    async with served_asking_the_black_hole(tmp_path, postgres, black_hole, env) as served:
        fake.kasir_url = served[0].base_url
        yield served


@pytest.fixture
async def staging(
    tmp_path: Path, postgres: PostgresCluster | None, black_hole: BlackHoleDns, app: FastAPI
) -> AsyncIterator[tuple[ServedKasir, Database]]:
    """Staging, through the simulator: any http(s) callback URL is taken, its name looked up only by the worker."""
    async with served_asking_the_black_hole(tmp_path, postgres, black_hole, {"KASIR_ENV": "staging"}) as served:
        yield served


async def test_a_black_hole_name_slows_no_other_merchants_charges_creations_or_callbacks(
    production: tuple[ServedKasir, Database], black_hole: BlackHoleDns, receiver: CallbackReceiver
) -> None:
    server, database = production
    merchants = SimpleNamespace(state=SimpleNamespace(database=database))
    hostile, good = await builders.make_merchant(merchants), await builders.make_merchant(merchants)  # type: ignore[arg-type]
    # Forty of A's callbacks are due, to a name that no longer answers: the server's worker looks it up.
    hostile_callbacks = [
        await record(database, merchant_id=hostile.id, url=BLACK_HOLE_URL, transaction_ref=f"A{n}") for n in range(40)
    ]
    async with httpx.AsyncClient(base_url=server.base_url, timeout=HANG_GUARD_SECONDS) as http:
        # Twelve of A's charges name it: each waits on the request path's lookup.
        hostile_charges = [
            asyncio.create_task(post_charge(http, hostile, charge_body(callback_url=BLACK_HOLE_URL))) for _ in range(12)
        ]
        # Both lookups (delivery's, the charges') reached the name server: A and AAAA each.
        queries = await asyncio.to_thread(black_hole.wait_for_queries, 4, timeout=HANG_GUARD_SECONDS)
        assert queries >= 4, server.log()

        # Meanwhile B's merchant creations and charges answer at once, and B's callbacks go out.
        took: list[tuple[str, float]] = []
        charges = []
        for n in range(5):
            started = time.perf_counter()
            key = builders.rsa_key(n % 2)
            created = await http.post(
                "/admin/merchants",
                headers=ADMIN,
                json={"name": builders.unique_name(), "public_key": builders.public_pem(key), "callback_url": None},
            )
            took.append(("merchant creation", time.perf_counter() - started))
            assert created.status_code == 201, created.text

            url = receiver.url("/good")
            if n % 2:
                url = url.replace("127.0.0.1", GOOD_NAME)
            body = charge_body(number=APPROVED, callback_url=url)
            started = time.perf_counter()
            answer = await post_charge(http, good, body)
            took.append(("charge", time.perf_counter() - started))
            assert answer.status_code == 200, answer.text
            assert answer.json()["data"]["paymentStatus"] == "SUCCESS"
            charges.append(answer.json()["data"]["transactionId"])
        received = await receiver.wait_for(5, path="/good")
        # All of it while A's lookups still hang: none of A's charges has had its answer yet.
        assert not any(task.done() for task in hostile_charges), "B's requests outlasted A's lookups"
        slow = [(what, round(seconds, 2)) for what, seconds in took if seconds >= QUICK_SECONDS]
        assert slow == [], slow
        assert sorted(r.json()["transaction_id"] for r in received) == sorted(charges)

        # A's charges are refused when their lookup's time is up, one lookup for the twelve.
        refusals = await asyncio.gather(*hostile_charges)
    assert {answer.status_code for answer in refusals} == {400}
    assert all("did not resolve within 5 s" in answer.text for answer in refusals), refusals[0].text
    # A's callbacks were attempted and failed within their attempt's timeout, none delivered.
    callback, attempts = await load(database, hostile_callbacks[0])
    assert callback.status != "delivered"
    assert attempts
    assert attempts[0].error == "timeout after 3 s"


async def test_in_staging_a_black_hole_name_in_callbacks_slows_no_other_merchant(
    staging: tuple[ServedKasir, Database], black_hole: BlackHoleDns, receiver: CallbackReceiver
) -> None:
    """Staging checks no name on the request path: the worker's transport looks A's up, on delivery's own pool
    (never on the default executor, where the server's SQLite commits run and B's names would queue)."""
    server, database = staging
    merchants = SimpleNamespace(state=SimpleNamespace(database=database))
    hostile, good = await builders.make_merchant(merchants), await builders.make_merchant(merchants)  # type: ignore[arg-type]
    async with httpx.AsyncClient(base_url=server.base_url, timeout=HANG_GUARD_SECONDS) as http:
        for _ in range(40):
            answer = await post_charge(http, hostile, charge_body(callback_url=BLACK_HOLE_URL))
            assert answer.status_code == 200, answer.text
        queries = await asyncio.to_thread(black_hole.wait_for_queries, 2, timeout=HANG_GUARD_SECONDS)
        assert queries >= 2, server.log()

        took: list[tuple[str, float]] = []
        charges = []
        for n in range(6):
            url = receiver.url("/good")
            if n % 2:
                url = url.replace("127.0.0.1", GOOD_NAME)
            started = time.perf_counter()
            answer = await post_charge(http, good, charge_body(callback_url=url))
            took.append(("charge", time.perf_counter() - started))
            assert answer.status_code == 200, answer.text
            charges.append(answer.json()["data"]["transactionId"])
            started = time.perf_counter()
            await receiver.wait_for(n + 1, path="/good")
            took.append((f"callback to {url}", time.perf_counter() - started))
    slow = [(what, round(seconds, 2)) for what, seconds in took if seconds >= QUICK_SECONDS]
    assert slow == [], slow
    received = await receiver.wait_for(6, path="/good")
    assert sorted(r.json()["transaction_id"] for r in received) == sorted(charges)
    # A's lookups were still hanging: none of its callbacks went out.
    async with database.unit_of_work(read_only=True) as session:
        statuses = {
            row.status
            for row in await fetch(session, select(Callback.status).where(Callback.merchant_id == hostile.id))
        }
    assert "delivered" not in statuses
