"""The provider SDK's snake_case card dialect (IFORTEPAY/ifp-node): a translation onto the card charge.

    POST /card-v2/v1/charge          3-D Secure flow: data.html (default) or data.link (`response-type: url`)
    POST /card-v2/v1/charge-direct   no 3-D Secure: the answer is the outcome
    POST /card-v2/v2/charge-direct   the same, the CVN optional

The SDK signs like the wallet API (Basic base64(merchantId:secretUnboundId), `x-req-signature` =
sha256(hashKey + external_id + order_id), `x-version: v3`) and reads the wallet API's answers
`{response_code, response_message, data}`: its requests are verified by the wallet API's scheme,
`kasir.auth.wallet_signature` (kasir.auth), and its errors are rendered in the wallet format (kasir.errors.speak).

A dialect request becomes the camelCase charge's `ChargeRequest` and card (`DialectCharge`), and
goes through the same card service, idempotency, duplicate rules, states, attempts and callbacks.
What the camelCase request has and the dialect does not is filled in: `isCustomerPayingFee` false,
one item for the whole amount when `item_details` is absent; absent addresses stay absent. Its
errors (wallet codes 01, 03, 04) are drawn in the card room's error tree (kasir.card.service).

`payment_mode` INSTALLMENT takes `payment_options.tenor` 3, 6 or 12 (recorded on the payment as
its tenor); CLOSE takes none or 0. `store_token` (default true) stores the card when it is
charged (`StoredCard`): `data.token` of the direct charge, usable later as `card_details {token,
card_cvn}` by the same merchant only. Never the number or the CVN is stored.
"""

from __future__ import annotations

import hashlib
import html
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Annotated, Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic_core import PydanticCustomError

from kasir.card.cards import InvalidCardData, ParsedCard, card_channels, parse_card
from kasir.card.repository import CardAttemptRow, CardOrderRow, StoredCardRow
from kasir.card.schemas import (
    Amount,
    CardAddress,
    CardCustomerDetails,
    CardItem,
    CardPaymentDetails,
    CardPaymentOptions,
    CardText,
    ChargeRequest,
    Country,
    Email,
    Phone,
    Qty,
    Req,
    Str64,
    Str128,
    Str255,
    Str256,
    StrictBool,
    UnitPrice,
    Url,
    _ip,
    _one_of,
    _text,
)
from kasir.card.states import CardOrderStatus
from kasir.errors import BadRequest, DuplicateReference, FeatureNotAllowed, FieldError, from_pydantic_errors
from kasir.kit.fields import http_url
from kasir.processors.protocols import CardDetails, DeclineReason

DIALECT_VERSION = "v3"  # x-version of every dialect request; recorded on its payments
RESPONSE_TYPES = ("html", "url")
# The SDK's channels and the card channel each is charged on (kasir.card.cards): the PG channels
# are the banks' hosted 3-D Secure gateways, the CC ones their direct acquiring.
CHANNELS = {"BCAPG": "BCACC", "CIMBPG": "CIMBCC", "BCACC": "BCACC", "CIMBCC": "CIMBCC", "BRICC": "BRICC"}
INSTALMENT_TENORS = (3, 6, 12)
SUCCESS_MESSAGE = "Success"
DIRECT_3DS_REFUSED = "3-D Secure authentication is not available on a direct charge"

# transaction_code of a direct charge's failure, by the acquirer's decline reason (ISO 8583 response
# codes); a decline with no reason named here is 05 (do not honour), the dialect's own refusal of a
# challenge 1A.
TRANSACTION_CODES: dict[DeclineReason, str] = {
    DeclineReason.DO_NOT_HONOUR: "05",
    DeclineReason.INSUFFICIENT_FUNDS: "51",
    DeclineReason.EXPIRED_CARD: "54",
    DeclineReason.ISSUER_UNAVAILABLE: "91",
    DeclineReason.INVALID_CARD: "14",
}
CHALLENGE_REFUSED_CODE = "1A"


# --- errors ------------------------------------------------------------------------------


