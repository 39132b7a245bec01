"""BNPL request bodies (interface.md tables), camelCase on the wire.

Every field's type and maximum length is checked; a blank mandatory string counts as
missing (`400xx02`), anything else wrong is `400xx01 Invalid Field Format {field}`.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import PydanticCustomError

from kasir.bnpl.categories import FEE_ITEM_IDS, allowed_categories
from kasir.kit.fields import (
    COUNTRY,
    EMAIL,
    REQUIRED,
    URL,
    Documented,
    PhoneNumber,
    country_code,
    email,
    http_url,
    required,
)
from kasir.kit.money import SNAP_AMOUNT_PATTERN, SNAP_AMOUNT_RULE, parse_snap_amount
from kasir.snap.schemas import SnapModel

QTY_MAX = 99_999_999  # interface.md: qty length 8
# Not in the interface: a bound on every list, as for the wallet and the card (100 items), so that no
# body inside the size limit can still cost a row or a validation per element without end.
ITEMS_MAX = 100


def _amount(value: str) -> str:
    try:
        parse_snap_amount(value)
    except ValueError as exc:
        raise PydanticCustomError("amount", str(exc)) from exc
    return value


def _idr(value: str) -> str:
    if value != "IDR":
        raise PydanticCustomError("currency", "must be IDR")
    return value


def _category(value: str) -> str:
    if value not in allowed_categories():
        raise PydanticCustomError("category", "is not a code of the BNPL category table")
    return value


def _item_id(value: str) -> str:
    if value.lower() in FEE_ITEM_IDS and value not in FEE_ITEM_IDS:
        raise PydanticCustomError("item_id", "fee item ids are written in lower case, like shippingfee")
    return value


def _strict_qty(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PydanticCustomError("int_type", "must be an integer")
    return value


def _lenient_qty(value: Any) -> Any:
    # interface.md: calculation qty is "string in the field list (a number is sent)": take both.
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    return _strict_qty(value)


def _qty_range(value: int) -> int:
    if not 1 <= value <= QTY_MAX:
        raise PydanticCustomError("qty", "must be between 1 and 99999999")
    return value


def _text(max_length: int) -> Any:
    return StringConstraints(max_length=max_length)


Req = AfterValidator(required)
# Each rule is also stated in the field's OpenAPI schema (kasir.kit.fields.Documented).
QTY = Documented(type="integer", minimum=1, maximum=QTY_MAX)
CATEGORY = Documented(description="A 4-character code of the BNPL category table (KASIR_BNPL_CATEGORIES)")
Str3 = Annotated[str, _text(3), Req, REQUIRED]
Str8 = Annotated[str, _text(8), Req, REQUIRED]
Str16 = Annotated[str, _text(16), Req, REQUIRED]
Str32 = Annotated[str, _text(32), Req, REQUIRED]
Str64 = Annotated[str, _text(64), Req, REQUIRED]
Str128 = Annotated[str, _text(128), Req, REQUIRED]
Str256 = Annotated[str, _text(256), Req, REQUIRED]
Opt16 = Annotated[str, _text(16)]
Opt32 = Annotated[str, _text(32)]
# 14 digits, the point, 2 decimals; the rule documented as the schema's pattern (checked by _amount).
AmountValue = Annotated[
    str,
    _text(17),
    Req,
    AfterValidator(_amount),
    Field(
        description=f"A string of {SNAP_AMOUNT_RULE}",
        json_schema_extra={"pattern": SNAP_AMOUNT_PATTERN, "examples": ["150000.00"]},
    ),
]
Currency = Annotated[str, _text(3), Req, AfterValidator(_idr), Documented(enum=["IDR"])]
Url256 = Annotated[str, _text(256), Req, AfterValidator(http_url), URL]
OptUrl256 = Annotated[str, _text(256), AfterValidator(http_url), URL]
Email64 = Annotated[str, _text(64), Req, AfterValidator(email), EMAIL]
OptEmail64 = Annotated[str, _text(64), AfterValidator(email), EMAIL]
Phone16 = Annotated[str, _text(16), Req, PhoneNumber()]  # interface.md: phone 16
ItemId = Annotated[str, _text(64), Req, AfterValidator(_item_id), REQUIRED]
StrictQty = Annotated[int, BeforeValidator(_strict_qty), AfterValidator(_qty_range), QTY]
LenientQty = Annotated[
    int, BeforeValidator(_lenient_qty), AfterValidator(_qty_range), QTY, Documented(description="A number (or digits)")
]


class BnplMoney(SnapModel):
    value: AmountValue
    currency: Currency

    @property
    def decimal(self) -> Decimal:
        return Decimal(self.value)


# --- payment calculation (service 90) -----------------------------------------------


class BnplCalculationItem(SnapModel):
    item_id: ItemId
    name: Str128
    amount: BnplMoney
    url: Url256
    image_url: OptUrl256 | None = None
    category: Annotated[str, _text(256), Req, AfterValidator(_category), CATEGORY]
    qty: LenientQty
    parent_type: Literal["SELLER"]
    parent_id: Str64


class PaymentCalculationRequest(SnapModel):
    amount: BnplMoney
    item_details: Annotated[list[BnplCalculationItem], Field(min_length=1, max_length=ITEMS_MAX)]
    additional_info: dict[str, Any] | None = None


# --- QR checkout (service 92) -------------------------------------------------------


class BnplPaymentDetails(SnapModel):
    amount: BnplMoney


class BnplCheckoutItem(SnapModel):
    item_id: ItemId
    name: Str128
    amount: BnplMoney
    category: Annotated[str, _text(4), Req, AfterValidator(_category), CATEGORY]
    qty: StrictQty


class BnplCustomerDetails(SnapModel):
    first_name: Str16
    last_name: Opt16 | None = None
    email: Email64
    phone: Phone16


class BnplSellerAddress(SnapModel):
    first_name: Str16
    last_name: Opt16 | None = None
    address: Str256
    city: Str32
    postal_code: Str8
    phone: Phone16
    country_code: Annotated[str, _text(16), Req, AfterValidator(country_code), COUNTRY]


class BnplSeller(SnapModel):
    id: Opt16 | None = None
    name: Opt16 | None = None
    url: OptUrl256 | None = None
    seller_id_number: Opt32 | None = None
    email: OptEmail64 | None = None
    address: BnplSellerAddress | None = None


class QrCheckoutRequest(SnapModel):
    partner_reference_no: Str64
    payment_details: BnplPaymentDetails
    item_details: Annotated[list[BnplCheckoutItem], Field(min_length=1, max_length=ITEMS_MAX)]
    customer_details: BnplCustomerDetails
    sellers: Annotated[list[BnplSeller], Field(max_length=ITEMS_MAX)] | None = None
    callback_url: Annotated[str, _text(2048), Req, AfterValidator(http_url), URL]
    additional_info: dict[str, Any] | None = None


# --- status inquiry (service 93) -----------------------------------------------------


class BnplStatusInquiryRequest(SnapModel):
    """Names the transaction by originalReferenceNo, originalPartnerReferenceNo, or both (then they must agree)."""

    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {"required": [name], "properties": {name: {"type": "string", "minLength": 1}}}
                for name in ("originalReferenceNo", "originalPartnerReferenceNo")
            ]
        }
    )
    original_partner_reference_no: Annotated[str, _text(64)] | None = None
    original_reference_no: Annotated[str, _text(64)] | None = None
    additional_info: dict[str, Any] | None = None


# --- answers (200 bodies), documented for the OpenAPI document and generated clients ------------------
# The service builds them (kasir.bnpl.service.option_body / transaction_body); field names are the wire's.

_SNAP_TIME = "ISO 8601 with offset, like 2026-11-23T10:15:00+07:00"
_STATUSES = {
    "00": "Success", "01": "Initiated", "02": "Paying", "03": "Pending", "04": "Refunded", "05": "Canceled",
    "06": "Failed", "07": "Not found",
}  # fmt: skip


class BnplAmount(BaseModel):
    """A SNAP amount: a string with two decimals, and its currency."""

    value: str = Field(pattern=r"^[0-9]{1,14}\.[0-9]{2}$", examples=["150000.00"])
    currency: str = Field(examples=["IDR"])


class BnplInstallmentOption(BaseModel):
    id: str = Field(examples=["3_months"])
    tenure: int = Field(examples=[3])
    tenureTimeUnit: str = Field(examples=["MONTH"])  # noqa: N815 (wire names)
    paymentType: str  # noqa: N815
    rate: int
    amount: BnplAmount
    installmentAmount: BnplAmount  # noqa: N815
    monthlyInstallment: BnplAmount  # noqa: N815
    totalInterest: BnplAmount  # noqa: N815
    provision: BnplAmount
    totalTransactionAmount: BnplAmount  # noqa: N815


class BnplCalculationResponse(BaseModel):
    """Payment calculation (service 90): one option per tenure the merchant offers."""

    responseCode: str = Field(examples=["2009000"])  # noqa: N815
    responseMessage: str = Field(examples=["Successful"])  # noqa: N815
    payments: list[BnplInstallmentOption]


class BnplAnswerPaymentDetails(BaseModel):
    amount: BnplAmount
    totalAmount: BnplAmount  # noqa: N815


_CHECKOUT_EXAMPLE: dict[str, Any] = {
    "responseCode": "2009200",
    "responseMessage": "Successful",
    "partnerReferenceNo": "INV-1001",
    "referenceNo": "BN2611230001ABCD",
    "paymentChannel": "KASIR_BNPL",
    "paymentDetails": {
        "amount": {"value": "150000.00", "currency": "IDR"},
        "totalAmount": {"value": "150000.00", "currency": "IDR"},
    },
    "qrContent": "https://kasir.example/bnpl/pages/BN2611230001ABCD",
    "qrUrl": "https://kasir.example/bnpl/qr/BN2611230001ABCD.png",
    "latestTransactionStatus": "01",
    "transactionStatusDesc": "Initiated",
    "createdAt": "2026-11-23T10:15:00+07:00",
    "validityPeriod": "2026-11-23T10:45:00+07:00",
}


class BnplCheckoutResponse(BaseModel):
    """QR checkout (service 91): the transaction, and where the customer approves it."""

    model_config = ConfigDict(json_schema_extra={"examples": [_CHECKOUT_EXAMPLE]})

    responseCode: str = Field(examples=["2009200"])  # noqa: N815
    responseMessage: str = Field(examples=["Successful"])  # noqa: N815
    partnerReferenceNo: str  # noqa: N815
    referenceNo: str  # noqa: N815
    paymentChannel: str = Field(examples=["KASIR_BNPL"])  # noqa: N815
    paymentDetails: BnplAnswerPaymentDetails  # noqa: N815
    qrContent: str = Field(description="The customer's approval page")  # noqa: N815
    qrUrl: str = Field(description="PNG of qrContent as a QR code")  # noqa: N815
    latestTransactionStatus: str = Field(  # noqa: N815
        json_schema_extra={"enum": list(_STATUSES)},
        description="; ".join(f"{code} {name}" for code, name in _STATUSES.items()),
    )
    transactionStatusDesc: str  # noqa: N815
    createdAt: str = Field(description=_SNAP_TIME)  # noqa: N815
    validityPeriod: str = Field(description=_SNAP_TIME)  # noqa: N815


class BnplStatusResponse(BnplCheckoutResponse):
    """Status inquiry (service 92): the checkout's fields, the original references, the tenure."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    **_CHECKOUT_EXAMPLE,
                    "responseCode": "2009300",
                    "originalPartnerReferenceNo": "INV-1001",
                    "originalReferenceNo": "BN2611230001ABCD",
                    "tenure": 3,
                }
            ]
        }
    )

    originalPartnerReferenceNo: str  # noqa: N815
    originalReferenceNo: str  # noqa: N815
    tenure: int = Field(description="Months, as chosen on the approval page")
    paidTime: str | SkipJsonSchema[None] = Field(None, description=_SNAP_TIME + "; once paid")  # noqa: N815
