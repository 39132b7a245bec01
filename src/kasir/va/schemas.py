"""Virtual-account request bodies (docs/decisions.md §9.2, §9.6), snake_case on the wire.

Every field's type, length and rule is checked; a failure is `01` naming the field and the rule.
Unknown keys are ignored (mcp-php sends `payment_options`), and an optional field sent as `null` or
`""` is absent (mcp-php sends `expired_time: ""`). Amounts are whole rupiah: a JSON integer, or a
number with a zero fraction (`10000.0`), made an integer at once.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, JsonValue, model_validator
from pydantic_core import PydanticCustomError

from kasir.kit.fields import EMAIL, REQUIRED, URL, Documented, PhoneNumber, email, http_url
from kasir.va.banks import AMOUNT_MAX, CHANNELS
from kasir.va.states import VaStatus
from kasir.wallet.schemas import MaxLength, Req, Str, Timestamp

PAYMENT_SYSTEMS = ("CLOSED", "OPEN", "PARTIAL")
PAYMENT_METHOD = "BANK_TRANSFER"
ITEMS_MAX = 100
QTY_MAX = 99_999


class VaModel(BaseModel):
    model_config = ConfigDict(extra="ignore")

    @model_validator(mode="before")
    @classmethod
    def _empty_is_absent(cls, data: Any) -> Any:
        """An optional field sent as null or "" is absent (§9.1); a required one stays, and is refused."""
        if not isinstance(data, dict):
            return data
        required = {name for name, field in cls.model_fields.items() if field.is_required()}
        return {key: value for key, value in data.items() if key in required or value not in (None, "")}


def _whole_rupiah(value: Any) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # `10000.0`: a whole number written with a fraction
    if isinstance(value, bool) or not isinstance(value, int):
        raise PydanticCustomError("rupiah", "must be a whole number of rupiah (a JSON integer, like 150000)")
    if not 0 <= value <= AMOUNT_MAX:
        raise PydanticCustomError("rupiah", "must be a whole number of rupiah from 0 to {max}", {"max": AMOUNT_MAX})
    return value


def _positive(value: int) -> int:
    if value < 1:
        raise PydanticCustomError("rupiah", "must be at least 1")
    return value


def _qty(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= QTY_MAX:
        raise PydanticCustomError("qty", "must be an integer from 1 to {max}", {"max": QTY_MAX})
    return value


def _any_case(allowed: tuple[str, ...], name: str) -> Any:
    def check(value: str) -> str:
        upper = value.strip().upper()
        if upper not in allowed:
            raise PydanticCustomError(name, "must be one of {allowed}", {"allowed": ", ".join(allowed)})
        return upper

    return AfterValidator(check)


def _payment_system(value: str) -> str:
    upper = value.strip().upper()
    if upper == "INSTALLMENT":
        return "PARTIAL"  # mcp-php sends it; taken, stored and answered as PARTIAL (§9.2)
    if upper not in PAYMENT_SYSTEMS:
        raise PydanticCustomError("payment_system", "must be one of CLOSED, OPEN, PARTIAL")
    return upper


def _va_digits(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        value = str(value)
    if not isinstance(value, str) or not value.isascii() or not value.isdigit():
        raise PydanticCustomError("va_number", "must be a string of digits")
    return value


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise PydanticCustomError("boolean", "must be true or false")
    return value


def _reference(value: str) -> str:
    if not value.replace("-", "").isalnum() or not value.isascii():
        raise PydanticCustomError("reference", "may contain only letters, digits and -")
    return value


def _printable(value: str) -> str:
    if not value.isprintable():
        raise PydanticCustomError("printable", "must contain only printable characters")
    return value


Printable = AfterValidator(_printable)
Text25 = Annotated[str, Str, MaxLength(25), Req, Printable, REQUIRED]
Text100 = Annotated[str, Str, MaxLength(100), Req, Printable, REQUIRED]
OptText10 = Annotated[str, Str, MaxLength(10), Printable]
OptText18 = Annotated[str, Str, MaxLength(18), Printable]
OptText50 = Annotated[str, Str, MaxLength(50), Printable]
OptText100 = Annotated[str, Str, MaxLength(100), Printable]
OptText150 = Annotated[str, Str, MaxLength(150), Printable]
OptText1024 = Annotated[str, Str, MaxLength(1024), Printable]


Rupiah = Annotated[int, BeforeValidator(_whole_rupiah), Documented(type="integer", minimum=0, maximum=AMOUNT_MAX)]
PositiveRupiah = Annotated[Rupiah, AfterValidator(_positive), Documented(minimum=1)]
ExternalId = Annotated[
    str, Str, MaxLength(64), Req, AfterValidator(_reference), Documented(pattern="^[A-Za-z0-9-]+$", minLength=1)
]
OrderId = Annotated[
    str, Str, MaxLength(25), Req, AfterValidator(_reference), Documented(pattern="^[A-Za-z0-9-]+$", minLength=1)
]
PaymentMethod = Annotated[str, Str, Req, _any_case(("BANK_TRANSFER",), "payment_method"), REQUIRED]
Channel = Annotated[str, Str, Req, _any_case(tuple(CHANNELS), "payment_channel"), REQUIRED]
Currency = Annotated[str, Str, Req, _any_case(("IDR",), "currency"), Documented(enum=["IDR"])]
Boolean = Annotated[bool, BeforeValidator(_boolean)]
VaDigits = Annotated[str, BeforeValidator(_va_digits), Documented(type="string", pattern="^[0-9]{1,12}$")]
Email = Annotated[str, Str, MaxLength(255), Req, AfterValidator(email), EMAIL]
Phone = Annotated[str, Str, MaxLength(18), Req, PhoneNumber()]
Url = Annotated[str, Str, MaxLength(2048), Req, AfterValidator(http_url), URL]


def defaults_undocumented(schema: dict[str, Any]) -> None:
    """An optional field documented with its default is one openapi-typescript (with its default options) makes
    required in the request: the defaults are said in the descriptions instead."""
    for field in schema.get("properties", {}).values():
        field.pop("default", None)


class VaPaymentDetails(VaModel):
    model_config = ConfigDict(extra="ignore", json_schema_extra=defaults_undocumented)

    billing_name: Text100
    transaction_description: Text100
    payment_system: Annotated[
        str,
        Str,
        AfterValidator(_payment_system),
        Documented(enum=[*PAYMENT_SYSTEMS, "INSTALLMENT"]),
        Field(description="Default CLOSED; INSTALLMENT is taken as PARTIAL"),
    ] = "CLOSED"
    is_multi_use: Boolean | None = None
    amount: Rupiah | None = None
    va_number: VaDigits | None = None
    expired_time: Timestamp | None = None
    is_customer_paying_fee: Annotated[Boolean, Field(description="Default false; changes nothing, echoed")] = False


class VaCustomerDetails(VaModel):
    email: Email
    full_name: Text100
    phone: Phone | None = None


class VaItem(VaModel):
    item_id: Text25
    name: Text100
    amount: PositiveRupiah
    qty: Annotated[int, BeforeValidator(_qty), Documented(type="integer", minimum=1, maximum=QTY_MAX)]
    description: OptText100 | None = None


class VaAddress(VaModel):
    """Free text, every field optional (§9.2): mcp-php sends the phone `1+23456` and the country `Indonesia`."""

    full_name: OptText100 | None = None
    phone: OptText18 | None = None
    address: OptText150 | None = None
    city: OptText50 | None = None
    postal_code: OptText10 | None = None
    country: OptText100 | None = None


def _items(value: list[VaItem]) -> list[VaItem]:
    if len(value) > ITEMS_MAX:
        raise PydanticCustomError("item_details", "must list at most {max} items", {"max": ITEMS_MAX})
    return value


class CreateVaRequest(VaModel):
    """The body of `POST /va`."""

    external_id: ExternalId
    order_id: OrderId
    currency: Currency
    payment_method: PaymentMethod
    payment_channel: Channel
    payment_details: VaPaymentDetails
    customer_details: VaCustomerDetails
    item_details: Annotated[list[VaItem], AfterValidator(_items), Documented(maxItems=ITEMS_MAX)] | None = None
    billing_address: VaAddress | None = None
    shipping_address: VaAddress | None = None
    callback_url: Url | None = None
    additional_data: OptText1024 | None = None


class VaReference(VaModel):
    """Names one VA of the merchant: inquiry, cancel, and the base of the dummy payment (§9.6)."""

    transaction_id: Annotated[str, Str, MaxLength(32), Req, REQUIRED]
    external_id: ExternalId
    order_id: OrderId
    payment_method: PaymentMethod | None = None
    payment_channel: Channel | None = None


class DummyVaPaymentRequest(VaReference):
    payment_method: PaymentMethod
    payment_channel: Channel
    amount: PositiveRupiah | None = None


class VaErrorBody(BaseModel):
    """Every VA failure: the wallet's (docs/decisions.md §4)."""

    response_code: str
    response_message: str


