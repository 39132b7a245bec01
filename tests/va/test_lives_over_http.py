"""Each payment system's life over real HTTP (a served Kasir on 127.0.0.1), every callback's signature computed
here: CLOSED, PARTIAL in three payments, multi-use paid twice, expiry, cancel (issue 44). tests/va/test_flow.py
holds the rules in detail, in process."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from fastapi import FastAPI

from kasir.kit.clock import clock, isoformat_millis
from tests.support.builders import make_merchant
from tests.support.receiver import CallbackReceiver
from tests.support.server import ServedKasir
from tests.support.wire.va import cancel, check_callback, create, inquire, pay
from tests.support.worker import expiry_hang_guard

pytestmark = pytest.mark.slow


async def test_every_payment_systems_life(app: FastAPI, served: ServedKasir, receiver: CallbackReceiver) -> None:
    merchant = await make_merchant(app)
    async with httpx.AsyncClient(base_url=served.base_url, timeout=30) as http:
        closed = await create(http, merchant, receiver.url("/closed"), amount=75_000)
        assert (await pay(http, merchant, closed)).json()["data"]["transaction_status"] == "PAID"

        partial = await create(http, merchant, receiver.url("/partial"), channel="PERMATA", system="PARTIAL",
                               amount=45_000)  # fmt: skip
        for amount in (15_000, 15_000, 15_000):
            assert (await pay(http, merchant, partial, amount)).status_code == 200

        multi = await create(http, merchant, receiver.url("/multi"), channel="BSI", amount=20_000, multi_use=True)
        for _ in range(2):
            assert (await pay(http, merchant, multi)).json()["data"]["transaction_status"] == "PAID"

        cancelled = await create(http, merchant, receiver.url("/cancel"), channel="BNC-BLIBLI")
        assert (await cancel(http, merchant, cancelled)).json()["data"]["transaction_status"] == "CANCELLED"

        expiring = await create(
            http, merchant, receiver.url("/expire"), expired_time=isoformat_millis(clock.now() + timedelta(minutes=2))
        )
        clock.advance(121)  # the expiry job of this test's worker judges by the test's clock

        expected = {
            "/closed": (closed, ["PAID"]),
            "/partial": (partial, ["PARTIALLY_PAID", "PARTIALLY_PAID", "PAID"]),
            "/multi": (multi, ["PAID", "PAID"]),
            "/cancel": (cancelled, ["CANCELLED"]),
            "/expire": (expiring, ["EXPIRED"]),
        }
        for path, (va, statuses) in expected.items():
            requests = await receiver.wait_for(len(statuses), path=path, timeout=expiry_hang_guard())
            assert [check_callback(r, merchant, va)["transaction_status"] for r in requests] == statuses, path
            assert (await inquire(http, merchant, va))["transaction_status"] == statuses[-1]
        assert (await inquire(http, merchant, partial))["payment_details"]["remaining_amount"] == 0
        assert len((await inquire(http, merchant, multi))["payment_history"]) == 2
