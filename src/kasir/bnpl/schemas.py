"""BNPL request bodies (interface.md tables), camelCase on the wire.

Every field's type and maximum length is checked; a blank mandatory string counts as
missing (`400xx02`), anything else wrong is `400xx01 Invalid Field Format {field}`.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints
from pydantic_core import PydanticCustomError

from kasir.bnpl.categories import FEE_ITEM_IDS, allowed_categories
from kasir.kit.fields import PhoneNumber, country_code, email, http_url, required
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
Str3 = Annotated[str, _text(3), Req]
Str8 = Annotated[str, _text(8), Req]
Str16 = Annotated[str, _text(16), Req]
Str32 = Annotated[str, _text(32), Req]
Str64 = Annotated[str, _text(64), Req]
Str128 = Annotated[str, _text(128), Req]
Str256 = Annotated[str, _text(256), Req]
Opt16 = Annotated[str, _text(16)]
Opt32 = Annotated[str, _text(32)]
# 14 digits, the point, 2 decimals; the rule documented as the schema's pattern (checked by _amount).
AmountValue = Annotated[
    str,
    _text(17),
    Req,
    AfterValidator(_amount),
    Field(description=f"A string of {SNAP_AMOUNT_RULE}", json_schema_extra={"pattern": SNAP_AMOUNT_PATTERN}),
]
Currency = Annotated[str, _text(3), Req, AfterValidator(_idr)]
Url256 = Annotated[str, _text(256), Req, AfterValidator(http_url)]
OptUrl256 = Annotated[str, _text(256), AfterValidator(http_url)]
Email64 = Annotated[str, _text(64), Req, AfterValidator(email)]
OptEmail64 = Annotated[str, _text(64), AfterValidator(email)]
Phone16 = Annotated[str, _text(16), Req, PhoneNumber()]  # interface.md: phone 16
ItemId = Annotated[str, _text(64), Req, AfterValidator(_item_id)]
StrictQty = Annotated[int, BeforeValidator(_strict_qty), AfterValidator(_qty_range)]
LenientQty = Annotated[int, BeforeValidator(_lenient_qty), AfterValidator(_qty_range)]


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
    category: Annotated[str, _text(256), Req, AfterValidator(_category)]
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
    category: Annotated[str, _text(4), Req, AfterValidator(_category)]
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
    country_code: Annotated[str, _text(16), Req, AfterValidator(country_code)]


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
    callback_url: Annotated[str, _text(2048), Req, AfterValidator(http_url)]
    additional_info: dict[str, Any] | None = None


# --- status inquiry (service 93) -----------------------------------------------------


class BnplStatusInquiryRequest(SnapModel):
    original_partner_reference_no: Annotated[str, _text(64)] | None = None
    original_reference_no: Annotated[str, _text(64)] | None = None
    additional_info: dict[str, Any] | None = None