# --- the answers (kasir.va.service builds them: va_data, dummy_payment_data, callback_payload) ---------------
# Documented for the OpenAPI document, so a generated client reads typed fields. A string with no value is "",
# never null; amounts are JSON integers (whole rupiah).

_VA_TIME = "ISO 8601 with milliseconds and +07:00, like 2026-11-28T10:15:00.000+07:00"
_STATUSES: list[JsonValue] = [status.value for status in VaStatus]


class VaAnswerCustomer(BaseModel):
    email: str
    full_name: str
    phone: str = Field(description='"" when not sent')


class VaAnswerItem(BaseModel):
    item_id: str
    name: str
    amount: int = Field(description="Unit price, whole rupiah")
    qty: int
    description: str = Field(description='"" when not sent')


class VaAnswerAddress(BaseModel):
    """Every field, "" when not sent."""

    full_name: str
    phone: str
    address: str
    city: str
    postal_code: str
    country: str


class VaAnswerPaymentDetails(BaseModel):
    billing_name: str
    va_number: str = Field(description="The full number the customer pays into: the bank's prefix and its digits")
    payment_system: str = Field(json_schema_extra={"enum": list(PAYMENT_SYSTEMS)})
    is_multi_use: bool
    amount: int = Field(description="Whole rupiah: CLOSED the amount to pay, PARTIAL the total, OPEN as sent or 0")
    total_paid_amount: int = Field(description="The sum of the payments")
    remaining_amount: int = Field(description="PARTIAL: amount - total_paid_amount; other payment systems 0")
    is_customer_paying_fee: bool
    transaction_description: str
    expired_time: str = Field(description=_VA_TIME)


