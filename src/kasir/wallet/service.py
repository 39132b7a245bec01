"""Wallet rules: create (checkout page or dynamic QR), inquiry, pay, fail, expire, refund, void.

    KasirError
    ├── BadRequest                          01  400
    │   ├── InvalidFieldFormat
    │   │   ├── AmountMismatch              payment_details.amount ≠ Σ item amount × qty
    │   │   ├── ChannelNotOnThisRoute       QRIS outside create-qr, or another channel on it
    │   │   ├── ExpiryOutOfRange            payment_details.expired_time outside 1 min … 24 h
    │   │   └── ChannelMismatch             dummy payment (simulator) for another channel than the transaction's
    │   └── InvalidMandatoryField
    │       └── CallbackUrlMissing          neither the request nor the merchant has one
    ├── NotFound
    │   └── WalletTransactionNotFound       02  404
    └── Conflict                            03  409
        ├── DuplicateExternalId             external_id already used by this merchant
        └── TransactionStateRefused (states.py): any move TRANSITIONS does not allow
            ├── TransactionExpired          PENDING past its expired_time
            ├── NotTheFailureChannel        `failed` is for OVO only
            ├── RefundExceedsRefundable     refund_amount > what is left of the paid amount
            └── VoidNotSameDay              void after the Jakarta day of paid_time

Every move into PAID, EXPIRED, failed, REFUNDED (each refund) and VOID records one wallet
callback (outbox kind WALLET) in the same unit of work; the dispatcher sends it after commit
with header and query parameter `svc-signature` (docs/decisions.md §3.5).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from fastapi.responses import JSONResponse, Response

from kasir.callbacks.models import CallbackKind
from kasir.callbacks.service import SignedIds, callback_outbox
from kasir.callbacks.ssrf import check_callback_url
from kasir.config import get_settings
from kasir.db import Session
from kasir.errors import Conflict, InvalidFieldFormat, InvalidMandatoryField, KasirError, NotFound
from kasir.kit.clock import JAKARTA, clock, isoformat_millis
from kasir.kit.ids import new_id, random_token
from kasir.kit.logs import annotate_request
from kasir.merchants.repository import MerchantRow
from kasir.merchants.service import merchant_service
from kasir.payments import metrics as payment_metrics
from kasir.payments import owners
from kasir.payments.owners import InnerEvent, InnerOutcome
from kasir.processors.calls import Call, PendingCall
from kasir.processors.protocols import WalletItem, WalletPayment
from kasir.processors.registry import wallet_issuer
from kasir.wallet.qris import QrisPayment, build_payload
from kasir.wallet.repository import TRANSACTION_COLUMNS, RefundRow, TransactionRow, wallet_repository
from kasir.wallet.schemas import (
    FAILURE_CHANNEL,
    QR_CHANNEL,
    CreatePaymentRequest,
    InquiryRequest,
    RefundRequest,
    TransactionReference,
    VoidRequest,
)
from kasir.wallet.states import (
    NOTIFIED,
    TransactionStateRefused,
    WalletStatus,
    check_transition,
    transition,
)

CURRENCY = "IDR"
PAYMENT_METHOD = "WALLET"  # interface.md: the callback's payment_method
DEFAULT_EXPIRY = timedelta(minutes=15)  # docs/decisions.md §5
MIN_EXPIRY = timedelta(minutes=1)
MAX_EXPIRY = timedelta(hours=24)
QR_AMOUNT_MAX = 9_999_999_999_999  # EMVCo field 54 holds at most 13 characters
DEFAULT_FAILURE_REASON = "Payment declined by the wallet"
SUCCESS_MESSAGE = "Success"
# payment_system: the payment system label of the callback (interface.md: "for example a QR type").
PAYMENT_SYSTEMS = {QR_CHANNEL: "QRIS_DYNAMIC"}
DEFAULT_PAYMENT_SYSTEM = "EWALLET"
# The issuer of a QRIS payment whose notification names none: Kasir itself (acquirer and issuer: on_us).
QR_ON_US_ISSUER = "KASIR"


# --- errors ----------------------------------------------------------------------------


class AmountMismatch(InvalidFieldFormat):
    def __init__(self) -> None:
        super().__init__("payment_details.amount", "must equal the sum of item_details amount × qty")


class ChannelNotOnThisRoute(InvalidFieldFormat):
    pass


class ExpiryOutOfRange(InvalidFieldFormat):
    def __init__(self) -> None:
        super().__init__("payment_details.expired_time", "must be between 1 minute and 24 hours from now")


class ChannelMismatch(InvalidFieldFormat):
    def __init__(self) -> None:
        super().__init__("payment_channel", "must be the payment channel of the transaction")


class CallbackUrlMissing(InvalidMandatoryField):
    def __init__(self) -> None:
        super().__init__("callback_url")
        self.reason = "is required when the merchant has no default callback URL"


class WalletTransactionNotFound(NotFound):
    default_message = "Data Not Found"


class DuplicateExternalId(Conflict):
    def __init__(self) -> None:
        super().__init__("external_id is already used by another transaction of this merchant", field="external_id")


class TransactionExpired(TransactionStateRefused):
    pass


class NotTheFailureChannel(TransactionStateRefused):
    pass


class RefundExceedsRefundable(TransactionStateRefused):
    pass


class VoidNotSameDay(TransactionStateRefused):
    pass


# --- the service ---------------------------------------------------------------------


# The stored `details`: what the request sent, as sent (JSON).
_DETAILS = {
    "customer_details",
    "item_details",
    "wallet_details",
    "billing_address",
    "shipping_address",
    "additional_data",
}


def items_total(request: CreatePaymentRequest) -> int:
    return sum(item.amount * item.qty for item in request.item_details)


class WalletService:
    # --- creation ------------------------------------------------------------------

    async def check_callback_url(self, merchant: MerchantRow, url: str | None, *, field: str = "callback_url") -> None:
        """The callback URL a new payment will use (the request's, else the merchant's), checked before
        its unit of work opens: in production the check resolves the host (DNS), and nothing slow may
        run inside a unit of work (kasir.db.sqlite). A missing URL is create_payment's to refuse."""
        callback_url = url or merchant.callback_url
        if callback_url:
            await check_callback_url(callback_url, production=get_settings().is_production, field=field)

    async def create_payment(
        self,
        session: Session,
        merchant: MerchantRow,
        request: CreatePaymentRequest,
        *,
        qr: bool = False,
        link_id: str | None = None,
    ) -> TransactionRow:
        """A PENDING transaction: checkout page (`qr=False`) or dynamic QRIS (`qr=True`).

        Also the entry of the card charge's `paymentMethod: ewallet` (docs/decisions.md §7), and of a payment
        link's wallet or QRIS attempt (`link_id`: the link owns it, kasir.payments.owners).
        """
        channel = request.payment_channel
        if qr and channel != QR_CHANNEL:
            raise ChannelNotOnThisRoute("payment_channel", f"must be {QR_CHANNEL} on /ewallet/v2/create-qr")
        if not qr and channel == QR_CHANNEL:
            raise ChannelNotOnThisRoute(
                "payment_channel", f"{QR_CHANNEL} is only available through /ewallet/v2/create-qr"
            )
        if not qr and request.wallet_details is None:
            raise InvalidMandatoryField("wallet_details")
        amount = request.payment_details.amount
        if items_total(request) != amount:
            raise AmountMismatch()
        if qr and amount > QR_AMOUNT_MAX:
            raise InvalidFieldFormat("payment_details.amount", "must be at most 13 digits on QRIS")
        now = clock.now()
        expires_at = request.payment_details.expired_time or now + DEFAULT_EXPIRY
        if not MIN_EXPIRY <= expires_at - now <= MAX_EXPIRY:
            raise ExpiryOutOfRange()
        callback_url = request.callback_url or merchant.callback_url
        if not callback_url:
            raise CallbackUrlMissing()

        transaction_id = new_id("WLT", 20)
        terminal = qr_string = None
        if channel == QR_CHANNEL:
            terminal = terminal_id(merchant)
            qr_string = build_payload(
                QrisPayment(
                    merchant_id=merchant.id,
                    merchant_name=merchant.name,
                    amount=amount,
                    transaction_id=transaction_id,
                    order_id=request.order_id,
                    terminal_id=terminal,
                )
            )
        # The field order of CreatePaymentRequest: customer, items, wallet, billing, shipping, additional data.
        details = request.model_dump(include=_DETAILS)
        tx = TransactionRow(
            id=transaction_id,
            merchant_id=merchant.id,
            external_id=request.external_id,
            order_id=request.order_id,
            reference_id=new_id("REF", 17),
            payment_channel=channel,
            currency=CURRENCY,
            amount=amount,
            refunded_amount=0,
            status=WalletStatus.PENDING.value,
            description=request.payment_details.transaction_description,
            callback_url=callback_url,
            return_url=request.return_url,
            details=json.dumps(details, ensure_ascii=False),
            qr_string=qr_string,
            terminal_id=terminal,
            failure_reason=None,
            issuer=None,
            retrieval_reference_no=None,
            created_at=now,
            expires_at=expires_at,
            updated_at=now,
            paid_at=None,
            voided_at=None,
            link_id=link_id,
        )
        # The unique (merchant_id, external_id) refuses a reused external_id, races included.
        if not await wallet_repository.add_transaction(session, row_values(tx)):
            raise DuplicateExternalId()
        payment_metrics.created(session, "wallet", WalletStatus(tx.status).name)
        annotate_request(transaction_id=tx.id, merchant_id=merchant.id)
        return tx

    # --- lookups -------------------------------------------------------------------

    async def get(self, session: Session, transaction_id: str, *, lock: bool = False) -> TransactionRow:
        tx = await wallet_repository.get(session, transaction_id, lock=lock)
        if tx is None:
            raise WalletTransactionNotFound()
        return tx

    async def find(
        self, session: Session, merchant: MerchantRow, ref: TransactionReference, *, lock: bool = False
    ) -> TransactionRow:
        """The merchant's transaction named by transaction_id, external_id and order_id together (else `02`)."""
        return _named(await wallet_repository.get(session, ref.transaction_id, lock=lock), merchant, ref)

    async def refunds(self, session: Session, tx: TransactionRow) -> list[RefundRow]:
        if not tx.refunded_amount:
            return []  # every refund adds at least 1 rupiah to refunded_amount
        return await wallet_repository.refunds(session, tx.id)

    # --- what the endpoints ask (one call each) -----------------------------------------

    async def inquire(self, session: Session, merchant: MerchantRow, request: InquiryRequest) -> TransactionRow:
        """`find` without the lock: a plain row (nothing is changed)."""
        return _named(await wallet_repository.row(session, request.transaction_id), merchant, request)

    async def refund_payment(self, session: Session, merchant: MerchantRow, request: RefundRequest) -> PendingCall:
        tx = await self.find(session, merchant, request, lock=True)
        return await self.refund(session, tx, request.refund_amount, request.reason)

    async def void_payment(self, session: Session, merchant: MerchantRow, request: VoidRequest) -> PendingCall:
        tx = await self.find(session, merchant, request, lock=True)
        return await self.void(session, tx)

    async def checkout(self, session: Session, transaction_id: str) -> WalletPayment:
        """The transaction as its issuer's `create` takes it (the customer opened payment_url)."""
        tx = await self.get(session, transaction_id)
        merchant = await merchant_service.get(session, tx.merchant_id)
        details: dict[str, Any] = json.loads(tx.details)
        customer = details["customer_details"]
        return WalletPayment(
            reference=tx.id,
            order_id=tx.order_id,
            merchant_name=merchant.name,
            channel=tx.payment_channel,
            amount=tx.amount,
            currency=tx.currency,
            description=tx.description,
            customer_name=customer["full_name"],
            customer_phone=customer["phone"],
            items=[WalletItem(i["name"], i["qty"], i["amount"]) for i in details["item_details"]],
            expires_at=tx.expires_at,
            status=tx.status,
            failure_reason=tx.failure_reason,
            return_url=tx.return_url,
            qr_image_url=f"/ewallet/qr/{tx.id}.png" if tx.qr_string else None,
        )

    async def describe(self, session: Session, tx: TransactionRow) -> dict[str, Any]:
        """The answer body of create, inquiry, refund and void."""
        return transaction_body(tx, await self.refunds(session, tx))

    # --- transitions (the caller holds the row lock: get/find with lock=True) ---------

    async def pay(self, session: Session, tx: TransactionRow, issuer: str | None = None) -> TransactionRow:
        """`issuer`: who paid, as the issuer's notification says (QRIS: the customer's issuer)."""
        self._refuse_if_due(tx)
        transition(tx, WalletStatus.PAID)
        now = clock.now()
        tx.paid_at = now
        if tx.payment_channel == QR_CHANNEL:
            tx.issuer = issuer or QR_ON_US_ISSUER
            tx.retrieval_reference_no = random_token(12, "0123456789")
        else:
            tx.issuer = issuer or tx.payment_channel
        await self._changed(session, tx)
        return tx

    async def fail(self, session: Session, tx: TransactionRow, reason: str | None = None) -> TransactionRow:
        self._refuse_if_due(tx)
        check_transition(tx, WalletStatus.FAILED)
        if tx.payment_channel != FAILURE_CHANNEL:
            raise NotTheFailureChannel(
                f"Failed Request: only the {FAILURE_CHANNEL} channel reports failed payments; "
                f"this transaction is {tx.payment_channel}"
            )
        transition(tx, WalletStatus.FAILED)
        tx.failure_reason = (reason or DEFAULT_FAILURE_REASON)[:255]
        await self._changed(session, tx)
        return tx

    async def expire_now(self, session: Session, tx: TransactionRow) -> TransactionRow:
        """The dummy payment's `simulate_status: EXPIRED`: expire a PENDING transaction at once."""
        transition(tx, WalletStatus.EXPIRED)
        await self._changed(session, tx)
        return tx

    async def expire(self, session: Session, transaction_id: str) -> bool:
        """The expiry job: PENDING past expired_time → EXPIRED. False when it changed meanwhile."""
        tx = await self.get(session, transaction_id, lock=True)
        if tx.status != WalletStatus.PENDING.value or tx.expires_at > clock.now():
            return False
        transition(tx, WalletStatus.EXPIRED)
        await self._changed(session, tx)
        return True

    def check_refund(self, tx: TransactionRow, amount: int) -> None:
        """What refuses a refund before anything is written (also the console's review step, which writes nothing)."""
        check_transition(tx, WalletStatus.REFUNDED)
        if amount > tx.refundable_amount:
            raise RefundExceedsRefundable(
                f"Failed Request: refund_amount exceeds the refundable amount ({tx.refundable_amount})"
            )
        wallet_issuer(tx.payment_channel)  # switched off: refused before anything is written

    def check_void(self, tx: TransactionRow) -> None:
        """What refuses a void before anything is written (also the console's review step)."""
        check_transition(tx, WalletStatus.VOID)
        assert tx.paid_at is not None
        if tx.paid_at.astimezone(JAKARTA).date() != clock.local_now().date():
            raise VoidNotSameDay(
                "Failed Request: a transaction can be voided only on the day it was paid (Asia/Jakarta)"
            )
        wallet_issuer(tx.payment_channel)

    async def refund(self, session: Session, tx: TransactionRow, amount: int, reason: str | None = None) -> PendingCall:
        """The refund, checked and held: the issuer is asked once this unit of work has committed
        (kasir.processors.calls), and it is recorded (REFUNDED, the callback) in a second."""
        self.check_refund(tx, amount)
        # Numbered by the refunds recorded: a retry of this one (nothing recorded) asks with the same reference.
        refund_reference = f"{tx.id}-R{len(await self.refunds(session, tx)) + 1}"
        details = {"channel": tx.payment_channel, "refund_reference": refund_reference, "amount": amount}
        return PendingCall(Call(WALLET_REFUND, "wallet", tx.id, {**details, "reason": reason}))

    async def record_refund(self, session: Session, call: Call, *, fresh: bool) -> TransactionRow:
        tx = await self.get(session, call.reference, lock=True)
        if not fresh:
            return tx
        transition(tx, WalletStatus.REFUNDED)
        amount = int(call.details["amount"])
        tx.refunded_amount += amount
        await wallet_repository.add_refund(session, tx.id, amount, call.details["reason"], clock.now())
        await self._changed(session, tx)
        return tx

    async def void(self, session: Session, tx: TransactionRow) -> PendingCall:
        """The void, checked and held: asked of the issuer once this unit of work has committed."""
        self.check_void(tx)
        return PendingCall(Call(WALLET_VOID, "wallet", tx.id, {"channel": tx.payment_channel}))

    async def record_void(self, session: Session, call: Call, *, fresh: bool) -> TransactionRow:
        tx = await self.get(session, call.reference, lock=True)
        if not fresh:
            return tx
        transition(tx, WalletStatus.VOID)
        tx.voided_at = clock.now()
        await self._changed(session, tx)
        return tx

    def _refuse_if_due(self, tx: TransactionRow) -> None:
        # Past expired_time the transaction is as good as expired; the expiry job records EXPIRED.
        if tx.status == WalletStatus.PENDING.value and tx.expires_at <= clock.now():
            raise TransactionExpired("Failed Request: transaction has expired")

    async def _changed(self, session: Session, tx: TransactionRow) -> None:
        tx.updated_at = clock.now()
        await wallet_repository.save(session, tx)
        # Every caller has just made a transition: each is out of PENDING or PAID.
        payment_metrics.settled_in(session, "wallet", WalletStatus(tx.status).name)
        if WalletStatus(tx.status) not in NOTIFIED:
            return
        if tx.link_id is not None:  # a payment link's: the link reports it (kasir.payments.owners)
            await owners.settled(session, _owned_outcome(tx))
            return
        await callback_outbox.record(
            session,
            kind=CallbackKind.WALLET,
            merchant_id=tx.merchant_id,
            transaction_ref=tx.id,
            event=tx.status,
            url=tx.callback_url,
            payload=callback_payload(tx, await self.refunds(session, tx)),
            signed_ids=SignedIds(tx.id, tx.external_id, tx.order_id),
        )


