"""A merchant's test callback: one of each kind it can receive, sent once to its callback URL from the console.

The body is what the product room itself would send for a paid payment (its own payload function, on a
transaction that is never stored), and the attempt goes out through the delivery engine's own code
(`kasir.callbacks.dispatcher.send_attempt`): the same headers, signed with the value the merchant verifies
callbacks with now (a rotation in its grace, docs/decisions.md §12.4, included). What marks it as a test stays
within the wire: its `external_id` and `order_id` (BNPL: `originalPartnerReferenceNo`) begin with `TEST-`, an
order the merchant never made, and its transaction id has `TEST` after the product's prefix.

It is recorded as a callback of the merchant (event `TEST`, one attempt, no retry), so its
X-Kasir-Callback-Id is a real event id that no other callback carries, its attempt is logged as every
attempt is, and the merchant may replay it like any other. Sent from the console request, outside any
unit of work: the merchant sees the answer at once.

    NoCallbackUrl (409)   the merchant has no default callback URL
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Any

from kasir.audit.service import Actor, audit
from kasir.bnpl.repository import TransactionRow as BnplTransactionRow
from kasir.bnpl.service import PAYMENT_CHANNEL as BNPL_CHANNEL
from kasir.bnpl.service import bnpl_service
from kasir.bnpl.states import BnplStatus
from kasir.callbacks.dispatcher import AttemptResult, ClaimedCallback, record_attempts, send_attempt
from kasir.callbacks.models import TEST_EVENT, CallbackKind, CallbackStatus
from kasir.callbacks.repository import CallbackRow, callback_repository
from kasir.callbacks.service import SignedIds, encode_payload
from kasir.callbacks.ssrf import delivery_lookup
from kasir.card.callbacks import callback_payload as card_payload
from kasir.card.cards import card_channels
from kasir.card.repository import CardOrderRow
from kasir.config import get_settings
from kasir.db import Database, Session
from kasir.errors import Conflict
from kasir.kit.clock import clock
from kasir.kit.http_client import KeepAliveTransport
from kasir.kit.ids import random_token
from kasir.merchants.repository import MerchantRow
from kasir.merchants.service import merchant_service
from kasir.wallet.repository import TransactionRow as WalletTransactionRow
from kasir.wallet.service import callback_payload as wallet_payload
from kasir.wallet.states import WalletStatus

TEST_AMOUNT = 10_000
WORKER = "console-test"


class NoCallbackUrl(Conflict):
    pass


class SampleKind(StrEnum):
    """What a merchant may ask for: the kinds of callback Kasir sends."""

    WALLET = "wallet"  # a wallet payment's PAID callback
    CARD = "card"  # a card order's payment-page SUCCESS callback
    BNPL = "bnpl"  # a BNPL transaction's SNAP notification, status 00

    @property
    def label(self) -> str:
        return _LABELS[self.value]


_LABELS = {
    "wallet": "Wallet payment (PAID)",
    "card": "Card payment page (SUCCESS)",
    "bnpl": "BNPL notification (00)",
}


@dataclass(frozen=True, slots=True)
class Sample:
    kind: CallbackKind
    transaction_ref: str
    payload: dict[str, Any]
    signed_ids: SignedIds


@dataclass(frozen=True, slots=True)
class SampleSent:
    """A test callback as sent: its row (id = X-Kasir-Callback-Id) and its one attempt."""

    callback: CallbackRow
    kind: SampleKind
    result: AttemptResult


def _test_ids(prefix: str, length: int) -> tuple[str, str]:
    """(transaction id in the product's shape with TEST after its prefix, the TEST- external and order id)."""
    return prefix + "TEST" + random_token(length - 4), "TEST-" + random_token(16)


_CUSTOMER = {"full_name": "Test Customer", "email": "test.customer@example.com", "phone": "081234567890"}
_ITEM = {"item_id": "TEST-ITEM", "name": "Test item", "amount": TEST_AMOUNT, "qty": 1, "description": "Test callback"}


def _wallet(merchant: MerchantRow, url: str) -> Sample:
    transaction_id, external_id = _test_ids("WLT", 20)
    now = clock.now()
    details = {"customer_details": _CUSTOMER, "item_details": [_ITEM]}
    tx = WalletTransactionRow(
        id=transaction_id,
        merchant_id=merchant.id,
        external_id=external_id,
        order_id=external_id,
        reference_id="REFTEST" + random_token(13),
        payment_channel="DANA",
        currency="IDR",
        amount=TEST_AMOUNT,
        refunded_amount=0,
        status=WalletStatus.PAID.value,
        description="Test callback",
        callback_url=url,
        return_url=None,
        details=json.dumps(details),
        qr_string=None,
        terminal_id=None,
        failure_reason=None,
        issuer="DANA",
        retrieval_reference_no=None,
        created_at=now,
        expires_at=now + timedelta(hours=1),
        updated_at=now,
        paid_at=now,
        voided_at=None,
    )
    payload = wallet_payload(tx, [])
    return Sample(CallbackKind.WALLET, tx.id, payload, SignedIds(tx.id, tx.external_id, tx.order_id))


def _card(merchant: MerchantRow, url: str) -> Sample:
    order_id, external_id = _test_ids("CARD", 20)
    now = clock.now()
    channel = next(iter(card_channels()), "CARD")
    details = {
        "customerDetails": {
            "fullName": _CUSTOMER["full_name"],
            "email": _CUSTOMER["email"],
            "phone": _CUSTOMER["phone"],
        },
        "itemDetails": [{"itemId": "TEST-ITEM", "name": "Test item", "amount": TEST_AMOUNT, "qty": 1}],
        "paymentDetails": {"isCustomerPayingFee": False},
    }
    order = CardOrderRow(
        id=order_id,
        merchant_id=merchant.id,
        external_id=external_id,
        order_id=external_id,
        currency="IDR",
        amount=TEST_AMOUNT,
        payment_method="CARD",
        payment_channel=channel,
        payment_mode="CLOSE",
        status="SUCCESS",
        tenor=None,
        attempts_made=1,
        attempts_failed=0,
        details=json.dumps(details),
        return_url="https://example.com/test-return",
        callback_url=url,
        acq=card_channels().get(channel) or "",
        response_message="Transaction Approved",
        save_card=False,
        card_token=None,
        created_at=now,
        expires_at=now + timedelta(hours=1),
        updated_at=now,
        paid_at=now,
        dialect=None,
        sub_merchant_id=None,
    )
    payload = card_payload(order, "SUCCESS")
    return Sample(CallbackKind.PAYMENT_PAGE, order.id, payload, SignedIds(order.id, order.external_id, order.order_id))


async def _bnpl(session: Session, merchant: MerchantRow, url: str) -> Sample:
    reference_no, partner_reference_no = _test_ids("BNPL", 24)
    now = clock.now()
    tx = BnplTransactionRow(
        id=reference_no,
        merchant_id=merchant.id,
        partner_reference_no=partner_reference_no,
        amount_cents=TEST_AMOUNT * 100,
        currency="IDR",
        status=BnplStatus.SUCCESS.value,
        status_desc="Success",
        callback_url=url,
        channel_id=BNPL_CHANNEL,
        details="{}",
        tenure=None,
        created_at=now,
        expires_at=now + timedelta(hours=1),
        updated_at=now,
        paid_at=now,
    )
    payload = await bnpl_service.notification_payload(session, tx)
    # Issue 26: the wallet's svc-signature with partnerReferenceNo as external id and order id.
    return Sample(CallbackKind.BNPL, tx.id, payload, SignedIds(tx.id, partner_reference_no, partner_reference_no))


async def sample(session: Session, merchant: MerchantRow, kind: SampleKind, url: str) -> Sample:
    if kind is SampleKind.WALLET:
        return _wallet(merchant, url)
    if kind is SampleKind.CARD:
        return _card(merchant, url)
    return await _bnpl(session, merchant, url)


async def send_test_callback(database: Database, merchant_id: str, kind: SampleKind, actor: Actor) -> SampleSent:
    """Send one test callback of `kind` to the merchant's default callback URL now; answers its attempt.

    Three short units: the callback recorded (leased to this request, so no worker takes it meanwhile;
    should this process die, the lease ends and a worker sends it), the attempt with none open, then the
    attempt and the audit row."""
    settings = get_settings()
    async with database.unit_of_work() as session:
        merchant = await merchant_service.get(session, merchant_id)
        if not merchant.callback_url:
            raise NoCallbackUrl("set a default callback URL first: test callbacks go there", field="callback_url")
        built = await sample(session, merchant, kind, merchant.callback_url)
        now = clock.now()
        row = await callback_repository.add_replay(
            session,
            merchant_id=merchant.id,
            kind=built.kind.value,
            transaction_ref=built.transaction_ref,
            event=TEST_EVENT,
            url=merchant.callback_url,
            payload=encode_payload(built.payload),
            svc_signature=None,
            signed_ids=built.signed_ids.encoded(),
            status=CallbackStatus.DELIVERING.value,
            attempts_made=0,
            max_attempts=1,  # one attempt, shown at once; the merchant sends another or replays this one
            next_attempt_at=now,
            lease_owner=WORKER,
            lease_expires_at=now + timedelta(seconds=settings.callback_timeout_seconds + 30),
            fence=1,
            replay_of=None,
            event_id=None,
            attempt_offset=0,
            created_at=now,
            delivered_at=None,
            last_error=None,
        )
        signing = await merchant_service.callback_signing(session, merchant.id)
    claimed = ClaimedCallback(
        id=row.id,
        fence=row.fence,
        kind=built.kind,
        merchant_id=row.merchant_id,
        transaction_ref=row.transaction_ref,
        url=row.url,
        payload=row.payload.encode(),
        svc_signature=None,
        signed_ids=built.signed_ids,
        event_key=row.id,
        attempt_offset=0,
        attempt_number=1,
        max_attempts=1,
        created_at_unix=row.created_at.timestamp(),
        signing=signing,
    )
    transport = KeepAliveTransport(max_idle_per_origin=1, resolve=delivery_lookup)
    try:
        result = await send_attempt(transport, claimed, settings)
    finally:
        await transport.aclose()
    await record_attempts(database, [(claimed, result)], WORKER, settings)
    async with database.unit_of_work() as session:
        await audit.record(
            session,
            actor,
            "merchant.test_callback",
            target_type="callback",
            target_id=str(row.id),
            merchant_id=merchant_id,
            after={
                "kind": kind.value,
                "url": row.url,
                "transaction_id": row.transaction_ref,
                "http_status": result.http_status,
                "latency_ms": result.latency_ms,
                "accepted": result.accepted,
                "error": result.error,
            },
        )
        stored = await callback_repository.get(session, row.id)
    assert stored is not None
    return SampleSent(stored, kind, result)
