"""Payment-link rules (docs/decisions.md §10): create, the merchant's read, and the wire bodies.

KasirError
├── BadRequest                            01  400
│   └── InvalidFieldFormat
│       ├── AmountMismatch                Σ item amount × qty ≠ amount
│       ├── ExpiryOutOfRange              expired_time outside 1 minute … 30 days
│       └── (kasir.links.schemas)         selected_channels[i].channel / .acq not in §10.3
├── FeatureNotAllowed
│   └── UnknownSubMerchant (the VA's)     04  403
├── NotFound
│   └── LinkNotFound                      02  404  unknown, or another merchant's
└── Conflict                              03  409
    ├── DuplicateExternalId               external_id already used by a payment of this merchant
    ├── ChannelSwitchedOff                selected_channels[i].channel: its product or channel has no processor
    └── LinkStateRefused (states.py)      the link has ended (SUCCESS, EXPIRED)
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from kasir.callbacks.ssrf import check_callback_url
from kasir.card.dialect import CHANNELS as CARD_DIALECT_CHANNELS
from kasir.card.service import LinkCardOrder, card_service
from kasir.config import get_settings
from kasir.db import Database, Session
from kasir.errors import Conflict, InvalidFieldFormat, NotFound
from kasir.kit.clock import JAKARTA, clock, isoformat_seconds
from kasir.kit.ids import new_id
from kasir.kit.logs import annotate_request
from kasir.links.repository import AttemptRow, LinkRow, link_repository
from kasir.links.schemas import CARD, QRIS, VA, CreateLinkRequest, SelectedChannel, parse_channels
from kasir.links.states import AttemptStatus, LinkStatus
from kasir.merchants.repository import MerchantRow
from kasir.merchants.service import merchant_service
from kasir.payments import metrics as payment_metrics
from kasir.processors.registry import processor_for, require
from kasir.va.banks import CHANNELS as VA_CHANNELS
from kasir.va.repository import VaRow
from kasir.va.schemas import CreateVaRequest
from kasir.va.service import va_service
from kasir.wallet.schemas import CreatePaymentRequest
from kasir.wallet.service import CallbackUrlMissing, timestamp, wallet_service

log = logging.getLogger("kasir.links")

CURRENCY = "IDR"
SUCCESS_MESSAGE = "Success"
DEFAULT_EXPIRY = timedelta(hours=24)  # the provider's sample
MIN_EXPIRY = timedelta(minutes=1)
MAX_EXPIRY = timedelta(days=30)
WALLET_EXPIRY = timedelta(minutes=15)  # §5's default: a link's wallet transaction that lapses is not a failure
NO_PHONE = "000000"  # a QRIS attempt of a customer who gave no phone: the wallet's field is required
_ADDRESS_FIELDS = ("full_name", "phone", "address", "city", "postal_code", "country")
_DETAILS = ("customer_details", "item_details", "billing_address", "shipping_address", "additional_data")

# How each method is reported in the payment-page callback (§10.5's override for links).
METHOD_CARD = "CARD"
METHOD_WALLET = "WALLET"
METHOD_VA = "VIRTUAL_ACCOUNT"


class AmountMismatch(InvalidFieldFormat):
    def __init__(self) -> None:
        super().__init__("amount", "must equal the sum of item_details amount × qty")


class ExpiryOutOfRange(InvalidFieldFormat):
    def __init__(self) -> None:
        super().__init__("expired_time", "must be between 1 minute and 30 days from now")


class LinkNotFound(NotFound):
    default_message = "Data Not Found"


class DuplicateExternalId(Conflict):
    def __init__(self) -> None:
        super().__init__(
            "external_id is already used by another payment of this merchant (a payment link, a VA, a wallet "
            "transaction or a card order)",
            field="external_id",
        )


class ChannelSwitchedOff(Conflict):
    def __init__(self, index: int, channel: str) -> None:
        field = f"selected_channels[{index}].channel"
        super().__init__(f"Failed Request: {field} {channel} is not available on this deployment", field=field)


def product_of(entry: SelectedChannel) -> tuple[str, str]:
    """The product and processor channel that serve an entry (§10.3): a card acquirer channel (BCAPG is
    charged on BCACC), a wallet channel, the VA bank's channel."""
    assert entry.acq is not None
    if entry.channel == CARD:
        return "card", CARD_DIALECT_CHANNELS.get(entry.acq, entry.acq)
    if entry.channel == VA:
        return "va", VA_CHANNELS[entry.acq]
    return "wallet", entry.channel