wallet_service = WalletService()

WALLET_REFUND = "wallet.refund"
WALLET_VOID = "wallet.void"


class _WalletAction:
    """A refund or void at the issuer, asked outside any unit of work (kasir.processors.calls).
    Both are idempotent by their reference at the issuer: asked again after a crash, as they were."""

    async def lock(self, session: Session, call: Call) -> None:
        await wallet_service.get(session, call.reference, lock=True)

    async def undo(self, session: Session, call: Call, error: KasirError) -> None:
        return None  # nothing was recorded before the issuer was asked

    async def respond(self, session: Session, call: Call, recorded: TransactionRow) -> Response:
        return JSONResponse(await wallet_service.describe(session, recorded))

    async def ask_again(self, call: Call) -> None:
        await self.ask(call)

    async def ask(self, call: Call) -> None:
        raise NotImplementedError


class WalletRefundAction(_WalletAction):
    async def ask(self, call: Call) -> None:
        details = call.details
        await wallet_issuer(details["channel"]).refund(call.reference, details["refund_reference"], details["amount"])

    async def record(self, session: Session, call: Call, answer: None, *, fresh: bool) -> TransactionRow:
        return await wallet_service.record_refund(session, call, fresh=fresh)


class WalletVoidAction(_WalletAction):
    async def ask(self, call: Call) -> None:
        await wallet_issuer(call.details["channel"]).void(call.reference)

    async def record(self, session: Session, call: Call, answer: None, *, fresh: bool) -> TransactionRow:
        return await wallet_service.record_void(session, call, fresh=fresh)


