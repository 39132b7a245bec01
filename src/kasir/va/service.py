"""Virtual-account rules (docs/decisions.md §9): create, inquiry, cancel, payments, expiry.

    KasirError
    ├── BadRequest                            01  400
    │   └── InvalidFieldFormat
    │       ├── AmountOutOfRange              payment_details.amount outside the channel limits (CLOSED, PARTIAL)
    │       ├── AmountMismatch (the wallet's) Σ item amount × qty ≠ payment_details.amount (CLOSED, PARTIAL)
    │       ├── ExpiryOutOfRange              payment_details.expired_time outside 1 minute … 3650 days
    │       └── TooManyChosenDigits           payment_details.va_number longer than the bank allows
    ├── FeatureNotAllowed
    │   └── UnknownSubMerchant                04  403  sub-merchant-id is not one of the merchant's
    ├── NotFound
    │   └── VaNotFound                        02  404
    └── Conflict                              03  409
        ├── DuplicateExternalId               external_id already used by another VA of this merchant
        ├── NumberTaken                       the chosen va_number is another open VA's at that bank
        └── VaStateRefused (states.py)        the VA is closed (PAID single-use, EXPIRED, CANCELLED)
            └── PaymentRefused                an amount §9.3 refuses, or a VA past its expired_time

Every payment and every move into EXPIRED or CANCELLED records one VA callback in the same unit of
work (the wallet callback's sibling: svc-signature in the header and the query, kasir.callbacks).
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from kasir.callbacks.models import CallbackKind
from kasir.callbacks.service import SignedIds, callback_outbox
from kasir.callbacks.ssrf import check_callback_url
from kasir.config import get_settings
from kasir.db import Database, Session, on_commit
from kasir.errors import Conflict, FeatureNotAllowed, InvalidFieldFormat, InvalidMandatoryField, NotFound
from kasir.kit.clock import clock
from kasir.kit.ids import new_id
from kasir.kit.logs import annotate_request
from kasir.merchants.repository import MerchantRow
from kasir.merchants.service import merchant_service
from kasir.payments import metrics as payment_metrics
from kasir.payments import owners
from kasir.payments.owners import InnerEvent, InnerOutcome
from kasir.processors.protocols import VaOpening
from kasir.processors.registry import va_issuer
from kasir.va.banks import AMOUNT_MAX, CHANNELS, bank_of
from kasir.va.repository import PaymentRow, VaRow, va_repository
from kasir.va.schemas import PAYMENT_METHOD, CreateVaRequest, VaReference
from kasir.va.states import VaStateRefused, VaStatus, is_open, transition
from kasir.wallet.service import AmountMismatch, CallbackUrlMissing, timestamp  # the same refusals and times

log = logging.getLogger("kasir.va")

CURRENCY = "IDR"
SUCCESS_MESSAGE = "Success"
MIN_EXPIRY = timedelta(minutes=1)
MAX_EXPIRY = timedelta(days=3650)
SINGLE_USE_EXPIRY = timedelta(hours=24)  # single-use VAs and PARTIAL
MULTI_USE_EXPIRY = timedelta(days=3650)  # the provider's "10 years"
NUMBER_DRAWS = 5  # a drawn number that another open VA holds is drawn again, this many times at most
_ADDRESS_FIELDS = ("full_name", "phone", "address", "city", "postal_code", "country")
_DETAILS = ("customer_details", "item_details", "billing_address", "shipping_address", "additional_data")


# --- errors ----------------------------------------------------------------------------


class AmountOutOfRange(InvalidFieldFormat):
    def __init__(self, minimum: int) -> None:
        super().__init__("payment_details.amount", f"must be from {minimum} to {AMOUNT_MAX} for this payment_channel")


class ExpiryOutOfRange(InvalidFieldFormat):
    def __init__(self) -> None:
        super().__init__("payment_details.expired_time", "must be between 1 minute and 3650 days from now")


class TooManyChosenDigits(InvalidFieldFormat):
    def __init__(self, limit: int) -> None:
        super().__init__("payment_details.va_number", f"must be 1 to {limit} digits for this payment_channel")


class UnknownSubMerchant(FeatureNotAllowed):
    def __init__(self) -> None:
        super().__init__("sub-merchant-id is not a sub-merchant of this merchant", field="sub-merchant-id")


class VaNotFound(NotFound):
    default_message = "Data Not Found"


class DuplicateExternalId(Conflict):
    def __init__(self) -> None:
        super().__init__(
            "external_id is already used by another payment of this merchant (a VA, a wallet transaction or a card "
            "order)",
            field="external_id",
        )


class NumberTaken(Conflict):
    def __init__(self) -> None:
        super().__init__(
            "payment_details.va_number is the number of another open virtual account of this bank",
            field="payment_details.va_number",
        )


class PaymentRefused(VaStateRefused):
    pass


# --- creation ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VaPlan:
    """A checked create request: everything the VA will be but its number (the issuer's)."""

    transaction_id: str
    request: CreateVaRequest
    bank: str
    payment_system: str
    is_multi_use: bool
    amount: int
    callback_url: str
    expires_at: datetime
    created_at: datetime
    sub_merchant_id: str | None

    def opening(self, draw: int) -> VaOpening:
        details = self.request.payment_details
        return VaOpening(
            reference=self.transaction_id,
            channel=self.request.payment_channel,
            bank=self.bank,
            payment_system=self.payment_system,
            chosen_digits=details.va_number,
            amount=self.amount,
            billing_name=details.billing_name,
            expires_at=self.expires_at,
            draw=draw,
        )


def transaction_id_of(merchant_id: str, external_id: str) -> str:
    """`VA` and 20 characters A–Z 0–9, the same for the same merchant and external_id: a retried create asks
    the issuer with the same reference (the issuer is idempotent by it), and a reused external_id meets
    its first VA's row."""
    digest = hashlib.sha256(f"kasir-va\0{merchant_id}\0{external_id}".encode()).digest()
    return "VA" + base64.b32encode(digest).decode()[:20]  # A-Z and 2-7; the padding is past the 20th


class VaService:
    async def check_callback_url(self, merchant: MerchantRow, url: str | None) -> None:
        """The callback URL the VA will use, checked before its unit of work (DNS in production)."""
        callback_url = url or merchant.callback_url
        if callback_url:
            await check_callback_url(callback_url, production=get_settings().is_production, field="callback_url")

    def plan(self, merchant: MerchantRow, request: CreateVaRequest, sub_merchant_id: str | None) -> VaPlan:
        """Check the request against §9.3 and §9.4 (everything that needs no database); `01` otherwise."""
        details = request.payment_details
        system = details.payment_system
        bank = CHANNELS[request.payment_channel]
        if system == "PARTIAL":
            multi_use = True  # ignored, answered true
        elif details.is_multi_use is not None:
            multi_use = details.is_multi_use
        else:
            multi_use = system == "OPEN"
        if system == "OPEN":
            amount = details.amount or 0
        else:
            if details.amount is None:
                raise InvalidMandatoryField("payment_details.amount")
            amount = details.amount
            minimum = bank_of(bank).amount_min
            if not minimum <= amount <= AMOUNT_MAX:
                raise AmountOutOfRange(minimum)
            items = request.item_details
            if items and sum(item.amount * item.qty for item in items) != amount:
                raise AmountMismatch()
        chosen_max = bank_of(bank).chosen_digits_max
        if details.va_number is not None and len(details.va_number) > chosen_max:
            raise TooManyChosenDigits(chosen_max)
        now = clock.now()
        long_lived = multi_use and system != "PARTIAL"
        expires_at = details.expired_time or now + (MULTI_USE_EXPIRY if long_lived else SINGLE_USE_EXPIRY)
        if not MIN_EXPIRY <= expires_at - now <= MAX_EXPIRY:
            raise ExpiryOutOfRange()
        callback_url = request.callback_url or merchant.callback_url
        if not callback_url:
            raise CallbackUrlMissing()
        return VaPlan(
            transaction_id=transaction_id_of(merchant.id, request.external_id),
            request=request,
            bank=bank,
            payment_system=system,
            is_multi_use=multi_use,
            amount=amount,
            callback_url=callback_url,
            expires_at=expires_at,
            created_at=now,
            sub_merchant_id=sub_merchant_id,
        )

    async def check_sub_merchant(self, database: Database, merchant_id: str, sub_merchant_id: str | None) -> None:
        if sub_merchant_id is None:
            return
        async with database.unit_of_work(read_only=True) as session:
            if not await merchant_service.has_sub_merchant(session, merchant_id, sub_merchant_id):
                raise UnknownSubMerchant()

    async def number_for(self, database: Database, plan: VaPlan) -> str:
        """The VA's number, from its issuer, asked outside any unit of work (it is the network). A drawn
        number another open VA holds is drawn again; a chosen one is `03`. The INSERT's unique constraint
        decides any race left."""
        issuer = va_issuer(plan.bank)  # an alias (BCA-MCP) goes to its bank's issuer
        for draw in range(NUMBER_DRAWS):
            number = await issuer.create(plan.opening(draw))
            async with database.unit_of_work(read_only=True) as session:
                holder = await va_repository.number_holder(session, plan.bank, number)
            if holder is None or holder == plan.transaction_id:  # free, or this very VA's (a retry)
                return number
            if plan.request.payment_details.va_number is not None:
                raise NumberTaken()
        raise NumberTaken()

    async def open(
        self, session: Session, merchant: MerchantRow, plan: VaPlan, number: str, *, link_id: str | None = None
    ) -> VaRow:
        """The PENDING VA, in the request's unit of work (`link_id`: a payment link's, kasir.payments.owners)."""
        request = plan.request
        va = VaRow(
            id=plan.transaction_id,
            merchant_id=merchant.id,
            sub_merchant_id=plan.sub_merchant_id,
            external_id=request.external_id,
            order_id=request.order_id,
            payment_channel=request.payment_channel,
            bank=plan.bank,
            va_number=number,
            open_number=number,
            payment_system=plan.payment_system,
            is_multi_use=plan.is_multi_use,
            amount=plan.amount,
            total_paid_amount=0,
            status=VaStatus.PENDING.value,
            billing_name=request.payment_details.billing_name,
            description=request.payment_details.transaction_description,
            is_customer_paying_fee=request.payment_details.is_customer_paying_fee,
            callback_url=plan.callback_url,
            details=json.dumps(request.model_dump(include=set(_DETAILS)), ensure_ascii=False),
            created_at=plan.created_at,
            expires_at=plan.expires_at,
            open_until=plan.expires_at,
            updated_at=plan.created_at,
            link_id=link_id,
        )
        if not await va_repository.add(session, va):
            if await va_repository.external_id_taken(session, merchant.id, request.external_id):
                raise DuplicateExternalId()
            raise NumberTaken()
        payment_metrics.created(session, "va", VaStatus.PENDING.name)
        annotate_request(transaction_id=va.id, merchant_id=merchant.id)
        return va

    # --- lookups ---------------------------------------------------------------------

    async def get(self, session: Session, va_id: str, *, lock: bool = False) -> VaRow:
        va = await va_repository.get(session, va_id, lock=lock)
        if va is None:
            raise VaNotFound()
        return va

    async def find(self, session: Session, merchant: MerchantRow, ref: VaReference, *, lock: bool = False) -> VaRow:
        """The merchant's VA named by transaction_id, external_id and order_id together, of the channel when
        one is named (else `02`)."""
        va = await va_repository.get(session, ref.transaction_id, lock=lock)
        if (
            va is None
            or va.link_id is not None  # a payment link's: found through the link only (§10.3)
            or va.merchant_id != merchant.id
            or (va.external_id, va.order_id) != (ref.external_id, ref.order_id)
            or (ref.payment_channel is not None and ref.payment_channel != va.payment_channel)
        ):
            raise VaNotFound()
        return va

    async def latest_payment(self, session: Session, va_id: str) -> PaymentRow:
        """The VA's newest payment (after one was made in this unit of work)."""
        return (await va_repository.payments(session, va_id))[0]

    async def describe(self, session: Session, va: VaRow) -> dict[str, Any]:
        """The `{response_code, response_message, data}` answer of create, inquiry and cancel."""
        return envelope(va_data(va, await va_repository.payments(session, va.id)))

    # --- transitions (the caller holds the row lock: get/find with lock=True) ------------

    def check_cancel(self, va: VaRow) -> None:
        """What `cancel` refuses (`03`), checked on a copy: nothing changes (the console's confirmation step)."""
        self._refuse_if_due(va)
        transition(copy.copy(va), VaStatus.CANCELLED)

    async def cancel(self, session: Session, va: VaRow) -> VaRow:
        self._refuse_if_due(va)
        transition(va, VaStatus.CANCELLED)
        self._close(va)
        await self._changed(session, va, None)
        bank = va.bank
        reference = va.id

        async def tell_the_issuer() -> None:
            # After the commit (never inside a unit: it is the network). A failure is logged; the VA is
            # cancelled at Kasir either way, and a payment the bank takes after it is refused.
            await va_issuer(bank).cancel(reference)

        on_commit(session, tell_the_issuer)
        return va

    async def pay(
        self, session: Session, va: VaRow, amount: int | None, *, bank_reference: str | None = None
    ) -> tuple[VaRow, PaymentRow | None]:
        """One payment into the VA (§9.3). `amount` None: a CLOSED VA's own amount. With the bank's reference,
        a payment recorded before changes nothing (None), whatever the VA's state now: the bank retries a notification
        until it is answered, after the VA closed too."""
        if bank_reference is not None and await va_repository.payment_recorded(session, va.id, bank_reference):
            return va, None
        self._refuse_if_due(va)
        if not is_open(va):
            raise VaStateRefused(f"Failed Request: the virtual account is {va.status}, it takes no payment")
        paid = self._payment_amount(va, amount)
        remaining = va.amount - va.total_paid_amount - paid
        if va.payment_system == "PARTIAL" and remaining > 0:
            target = VaStatus.PARTIALLY_PAID
        else:
            target = VaStatus.PAID
        now = clock.now()
        reference_id = new_id("REF", 17)
        if not await va_repository.add_payment(session, va.id, reference_id, bank_reference, paid, now):
            return va, None
        transition(va, target)
        va.total_paid_amount += paid
        if not va.is_multi_use or (va.payment_system == "PARTIAL" and remaining == 0):
            self._close(va)
        payment = PaymentRow(reference_id, paid, now)
        await self._changed(session, va, payment)
        return va, payment

    async def expire(self, session: Session, va_id: str) -> bool:
        """The expiry job: an open VA past its expired_time → EXPIRED. False when it changed meanwhile."""
        va = await self.get(session, va_id, lock=True)
        if not is_open(va) or va.expires_at > clock.now():
            return False
        transition(va, VaStatus.EXPIRED)
        self._close(va)
        await self._changed(session, va, None)
        return True

    def _payment_amount(self, va: VaRow, amount: int | None) -> int:
        """What §9.3 lets this payment be (`03` otherwise)."""
        if va.payment_system == "CLOSED":
            if amount is not None and amount != va.amount:
                raise PaymentRefused(f"Failed Request: the payment must be exactly the amount ({va.amount})")
            return va.amount
        if amount is None:
            raise InvalidMandatoryField("amount")
        minimum = bank_of(va.bank).amount_min
        if va.payment_system == "OPEN":
            if not minimum <= amount <= AMOUNT_MAX:
                raise PaymentRefused(f"Failed Request: the payment must be from {minimum} to {AMOUNT_MAX}")
            return amount
        remainder = va.amount - va.total_paid_amount
        if amount > remainder or amount < min(minimum, remainder):
            raise PaymentRefused(
                f"Failed Request: the payment must be from {min(minimum, remainder)} to the remainder ({remainder})"
            )
        return amount

    def _refuse_if_due(self, va: VaRow) -> None:
        # Past its expired_time a VA is EXPIRED for every purpose, before the worker records it (§9.3).
        if is_open(va) and va.expires_at <= clock.now():
            raise PaymentRefused("Failed Request: the virtual account has expired")

    def _close(self, va: VaRow) -> None:
        va.open_number = None  # frees the number (§9.4)
        va.open_until = None

    async def _changed(self, session: Session, va: VaRow, payment: PaymentRow | None) -> None:
        va.updated_at = clock.now()
        await va_repository.save(session, va)
        payment_metrics.settled_in(session, "va", VaStatus(va.status).name)
        if va.link_id is not None:  # a payment link's: the link reports it (kasir.payments.owners)
            event = InnerEvent.PAID if payment is not None else InnerEvent.CLOSED
            await owners.settled(session, InnerOutcome(va.link_id, va.id, event))
            return
        await callback_outbox.record(
            session,
            kind=CallbackKind.VA,
            merchant_id=va.merchant_id,
            transaction_ref=va.id,
            event=va.status,
            url=va.callback_url,
            payload=callback_payload(va, payment),
            signed_ids=SignedIds(va.id, va.external_id, va.order_id, va.sub_merchant_id),
        )


va_service = VaService()


# --- wire bodies --------------------------------------------------------------------------


def envelope(data: dict[str, Any]) -> dict[str, Any]:
    return {"response_code": "00", "response_message": SUCCESS_MESSAGE, "data": data}


def _address(value: Any) -> dict[str, str]:
    given = value if isinstance(value, dict) else {}
    return {name: str(given.get(name) or "") for name in _ADDRESS_FIELDS}


def _sent(va: VaRow) -> dict[str, Any]:
    """What the create request sent besides the VA's columns: customer, items, addresses, additional data."""
    details: dict[str, Any] = json.loads(va.details)
    customer = details.get("customer_details") or {}
    return {
        "customer_details": {
            "email": customer.get("email") or "",
            "full_name": customer.get("full_name") or "",
            "phone": customer.get("phone") or "",
        },
        "item_details": [
            {
                "item_id": item["item_id"],
                "name": item["name"],
                "amount": item["amount"],
                "qty": item["qty"],
                "description": item.get("description") or "",
            }
            for item in details.get("item_details") or []
        ],
        "billing_address": _address(details.get("billing_address")),
        "shipping_address": _address(details.get("shipping_address")),
        "additional_data": details.get("additional_data") or "",
    }


def _identity(va: VaRow) -> dict[str, Any]:
    return {
        "transaction_id": va.id,
        "external_id": va.external_id,
        "order_id": va.order_id,
        "merchant_id": va.merchant_id,
    }


def _kind(va: VaRow) -> dict[str, Any]:
    return {
        "currency": CURRENCY,
        "payment_method": PAYMENT_METHOD,
        "payment_channel": va.payment_channel,
        "payment_system": va.payment_system,
        "transaction_status": va.status,
        "transaction_time": timestamp(va.created_at),
    }


def va_data(va: VaRow, payments: Sequence[PaymentRow]) -> dict[str, Any]:
    """`data` of create, inquiry and cancel (§9.6). A VA past its expired_time is EXPIRED for every purpose (§9.3),
    inquiry included, before the worker records it."""
    sent = _sent(va)
    kind = _kind(va)
    if is_open(va) and va.expires_at <= clock.now():
        kind["transaction_status"] = VaStatus.EXPIRED.value
    return {
        **_identity(va),
        **kind,
        "payment_details": {
            "billing_name": va.billing_name,
            "va_number": va.va_number,
            "payment_system": va.payment_system,
            "is_multi_use": va.is_multi_use,
            "amount": va.amount,
            "total_paid_amount": va.total_paid_amount,
            "remaining_amount": va.remaining_amount,
            "is_customer_paying_fee": va.is_customer_paying_fee,
            "transaction_description": va.description,
            "expired_time": timestamp(va.expires_at),
        },
        "customer_details": sent["customer_details"],
        "item_details": sent["item_details"],
        "billing_address": sent["billing_address"],
        "shipping_address": sent["shipping_address"],
        "callback_url": va.callback_url,
        "additional_data": sent["additional_data"],
        "payment_history": [
            {
                "reference_id": payment.reference_id,
                "amount": payment.amount,
                "paid_time": timestamp(payment.paid_at),
                "transaction_status": VaStatus.PAID.value,
            }
            for payment in payments
        ],
    }


def callback_payload(va: VaRow, payment: PaymentRow | None) -> dict[str, Any]:
    """§9.7: one per payment (`payment`), and one per move into EXPIRED or CANCELLED (None)."""
    sent = _sent(va)
    payload: dict[str, Any] = {
        **_identity(va),
        "reference_id": payment.reference_id if payment is not None else "",
        **_kind(va),
        "payment_details": {
            "billing_name": va.billing_name,
            "va_number": va.va_number,
            "payment_system": va.payment_system,
            "is_multi_use": va.is_multi_use,
            "amount": va.amount,
            "total_amount": payment.amount if payment is not None else 0,
            "total_paid_amount": va.total_paid_amount,
            "remaining_amount": va.remaining_amount,
            "transaction_description": va.description,
            "expired_time": timestamp(va.expires_at),
            "paid_time": timestamp(payment.paid_at) if payment is not None else "",
        },
        "customer_details": sent["customer_details"],
        "item_details": sent["item_details"],
        "billing_address": sent["billing_address"],
        "shipping_address": sent["shipping_address"],
        "response_code": "00",
        "response_message": SUCCESS_MESSAGE,
        "additional_data": sent["additional_data"],
    }
    if va.sub_merchant_id:
        payload["sub_merchant_id"] = va.sub_merchant_id
    return payload


def dummy_payment_data(va: VaRow, payment: PaymentRow) -> dict[str, Any]:
    """`data` of the dummy payment (§9.6): the payment, and the VA's state after it."""
    return {
        "transaction_id": va.id,
        "external_id": va.external_id,
        "order_id": va.order_id,
        "va_number": va.va_number,
        "reference_id": payment.reference_id,
        "amount": payment.amount,
        "paid_time": timestamp(payment.paid_at),
        "transaction_status": va.status,
    }