def method_of(entry: SelectedChannel) -> str:
    if entry.channel == CARD:
        return METHOD_CARD
    if entry.channel == VA:
        return METHOD_VA
    return METHOD_WALLET


@dataclass(frozen=True, slots=True)
class LinkPlan:
    """A checked create request: everything the link will be."""

    request: CreateLinkRequest
    channels: list[SelectedChannel]
    callback_url: str
    created_at: datetime
    expires_at: datetime
    sub_merchant_id: str | None


class LinkService:
    async def check_callback_url(self, merchant: MerchantRow, url: str | None) -> None:
        """The callback URL the link will use, checked before its unit of work (DNS in production)."""
        callback_url = url or merchant.callback_url
        if callback_url:
            await check_callback_url(callback_url, production=get_settings().is_production, field="callback_url")

    def plan(self, merchant: MerchantRow, request: CreateLinkRequest, sub_merchant_id: str | None) -> LinkPlan:
        """Check the request against §10.1 and §10.3 (everything that needs no database)."""
        channels = parse_channels(request.selected_channels)
        items = request.item_details
        if items and sum(item.amount * item.qty for item in items) != request.amount:
            raise AmountMismatch()
        now = clock.now()
        expires_at = request.expired_time or now + DEFAULT_EXPIRY
        if not MIN_EXPIRY <= expires_at - now <= MAX_EXPIRY:
            raise ExpiryOutOfRange()
        callback_url = request.callback_url or merchant.callback_url
        if not callback_url:
            raise CallbackUrlMissing()
        for index, entry in enumerate(channels):
            product, channel = product_of(entry)
            if processor_for(product, channel) is None:  # type: ignore[arg-type]
                raise ChannelSwitchedOff(index, entry.channel)
        return LinkPlan(request, channels, callback_url, now, expires_at.astimezone(UTC), sub_merchant_id)

    async def open(self, session: Session, merchant: MerchantRow, plan: LinkPlan) -> LinkRow:
        """The PENDING link, in the request's unit of work."""
        request = plan.request
        link = LinkRow(
            id=new_id("PPL", 20),
            merchant_id=merchant.id,
            sub_merchant_id=plan.sub_merchant_id,
            external_id=request.external_id,
            order_id=request.order_id,
            amount=request.amount,
            description=request.description,
            status=LinkStatus.PENDING.value,
            is_customer_paying_fee=request.is_customer_paying_fee,
            save_card=request.save_card,
            callback_url=plan.callback_url,
            success_redirect_url=request.success_redirect_url,
            failed_redirect_url=request.failed_redirect_url,
            channels=json.dumps([{"channel": e.channel, "acq": e.acq} for e in plan.channels]),
            details=json.dumps(request.model_dump(include=set(_DETAILS)), ensure_ascii=False),
            attempts_failed=0,
            payment_method=None,
            payment_channel=None,
            acq=None,
            response_message=None,
            card_token=None,
            created_at=plan.created_at,
            expires_at=plan.expires_at,
            open_until=plan.expires_at,
            paid_at=None,
            updated_at=plan.created_at,
        )
        if not await link_repository.add(session, link):
            raise DuplicateExternalId()
        payment_metrics.created(session, "link", LinkStatus.PENDING.name)
        annotate_request(transaction_id=link.id, merchant_id=merchant.id)
        return link

    # --- lookups ---------------------------------------------------------------------

    async def get(self, session: Session, link_id: str, *, lock: bool = False) -> LinkRow:
        link = await link_repository.get(session, link_id, lock=lock)
        if link is None:
            raise LinkNotFound()
        return link

    async def find(self, session: Session, merchant: MerchantRow, link_id: str) -> LinkRow:
        """The merchant's link (another merchant's is `02`, as an unknown one)."""
        link = await link_repository.get(session, link_id)
        if link is None or link.merchant_id != merchant.id:
            raise LinkNotFound()
        return link


link_service = LinkService()


# --- wire bodies --------------------------------------------------------------------------


def envelope(data: dict[str, Any]) -> dict[str, Any]:
    return {"response_code": "00", "response_message": SUCCESS_MESSAGE, "data": data}


def payment_url(link_id: str) -> str:
    return f"{get_settings().public_url}/payment-page/pages/{link_id}"


def channels_of(link: LinkRow) -> list[SelectedChannel]:
    return [SelectedChannel(**entry) for entry in json.loads(link.channels)]


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _address(value: Any) -> dict[str, str]:
    given = value if isinstance(value, dict) else {}
    return {name: _text(given.get(name)) for name in _ADDRESS_FIELDS}