def _named(tx: TransactionRow | None, merchant: MerchantRow, ref: TransactionReference) -> TransactionRow:
    """`tx` when it is the merchant's and its external_id and order_id are the reference's; else `02`."""
    if (
        tx is None
        or tx.link_id is not None  # a payment link's: found through the link only (§10.3)
        or tx.merchant_id != merchant.id
        or (tx.external_id, tx.order_id) != (ref.external_id, ref.order_id)
    ):
        raise WalletTransactionNotFound()
    return tx


def _owned_outcome(tx: TransactionRow) -> InnerOutcome:
    """What became of a payment link's transaction: paid, failed (OVO), or ended unpaid (not a failed attempt)."""
    if tx.status == WalletStatus.PAID.value:
        return InnerOutcome(tx.link_id or "", tx.id, InnerEvent.PAID)
    if tx.status == WalletStatus.FAILED.value:
        return InnerOutcome(tx.link_id or "", tx.id, InnerEvent.FAILED, reason=tx.failure_reason or "")
    return InnerOutcome(tx.link_id or "", tx.id, InnerEvent.CLOSED)


def row_values(tx: TransactionRow) -> dict[str, Any]:
    """The row's columns by name: the values of its INSERT."""
    return {name: getattr(tx, name) for name in TRANSACTION_COLUMNS}


