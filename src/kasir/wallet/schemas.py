"""Wallet request bodies (docs/decisions.md §5), snake_case on the wire.

Every field's type, length and rule is checked; a failure is `01` whose message names the
field and the rule (`order_id may contain only letters, digits and -`). Amounts are whole
rupiah (docs/decisions.md §7): JSON integers only, never a float or a string.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
)
from pydantic.json_schema import JsonSchemaValue, SkipJsonSchema
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from kasir.kit.clock import parse_aware
from kasir.kit.fields import (
    COUNTRY,
    EMAIL,
    PHONE_MAX,
    REQUIRED,
    URL,
    Documented,
    PhoneNumber,
    country_code,
    email,
    http_url,
    required,
)
from kasir.wallet.states import WalletStatus

CHANNELS = ("OVO", "DANA", "SHOPEEPAY", "LINKAJA", "VIRGO", "QRIS")
QR_CHANNEL = "QRIS"  # the dynamic-QR-only channel: create-qr only
FAILURE_CHANNEL = "OVO"  # the failure-reporting channel
AMOUNT_MAX = 9_999_999_999_999_999  # 16 digits, like the other products' amounts
QTY_MAX = 999  # the card API's item qty limit, the same for wallet items
ITEMS_MAX = 100
SIMULATED_STATUSES = ("PAID", "FAILED", "EXPIRED")

_ORDER_ID = re.compile(r"^[A-Za-z0-9-]+$")


class WalletModel(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=False)


def _string(value: Any) -> Any:
    if not isinstance(value, str):
        raise PydanticCustomError("string_type", "must be a string")
    return value


@dataclass(frozen=True, slots=True)
class MaxLength:
    """At most `limit` characters, said in plain words, and `maxLength` in the OpenAPI schema."""

    limit: int

    def _check(self, value: str) -> str:
        if len(value) > self.limit:
            raise PydanticCustomError("too_long", "must be at most {limit} characters", {"limit": self.limit})
        return value

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        json_schema = handler(schema)
        json_schema["maxLength"] = self.limit
        return json_schema


def _text(max_length: int) -> MaxLength:
    return MaxLength(max_length)


def _items(value: list[Any]) -> list[Any]:
    if not 1 <= len(value) <= ITEMS_MAX:
        raise PydanticCustomError("item_details", "must list 1 to {max} items", {"max": ITEMS_MAX})
    return value


def _order_id(value: str) -> str:
    if not _ORDER_ID.match(value):
        raise PydanticCustomError("order_id", "may contain only letters, digits and -")
    return value


def _wallet_method(value: str) -> str:
    if value != "wallet":
        raise PydanticCustomError("payment_method", "must be wallet")
    return value


def _channel(value: str) -> str:
    if value not in CHANNELS:
        raise PydanticCustomError("payment_channel", "must be one of " + ", ".join(CHANNELS))
    return value


def _idr(value: str) -> str:
    if value != "IDR":
        raise PydanticCustomError("currency", "must be IDR")
    return value


def _whole_rupiah(value: Any) -> Any:
    # docs/decisions.md §7: whole rupiah. 150000.0 or "150000" are refused rather than guessed at.
    if isinstance(value, bool) or not isinstance(value, int):
        raise PydanticCustomError("rupiah", "must be a whole number of rupiah (a JSON integer, like 150000)")
    if not 1 <= value <= AMOUNT_MAX:
        raise PydanticCustomError("rupiah", "must be a positive whole number of rupiah, at most 16 digits")
    return value


def _qty(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PydanticCustomError("qty", "must be an integer")
    if not 1 <= value <= QTY_MAX:
        raise PydanticCustomError("qty", f"must be between 1 and {QTY_MAX}")
    return value


def _timestamp(value: Any) -> Any:
    if isinstance(value, datetime) and value.utcoffset() is not None:  # built in Python (the card room)
        return value
    if not isinstance(value, str):
        raise PydanticCustomError("timestamp", "must be an ISO 8601 string with an offset")
    try:
        return parse_aware(value)
    except ValueError as exc:
        raise PydanticCustomError(
            "timestamp", "must be ISO 8601 with an offset, like 2026-11-23T10:15:00+07:00"
        ) from exc


def _simulated(value: str) -> str:
    if value not in SIMULATED_STATUSES:
        raise PydanticCustomError("simulate_status", "must be one of " + ", ".join(SIMULATED_STATUSES))
    return value


def _id_type(value: str) -> str:
    if value not in ("HP", "EMAIL"):
        raise PydanticCustomError("id_type", "must be HP or EMAIL")
    return value


Str = BeforeValidator(_string)
Req = AfterValidator(required)


# Each rule is also stated in the field's OpenAPI schema (Documented): a body valid by the document passes them.
ExternalId = Annotated[str, Str, _text(64), Req, REQUIRED]
OrderId = Annotated[str, Str, _text(100), Req, AfterValidator(_order_id), Documented(pattern=_ORDER_ID.pattern)]
TransactionId = Annotated[str, Str, _text(64), Req, REQUIRED]
PaymentMethod = Annotated[str, Str, Req, AfterValidator(_wallet_method), Documented(enum=["wallet"])]
Channel = Annotated[str, Str, Req, AfterValidator(_channel), Documented(enum=list(CHANNELS))]
Currency = Annotated[str, Str, Req, AfterValidator(_idr), Documented(enum=["IDR"])]
Rupiah = Annotated[
    int,
    BeforeValidator(_whole_rupiah),
    Documented(type="integer", minimum=1, maximum=AMOUNT_MAX, description="Whole rupiah"),
]
Qty = Annotated[int, BeforeValidator(_qty), Documented(type="integer", minimum=1, maximum=QTY_MAX)]
Email = Annotated[str, Str, _text(64), Req, AfterValidator(email), EMAIL]
# docs/decisions.md §5 gives the wallet phones no length: 16 digits and their separators fit in 32.
Phone = Annotated[str, Str, _text(PHONE_MAX), Req, PhoneNumber()]
Country = Annotated[str, Str, _text(3), Req, AfterValidator(country_code), COUNTRY]
Url = Annotated[str, Str, _text(2048), Req, AfterValidator(http_url), URL]
Timestamp = Annotated[
    datetime,
    BeforeValidator(_timestamp),
    Documented(type="string", format="date-time", description="ISO 8601 with an offset: 2026-11-23T10:15:00+07:00"),
]
Text64 = Annotated[str, Str, _text(64), Req, REQUIRED]
Text128 = Annotated[str, Str, _text(128), Req, REQUIRED]
Text255 = Annotated[str, Str, _text(255), Req, REQUIRED]
OptText255 = Annotated[str, Str, _text(255)]
OptText1024 = Annotated[str, Str, _text(1024)]


class WalletPaymentDetails(WalletModel):
    amount: Rupiah
    transaction_description: Text255
    expired_time: Timestamp | None = None


class WalletCustomerDetails(WalletModel):
    email: Email
    full_name: Text128
    phone: Phone


class WalletItem(WalletModel):
    item_id: Text64
    name: Text128
    amount: Rupiah  # unit price
    qty: Qty
    description: OptText255 | None = None


class WalletAddress(WalletModel):
    full_name: Text128
    phone: Phone
    address: Text255
    city: Text64
    postal_code: Annotated[str, Str, _text(10), Req, REQUIRED]
    country: Country


class WalletDetails(WalletModel):
    id: Text64
    id_type: Annotated[str, Str, Req, AfterValidator(_id_type), Documented(enum=["HP", "EMAIL"])]


class CreatePaymentRequest(WalletModel):
    """The body of `/ewallet/v2/create-payment` and `/ewallet/v2/create-qr`.

    `wallet_details` is mandatory on create-payment (the customer's wallet account) and
    optional on create-qr, where whoever scans pays; the service checks that.
    """

    external_id: ExternalId
    order_id: OrderId
    currency: Currency
    payment_method: PaymentMethod
    payment_channel: Channel
    payment_details: WalletPaymentDetails
    customer_details: WalletCustomerDetails
    item_details: Annotated[list[WalletItem], AfterValidator(_items), Documented(minItems=1, maxItems=ITEMS_MAX)]
    wallet_details: WalletDetails | None = None
    billing_address: WalletAddress | None = None
    shipping_address: WalletAddress | None = None
    additional_data: OptText1024 | None = None
    callback_url: Url | None = None
    return_url: Url | None = None


class TransactionReference(WalletModel):
    """Names one transaction: inquiry, void (and the base of refund and dummy payment)."""

    transaction_id: TransactionId
    external_id: ExternalId
    order_id: OrderId


class InquiryRequest(TransactionReference):
    pass


class RefundRequest(TransactionReference):
    refund_amount: Rupiah
    reason: OptText255 | None = None


class VoidRequest(TransactionReference):
    reason: OptText255 | None = None


class DummyPaymentRequest(TransactionReference):
    """interface.md: Dummy payment request, plus docs/decisions.md §5's `simulate_status`."""

    payment_method: PaymentMethod
    payment_channel: Channel
    simulate_status: Annotated[str, Str, Req, AfterValidator(_simulated), Documented(enum=list(SIMULATED_STATUSES))] = (
        "PAID"
    )
    failure_reason: OptText255 | None = None


class WalletErrorBody(BaseModel):
    """Every wallet failure (docs/decisions.md §4)."""

    response_code: str
    response_message: str


# --- answers (the 200 bodies of create-payment, create-qr, inquiry, refund, void, dummy payment) ----------
# Documented for the OpenAPI document and the clients generated from it; the service builds the bodies
# (kasir.wallet.service.transaction_body). A field that may be absent is optional here, never null.

_WALLET_TIME = "ISO 8601 with offset and milliseconds, like 2026-11-23T10:15:00.000+07:00"


class WalletAnswerPaymentDetails(BaseModel):
    amount: int = Field(description="Whole rupiah")
    total_amount: int
    transaction_description: str
    transaction_time: str = Field(description=_WALLET_TIME)
    expired_time: str = Field(description=_WALLET_TIME)
    paid_time: str = Field(description=_WALLET_TIME + "; empty before payment")


class WalletRefundEntry(BaseModel):
    refund_time: str
    refund_amount: int


class WalletVoidEntry(BaseModel):
    void_time: str
    void_amount: int


class WalletDummyPaymentResponse(BaseModel):
    """interface.md endpoint 3's result: these six fields and no other (kasir.simulator.endpoints builds it)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "external_id": "ext-1001",
                    "order_id": "ORDER-1001",
                    "transaction_status": "PAID",
                    "paid_time": "2026-11-23T10:16:00.000+07:00",
                    "reference_id": "R2611230001",
                    "response_code": "00",
                }
            ]
        }
    )

    external_id: str
    order_id: str
    transaction_status: str = Field(json_schema_extra={"enum": [status.value for status in WalletStatus]})
    paid_time: str = Field(description=_WALLET_TIME + "; empty unless paid")
    reference_id: str
    response_code: str = Field(examples=["00"])


class WalletTransactionResponse(BaseModel):
    """The wallet transaction as every successful wallet API call answers it (`response_code` `00`)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "response_code": "00",
                    "response_message": "Success",
                    "transaction_id": "EW2611230001ABCD",
                    "external_id": "ext-1001",
                    "order_id": "ORDER-1001",
                    "merchant_id": "M123456",
                    "reference_id": "R2611230001",
                    "currency": "IDR",
                    "payment_method": "wallet",
                    "payment_channel": "OVO",
                    "payment_system": "CLOSED",
                    "transaction_status": "PENDING",
                    "amount": 150000,
                    "refunded_amount": 0,
                    "transaction_time": "2026-11-23T10:15:00.000+07:00",
                    "expired_time": "2026-11-23T10:45:00.000+07:00",
                    "paid_time": "",
                    "payment_details": {
                        "amount": 150000,
                        "total_amount": 150000,
                        "transaction_description": "Order 1001",
                        "transaction_time": "2026-11-23T10:15:00.000+07:00",
                        "expired_time": "2026-11-23T10:45:00.000+07:00",
                        "paid_time": "",
                    },
                    "payment_url": "https://kasir.example/ewallet/pages/EW2611230001ABCD",
                }
            ]
        }
    )

    response_code: str = Field(examples=["00"])
    response_message: str = Field(examples=["Success"])
    transaction_id: str
    external_id: str
    order_id: str
    merchant_id: str
    reference_id: str
    currency: str = Field(examples=["IDR"])
    payment_method: str = Field(examples=["wallet"])
    payment_channel: str = Field(json_schema_extra={"enum": list(CHANNELS)})
    payment_system: str
    transaction_status: str = Field(json_schema_extra={"enum": [status.value for status in WalletStatus]})
    amount: int = Field(description="Whole rupiah")
    refunded_amount: int
    transaction_time: str = Field(description=_WALLET_TIME)
    expired_time: str = Field(description=_WALLET_TIME)
    paid_time: str = Field(description=_WALLET_TIME + "; empty before payment")
    payment_details: WalletAnswerPaymentDetails
    payment_url: str = Field(description="The customer's checkout page")
    qr_string: str | SkipJsonSchema[None] = Field(None, description="QRIS payload (create-qr and QRIS only)")
    qr_url: str | SkipJsonSchema[None] = Field(None, description="PNG of the QR code (QRIS only)")
    failure_reason: str | SkipJsonSchema[None] = Field(None, description="Only when transaction_status is failed")
    refund_history: list[WalletRefundEntry] | SkipJsonSchema[None] = Field(None, description="After a refund")
    void_history: list[WalletVoidEntry] | SkipJsonSchema[None] = Field(None, description="After a void")