def sent(link: LinkRow) -> dict[str, Any]:
    """What the create request sent besides the link's columns: customer, items, addresses, additional data."""
    details: dict[str, Any] = json.loads(link.details)
    customer = details.get("customer_details") or {}
    return {
        "customer_details": {
            "full_name": _text(customer.get("full_name")),
            "email": _text(customer.get("email")),
            "phone": _text(customer.get("phone")),
            "address": _text(customer.get("address")),
            "is_email_show": bool(customer.get("is_email_show", True)),
            "is_phone_show": bool(customer.get("is_phone_show", True)),
        },
        "item_details": [
            {
                "item_id": item["item_id"],
                "name": item["name"],
                "amount": item["amount"],
                "qty": item["qty"],
                "description": _text(item.get("description")),
            }
            for item in details.get("item_details") or []
        ],
        "billing_address": _address(details.get("billing_address")),
        "shipping_address": _address(details.get("shipping_address")),
        "additional_data": _text(details.get("additional_data")),
    }


def created_data(link: LinkRow) -> dict[str, Any]:
    """`data` of create (§10.2)."""
    return {
        "transaction_id": link.id,
        "external_id": link.external_id,
        "order_id": link.order_id,
        "currency": CURRENCY,
        "amount": link.amount,
        "description": link.description,
        "transaction_status": link.status,
        "payment_url": payment_url(link.id),
        "transaction_time": timestamp(link.created_at),
        "expired_time": timestamp(link.expires_at),
        "selected_channels": json.loads(link.channels),
    }


def _utc_iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def callback_payload(link: LinkRow, transaction_status: str) -> dict[str, Any]:
    """§10.5: the payment-page callback of a link, describing the attempt reported (the link's
    payment_method / payment_channel / acq / response_message columns, set by the transition)."""
    given = sent(link)
    payload: dict[str, Any] = {
        "transaction_id": link.id,
        "order_id": link.order_id,
        "external_id": link.external_id,
        "currency": CURRENCY,
        "transaction_status": transaction_status,
        "response_message": _text(link.response_message),
        "payment_method": _text(link.payment_method),
        "payment_channel": _text(link.payment_channel),
        "acq": _text(link.acq),
        "paid_date": _utc_iso(link.paid_at) if link.paid_at is not None and transaction_status == "SUCCESS" else "",
        "amount": link.amount,
        "selected_channels": json.loads(link.channels),
        "is_customer_paying_fee": link.is_customer_paying_fee,
        "item_details": given["item_details"],
        "save_card": link.save_card,
        "card_token": _text(link.card_token),
        "token": _text(link.card_token),
        "fee": 0,
        "mis_version": 3,
        "customer_details": given["customer_details"],
        "shipping_address": given["shipping_address"],
        "billing_address": given["billing_address"],
        "callback_url": link.callback_url,
        "success_redirect_url": _text(link.success_redirect_url),
        "failed_redirect_url": _text(link.failed_redirect_url),
        "expired_time": isoformat_seconds(link.expires_at, JAKARTA),
    }
    if link.sub_merchant_id:
        payload["sub_merchant_id"] = link.sub_merchant_id
    return payload


def link_data(link: LinkRow) -> dict[str, Any]:
    """`data` of `GET /payment-page/payment/{transaction_id}` (§10.2): the link as it is now. A PENDING link
    past its expired_time is EXPIRED for every purpose, before the worker records it."""
    status = link.status
    if status == LinkStatus.PENDING.value and link.expires_at <= clock.now():
        status = LinkStatus.EXPIRED.value
    return {
        **callback_payload(link, status),
        "payment_url": payment_url(link.id),
        "description": link.description,
        "transaction_time": timestamp(link.created_at),
        "additional_data": sent(link)["additional_data"],
    }


# --- the customer's choice (§10.4) -------------------------------------------------------------------


class ChoiceRefused(InvalidFieldFormat):
    """The page's form named no method the link offers."""


@dataclass(frozen=True, slots=True)
class Choice:
    """What the customer chose: one of the link's entries (and, for a wallet, the wallet account)."""

    entry: SelectedChannel
    wallet_id: str | None


def choice_of(link: LinkRow, channel: str, acq: str, wallet_id: str) -> Choice:
    """The entry the form names (any letter case; a CARD's acq may be absent: the first CARD entry serves)."""
    channel, acq = channel.strip().upper(), acq.strip().upper()
    for entry in channels_of(link):
        if entry.channel == channel and (acq in ("", entry.acq) or channel == CARD):
            return Choice(entry, wallet_id.strip() or None)
    raise ChoiceRefused("channel", "is not a method this payment link offers")


