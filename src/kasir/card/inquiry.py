"""The card inquiry of the provider SDK's dialect (its `card.inquiry`): docs/decisions.md §12.1.

    POST /card-v2/inquiry   {external_id, order_id, transaction_id}, signed as the dialect's charges

It names one card order of the merchant, made by either card API (the camelCase charge or the
dialect), and answers it as it stands, in the dialect's snake_case: every field §12.1 lists, `""`
where nothing happened yet, amounts and tenors as numbers, times as epoch milliseconds. Anything
else (another merchant's, a wallet transaction, ids that do not go together) is `02` Data Not Found.

The answer describes the order's last attempt (the paying one once paid): its card as Kasir kept
it (masked number, brand, expiry, holder's name; never the number) and its transaction code, the
dialect's ISO 8583 code (kasir.card.dialect.TRANSACTION_CODES): `00` approved, `1A` waiting for
(or refused) 3-D Secure, the decline's code when it failed, `""` before any attempt.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import SkipJsonSchema

from kasir.card.dialect import (
    CHALLENGE_REFUSED_CODE,
    DIALECT_VERSION,
    DIRECT_3DS_REFUSED,
    SUCCESS_MESSAGE,
    TRANSACTION_CODES,
    approval_code,
)
from kasir.card.repository import CardAttemptRow, CardOrderRow, card_repository
from kasir.card.schemas import Str64
from kasir.card.service import CardOrderNotFound, card_service
from kasir.card.states import CardAttemptStatus, CardOrderStatus
from kasir.db import Session
from kasir.errors import NotFound
from kasir.processors.protocols import DeclineReason

INQUIRY_PATH = "/card-v2/inquiry"

# transaction_status and message by the order's state (an open order past its expiredTime is expired).
_STATUS = {
    CardOrderStatus.PENDING: ("PENDING", "The transaction is waiting for payment."),
    CardOrderStatus.AUTHENTICATING: ("PENDING", "The transaction is waiting for payment."),
    CardOrderStatus.SUCCESS: ("PAID", "The transaction has been paid."),
    CardOrderStatus.EXPIRED: ("EXPIRED", "The transaction has expired."),
}
_BRANDS = ("VISA", "MASTERCARD", "JCB", "AMEX")
# Kasir knows no card's issuer (it keeps no BIN table): a paid card is never said to be the acquirer's own.
_OFF_US = "off_us"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class DialectOrderNotFound(NotFound):
    """02 Data Not Found (docs/decisions.md §12.1: the family's not-found code)."""

    def __init__(self) -> None:
        super().__init__("Data Not Found", field="transaction_id")


# --- the request and the answer, as the wire has them ------------------------------------------


class CardInquiryRequest(BaseModel):
    """The SDK's inquiry body (pg/card/models/inquiry.ts `BodyInquiry`): all three required."""

    external_id: Str64
    order_id: Str64
    transaction_id: Str64


class CardInquiryPaymentDetails(BaseModel):
    amount: int
    fee_amount: int
    total_amount: int
    is_customer_paying_fee: bool
    expired_time: int  # epoch milliseconds
    transaction_description: str
    # Absent until paid (never null on the wire).
    paid_time: int | SkipJsonSchema[None] = None  # epoch milliseconds
    total_paid_amount: int | SkipJsonSchema[None] = None


class CardInquiryItem(BaseModel):
    item_id: str
    name: str
    amount: int
    qty: int
    description: str


class CardInquiryCustomer(BaseModel):
    full_name: str
    email: str
    phone: str
    ip_address: str


class CardInquiryAddress(BaseModel):
    full_name: str
    phone: str
    address: str
    city: str
    postal_code: str
    country: str


class CardInquiryCard(BaseModel):
    card_holder_name: str
    card_number: str  # first 6, one `*` per hidden digit, last 4
    card_expired_month: str
    card_expired_year: str
    token: str
    card_brand: str


class CardInquiryPaymentOptions(BaseModel):
    campaign_code: str
    rule_code: str
    tenor: int
    use_rewards: bool
    acquirer_issuer_relation: str


class CardInquiryData(BaseModel):
    approval_code: str
    merchant_id: str
    mis_version: str
    transaction_id: str
    source: str
    external_id: str
    order_id: str
    receipt_no: str
    response_code: str
    host_response_code: str
    currency: str
    payment_method: str
    payment_channel: str
    transaction_status: str
    message: str
    callback_url: str
    return_url: str
    installment_tenor: int
    payment_mode: str
    payment_details: CardInquiryPaymentDetails
    item_details: list[CardInquiryItem]
    customer_details: CardInquiryCustomer
    # Only when the charge had one (never null on the wire).
    billing_address: CardInquiryAddress | SkipJsonSchema[None] = None
    shipping_address: CardInquiryAddress | SkipJsonSchema[None] = None
    card_details: CardInquiryCard
    payment_options: CardInquiryPaymentOptions


class CardInquiryResponse(BaseModel):
    response_code: str
    response_message: str
    data: CardInquiryData


# --- the service -----------------------------------------------------------------------------


async def inquire(session: Session, merchant_id: str, request: CardInquiryRequest) -> dict[str, Any]:
    """The answer's body for the merchant's card order `request` names; DialectOrderNotFound otherwise."""
    try:
        order = await card_service.get(session, request.transaction_id)
    except CardOrderNotFound:
        raise DialectOrderNotFound() from None
    if (
        order.link_id is not None
        or order.merchant_id != merchant_id
        or (order.external_id, order.order_id)
        != (
            request.external_id,
            request.order_id,
        )
    ):
        raise DialectOrderNotFound()
    attempts = await card_repository.attempts(session, order.id)
    state = CardOrderStatus.EXPIRED if card_service.is_due(order) else CardOrderStatus(order.status)
    return {"response_code": "00", "response_message": SUCCESS_MESSAGE, "data": inquiry_data(order, attempts, state)}


def inquiry_data(order: CardOrderRow, attempts: list[CardAttemptRow], state: CardOrderStatus) -> dict[str, Any]:
    details: dict[str, Any] = json.loads(order.details)
    recorded: dict[str, Any] = details.get("dialect", {})
    payment = details.get("paymentDetails", {})
    options = details.get("paymentOptions", {})
    last = attempts[-1] if attempts else None
    paid = state is CardOrderStatus.SUCCESS and last is not None
    tenor = int(order.tenor or "0")
    status, message = _STATUS[state]
    payment_details: dict[str, Any] = {
        "amount": order.amount,
        "fee_amount": 0,
        "total_amount": order.amount,
        "is_customer_paying_fee": bool(payment.get("isCustomerPayingFee", False)),
        "expired_time": epoch_milliseconds(order.expires_at),
        "transaction_description": str(payment.get("transactionDescription", "")),
    }
    if paid and order.paid_at is not None:
        payment_details["paid_time"] = epoch_milliseconds(order.paid_at)
        payment_details["total_paid_amount"] = order.amount
    code = transaction_code(last)
    data: dict[str, Any] = {
        "approval_code": approval_code(order.id, last.number) if paid and last else "",
        "merchant_id": order.merchant_id,
        "mis_version": DIALECT_VERSION,
        "transaction_id": order.id,
        "source": "",
        "external_id": order.external_id,
        "order_id": order.order_id,
        "receipt_no": f"{order.id}-{last.number}" if paid and last else "",
        "response_code": code,
        "host_response_code": code,
        "currency": order.currency,
        "payment_method": "CARD",
        "payment_channel": str(recorded.get("payment_channel") or order.payment_channel),
        "transaction_status": status,
        "message": message,
        "callback_url": order.callback_url or "",
        "return_url": order.return_url,
        "installment_tenor": tenor,
        "payment_mode": "INSTALLMENT" if tenor else "CLOSE",
        "payment_details": payment_details,
        "item_details": [
            {
                "item_id": str(item.get("itemId", "")),
                "name": str(item.get("name", "")),
                "amount": item.get("amount", 0),
                "qty": item.get("qty", 0),
                "description": str(item.get("description") or ""),
            }
            for item in details.get("itemDetails", [])
        ],
        "customer_details": {
            "full_name": _text(details.get("customerDetails", {}), "fullName"),
            "email": _text(details.get("customerDetails", {}), "email"),
            "phone": _text(details.get("customerDetails", {}), "phone"),
            "ip_address": _text(details.get("customerDetails", {}), "ipAddress"),
        },
    }
    for name, key in (("billing_address", "billingAddress"), ("shipping_address", "shippingAddress")):
        if key in details:
            data[name] = _address(details[key])
    # The card's token: the one this payment stored, else the stored card its charge named (the first attempt's).
    token = order.card_token or (str(recorded.get("stored_token") or "") if last and last.number == 1 else "")
    data["card_details"] = _card(last, token)
    data["payment_options"] = {
        "campaign_code": str(options.get("campaign_code") or ""),
        "rule_code": str(recorded.get("rule_code") or ""),
        "tenor": tenor,
        "use_rewards": bool(options.get("useRewards") or False),
        "acquirer_issuer_relation": _OFF_US if paid else "",
    }
    return data


def transaction_code(attempt: CardAttemptRow | None) -> str:
    """The attempt's ISO 8583 code as the dialect says it; "" before any attempt or while the acquirer decides."""
    if attempt is None or attempt.status == CardAttemptStatus.SUBMITTED.value:
        return ""
    if attempt.status == CardAttemptStatus.SUCCESS.value:
        return "00"
    if attempt.status == CardAttemptStatus.CHALLENGE.value or attempt.response_message == DIRECT_3DS_REFUSED:
        return CHALLENGE_REFUSED_CODE  # 1A: additional customer authentication required
    reason = DeclineReason(attempt.decline_reason) if attempt.decline_reason in _REASONS else None
    return TRANSACTION_CODES.get(reason, "05") if reason is not None else "05"


_REASONS = {reason.value for reason in DeclineReason}


def epoch_milliseconds(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def _text(values: dict[str, Any], key: str) -> str:
    value = values.get(key)
    return "" if value is None else str(value)


def _address(address: dict[str, Any]) -> dict[str, str]:
    return {
        "full_name": _text(address, "fullName"),
        "phone": _text(address, "phone"),
        "address": _text(address, "address"),
        "city": _text(address, "city"),
        "postal_code": _text(address, "postalCode"),
        "country": _text(address, "country"),
    }


def _card(attempt: CardAttemptRow | None, token: str) -> dict[str, str]:
    """The last attempt's card as kept (never the number); every value "" before a card was entered."""
    if attempt is None:
        return dict.fromkeys(
            ("card_holder_name", "card_number", "card_expired_month", "card_expired_year", "token", "card_brand"), ""
        )
    return {
        "card_holder_name": attempt.card_holder_name or "",
        "card_number": attempt.masked_card,
        "card_expired_month": attempt.card_exp_month,
        "card_expired_year": attempt.card_exp_year,
        "token": token,
        # §12.1 names four brands: another card's brand is not one the SDK knows.
        "card_brand": attempt.card_brand if attempt.card_brand in _BRANDS else "",
    }
