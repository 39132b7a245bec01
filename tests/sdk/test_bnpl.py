"""The SDK's BNPL calls against the real server: both signing variants, checkout, status."""

from __future__ import annotations

import uuid

import pytest
from fastapi import FastAPI
from kasir_client import AsyncClient, ConflictError, ValidationError
from sqlalchemy import func, select

from kasir.bnpl.models import BnplTransaction
from kasir.db import fetch_value
from tests.sdk.helpers import sdk_credentials
from tests.support.builders import make_merchant

pytestmark = pytest.mark.slow

ITEM = {
    "itemId": "SKU-1",
    "name": "Headphones",
    "amount": {"value": "75000.00", "currency": "IDR"},
    "category": "ELEC",
    "qty": 2,
}


def calculation() -> dict:
    item = {
        **ITEM,
        "url": "https://shop.example/sku-1",
        "parentType": "SELLER",
        "parentId": "SELLER-1",
        "name": "Headphones – Śpiewak",
    }  # non-ASCII text is signed byte for byte
    return {"amount": {"value": "150000.00", "currency": "IDR"}, "itemDetails": [item]}


def checkout(reference: str, callback_url: str) -> dict:
    return {
        "partnerReferenceNo": reference,
        "paymentDetails": {"amount": {"value": "150000.00", "currency": "IDR"}},
        "itemDetails": [ITEM],
        "customerDetails": {"firstName": "Budi", "email": "budi@example.com", "phone": "081234567890"},
        "callbackUrl": callback_url,
    }


@pytest.mark.parametrize("signing", ["symmetric", "asymmetric"])
async def test_calculation_checkout_and_status(app, served, receiver, signing):
    merchant = await make_merchant(app)
    async with AsyncClient(served.base_url, sdk_credentials(merchant), signing=signing) as client:
        calc = await client.bnpl_calculate(calculation())
        assert calc.response_code == "2009000"
        assert [o.tenure for o in calc.options] == sorted(o.tenure for o in calc.options)
        for option in calc.options:
            assert option.installment_amount == option.monthly_installment * option.tenure
            assert option.total_interest == option.installment_amount - option.amount

        reference = f"ORDER-{uuid.uuid4().hex[:12]}"
        created = await client.bnpl_checkout(checkout(reference, receiver.url("/bnpl")))
        assert created.response_code == "2009200"
        assert created.status == "01"
        assert created.qr_url
        assert created.qr_content

        status = await client.bnpl_status(reference_no=created.reference_no)
        assert status.status == "01"
        assert status.response_code == "2009300"

        with pytest.raises(ConflictError) as duplicate:
            await client.bnpl_checkout(checkout(reference, receiver.url("/bnpl")))
        assert duplicate.value.code == "4099201"


async def test_validation_error_names_the_field(app, served):
    merchant = await make_merchant(app)
    body = calculation()
    body["amount"]["value"] = "1.00"
    async with AsyncClient(served.base_url, sdk_credentials(merchant)) as client:
        with pytest.raises(ValidationError) as caught:
            await client.bnpl_calculate(body)
    assert caught.value.code == "4009001"
    assert "amount.value" in caught.value.message


async def stored(app: FastAPI, merchant_id: str) -> int:
    async with app.state.database.unit_of_work(read_only=True) as session:
        count = await fetch_value(
            session, select(func.count()).select_from(BnplTransaction).where(BnplTransaction.merchant_id == merchant_id)
        )
    return int(count or 0)


@pytest.mark.parametrize("signing", ["symmetric", "asymmetric"])
async def test_a_checkout_sent_twice_with_one_key_acts_once(app, served, receiver, signing):
    merchant = await make_merchant(app)
    reference = f"ORDER-{uuid.uuid4().hex[:12]}"
    body = checkout(reference, receiver.url("/bnpl-once"))
    async with AsyncClient(served.base_url, sdk_credentials(merchant), signing=signing) as client:
        first = await client.bnpl_checkout(body, idempotency_key=f"checkout-{reference}")
        # Another call: a fresh X-EXTERNAL-ID and signature, the same body and key.
        again = await client.bnpl_checkout(body, idempotency_key=f"checkout-{reference}")
        assert not first.replayed
        assert again.replayed
        assert again.raw == first.raw
        assert again.reference_no == first.reference_no

        other = checkout(f"{reference}-2", receiver.url("/bnpl-once"))
        with pytest.raises(ValidationError) as reused:  # the same key with another body
            await client.bnpl_checkout(other, idempotency_key=f"checkout-{reference}")
        assert reused.value.status == 422
        assert reused.value.code == "4229200"
    assert await stored(app, merchant.id) == 1
