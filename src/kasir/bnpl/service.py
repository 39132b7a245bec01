"""BNPL rules: payment calculation, QR checkout, approval, expiry, status inquiry.

    KasirError
    ├── InvalidFieldFormat
    │   └── AmountMismatch             400xx01 Invalid Field Format amount.value
    ├── NotFound
    │   └── BnplTransactionNotFound     404xx01
    └── Conflict
        ├── DuplicatePartnerReference   409xx01 (DuplicateReference)
        └── TransactionNotInitiated     409xx00 (states.py: only 01 may change)

Every change into 00, 05, 06 records one notification (callback outbox, kind BNPL) in the
same unit of work; the delivery engine signs it (docs/decisions.md §3.6) and sends it after commit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from functools import lru_cache
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from kasir.auth.snap import SnapCaller
from kasir.bnpl.models import amount_of, cents_of
from kasir.bnpl.pricing import (
    DEFAULT_PLANS,
    InstallmentOption,
    Plan,
    installment_options,
    plans_from_json,
    plans_to_json,
)
from kasir.bnpl.repository import TransactionRow, bnpl_repository
from kasir.bnpl.states import DESCRIPTIONS, IS_TERMINAL, NOTIFIED, BnplStatus, TransactionNotInitiated, transition
from kasir.callbacks.models import CallbackKind
from kasir.callbacks.service import SignedIds, callback_outbox
from kasir.callbacks.ssrf import check_callback_url
from kasir.config import get_settings
from kasir.db import Session
from kasir.errors import (
    DuplicateReference,
    InvalidFieldFormat,
    InvalidMandatoryField,
    NotFound,
    from_pydantic_errors,
)
from kasir.kit.clock import clock, isoformat_seconds
from kasir.kit.ids import new_id
from kasir.kit.logs import annotate_request
from kasir.kit.money import format_snap_amount
from kasir.merchants.service import merchant_service
from kasir.payments import metrics as payment_metrics
from kasir.processors.protocols import BnplApplication
from kasir.snap.headers import parse_json_body

VALIDITY = timedelta(hours=24)  # interface.md: default validity 24 hours
PAYMENT_CHANNEL = "KASIR_BNPL"
CURRENCY = "IDR"
EXPIRED_DESC = "Expired"  # docs/decisions.md §6
REJECTED_DESC = "Rejected by customer"

Model = TypeVar("Model", bound=BaseModel)


class AmountMismatch(InvalidFieldFormat):
    def __init__(self, field: str) -> None:
        super().__init__(field, "must equal the sum of itemDetails amount.value × qty")


class DuplicatePartnerReference(DuplicateReference):
    def __init__(self) -> None:
        super().__init__("Duplicate partnerReferenceNo", field="partnerReferenceNo")


class BnplTransactionNotFound(NotFound):
    pass


class UnknownTenure(InvalidFieldFormat):
    def __init__(self) -> None:
        super().__init__("tenure", "is not one of the offered installment tenures")


def parse_request(model: type[Model], body: bytes) -> Model:
    """The raw (already verified) body as `model`, or a KasirError naming every bad field."""
    data = parse_json_body(body)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise from_pydantic_errors(exc.errors()) from exc


def money(amount: Decimal) -> dict[str, str]:
    return {"value": format_snap_amount(amount), "currency": CURRENCY}


def items_total(items: Sequence[Any]) -> Decimal:
    return sum((Decimal(item.amount.value) * item.qty for item in items), Decimal("0.00"))


@lru_cache(maxsize=256)
def _plans_of(table: str) -> tuple[Plan, ...]:
    """A stored pricing table, parsed (a pure function of its JSON text, so kept: plans are frozen)."""
    return plans_from_json(json.loads(table))


@dataclass(frozen=True, slots=True)
class NewTransaction:
    """What the checkout answers of the transaction it just wrote (no ORM object on the hot path)."""

    id: str
    partner_reference_no: str
    amount: Decimal
    status: str
    status_desc: str
    created_at: datetime
    expires_at: datetime


class TransactionFields(Protocol):
    """What `transaction_body` reads: a stored transaction's row or a NewTransaction."""

    @property
    def id(self) -> str: ...
    @property
    def partner_reference_no(self) -> str: ...
    @property
    def amount(self) -> Decimal: ...
    @property
    def status(self) -> str: ...
    @property
    def status_desc(self) -> str: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def expires_at(self) -> datetime: ...