class DialectValidationError(BadRequest):
    """01 with every violated field and why, in snake_case: `payment_details.amount must be ...; ...`."""

    def __init__(self, errors: list[FieldError]) -> None:
        message = "; ".join(f"{e.field} {e.message}" for e in errors)
        super().__init__(message[:1000], field=errors[0].field if errors else None, errors=errors)


class UnknownStoredCard(BadRequest):
    def __init__(self) -> None:
        super().__init__("card_details.token is not a card stored for this merchant", field="card_details.token")


class UnknownSubMerchant(FeatureNotAllowed):
    def __init__(self) -> None:
        super().__init__("sub-merchant-id is not a sub-merchant of this merchant", field="sub-merchant-id")


class DialectDuplicate(DuplicateReference):
    def __init__(self, field: str) -> None:
        super().__init__(f"{field} is already used; use a new unused {field}", field=field)


# --- the request ---------------------------------------------------------------------------


def _tenor(value: Any) -> Any:
    """A number (the SDK's) or a string of one: 0, 3, 6 or 12."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise PydanticCustomError("tenor", "must be one of 0, 3, 6, 12")
    text = str(value).strip()
    if text not in ("0", "3", "6", "12"):
        raise PydanticCustomError("tenor", "must be one of 0, 3, 6, 12")
    return int(text)


class DialectModel(BaseModel):
    # Field names are the wire's (snake_case). The input is hidden in errors: it may be a card number.
    model_config = ConfigDict(extra="ignore", hide_input_in_errors=True)


class DialectPaymentDetails(DialectModel):
    amount: Amount
    transaction_description: Str255


class DialectItem(DialectModel):
    item_id: Str64
    name: Str128
    amount: UnitPrice
    qty: Qty
    description: Annotated[str, _text(255)] | None = None


class DialectCustomer(DialectModel):
    full_name: Str128
    phone: Phone
    email: Email
    ip_address: Annotated[str, _text(45), AfterValidator(_ip)]


class DialectAddress(DialectModel):
    full_name: Str128 | None = None
    phone: Phone | None = None
    address: Str256
    city: Str64
    postal_code: Annotated[str, _text(10), Req]
    country: Country


class DialectCard(DialectModel):
    card_holder_name: Annotated[str, _text(64)] | None = None
    card_number: CardText | None = None
    card_expired_month: Annotated[str, _text(2)] | None = None
    card_expired_year: Annotated[str, _text(4)] | None = None
    card_cvn: Annotated[str, _text(4)] | None = None
    token: Annotated[str, _text(64)] | None = None


class DialectPaymentOptions(DialectModel):
    use_rewards: StrictBool | None = None
    campaign_code: Annotated[str, _text(64)] | None = None
    tenor: Annotated[int, BeforeValidator(_tenor)] | None = None
    rule_code: Annotated[str, _text(64)] | None = None


class DialectChargeRequest(DialectModel):
    """The body of the SDK's charge, charge-direct and charge-direct v2 (docs/merchant/card-dialect.md)."""

    external_id: Str64
    order_id: Str64
    currency: Annotated[str, _one_of("IDR")] = "IDR"
    payment_method: Annotated[str, _one_of("CARD")]
    payment_channel: Annotated[str, _one_of(*CHANNELS)]
    payment_mode: Annotated[str, _one_of("CLOSE", "INSTALLMENT")] = "CLOSE"
    payment_details: DialectPaymentDetails
    card_details: DialectCard
    customer_details: DialectCustomer
    item_details: Annotated[list[DialectItem], Field(min_length=1, max_length=100)] | None = None
    billing_address: DialectAddress | None = None
    shipping_address: DialectAddress | None = None
    payment_options: DialectPaymentOptions | None = None
    callback_url: Annotated[str, _text(2048), AfterValidator(http_url)] | None = None
    return_url: Url
    additional_data: Annotated[str, _text(1024)] | None = None
    store_token: StrictBool = True

    @property
    def tenor(self) -> int:
        return (self.payment_options.tenor if self.payment_options else None) or 0