class VaHistoryEntry(BaseModel):
    reference_id: str = Field(description="The payment's, as its callback names it")
    amount: int
    paid_time: str = Field(description=_VA_TIME)
    transaction_status: str = Field(json_schema_extra={"enum": ["PAID"]})


class VaData(BaseModel):
    """The virtual account, as create, inquiry and cancel answer it (§9.6)."""

    transaction_id: str = Field(examples=["VA7Q2M9K4X1B8N3C5D6F0G"])
    external_id: str
    order_id: str
    merchant_id: str
    currency: str = Field(json_schema_extra={"enum": ["IDR"]})
    payment_method: str = Field(json_schema_extra={"enum": [PAYMENT_METHOD]})
    payment_channel: str = Field(description="Upper case, as sent (aliases included)", examples=["BCA"])
    payment_system: str = Field(json_schema_extra={"enum": list(PAYMENT_SYSTEMS)})
    transaction_status: str = Field(json_schema_extra={"enum": _STATUSES})
    transaction_time: str = Field(description="Creation; " + _VA_TIME)
    payment_details: VaAnswerPaymentDetails
    customer_details: VaAnswerCustomer
    item_details: list[VaAnswerItem]
    billing_address: VaAnswerAddress
    shipping_address: VaAnswerAddress
    callback_url: str
    additional_data: str = Field(description='"" when not sent')
    payment_history: list[VaHistoryEntry] = Field(description="The last five payments, newest first")


class VaAnswer(BaseModel):
    """Every successful answer of create, inquiry and cancel: `{response_code, response_message, data}` (§9.1)."""

    response_code: str = Field(examples=["00"])
    response_message: str = Field(examples=["Success"])
    data: VaData


class VaDummyPaymentData(BaseModel):
    """The staging payment (§9.6), and the VA's state after it."""

    transaction_id: str
    external_id: str
    order_id: str
    va_number: str
    reference_id: str = Field(examples=["REF7Q2M9K4X1B8N3C5D6"])
    amount: int
    paid_time: str = Field(description=_VA_TIME)
    transaction_status: str = Field(json_schema_extra={"enum": [VaStatus.PARTIALLY_PAID.value, VaStatus.PAID.value]})


class VaDummyPaymentAnswer(BaseModel):
    """The answer of `/va/dummy-payment`: `{response_code, response_message, data}`."""

    response_code: str = Field(examples=["00"])
    response_message: str = Field(examples=["Success"])
    data: VaDummyPaymentData
