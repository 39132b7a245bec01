"""The example shop takes a BNPL payment through a real `kasir serve` and follows its callbacks."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import uvicorn
from examples.merchant_shop.app import create_app

from tests.conftest import TEST_ADMIN_TOKEN
from tests.sdk.helpers import sdk_credentials
from tests.support.builders import make_merchant
from tests.support.forms import submit
from tests.support.postgres import free_port
from tests.support.worker import callback_hang_guard

pytestmark = pytest.mark.slow


@pytest.fixture
async def shop(app, served, tmp_path):
    merchant = await make_merchant(app)
    port = free_port()
    shop_app = create_app(
        kasir_url=served.base_url,
        shop_url=f"http://127.0.0.1:{port}",
        credentials=sdk_credentials(merchant),
        db_path=str(tmp_path / "shop.db"),
    )
    server = uvicorn.Server(uvicorn.Config(shop_app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
        yield http
    server.should_exit = True
    await task


async def wait_status(shop: httpx.AsyncClient, order_id: int, status: str) -> dict:
    """The order once the shop has it in `status` (a callback moves it: as long as one may take to arrive)."""
    async with asyncio.timeout(callback_hang_guard()):
        while (order := (await shop.get(f"/orders/{order_id}")).json())["status"] != status:
            await asyncio.sleep(0.05)
    return order


async def test_bnpl_order_is_paid_by_a_verified_callback_and_replays_change_nothing(shop, served):
    created = (await shop.post("/orders", json={"method": "bnpl", "amount": 150000})).json()
    assert created["status"] == "pending"
    async with httpx.AsyncClient() as http:
        approved = await submit(http, created["pay_url"], "approve-form", tenure=3)
        assert approved.status_code == 303
    order = await wait_status(shop, created["id"], "paid")

    # A replayed callback (delivery is at least once) leaves the order as it is.
    admin = {"Authorization": f"Bearer {TEST_ADMIN_TOKEN}"}
    async with httpx.AsyncClient(base_url=served.base_url, headers=admin) as http:
        listed = (await http.get("/admin/callbacks", params={"transaction": order["kasir_reference"]})).json()
        [callback] = listed["callbacks"]
        replay = (await http.post(f"/admin/callbacks/{callback['id']}/replay")).json()
        async with asyncio.timeout(callback_hang_guard()):
            while True:
                # The replay endpoint's unit of work commits after its answer is sent (FastAPI's default
                # dependency scope), so the new row may not be visible yet: 404 until it is.
                answer = await http.get(f"/admin/callbacks/{replay['id']}")
                shown = answer.json() if answer.status_code == 200 else {"status": f"HTTP {answer.status_code}"}
                if shown["status"] == "delivered":
                    break
                await asyncio.sleep(0.05)
    assert (await shop.get(f"/orders/{created['id']}")).json()["status"] == "paid"


async def test_unsigned_callback_is_refused(shop):
    created = (await shop.post("/orders", json={"method": "bnpl", "amount": 20000})).json()
    forged = json.dumps({"originalPartnerReferenceNo": created["reference"], "latestTransactionStatus": "00"})
    response = await shop.post(
        "/callbacks/bnpl",
        content=forged,
        headers={"X-TIMESTAMP": "2026-11-22T10:00:00+07:00", "X-SIGNATURE": "Zm9yZ2Vk"},
    )
    assert response.status_code == 401
    assert (await shop.get(f"/orders/{created['id']}")).json()["status"] == "pending"
