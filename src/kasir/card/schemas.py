"""The card charge request (interface.md "Card charge request"), camelCase on the wire.

`parse_charge_request(body, now)` answers a `ChargeRequest` or raises one `CardValidationError`
(400 VALIDATION_ERROR) listing every violated field at once as dotted camelCase paths: the
field rules of the model and the rules across fields (amount = items total, channel for
the payment method, expiredTime in the future).

Issue 26: every rule of the card data (`cardDetails` and its fields: type, presence in CLOSE
mode, length, digits, Luhn, month, year, CVN, holder name) is 422 INVALID_CARD instead, listing
every failing card field (`cards.InvalidCardData`); a request with any other failing field is
400 and lists those. The card's content rules are `cards.parse_card`'s alone. Models hide their
input in errors: a message never repeats a card number.
"""

from __future__ import annotations

import ipaddress
import re
from datetime import datetime
from typing import Annotated, Any, NoReturn

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from kasir.card.cards import InvalidCardData, card_channels, parse_card
from kasir.errors import BadRequest, FieldError, from_pydantic_errors
from kasir.kit import json_input
from kasir.kit.clock import JAKARTA, parse_aware
from kasir.kit.fields import (
    COUNTRY,
    EMAIL,
    PHONE_MAX,
    REQUIRED,
    URL,
    PhoneNumber,
    country_code,
    email,
    http_url,
    required,
)

QTY_MAX = 999  # interface.md Limits
AMOUNT_MAX = 10**15  # whole rupiah; far beyond any card limit, inside BigInteger
TENORS = ("0", "3", "6", "12")
# docs/decisions.md §5 without QRIS: a dynamic QR is not a page the customer is sent to.
WALLET_CHANNELS = ("OVO", "DANA", "SHOPEEPAY", "LINKAJA", "VIRGO")


class CardValidationError(BadRequest):
    """400 VALIDATION_ERROR with every violated field."""

    def __init__(self, errors: list[FieldError]) -> None:
        super().__init__("Request fails validation", errors=errors)


# --- field types ----------------------------------------------------------------------


def _ip(value: str) -> str:
    if _IPV4.fullmatch(value) is None:  # a dotted quad of 0-255 without leading zeros is ipaddress's IPv4 too
        try:
            ipaddress.ip_address(value)
        except ValueError as exc:
            raise PydanticCustomError("ip", "must be an IPv4 or IPv6 address") from exc
    return value


_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])"
# ASCII digits only ([0-9], not \d): ipaddress refuses other scripts' digits as well.
_IPV4 = re.compile(rf"{_OCTET}(?:\.{_OCTET}){{3}}")


def _strict_int(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PydanticCustomError("int_type", "must be an integer (whole rupiah)")
    return value


def _strict_bool(value: Any) -> Any:
    if not isinstance(value, bool):
        raise PydanticCustomError("bool_type", "must be true or false")
    return value


def _one_of(*allowed: str) -> Any:
    def check(value: str) -> str:
        if value not in allowed:
            raise PydanticCustomError("enum", "must be one of {allowed}", {"allowed": ", ".join(allowed)})
        return value

    return AfterValidator(check)


def _expired_time(value: str) -> str:
    try:
        parse_aware(value)
    except ValueError as exc:
        raise PydanticCustomError("datetime", "must be ISO 8601 with a UTC offset") from exc
    return value


def _text(max_length: int) -> Any:
    return StringConstraints(max_length=max_length)


Req = AfterValidator(required)
# Each rule is also stated in the field's OpenAPI schema (kasir.kit.fields.Documented).
Str16 = Annotated[str, _text(16), Req, REQUIRED]
Str64 = Annotated[str, _text(64), Req, REQUIRED]
Str128 = Annotated[str, _text(128), Req, REQUIRED]
Str255 = Annotated[str, _text(255), Req, REQUIRED]
Str256 = Annotated[str, _text(256), Req, REQUIRED]
Email = Annotated[str, _text(64), Req, AfterValidator(email), EMAIL]
# The interface gives the card phones no length: 16 digits and their separators fit in 32.
Phone = Annotated[str, _text(PHONE_MAX), Req, PhoneNumber()]
Country = Annotated[str, _text(3), Req, AfterValidator(country_code), COUNTRY]
Url = Annotated[str, _text(2048), Req, AfterValidator(http_url), URL]
Amount = Annotated[int, BeforeValidator(_strict_int), Field(gt=0, le=AMOUNT_MAX)]
UnitPrice = Annotated[int, BeforeValidator(_strict_int), Field(ge=0, le=AMOUNT_MAX)]
Qty = Annotated[int, BeforeValidator(_strict_int), Field(ge=1, le=QTY_MAX)]
StrictBool = Annotated[bool, BeforeValidator(_strict_bool)]
# Card fields are strings; their rules (length, digits, Luhn, expiry, CVN, holder) are cards.parse_card's,
# all answered 422 INVALID_CARD (issue 26). The schema documents them; the server checks them there.
CardText = str


def _card_rule(description: str, **schema: Any) -> Any:
    return Field(None, description=description, json_schema_extra=schema)


class CardModel(BaseModel):
    # hide_input_in_errors: a ValidationError's text would otherwise carry the card number.
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", hide_input_in_errors=True
    )