# --- links and wire bodies -------------------------------------------------------------


def terminal_id(merchant: MerchantRow) -> str:
    """The merchant's (simulated) sound-box terminal for QRIS."""
    return "T" + merchant.id[-7:]


def payment_url(tx: TransactionRow) -> str:
    """The customer's checkout: Kasir's page, which hands the customer to the issuer's checkout."""
    return f"{get_settings().public_url}/ewallet/pages/{tx.id}"


def qr_url(tx: TransactionRow) -> str:
    return f"{get_settings().public_url}/ewallet/qr/{tx.id}.png"


def timestamp(moment: datetime | None) -> str:
    """ISO 8601 with milliseconds and offset; "" for a time that has not happened (issue 26: never null)."""
    return isoformat_millis(moment) if moment is not None else ""


ADDRESS_FIELDS = ("phone", "address", "city", "postal_code", "country", "full_name")


def address(value: Any) -> dict[str, str]:
    """interface.md: billing_address and shipping_address are objects with every listed field, "" when unknown."""
    given = value if isinstance(value, dict) else {}
    return {name: str(given.get(name) or "") for name in ADDRESS_FIELDS}


def payment_system(tx: TransactionRow) -> str:
    return PAYMENT_SYSTEMS.get(tx.payment_channel, DEFAULT_PAYMENT_SYSTEM)


