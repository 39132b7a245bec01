"""/metrics after real traffic: HTTP by route template and status, payments by product and status,
callbacks from `kasir worker`'s own endpoint, and one sum across the processes of `--workers 2`."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families

from kasir.db import Database, upgrade_schema
from kasir.merchants.service import merchant_service
from tests.callbacks.helpers import record
from tests.support.builders import make_merchant, public_pem, rsa_key, unique_name
from tests.support.forms import submit
from tests.support.postgres import PostgresCluster, free_port
from tests.support.process import HANG_GUARD_SECONDS, end_with_parent
from tests.support.receiver import CallbackReceiver
from tests.support.server import ServedKasir
from tests.support.wire.card import APPROVED, DECLINED, charge_body, post_charge
from tests.support.wire.snap import checkout_body, post_signed
from tests.support.wire.wallet import create, dummy_payment

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def scrape(client: httpx.AsyncClient, path: str = "/metrics") -> Samples:
    response = await client.get(path)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return parse(response.text)


async def test_http_requests_by_route_template_and_status(app: FastAPI, client: httpx.AsyncClient) -> None:
    route = "/admin/callbacks/{callback_id}"
    admin = {"Authorization": f"Bearer {app.state.settings.resolved_admin_token()}"}
    before = await scrape(client)
    for missing in (900_000_001, 900_000_002, 900_000_003):  # three raw paths, one template
        assert (await client.get(f"/admin/callbacks/{missing}", headers=admin)).status_code == 404
    assert (await client.get("/healthz")).status_code == 200
    assert (await client.get("/no/such/path")).status_code == 404
    after = await scrape(client)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("kasir_http_requests_total", method="GET", route=route, status="404") == 3
    assert moved("kasir_http_errors_total", method="GET", route=route, status="404") == 3
    assert moved("kasir_http_request_duration_seconds_count", method="GET", route=route) == 3
    assert moved("kasir_http_request_duration_seconds_sum", method="GET", route=route) > 0
    assert moved("kasir_http_requests_total", method="GET", route="/healthz", status="200") == 1
    assert moved("kasir_http_errors_total", method="GET", route="/healthz", status="200") == 0
    assert moved("kasir_http_requests_total", method="GET", route="<unmatched>", status="404") == 1
    assert not [key for key in after if "900000001" in str(key) or "/no/such/path" in str(key)]  # never raw paths


async def test_payments_created_and_settled_by_product_and_status(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    before = await scrape(client)

    paid = await create(client, merchant, payment_channel="DANA")
    await create(client, merchant, payment_channel="DANA")  # left pending
    assert (await dummy_payment(client, merchant, paid)).status_code == 200
    approved = await post_charge(client, merchant, charge_body(number=APPROVED))
    declined = await post_charge(client, merchant, charge_body(number=DECLINED))
    assert approved.status_code == 200, approved.text
    assert declined.status_code in (200, 402), declined.text  # a refused card: the order stays open
    checkout = await post_signed(client, merchant, "/v1.0/bnpl/qr-checkout", checkout_body("http://127.0.0.1:9/cb"))
    assert checkout.status_code == 200, checkout.text
    page = str(checkout.json()["qrContent"]).removeprefix(app.state.settings.public_url)
    rejected = await submit(client, page, "reject-form")
    assert rejected.status_code == 303
    after = await scrape(client)

    def moved(name: str, product: str, status: str) -> float:
        return value(after, name, product=product, status=status) - value(before, name, product=product, status=status)

    assert moved("kasir_payments_created_total", "wallet", "PENDING") == 2
    assert moved("kasir_payments_settled_total", "wallet", "PAID") == 1
    assert moved("kasir_payments_created_total", "card", "PENDING") == 2
    assert moved("kasir_payments_settled_total", "card", "SUCCESS") == 1
    assert moved("kasir_payments_settled_total", "card", "EXPIRED") == 0  # one declined attempt of three
    assert moved("kasir_payments_created_total", "bnpl", "INITIATED") == 1
    assert moved("kasir_payments_settled_total", "bnpl", "FAILED") == 1


async def test_a_rolled_back_payment_is_not_counted(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    body = charge_body(number=APPROVED)
    assert (await post_charge(client, merchant, body)).status_code == 200
    before = await scrape(client)
    again = await post_charge(client, merchant, {**body, "externalId": "EXT-other"})  # the same orderId: refused
    assert again.status_code >= 400
    after = await scrape(client)
    key = {"product": "card", "status": "PENDING"}
    assert value(after, "kasir_payments_created_total", **key) == value(before, "kasir_payments_created_total", **key)


@pytest.fixture
async def isolated(app: FastAPI, settings, tmp_path: Path, postgres: PostgresCluster | None):
    """A database of its own, so the test app's embedded worker does not take these callbacks."""
    if postgres is not None:
        url = postgres.create_database(f"metrics_{abs(hash(tmp_path)) % 10**9}")
    else:
        url = f"sqlite+aiosqlite:///{tmp_path / 'metrics.db'}"
    database = Database(settings.model_copy(update={"database_url": url}))
    await upgrade_schema(database)
    async with database.unit_of_work() as session:
        merchant, _ = await merchant_service.create(session, name=unique_name(), public_key=public_pem(rsa_key()))
    yield database, url, merchant.id
    await database.dispose()