class CardPaymentDetails(CardModel):
    amount: Amount
    is_customer_paying_fee: StrictBool
    transaction_description: Str255
    expired_time: Annotated[str, _text(40), AfterValidator(_expired_time)] | None = None


class CardItem(CardModel):
    item_id: Str64
    name: Str128
    amount: UnitPrice
    qty: Qty
    description: Annotated[str, _text(255)] | None = None


class CardCustomerDetails(CardModel):
    email: Email
    full_name: Str128
    phone: Phone
    ip_address: Annotated[str, _text(45), Req, AfterValidator(_ip)]


class CardAddress(CardModel):
    full_name: Str128
    phone: Phone
    address: Str256
    city: Str64
    postal_code: Annotated[str, _text(10), Req]
    country: Country


class CardDetails(CardModel):
    """Required in CLOSE mode (paymentMethod card); any rule broken is 422 INVALID_CARD, every card field listed."""

    card_number: CardText | None = _card_rule(
        "13 to 19 digits after removing spaces, with a valid Luhn check digit", pattern="^[0-9 ]+$"
    )
    card_expired_month: CardText | None = _card_rule("Two digits, 01 to 12", pattern="^(0[1-9]|1[0-2])$")
    card_expired_year: CardText | None = _card_rule(
        "YY or YYYY; with the month, not in the past", pattern="^([0-9]{2}|[0-9]{4})$"
    )
    card_cvn: CardText | None = _card_rule("3 or 4 digits", pattern="^[0-9]{3,4}$")
    card_holder_name: CardText | None = _card_rule(
        "Letters, spaces, . ' -; at most 64 characters (upper-cased)", maxLength=64, pattern="^[A-Za-z][A-Za-z .'-]*$"
    )


class CardPaymentOptions(CardModel):
    use_rewards: StrictBool | None = None
    # interface.md: campaign_code is snake_case on the wire.
    campaign_code: Annotated[str, _text(64)] | None = Field(None, alias="campaign_code")
    tenor: Annotated[str, _one_of(*TENORS)] | None = None


class ChargeRequest(CardModel):
    external_id: Str64
    order_id: Str64
    currency: Annotated[str, _one_of("IDR")]
    source: Annotated[str, _text(64)] | None = None
    payment_method: Annotated[str, _one_of("card", "ewallet")]
    payment_channel: Str16
    payment_mode: Annotated[str, _one_of("CLOSE", "OPEN")]
    payment_details: CardPaymentDetails
    item_details: Annotated[list[CardItem], Field(min_length=1, max_length=100)]
    customer_details: CardCustomerDetails
    billing_address: CardAddress
    shipping_address: CardAddress
    card_details: CardDetails | None = None
    return_url: Url
    callback_url: Annotated[str, _text(2048), AfterValidator(http_url)] | None = None
    payment_options: CardPaymentOptions | None = None
    additional_data: Annotated[str, _text(1024)] | None = None

    @property
    def tenor(self) -> str:
        return (self.payment_options.tenor if self.payment_options else None) or "0"

    def stored_details(self) -> str:
        """What the order keeps of the request, as JSON: everything but the card.

        Serialised by pydantic itself (a third of `json.dumps` over `model_dump`), UTF-8 as sent.
        """
        return self.model_dump_json(by_alias=True, exclude_none=True, include=_STORED_FIELDS)


_STORED_FIELDS = {
    "source",
    "payment_details",
    "item_details",
    "customer_details",
    "billing_address",
    "shipping_address",
    "payment_options",
    "additional_data",
}