def payment_details(tx: TransactionRow) -> dict[str, Any]:
    """interface.md: amounts as numbers, timestamps ISO 8601 with offset."""
    return {
        "amount": tx.amount,
        "total_amount": tx.amount,
        "transaction_description": tx.description,
        "transaction_time": timestamp(tx.created_at),
        "expired_time": timestamp(tx.expires_at),
        "paid_time": timestamp(tx.paid_at),
    }


def refund_history(refunds: Sequence[RefundRow]) -> list[dict[str, Any]]:
    return [{"refund_time": timestamp(r.refunded_at), "refund_amount": r.amount} for r in refunds]


def void_history(tx: TransactionRow) -> list[dict[str, Any]]:
    return [{"void_time": timestamp(tx.voided_at), "void_amount": tx.amount}]


def transaction_fields(tx: TransactionRow) -> dict[str, Any]:
    """Who and what the transaction is: the fields the callback and every wallet answer begin with."""
    return {
        "transaction_id": tx.id,
        "external_id": tx.external_id,
        "order_id": tx.order_id,
        "merchant_id": tx.merchant_id,
        "reference_id": tx.reference_id,
        "currency": tx.currency,
        "payment_method": PAYMENT_METHOD,
        "payment_channel": tx.payment_channel,
        "payment_system": payment_system(tx),
        "transaction_status": tx.status,
    }