def va_external_id(link: LinkRow, entry: SelectedChannel) -> str:
    """The link's VA of one bank: one per (link, entry), so coming back to the same bank meets the same VA."""
    return f"{link.id}-{entry.acq}"


def va_request(link: LinkRow, entry: SelectedChannel) -> CreateVaRequest:
    """A single-use CLOSED VA for the link's amount, expiring with it (§10.3)."""
    customer = sent(link)["customer_details"]
    body: dict[str, Any] = {
        "external_id": va_external_id(link, entry),
        "order_id": link.order_id,
        "currency": CURRENCY,
        "payment_method": "bank_transfer",
        "payment_channel": entry.acq,
        "payment_details": {
            "billing_name": customer["full_name"][:100],
            "transaction_description": link.description[:100],
            "payment_system": "CLOSED",
            "is_multi_use": False,
            "amount": link.amount,
            "expired_time": timestamp(link.expires_at),
        },
        "customer_details": {"email": customer["email"], "full_name": customer["full_name"][:100]},
        "callback_url": link.callback_url,
    }
    if customer["phone"]:
        body["customer_details"]["phone"] = customer["phone"][:18]
    return CreateVaRequest.model_validate(body)


def wallet_request(link: LinkRow, entry: SelectedChannel, number: int, wallet_id: str | None) -> CreatePaymentRequest:
    """A wallet transaction (or dynamic QR) for the link's amount (§10.3), within the link's expiry."""
    given = sent(link)
    customer = given["customer_details"]
    items = given["item_details"] or [
        {"item_id": link.order_id, "name": link.description, "amount": link.amount, "qty": 1}
    ]
    expires_at = min(clock.now() + WALLET_EXPIRY, link.expires_at)
    # The wallet takes a phone on every transaction: the customer's, else the wallet account's, else none known.
    phone = customer["phone"] or wallet_id or NO_PHONE
    body: dict[str, Any] = {
        "external_id": f"{link.id}-{number}",
        "order_id": link.order_id,
        "currency": CURRENCY,
        "payment_method": "wallet",
        "payment_channel": entry.channel,
        "payment_details": {
            "amount": link.amount,
            "transaction_description": link.description,
            "expired_time": timestamp(expires_at),
        },
        "customer_details": {"email": customer["email"], "full_name": customer["full_name"], "phone": phone},
        "item_details": [
            {"item_id": item["item_id"][:64], "name": item["name"][:128], "amount": item["amount"], "qty": item["qty"]}
            for item in items
        ],
        "callback_url": link.callback_url,
        "return_url": payment_url(link.id),
    }
    if entry.channel != QRIS:
        body["wallet_details"] = {"id": wallet_id or phone, "id_type": "HP"}
    return CreatePaymentRequest.model_validate(body)


def card_order_of(link: LinkRow, entry: SelectedChannel, number: int) -> LinkCardOrder:
    """The link's card order (§10.3): OPEN, full payment, on the entry's channel (BCAPG is charged on BCACC)."""
    given = sent(link)
    customer = given["customer_details"]
    _product, channel = product_of(entry)
    details: dict[str, Any] = {
        "paymentDetails": {
            "amount": link.amount,
            "isCustomerPayingFee": link.is_customer_paying_fee,
            "transactionDescription": link.description,
        },
        "itemDetails": [
            {"itemId": item["item_id"], "name": item["name"], "amount": item["amount"], "qty": item["qty"]}
            for item in given["item_details"]
        ],
        "customerDetails": {"email": customer["email"], "fullName": customer["full_name"], "phone": customer["phone"]},
    }
    return LinkCardOrder(
        link_id=link.id,
        reference=f"{link.id}-{number}",
        shown_order_id=link.order_id,
        offers_save_card=link.save_card,
        channel=channel,
        amount=link.amount,
        details=details,
        return_url=payment_url(link.id),
        expires_at=link.expires_at,
    )


async def open_attempt(session: Session, link: LinkRow, entry: SelectedChannel, inner_id: str) -> AttemptRow:
    now = clock.now()
    attempt = AttemptRow(
        id=0,
        link_id=link.id,
        number=await link_repository.next_number(session, link.id),
        method=method_of(entry),
        channel=entry.channel,
        acq=entry.acq or entry.channel,
        inner_id=inner_id,
        status=AttemptStatus.OPEN.value,
        reason=None,
        created_at=now,
        updated_at=now,
    )
    await link_repository.add_attempt(session, attempt)
    return attempt