class BnplService:
    # --- pricing -------------------------------------------------------------------

    async def plans(self, session: Session, merchant_id: str) -> tuple[Plan, ...]:
        table = await bnpl_repository.plans(session, merchant_id)
        if not table:
            return DEFAULT_PLANS
        return _plans_of(table)

    async def set_pricing(self, session: Session, merchant_id: str, plans: Sequence[Plan] | None) -> None:
        """A merchant's own pricing table; None goes back to the shipped default."""
        encoded = json.dumps(plans_to_json(plans)) if plans else None
        await bnpl_repository.save_pricing(session, merchant_id, encoded, clock.now())

    async def options(self, session: Session, merchant_id: str, total: Decimal) -> list[InstallmentOption]:
        return installment_options(total, await self.plans(session, merchant_id))

    # --- payment calculation (service 90) -------------------------------------------

    async def calculate(self, session: Session, caller: SnapCaller, request: Any) -> list[InstallmentOption]:
        total = request.amount.decimal
        if items_total(request.item_details) != total:
            raise AmountMismatch("amount.value")
        return await self.options(session, caller.merchant_id, total)

    # --- QR checkout (service 92) ---------------------------------------------------

    async def check_callback_url(self, request: Any) -> None:
        """callbackUrl's check, before the checkout's unit of work opens: in production it resolves the
        host (DNS), and nothing slow may run inside a unit of work (kasir.db.sqlite)."""
        await check_callback_url(request.callback_url, production=get_settings().is_production, field="callbackUrl")

    async def checkout(self, session: Session, caller: SnapCaller, request: Any) -> NewTransaction:
        """A request whose callbackUrl passed `check_callback_url`."""
        total = request.payment_details.amount.decimal
        if items_total(request.item_details) != total:
            raise AmountMismatch("paymentDetails.amount.value")
        now = clock.now()
        details = {
            "itemDetails": [item.model_dump(by_alias=True, exclude_none=True) for item in request.item_details],
            "customerDetails": request.customer_details.model_dump(by_alias=True, exclude_none=True),
            "sellers": [s.model_dump(by_alias=True, exclude_none=True) for s in request.sellers or []],
            "additionalInfo": request.additional_info or {},
        }
        amount_cents = cents_of(total)
        tx = NewTransaction(
            id=new_id("BNPL", 24),
            partner_reference_no=request.partner_reference_no,
            amount=amount_of(amount_cents),
            status=BnplStatus.INITIATED.value,
            status_desc=DESCRIPTIONS[BnplStatus.INITIATED],
            created_at=now,
            expires_at=now + VALIDITY,
        )
        # The unique (merchant, partnerReferenceNo) refuses a duplicate, also between concurrent checkouts.
        added = await bnpl_repository.add_transaction(
            session,
            {
                "id": tx.id,
                "merchant_id": caller.merchant_id,
                "partner_reference_no": tx.partner_reference_no,
                "amount_cents": amount_cents,
                "currency": CURRENCY,
                "status": tx.status,
                "status_desc": tx.status_desc,
                "callback_url": request.callback_url,
                "channel_id": caller.channel_id,
                "details": json.dumps(details, ensure_ascii=False),
                "tenure": None,
                "created_at": now,
                "expires_at": tx.expires_at,
                "updated_at": now,
                "paid_at": None,
            },
        )
        if not added:
            raise DuplicatePartnerReference()
        payment_metrics.created(session, "bnpl", BnplStatus(tx.status).name)
        annotate_request(reference_no=tx.id, merchant_id=caller.merchant_id)
        return tx

    # --- approval (the lender's page, its notification) -------------------------------

    async def get(self, session: Session, reference_no: str, *, lock: bool = False) -> TransactionRow:
        tx = await bnpl_repository.get(session, reference_no, lock=lock)
        if tx is None:
            raise BnplTransactionNotFound()
        return tx

    async def application(self, session: Session, reference_no: str) -> BnplApplication:
        """The transaction as its lender's `checkout` takes it (the customer opened qrContent)."""
        tx = await self.get(session, reference_no)
        merchant = await merchant_service.get(session, tx.merchant_id)
        details: dict[str, Any] = json.loads(tx.details)
        return BnplApplication(
            reference=tx.id,
            partner_reference_no=tx.partner_reference_no,
            merchant_name=merchant.name,
            amount=format_snap_amount(tx.amount),
            currency=CURRENCY,
            customer_name=details.get("customerDetails", {}).get("fullName"),
            items=details.get("itemDetails", []),
            plans=[option_body(o) for o in await self.options(session, tx.merchant_id, tx.amount)],
            status=tx.status,
            status_desc=tx.status_desc,
            tenure=tx.tenure,
        )

    async def approve(self, session: Session, reference_no: str, tenure: int) -> TransactionRow:
        tx = await self.get(session, reference_no, lock=True)
        self._refuse_if_due(tx)
        offered = {option.tenure for option in await self.options(session, tx.merchant_id, tx.amount)}
        if tenure not in offered:
            raise UnknownTenure()
        transition(tx, BnplStatus.SUCCESS)
        tx.tenure = tenure
        tx.paid_at = clock.now()
        await self._changed(session, tx)
        return tx

    async def reject(self, session: Session, reference_no: str) -> TransactionRow:
        tx = await self.get(session, reference_no, lock=True)
        self._refuse_if_due(tx)
        transition(tx, BnplStatus.FAILED, REJECTED_DESC)
        await self._changed(session, tx)
        return tx

    def _refuse_if_due(self, tx: TransactionRow) -> None:
        # Past validityPeriod the transaction is as good as expired; the expiry job records 05.
        if tx.status == BnplStatus.INITIATED.value and tx.expires_at <= clock.now():
            raise TransactionNotInitiated("Transaction has expired")

    async def expire(self, session: Session, reference_no: str) -> bool:
        tx = await self.get(session, reference_no, lock=True)
        if tx.status != BnplStatus.INITIATED.value or tx.expires_at > clock.now():
            return False  # approved, rejected or expired meanwhile
        transition(tx, BnplStatus.CANCELED, EXPIRED_DESC)
        await self._changed(session, tx)
        return True

    async def _changed(self, session: Session, tx: TransactionRow) -> None:
        tx.updated_at = clock.now()
        await bnpl_repository.save(session, tx)
        if IS_TERMINAL[BnplStatus(tx.status)]:
            payment_metrics.settled_in(session, "bnpl", BnplStatus(tx.status).name)
        if BnplStatus(tx.status) in NOTIFIED:
            await callback_outbox.record(
                session,
                kind=CallbackKind.BNPL,
                merchant_id=tx.merchant_id,
                transaction_ref=tx.id,
                event=tx.status,
                url=tx.callback_url,
                payload=await self.notification_payload(session, tx),
                # Issue 26: the wallet's svc-signature with partnerReferenceNo as external id and order id.
                signed_ids=SignedIds(tx.id, tx.partner_reference_no, tx.partner_reference_no),
            )

    async def notification_payload(self, session: Session, tx: TransactionRow) -> dict[str, Any]:
        """docs/decisions.md §6: the body of a BNPL notification."""
        payload: dict[str, Any] = {
            "originalPartnerReferenceNo": tx.partner_reference_no,
            "originalReferenceNo": tx.id,
            "latestTransactionStatus": tx.status,
            "transactionStatusDesc": tx.status_desc,
            "amount": money(tx.amount),
            "tenure": tx.tenure or 0,  # a number, never null (issue 26): 0 while no tenure is chosen
        }
        additional_info: dict[str, Any] = {"paymentChannel": PAYMENT_CHANNEL}
        if tx.paid_at is not None:
            payload["paidTime"] = isoformat_seconds(tx.paid_at)
        if tx.tenure is not None:
            chosen = [o for o in await self.options(session, tx.merchant_id, tx.amount) if o.tenure == tx.tenure]
            if chosen:
                additional_info["installment"] = option_body(chosen[0])
        payload["additionalInfo"] = additional_info
        return payload

    # --- status inquiry (service 93) --------------------------------------------------

    async def inquire(self, session: Session, merchant_id: str, request: Any) -> TransactionRow:
        partner_ref, reference_no = request.original_partner_reference_no, request.original_reference_no
        if not partner_ref and not reference_no:
            raise InvalidMandatoryField("originalReferenceNo")
        tx: TransactionRow | None
        if reference_no:
            tx = await bnpl_repository.get(session, reference_no)
            if tx is not None and partner_ref and tx.partner_reference_no != partner_ref:
                tx = None
        else:
            assert partner_ref is not None
            tx = await bnpl_repository.by_partner_reference(session, merchant_id, partner_ref)
        if tx is None or tx.merchant_id != merchant_id:
            raise BnplTransactionNotFound()
        return tx