@dataclass(frozen=True, slots=True)
class DialectCharge:
    """A verified dialect request: the camelCase charge it is, and what only the dialect says."""

    request: ChargeRequest
    card: ParsedCard | None  # None while card_details names a stored card (`resolve_stored_card`)
    stored_token: str | None
    stored_cvn: str
    store_token: bool
    # What only the dialect's request says, kept with the order for its inquiry (kasir.card.inquiry):
    # the channel as the SDK named it (BCAPG is charged on BCACC), payment_options.rule_code, and the
    # token of the stored card it charged.
    recorded: dict[str, str]


def parse_dialect(body: dict[str, Any], *, now: datetime, cvn_required: bool) -> DialectCharge:
    """The request in `body` (a JSON object), or DialectValidationError naming every bad field."""
    try:
        request = DialectChargeRequest.model_validate(body)
    except ValidationError as exc:
        errors = from_pydantic_errors(exc.errors(include_input=False)).errors
        raise DialectValidationError(errors) from None
    errors = _cross_field_errors(request, cvn_required)
    if errors:
        raise DialectValidationError(errors)
    details = request.card_details
    card: ParsedCard | None = None
    if details.token is None:
        card = _card(details, now=now, cvn_required=cvn_required)
    return DialectCharge(
        request=_charge_request(request),
        card=card,
        stored_token=details.token,
        stored_cvn=(details.card_cvn or "").strip(),
        store_token=request.store_token,
        recorded=_recorded(request),
    )


def _recorded(request: DialectChargeRequest) -> dict[str, str]:
    recorded = {"payment_channel": request.payment_channel}
    rule_code = request.payment_options.rule_code if request.payment_options else None
    if rule_code:
        recorded["rule_code"] = rule_code
    if request.card_details.token:  # the stored card the charge's attempt used (its token: not card data)
        recorded["stored_token"] = request.card_details.token
    return recorded


_CARD_FIELDS = ("card_holder_name", "card_number", "card_expired_month", "card_expired_year")


def _cross_field_errors(request: DialectChargeRequest, cvn_required: bool) -> list[FieldError]:
    errors: list[FieldError] = []
    amount = request.payment_details.amount
    if request.item_details:
        total = sum(item.amount * item.qty for item in request.item_details)
        if total != amount:
            errors.append(
                FieldError("payment_details.amount", f"must equal the sum of item_details amount × qty ({total})")
            )
    channel = CHANNELS[request.payment_channel]
    if channel not in card_channels():
        errors.append(FieldError("payment_channel", "is not a card channel of this deployment"))
    tenor = request.tenor
    if request.payment_mode == "INSTALLMENT" and tenor not in INSTALMENT_TENORS:
        errors.append(FieldError("payment_options.tenor", "must be 3, 6 or 12 when payment_mode is INSTALLMENT"))
    elif request.payment_mode == "CLOSE" and tenor:
        errors.append(FieldError("payment_options.tenor", "must be 0 or absent when payment_mode is CLOSE"))
    card = request.card_details
    if card.token is not None:
        if not card.token.strip():
            errors.append(FieldError("card_details.token", "is required"))
        if card.card_number:
            errors.append(FieldError("card_details", "must name either a token or a card number, not both"))
    else:
        for name in _CARD_FIELDS:
            value = getattr(card, name)
            if value is None or not value.strip():
                errors.append(FieldError(f"card_details.{name}", "is required (or card_details.token)"))
    if cvn_required and not (card.card_cvn or "").strip():
        errors.append(FieldError("card_details.card_cvn", "is required"))
    return errors


# The card checks' messages name camelCase fields (kasir.card.cards): said in the dialect's names.
_CARD_NAMES = {
    "cardNumber": "card_number",
    "cardExpiredMonth": "card_expired_month",
    "cardExpiredYear": "card_expired_year",
    "cardCvn": "card_cvn",
    "cardHolderName": "card_holder_name",
}
_NO_CVN = "000"  # checked in place of an absent optional CVN, never sent: the card carries none