async def open_attempt_for(session: Session, link: LinkRow, entry: SelectedChannel) -> AttemptRow | None:
    """The link's open attempt by this entry, to come back to (the same VA bank shows the same VA, the card
    page its order, the same wallet its transaction while open); None when there is none."""
    for attempt in reversed(await link_repository.attempts(session, link.id)):
        if AttemptStatus(attempt.status) is not AttemptStatus.OPEN:
            continue
        if attempt.method == method_of(entry) == METHOD_CARD or (
            attempt.channel == entry.channel and attempt.acq == (entry.acq or entry.channel)
        ):
            return attempt
    return None


def payable(link: LinkRow) -> bool:
    """PENDING and not past its expired_time (then EXPIRED for every purpose, before the worker records it)."""
    return link.status == LinkStatus.PENDING.value and link.expires_at > clock.now()


def page_path(link_id: str) -> str:
    return f"/payment-page/pages/{link_id}"


def attempt_path(attempt: AttemptRow) -> str:
    """Where an attempt's customer pays: the card page, the VA's instructions, the wallet's checkout or QR."""
    if attempt.method == METHOD_CARD:
        return f"/card/pages/{attempt.inner_id}"
    if attempt.method == METHOD_VA:
        return f"{page_path(attempt.link_id)}/va"
    return f"/ewallet/pages/{attempt.inner_id}"


class LinkPages:
    """What the customer's pages ask (§10.4): each opens its own units of work (a VA's number comes from its
    issuer, between them: the network never runs inside a unit)."""

    async def choose(self, database: Database, link_id: str, choice_form: dict[str, str]) -> str:
        """The method the customer chose: its inner payment made (or the open one found again); where to go."""
        async with database.unit_of_work(read_only=True) as session:
            link = await link_service.get(session, link_id)
            merchant = await merchant_service.get(session, link.merchant_id)
            if not payable(link):
                return page_path(link.id)
            choice = choice_of(
                link, choice_form.get("channel", ""), choice_form.get("acq", ""), choice_form.get("wallet_id", "")
            )
            entry = choice.entry
            found = await open_attempt_for(session, link, entry)
        if found is not None:
            return attempt_path(found)
        product, channel = product_of(entry)
        require(product, channel)  # type: ignore[arg-type]  # switched off since the link was made: 03
        va_plan = number = None
        if entry.channel == VA:
            va_plan = va_service.plan(merchant, va_request(link, entry), None)
            number = await va_service.number_for(database, va_plan)  # the issuer: before the unit of work
        async with database.unit_of_work() as session:
            link = await link_service.get(session, link_id, lock=True)
            if not payable(link):
                return page_path(link.id)
            found = await open_attempt_for(session, link, entry)
            if found is not None:  # another tab chose it meanwhile
                return attempt_path(found)
            number_of_attempt = await link_repository.next_number(session, link.id)
            if va_plan is not None and number is not None:
                inner_id = (await va_service.open(session, merchant, va_plan, number, link_id=link.id)).id
            elif entry.channel == CARD:
                order = await card_service.open_for_link(
                    session, merchant, card_order_of(link, entry, number_of_attempt)
                )
                inner_id = order.id
            else:
                request = wallet_request(link, entry, number_of_attempt, choice.wallet_id)
                tx = await wallet_service.create_payment(
                    session, merchant, request, qr=entry.channel == QRIS, link_id=link.id
                )
                inner_id = tx.id
            attempt = await open_attempt(session, link, entry, inner_id)
            annotate_request(transaction_id=link.id, merchant_id=link.merchant_id)
        return attempt_path(attempt)

    async def open_va(self, session: Session, link: LinkRow) -> tuple[AttemptRow, VaRow] | None:
        """The link's open VA attempt (the newest) and its VA, or None."""
        for attempt in reversed(await link_repository.attempts(session, link.id)):
            if attempt.method == METHOD_VA and AttemptStatus(attempt.status) is AttemptStatus.OPEN:
                return attempt, await va_service.get(session, attempt.inner_id)
        return None

    async def pay_va(self, session: Session, link_id: str, va_id: str) -> LinkRow:
        """Staging: the link's VA paid exactly its amount, as /va/dummy-payment would (`03` when refused)."""
        va = await va_service.get(session, va_id, lock=True)
        if va.link_id != link_id:
            raise LinkNotFound()
        await va_service.pay(session, va, None)
        return await link_service.get(session, link_id, lock=True)


link_pages = LinkPages()