bnpl_service = BnplService()


# --- wire bodies ---------------------------------------------------------------------


def option_body(option: InstallmentOption) -> dict[str, Any]:
    return {
        "id": option.id,
        "tenure": option.tenure,
        "tenureTimeUnit": "MONTH",
        "paymentType": option.payment_type,
        "rate": option.rate,
        "amount": money(option.amount),
        "installmentAmount": money(option.installment_amount),
        "monthlyInstallment": money(option.monthly_installment),
        "totalInterest": money(option.total_interest),
        "provision": money(option.provision),
        "totalTransactionAmount": money(option.total),
    }


def page_url(tx: TransactionFields) -> str:
    return f"{get_settings().public_url}/bnpl/pages/{tx.id}"


def qr_image_url(tx: TransactionFields) -> str:
    return f"{get_settings().public_url}/bnpl/qr/{tx.id}.png"


def transaction_body(tx: TransactionFields) -> dict[str, Any]:
    """The checkout response's fields for `tx` (also the status inquiry's)."""
    body: dict[str, Any] = {
        "partnerReferenceNo": tx.partner_reference_no,
        "referenceNo": tx.id,
        "paymentChannel": PAYMENT_CHANNEL,
        "paymentDetails": {"amount": money(tx.amount), "totalAmount": money(tx.amount)},
        "qrContent": page_url(tx),
        "qrUrl": qr_image_url(tx),
        "latestTransactionStatus": tx.status,
        "transactionStatusDesc": tx.status_desc,
        "createdAt": isoformat_seconds(tx.created_at),
        "validityPeriod": isoformat_seconds(tx.expires_at),
    }
    return body