def _card(details: DialectCard, *, now: datetime, cvn_required: bool) -> ParsedCard:
    cvn = (details.card_cvn or "").strip()
    try:
        card = parse_card(
            number=details.card_number or "",
            exp_month=details.card_expired_month or "",
            exp_year=details.card_expired_year or "",
            cvn=cvn if (cvn or cvn_required) else _NO_CVN,
            holder_name=details.card_holder_name or "",
            now=now,
            prefix="",
        )
    except InvalidCardData as exc:
        raise DialectValidationError(
            [FieldError(f"card_details.{_CARD_NAMES.get(e.field, e.field)}", e.message) for e in exc.errors]
        ) from None
    return card if cvn else replace(card, cvn="")


def stored_card(stored: StoredCardRow, cvn: str, *, now: datetime) -> ParsedCard:
    """The card a token names: what was kept of it, the CVN if sent; refused once expired."""
    if cvn and not (cvn.isdigit() and len(cvn) in (3, 4)):
        raise DialectValidationError([FieldError("card_details.card_cvn", "must be 3 or 4 digits")])
    if (int(stored.card_exp_year), int(stored.card_exp_month)) < (now.year, now.month):
        raise DialectValidationError([FieldError("card_details.token", "the stored card has expired")])
    return CardDetails(
        number="",
        cvn=cvn,
        exp_month=stored.card_exp_month,
        exp_year=stored.card_exp_year,
        holder_name="",
        masked=stored.masked_card,
        brand=stored.card_brand,
        stored_token=stored.token,
    )


def _charge_request(request: DialectChargeRequest) -> ChargeRequest:
    """The camelCase charge this dialect request is (already validated: built without validating again)."""
    details = request.payment_details
    items = request.item_details or [
        DialectItem(item_id=request.order_id, name=details.transaction_description[:128], amount=details.amount, qty=1)
    ]
    options = request.payment_options
    # The dialect's addresses are optional: an absent one stays absent (None) in the stored details.
    addresses: dict[str, Any] = {
        "billing_address": _address(request.billing_address),
        "shipping_address": _address(request.shipping_address),
    }
    return ChargeRequest.model_construct(
        external_id=request.external_id,
        order_id=request.order_id,
        currency="IDR",
        source=None,
        payment_method="card",
        payment_channel=CHANNELS[request.payment_channel],
        payment_mode="CLOSE",
        payment_details=CardPaymentDetails.model_construct(
            amount=details.amount,
            is_customer_paying_fee=False,
            transaction_description=details.transaction_description,
            expired_time=None,
        ),
        item_details=[
            CardItem.model_construct(
                item_id=i.item_id, name=i.name, amount=i.amount, qty=i.qty, description=i.description
            )
            for i in items
        ],
        customer_details=CardCustomerDetails.model_construct(
            email=request.customer_details.email,
            full_name=request.customer_details.full_name,
            phone=request.customer_details.phone,
            ip_address=request.customer_details.ip_address,
        ),
        **addresses,
        card_details=None,
        return_url=request.return_url,
        callback_url=request.callback_url,
        payment_options=CardPaymentOptions.model_construct(
            use_rewards=options.use_rewards,
            campaign_code=options.campaign_code,
            tenor=str(request.tenor),
        )
        if options is not None
        else None,
        additional_data=request.additional_data,
    )


def _address(address: DialectAddress | None) -> CardAddress | None:
    if address is None:
        return None
    names: dict[str, Any] = {"full_name": address.full_name, "phone": address.phone}  # optional here
    return CardAddress.model_construct(
        **names,
        address=address.address,
        city=address.city,
        postal_code=address.postal_code,
        country=address.country,
    )


# --- the answers ---------------------------------------------------------------------------


def answer(data: dict[str, Any]) -> dict[str, Any]:
    return {"response_code": "00", "response_message": SUCCESS_MESSAGE, "data": data}