@pytest.mark.slow  # starts a process
async def test_kasir_worker_serves_its_callback_metrics(
    isolated, settings_env: dict[str, str], receiver: CallbackReceiver, tmp_path: Path
) -> None:
    """`kasir worker --metrics-port`: 3 callbacks accepted, 1 unreachable until its attempts ran out (logged)."""
    database, url, merchant_id = isolated
    for n in range(3):
        await record(database, merchant_id=merchant_id, url=receiver.url("/ok"), transaction_ref=f"TX-OK-{n}")
    closed = f"http://127.0.0.1:{free_port()}/down"  # nobody listens: every attempt is refused
    refused = await record(database, merchant_id=merchant_id, url=closed, transaction_ref="TX-DOWN")
    port = free_port()
    log_path = tmp_path / "worker.log"
    env = {
        **os.environ,
        **settings_env,
        "KASIR_DATABASE_URL": url,
        "KASIR_CALLBACK_SCHEDULE": "0",  # the refused one's retries at once
    }
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(Path(sys.executable).parent / "kasir"), "worker", "--metrics-port", str(port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=end_with_parent,
        )
        try:
            samples = await _scrape_until(
                f"http://127.0.0.1:{port}/metrics",
                lambda s: (
                    value(s, "kasir_callbacks_sent_total", kind="wallet") >= 3
                    and value(s, "kasir_callbacks_failed_total", kind="wallet") >= 1
                ),
                process,
            )
        finally:
            process.send_signal(signal.SIGTERM)
            await asyncio.to_thread(process.wait, 30)
    assert value(samples, "kasir_callbacks_sent_total", kind="wallet") == 3
    assert value(samples, "kasir_callbacks_failed_total", kind="wallet") == 1
    assert value(samples, "kasir_callbacks_retried_total", kind="wallet") == 2  # 3 attempts: 2 retries
    assert value(samples, "kasir_callback_attempt_seconds_count", kind="wallet") == 6
    assert value(samples, "kasir_callback_delivery_seconds_count", kind="wallet") == 3

    lines = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]
    [exhausted] = [line for line in lines if line["message"] == "callback exhausted its attempts"]
    assert exhausted["level"] == "warning"
    assert exhausted["callback_id"] == refused
    assert exhausted["merchant_id"] == merchant_id
    assert exhausted["url_host"] == "127.0.0.1"
    assert exhausted["last_error"].startswith("ConnectError")
    assert exhausted["attempts"] == 3


async def _scrape_until(url: str, done, process: subprocess.Popen[bytes]) -> Samples:
    """The worker's metrics once `done` says so: as long as its start and its deliveries take, unless it exits."""
    samples: Samples = {}
    async with httpx.AsyncClient() as client, asyncio.timeout(HANG_GUARD_SECONDS):
        while process.poll() is None:
            try:
                samples = parse((await client.get(url)).text)
            except httpx.TransportError:
                samples = {}
            if samples and done(samples):
                return samples
            await asyncio.sleep(0.1)
    raise AssertionError(f"the worker exited before its metrics got there: {samples}")


@pytest.mark.slow  # starts a process
async def test_workers_2_sum_every_process(settings_env: dict[str, str], migrated: None) -> None:
    """`kasir serve --workers 2`: whichever process answers the scrape, it counts every process's requests."""
    server = ServedKasir(settings_env, args=("--workers", "2", "--no-worker"))
    await asyncio.to_thread(server.start)
    try:
        directory = Path(settings_env["KASIR_DATA_DIR"]) / "metrics" / str(server.port)
        async with httpx.AsyncClient(base_url=server.base_url) as client:
            start = await scrape(client)  # the start-up's own /healthz polls
        healthz = {"method": "GET", "route": "/healthz", "status": "200"}
        total = 0

        async def probe() -> None:
            async with httpx.AsyncClient(base_url=server.base_url) as client:  # a connection of its own
                assert (await client.get("/healthz")).status_code == 200

        # Rounds of concurrent connections until both processes have answered some (each writes its own
        # files there): the second process may still be starting when the first answers, however long.
        async with asyncio.timeout(HANG_GUARD_SECONDS):
            while len(list(directory.glob("counter_*.db"))) < 2:
                await asyncio.gather(*(probe() for _ in range(8)))
                total += 8
        assert len(list(directory.glob("counter_*.db"))) == 2, total
        for _ in range(4):
            async with httpx.AsyncClient(base_url=server.base_url) as client:
                samples = await scrape(client)
            assert (
                value(samples, "kasir_http_requests_total", **healthz)
                == value(start, "kasir_http_requests_total", **healthz) + total
            )
    finally:
        await asyncio.to_thread(server.stop)


async def test_readyz_writes_its_request_line_and_no_alembic_lines(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        for _ in range(2):
            assert (await client.get("/readyz")).status_code == 200
    probes = [r for r in caplog.records if r.name == "kasir.request" and getattr(r, "route", None) == "/readyz"]
    assert len(probes) == 2
    assert [r.getMessage() for r in caplog.records if r.name.startswith("alembic")] == []