def _response(tx: TransactionRow) -> tuple[str, str]:
    if tx.status == WalletStatus.FAILED.value:
        return "03", tx.failure_reason or DEFAULT_FAILURE_REASON  # interface.md Events rule 2
    return "00", SUCCESS_MESSAGE


def callback_payload(tx: TransactionRow, refunds: Sequence[RefundRow]) -> dict[str, Any]:
    """interface.md: the wallet callback payload, every field, filled from the transaction."""
    details: dict[str, Any] = json.loads(tx.details)
    status = WalletStatus(tx.status)
    paid = status is WalletStatus.PAID
    qris = tx.payment_channel == QR_CHANNEL
    customer = details["customer_details"]
    response_code, response_message = _response(tx)
    wallet = details.get("wallet_details") or {"id": customer["phone"], "id_type": "HP"}
    payload: dict[str, Any] = {
        **transaction_fields(tx),
        "payment_details": payment_details(tx),
        "customer_details": {
            "phone": customer["phone"],
            "email": customer["email"],
            "full_name": customer["full_name"],
        },
        "item_details": [
            {
                "item_id": item["item_id"],
                "name": item["name"],
                "amount": item["amount"],
                "qty": item["qty"],
                "description": item.get("description") or "",
            }
            for item in details["item_details"]
        ],
        "billing_address": address(details.get("billing_address")),
        "shipping_address": address(details.get("shipping_address")),
        "response_code": response_code,
        "response_message": response_message,
        "additional_data": details.get("additional_data") or "",
        "wallet_details": {"id": wallet["id"], "id_type": wallet["id_type"]},
        "terminal_id": tx.terminal_id or "",
        "payer_name": customer["full_name"] if tx.paid_at is not None else "",
    }
    # Fields the interface shows only in some callbacks are absent from the others.
    if paid:
        payload["issuer"] = tx.issuer or ""
        if qris:
            payload["acquirer_issuer_relation"] = "on_us" if tx.issuer == QR_ON_US_ISSUER else "off_us"
            payload["retrieval_reference_no"] = tx.retrieval_reference_no or ""
    if qris:
        payload["payer_number"] = wallet["id"] if tx.paid_at is not None else ""
    if status is WalletStatus.REFUNDED:
        payload["refund_history"] = refund_history(refunds)
    if status is WalletStatus.VOID:
        payload["void_history"] = void_history(tx)
    return payload


