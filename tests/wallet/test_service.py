"""The service entry other rooms use: `wallet_service.create_payment(session, merchant, request)` and `payment_url`."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from fastapi import FastAPI

from kasir.errors import InvalidMandatoryField
from kasir.kit.clock import clock
from kasir.merchants.service import merchant_service
from kasir.wallet.schemas import CreatePaymentRequest
from kasir.wallet.service import payment_url, wallet_service
from tests.support.builders import make_merchant
from tests.wallet.helpers import create_body, inquire


async def test_create_payment_from_python(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    body = create_body(channel="OVO")
    body["payment_details"]["expired_time"] = clock.now() + timedelta(minutes=30)  # an aware datetime is taken too
    request = CreatePaymentRequest.model_validate(body)
    async with app.state.database.unit_of_work() as session:
        owner = await merchant_service.get(session, merchant.id)
        tx = await wallet_service.create_payment(session, owner, request)
        url = payment_url(tx)
    assert url == f"http://kasir.test/ewallet/pages/{tx.id}"
    assert tx.status == "PENDING"
    assert tx.expires_at == body["payment_details"]["expired_time"]
    status = await inquire(
        client, merchant, {"transaction_id": tx.id, "external_id": tx.external_id, "order_id": tx.order_id}
    )
    assert status["payment_url"] == url


async def test_create_payment_needs_wallet_details_outside_qr(app: FastAPI) -> None:
    merchant = await make_merchant(app)
    body = create_body()
    del body["wallet_details"]
    request = CreatePaymentRequest.model_validate(body)
    async with app.state.database.unit_of_work() as session:
        owner = await merchant_service.get(session, merchant.id)
        with pytest.raises(InvalidMandatoryField):
            await wallet_service.create_payment(session, owner, request)