CARD_FIELDS = ("cardNumber", "cardExpiredMonth", "cardExpiredYear", "cardCvn", "cardHolderName")
_CARD_ATTRIBUTES = {
    name: field for field, info in CardDetails.model_fields.items() if (name := info.alias) in CARD_FIELDS
}


def parse_charge_request(body: bytes, now: datetime) -> ChargeRequest:
    """The request in `body`, or CardValidationError with every field error and cross-field error.

    A body that is valid JSON and passes the field rules is parsed and validated in one pass
    by pydantic (a third less than `json.loads` and validating the objects it made), and the
    rules across fields then read the model. Any other body takes `parse_charge_request_slowly`,
    which answers exactly as the service always did (a test holds the two paths equal).
    """
    if b"\\u" in body:  # escapes: a NUL or an unpaired surrogate is refused on the checked path
        return parse_charge_request_slowly(body, now)
    try:
        request = ChargeRequest.model_validate_json(body)
    except ValidationError:
        return parse_charge_request_slowly(body, now)
    errors = _cross_field_errors_of(request, now)
    if errors:
        card = request.card_details.model_dump(by_alias=True) if request.card_details is not None else None
        _refuse(errors, card, now)
    return request


def parse_charge_request_slowly(body: bytes, now: datetime) -> ChargeRequest:
    """`json.loads`, then the field rules and the rules across fields on what it made: every error at once."""
    try:
        data = json_input.loads(body)
    except json_input.UnsafeJson as exc:
        raise CardValidationError([FieldError(exc.path, exc.reason)]) from None
    except (ValueError, UnicodeDecodeError):
        raise CardValidationError([FieldError("body", "is not valid JSON")]) from None
    errors: list[FieldError] = []
    request: ChargeRequest | None = None
    try:
        request = ChargeRequest.model_validate(data)
    except ValidationError as exc:
        errors.extend(from_pydantic_errors(exc.errors(include_input=False)).errors)
    if isinstance(data, dict):
        cross_field = _cross_field_errors(data, now)
        if errors and cross_field:
            flagged = {error.field for error in errors}
            cross_field = [e for e in cross_field if e.field not in flagged]
        errors.extend(cross_field)
    if errors:
        _refuse(errors, data.get("cardDetails") if isinstance(data, dict) else None, now)
    assert request is not None
    return request


def is_card_field(field: str) -> bool:
    return field == "cardDetails" or field.startswith("cardDetails.")


def _refuse(errors: list[FieldError], card: Any, now: datetime) -> NoReturn:
    """400 with the failing fields other than the card's, if any; else 422 with every failing card field.

    The card's own errors (type, presence) come first; the content rules of `parse_card` add the
    card fields that are present and still fail (each field named once).
    """
    others = [e for e in errors if not is_card_field(e.field)]
    if others:
        raise CardValidationError(others)
    card_errors = list(errors)
    if isinstance(card, dict):
        flagged = {e.field for e in errors}
        card_errors += [e for e in card_content_errors(card, now) if e.field not in flagged]
    raise InvalidCardData(card_errors)


def card_content_errors(card: dict[str, Any], now: datetime) -> list[FieldError]:
    """`parse_card`'s errors of the card fields in `card` (wire names) that are strings."""
    values = {name: card.get(name) for name in CARD_FIELDS}
    try:
        parse_card(
            number=_text_of(values["cardNumber"]),
            exp_month=_text_of(values["cardExpiredMonth"]),
            exp_year=_text_of(values["cardExpiredYear"]),
            cvn=_text_of(values["cardCvn"]),
            holder_name=_text_of(values["cardHolderName"]),
            now=now.astimezone(JAKARTA),
        )
    except InvalidCardData as exc:
        return [e for e in exc.errors if isinstance(values[e.field.removeprefix("cardDetails.")], str)]
    return []