def transaction_body(tx: TransactionRow, refunds: Sequence[RefundRow]) -> dict[str, Any]:
    """The answer of create-payment, create-qr, inquiry, refund and void (after response_code)."""
    body: dict[str, Any] = {
        "response_code": "00",
        "response_message": SUCCESS_MESSAGE,
        **transaction_fields(tx),
        "amount": tx.amount,
        "refunded_amount": tx.refunded_amount,
        "transaction_time": timestamp(tx.created_at),
        "expired_time": timestamp(tx.expires_at),
        "paid_time": timestamp(tx.paid_at),
        "payment_details": payment_details(tx),
        "payment_url": payment_url(tx),
    }
    if tx.qr_string is not None:
        body["qr_string"] = tx.qr_string
        body["qr_url"] = qr_url(tx)
    if tx.status == WalletStatus.FAILED.value:
        body["failure_reason"] = tx.failure_reason or DEFAULT_FAILURE_REASON
    if refunds:
        body["refund_history"] = refund_history(refunds)
    if tx.status == WalletStatus.VOID.value:
        body["void_history"] = void_history(tx)
    return body


__all__ = [
    "CreatePaymentRequest",
    "WalletService",
    "callback_payload",
    "payment_url",
    "qr_url",
    "transaction_body",
    "wallet_service",
]
