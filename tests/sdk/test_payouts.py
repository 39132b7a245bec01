"""The SDK's disbursement calls against a served Kasir (issue 46 item 6): the disbursement token fetched and reused,
every call accepted, the staging simulator's outcomes read into typed results, sync and async alike."""

from __future__ import annotations

import asyncio
import uuid
from decimal import Decimal
from typing import Any

import pytest
from fastapi import FastAPI
from kasir_client import AsyncClient, Client, ConflictError, NotFoundError, PayoutTransfer, ValidationError

from kasir.audit.service import Actor
from kasir.payouts.service import payout_service
from tests.sdk.helpers import sdk_credentials
from tests.support import builders
from tests.support.builders import make_merchant

pytestmark = pytest.mark.slow

ORIGINATOR = [{"originatorCustomerNo": "1", "originatorCustomerName": "Toko Kopi", "originatorBankCode": "014"}]


async def funded(app: FastAPI, amount: int) -> builders.TestMerchant:
    merchant = await make_merchant(app)
    async with app.state.database.unit_of_work() as session:
        await payout_service.top_up(session, merchant.id, amount, "Saldo awal", Actor.cli())
    return merchant


def transfer(account_no: str, amount: str = "150000.00", **extra: Any) -> Any:
    return {
        "partnerReferenceNo": f"PAYOUT-{uuid.uuid4().hex[:16]}",
        "amount": {"value": amount, "currency": "IDR"},
        "beneficiaryAccountName": "BUDI SANTOSO",
        "beneficiaryAccountNo": account_no,
        "beneficiaryBankCode": "014",
        "originatorInfos": ORIGINATOR,
        **extra,
    }


async def test_every_disbursement_call_of_the_async_client(app: FastAPI, served) -> None:
    merchant = await funded(app, 1_000_000)
    seen: list[str] = []
    async with AsyncClient(
        served.base_url, sdk_credentials(merchant), on_request=lambda r: seen.append(r.path)
    ) as kasir:
        balance = await kasir.balance()
        assert (balance.available, balance.hold, balance.ledger) == (Decimal(10**6), Decimal(0), Decimal(10**6))
        assert len(balance.account_no) == 16
        account = await kasir.account_inquiry({"beneficiaryBankCode": "014", "beneficiaryAccountNo": "1234560002"})
        assert (account.account_name, account.bank_name) == ("SITI RAHAYU", "BANK CENTRAL ASIA")
        with pytest.raises(NotFoundError) as unknown:
            await kasir.account_inquiry({"beneficiaryBankCode": "014", "beneficiaryAccountNo": "1234560004"})
        assert unknown.value.code == "4041611"

        sent = await kasir.transfer(transfer("1234567890", additionalInfo={"remark": "gaji"}))
        assert (sent.response_code, sent.status, sent.status_description, sent.is_final) == (
            "2001800", "00", "Success", True,
        )  # fmt: skip
        assert sent.reference_no.startswith("DSB")
        assert sent.source_account_no == balance.account_no
        pending = await kasir.transfer(transfer("1234560003", amount="50000.00"), version="v1.0")
        assert (pending.status, pending.is_final) == ("03", False)
        status = await kasir.transfer_status(partner_reference_no=pending.partner_reference_no)
        assert (status.reference_no, status.status, status.amount) == (pending.reference_no, "03", Decimal(50_000))
        after = await kasir.balance()
        assert (after.ledger, after.hold, after.available) == (Decimal(850_000), Decimal(50_000), Decimal(800_000))

        history = await kasir.history({"pageSize": 20})
        kinds = [(e.type, e.status) for e in history.entries]
        assert ("TOP_UP", "SUCCESS") in kinds
        assert ("SEND_MONEY", "SUCCESS") in kinds
        assert ("SEND_MONEY", "INIT") in kinds
        detail = await kasir.history_detail(sent.partner_reference_no)
        assert (detail.type, detail.status, detail.remark, detail.reference_no) == (
            "SEND_MONEY", "SUCCESS", "gaji", sent.reference_no,
        )  # fmt: skip

        with pytest.raises(ConflictError) as duplicate:
            await kasir.transfer(transfer("1234567890") | {"partnerReferenceNo": sent.partner_reference_no})
        assert duplicate.value.code == "4091801"
        with pytest.raises(ValidationError):
            await kasir.transfer(transfer("1234567890", amount="10.50"))
    assert seen.count("/api/v1.0/access-token/b2b") == 1  # one disbursement token for every call
    assert "/auth/merchants/v1.0/access-token/b2b" not in seen


async def test_a_transfer_repeated_with_its_key_is_sent_once_by_the_sync_client(app: FastAPI, served) -> None:
    merchant = await funded(app, 500_000)
    body = transfer("1234567890", amount="100000.00")

    def run() -> tuple[PayoutTransfer, PayoutTransfer, Decimal]:
        with Client(served.base_url, sdk_credentials(merchant)) as kasir:
            first = kasir.transfer(body, idempotency_key="payout-once")
            again = kasir.transfer(body, idempotency_key="payout-once")
            return first, again, kasir.balance().ledger

    first, again, ledger = await asyncio.to_thread(run)
    assert (again.reference_no, again.replayed, first.replayed) == (first.reference_no, True, False)
    assert ledger == Decimal(400_000)