def _text_of(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _cross_field_errors_of(request: ChargeRequest, now: datetime) -> list[FieldError]:
    """`_cross_field_errors` of a request that passed the field rules, read from the model.

    Same rules, same messages, same order; simpler, as every field is known valid.
    """
    errors: list[FieldError] = []
    details = request.payment_details
    total = sum(item.amount * item.qty for item in request.item_details)
    if total != details.amount:
        errors.append(FieldError("paymentDetails.amount", f"must equal the sum of itemDetails amount × qty ({total})"))
    if details.expired_time is not None and parse_aware(details.expired_time) <= now:
        errors.append(FieldError("paymentDetails.expiredTime", "must be in the future"))
    method, channel = request.payment_method, request.payment_channel
    if method == "card" and channel not in card_channels():
        errors.append(FieldError("paymentChannel", f"must be a card channel: {', '.join(card_channels())}"))
    elif method == "ewallet" and channel not in WALLET_CHANNELS:
        errors.append(FieldError("paymentChannel", f"must be a wallet channel: {', '.join(WALLET_CHANNELS)}"))
    if method == "card" and request.payment_mode == "CLOSE":
        card = request.card_details
        if card is None:
            errors.append(FieldError("cardDetails", "is required when paymentMode is CLOSE"))
        else:
            for name in CARD_FIELDS:
                value = getattr(card, _CARD_ATTRIBUTES[name])
                if value is None or not value.strip():
                    errors.append(FieldError(f"cardDetails.{name}", "is required when paymentMode is CLOSE"))
    return errors


def _cross_field_errors(data: dict[str, Any], now: datetime) -> list[FieldError]:
    """Rules across fields, on the raw body so they are reported next to the field errors."""
    errors: list[FieldError] = []
    details = data.get("paymentDetails")
    items = data.get("itemDetails")
    if isinstance(details, dict) and isinstance(items, list) and items:
        amount = details.get("amount")
        pairs: list[tuple[Any, Any]] = [(i.get("amount"), i.get("qty")) for i in items if isinstance(i, dict)]
        if (
            _is_int(amount)
            and len(pairs) == len(items)
            and all(
                _is_int(price) and 0 <= price <= AMOUNT_MAX and _is_int(qty) and 1 <= qty <= QTY_MAX
                for price, qty in pairs
            )
        ):
            # Only when every item is valid on its own: a bad qty is reported once, at the qty.
            total = sum(int(price) * int(qty) for price, qty in pairs)
            if total != amount:
                errors.append(
                    FieldError("paymentDetails.amount", f"must equal the sum of itemDetails amount × qty ({total})")
                )
    if isinstance(details, dict) and isinstance(details.get("expiredTime"), str):
        try:
            if parse_aware(details["expiredTime"]) <= now:
                errors.append(FieldError("paymentDetails.expiredTime", "must be in the future"))
        except ValueError:
            pass  # reported by the field rule

    method, channel = data.get("paymentMethod"), data.get("paymentChannel")
    if isinstance(channel, str) and channel.strip():
        if method == "card" and channel not in card_channels():
            allowed = ", ".join(card_channels())
            errors.append(FieldError("paymentChannel", f"must be a card channel: {allowed}"))
        elif method == "ewallet" and channel not in WALLET_CHANNELS:
            errors.append(FieldError("paymentChannel", f"must be a wallet channel: {', '.join(WALLET_CHANNELS)}"))

    if method == "card" and data.get("paymentMode") == "CLOSE":
        card = data.get("cardDetails")
        if card is None:
            errors.append(FieldError("cardDetails", "is required when paymentMode is CLOSE"))
        elif isinstance(card, dict):
            for name in CARD_FIELDS:
                value = card.get(name)
                if value is None or (isinstance(value, str) and not value.strip()):
                    errors.append(FieldError(f"cardDetails.{name}", "is required when paymentMode is CLOSE"))
    return errors


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --- responses ------------------------------------------------------------------------


class ChargeData(BaseModel):
    transactionId: str  # noqa: N815 (wire name)
    externalId: str  # noqa: N815
    paymentStatus: str  # noqa: N815
    link: str


# The charge's answer as the document shows it (here, and beside the SDK dialect's on the route).
CHARGE_ANSWER_EXAMPLE: dict[str, Any] = {
    "statusCode": "00",
    "statusMessage": "SUCCESS",
    "data": {
        "transactionId": "CARD2611230001ABCD",
        "externalId": "EXT-1001",
        "paymentStatus": "PENDING",
        "link": "https://kasir.example/card/pages/CARD2611230001ABCD",
    },
}


class ChargeResponse(BaseModel):
    """HTTP 200: statusCode "00", statusMessage "SUCCESS" (docs/decisions.md §4)."""

    model_config = ConfigDict(json_schema_extra={"examples": [CHARGE_ANSWER_EXAMPLE]})

    statusCode: str  # noqa: N815
    statusMessage: str  # noqa: N815
    data: ChargeData


class CardFieldError(BaseModel):
    field: str
    message: str


class CardErrorBody(BaseModel):
    statusCode: str  # noqa: N815
    statusMessage: str  # noqa: N815
    errors: list[CardFieldError]
