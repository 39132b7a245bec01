"""The service entry other rooms use: `wallet_service.create_payment(session, merchant, request)` and `payment_url`."""

from __future__ import annotations

from datetime import timedelta, timezone

import httpx
import pytest
from fastapi import FastAPI

from kasir.errors import InvalidMandatoryField
from kasir.kit.clock import clock
from kasir.merchants.service import merchant_service
from kasir.wallet.models import WalletTransaction
from kasir.wallet.repository import TRANSACTION_COLUMNS, wallet_repository
from kasir.wallet.schemas import CreatePaymentRequest
from kasir.wallet.service import payment_url, wallet_service
from tests.support.builders import make_merchant
from tests.support.wire.wallet import address, create_body, inquire, item


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


def test_the_row_has_every_column() -> None:
    """create-payment inserts, and inquiry reads, TransactionRow's fields: a new column must be one of them."""
    assert list(TRANSACTION_COLUMNS) == list(WalletTransaction.__table__.columns.keys())


async def test_the_created_row_is_what_is_stored(app: FastAPI) -> None:
    merchant = await make_merchant(app)
    expires = (clock.now() + timedelta(minutes=20, microseconds=123_456)).astimezone(timezone(timedelta(hours=-3)))
    body = create_body(
        channel="LINKAJA",
        items=[item(30_000, 2), item(40_000, 1, item_id="SKU-2", name="Teh ✓", description="manis")],
        billing_address=address(),
        shipping_address=address(city="Bandung"),
        additional_data="catatan: ✓",
        return_url="https://merchant.example/return?x=1",
    )
    body["payment_details"]["expired_time"] = expires
    request = CreatePaymentRequest.model_validate(body)
    async with app.state.database.unit_of_work() as session:
        owner = await merchant_service.get(session, merchant.id)
        created = await wallet_service.create_payment(session, owner, request)
        answer = await wallet_service.describe(session, created)
    async with app.state.database.unit_of_work(read_only=True) as session:
        stored = await wallet_repository.row(session, created.id)
        orm = await wallet_repository.get(session, created.id)
        assert stored is not None
        assert orm is not None
        assert await wallet_service.describe(session, stored) == answer
        assert await wallet_service.describe(session, orm) == answer
    assert stored == created
    assert {name: getattr(orm, name) for name in TRANSACTION_COLUMNS} == {
        name: getattr(created, name) for name in TRANSACTION_COLUMNS
    }