def charge_answer(link: str, response_type: str) -> dict[str, Any]:
    """The 3-D Secure charge: the payment step's URL, or a page that takes the customer there at once."""
    if response_type == "url":
        return answer({"link": link})
    return answer({"html": auto_submit_page(link)})


def auto_submit_page(link: str) -> str:
    """A page that sends the customer on to `link` as soon as it loads (a form GET with its query)."""
    parts = urlsplit(link)
    action = urlunsplit(parts._replace(query="", fragment=""))
    fields = "".join(
        f'<input type="hidden" name="{html.escape(name)}" value="{html.escape(value)}">'
        for name, value in parse_qsl(parts.query, keep_blank_values=True)
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Payment</title></head>'
        '<body onload="document.forms[0].submit()">'
        f'<form id="kasir_payment_form" name="kasir_payment_form" method="get" action="{html.escape(action)}">'
        f'{fields}<noscript><button type="submit">Continue to payment</button></noscript></form></body></html>'
    )


# The key of a held charge's details (kasir.processors.calls) saying how the dialect answers it:
# {"kind": "html" | "url" | "direct", "token": a stored card's token or null}. Not card data.
DIALECT_ANSWER = "dialect"


def answer_details(kind: str, stored_token: str | None) -> dict[str, Any]:
    return {"kind": kind, "token": stored_token}


def refuses_challenge(details: dict[str, Any]) -> bool:
    """A direct charge: a challenge the acquirer asks for fails the attempt (no one will pass it)."""
    answer = details.get(DIALECT_ANSWER)
    return isinstance(answer, dict) and answer.get("kind") == "direct"


def dialect_body(
    answer: dict[str, Any], order: CardOrderRow, attempt: CardAttemptRow, link: str, reason: DeclineReason | None
) -> dict[str, Any]:
    """The dialect's answer to a charge the acquirer decided (`link`: the camelCase answer's; `reason`:
    the acquirer's, when it declined)."""
    if answer.get("kind") == "direct":
        return direct_answer(order, attempt, token=order.card_token or answer.get("token"), reason=reason)
    return charge_answer(link, str(answer.get("kind")))


def direct_answer(
    order: CardOrderRow, attempt: CardAttemptRow | None, *, token: str | None, reason: DeclineReason | None
) -> dict[str, Any]:
    """The direct charge's outcome: SUCCESS (with the stored card's `token`), or FAILED with the decline's
    code (by the acquirer's `reason`) and description."""
    succeeded = order.status == CardOrderStatus.SUCCESS.value
    description = (attempt.response_message if attempt is not None else order.response_message) or ""
    if succeeded:
        code = "00"
    elif description == DIRECT_3DS_REFUSED:
        code = CHALLENGE_REFUSED_CODE
    else:
        code = TRANSACTION_CODES.get(reason, "05") if reason is not None else "05"
    number = attempt.number if attempt is not None else order.attempts_made
    transaction_data: dict[str, Any] = {
        "external_id": order.external_id,
        "receipt_no": f"{order.id}-{number}",
        "order_id": order.order_id,
        "transaction_id": order.id,
    }
    if succeeded:
        transaction_data["approval_code"] = approval_code(order.id, number)
    return answer(
        {
            "token": token if succeeded else None,
            "status": "SUCCESS" if succeeded else "FAILED",
            "transaction_code": code,
            "transaction_description": description,
            "transaction_data": transaction_data,
        }
    )


def approval_code(order_id: str, attempt: int) -> str:
    """Six digits naming the approved attempt (the acquirer's authorisation code stands in for it)."""
    digest = hashlib.sha256(f"{order_id}:{attempt}".encode()).digest()
    return f"{int.from_bytes(digest[:4], 'big') % 1_000_000:06d}"


def response_type_of(header: str | None) -> str:
    value = (header or "html").strip().lower()
    if value not in RESPONSE_TYPES:
        raise DialectValidationError([FieldError("response-type", "must be html or url")])
    return value


def snake_field(camel: str | None) -> str:
    return {"orderId": "order_id", "externalId": "external_id"}.get(camel or "", camel or "")
