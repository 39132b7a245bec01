"""Payment-link request and answer bodies (docs/decisions.md §10.1, §10.2), snake_case on the wire.

The VA family's rules (§9.1): unknown keys are ignored, an optional field sent as `null` or `""` is
absent (mcp-php sends `expired_time: ""`), amounts are whole rupiah (a JSON integer or a number with a
zero fraction). Every failure is `01` naming the field, as a dotted path (`selected_channels[2].acq`).

Channels (§10.3), compared in any letter case and kept in upper case, `acq` defaulted:

    CARD                                acq BCACC, CIMBCC, BRICC, BCAPG, CIMBPG or CARD; absent: CARD
    VA                                  acq required: a VA channel or alias (kasir.va.banks)
    OVO, DANA, SHOPEEPAY, LINKAJA, VIRGO acq absent or the same code
    QRIS                                acq absent or QRIS
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic_core import PydanticCustomError

from kasir.callbacks.schemas import PaymentPageNotification
from kasir.errors import InvalidFieldFormat, InvalidMandatoryField, from_pydantic_errors
from kasir.kit.fields import EMAIL, REQUIRED, URL, Documented, PhoneNumber, email, http_url
from kasir.va.banks import CHANNELS as VA_CHANNELS
from kasir.va.schemas import Boolean, Printable, VaModel, defaults_undocumented
from kasir.wallet.schemas import MaxLength, Req, Str, Timestamp

AMOUNT_MIN = 10_000
AMOUNT_MAX = 9_999_999_999_999
QTY_MAX = 999
ITEMS_MAX = 100
CHANNELS_MAX = 20

CARD = "CARD"
VA = "VA"
QRIS = "QRIS"
WALLETS = ("OVO", "DANA", "SHOPEEPAY", "LINKAJA", "VIRGO")
CARD_ACQUIRERS = ("BCACC", "CIMBCC", "BRICC", "BCAPG", "CIMBPG", "CARD")
CHANNELS = (CARD, VA, *WALLETS, QRIS)


def _whole_rupiah(value: Any) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # `10000.0`: a whole number written with a fraction (§9.1)
    if isinstance(value, bool) or not isinstance(value, int):
        raise PydanticCustomError("rupiah", "must be a whole number of rupiah (a JSON integer, like 150000)")
    return value


def _link_amount(value: int) -> int:
    if not AMOUNT_MIN <= value <= AMOUNT_MAX:
        raise PydanticCustomError(
            "rupiah", "must be from {min} to {max} rupiah", {"min": AMOUNT_MIN, "max": AMOUNT_MAX}
        )
    return value


def _positive(value: int) -> int:
    if not 1 <= value <= AMOUNT_MAX:
        raise PydanticCustomError("rupiah", "must be from 1 to {max} rupiah", {"max": AMOUNT_MAX})
    return value


def _qty(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= QTY_MAX:
        raise PydanticCustomError("qty", "must be an integer from 1 to {max}", {"max": QTY_MAX})
    return value


def _pattern(allowed: str, says: str) -> Any:
    def check(value: str) -> str:
        if not value.isascii() or not all(c.isalnum() or c in allowed for c in value):
            raise PydanticCustomError("reference", says)
        return value

    return AfterValidator(check)


def _items(value: list[Any]) -> list[Any]:
    if len(value) > ITEMS_MAX:
        raise PydanticCustomError("item_details", "must list at most {max} items", {"max": ITEMS_MAX})
    return value


def _channels(value: list[Any]) -> list[Any]:
    if not 1 <= len(value) <= CHANNELS_MAX:
        raise PydanticCustomError("selected_channels", "must list 1 to {max} channels", {"max": CHANNELS_MAX})
    return value


Rupiah = Annotated[int, BeforeValidator(_whole_rupiah)]
LinkAmount = Annotated[
    Rupiah, AfterValidator(_link_amount), Documented(type="integer", minimum=AMOUNT_MIN, maximum=AMOUNT_MAX)
]
ItemAmount = Annotated[Rupiah, AfterValidator(_positive), Documented(type="integer", minimum=1, maximum=AMOUNT_MAX)]
Qty = Annotated[int, BeforeValidator(_qty), Documented(type="integer", minimum=1, maximum=QTY_MAX)]
ExternalId = Annotated[
    str,
    Str,
    MaxLength(255),
    Req,
    _pattern("-_.", "may contain only letters, digits, -, _ and ."),
    Documented(pattern="^[A-Za-z0-9._-]+$", minLength=1),
]
OrderId = Annotated[
    str,
    Str,
    MaxLength(25),
    Req,
    _pattern("-", "may contain only letters, digits and -"),
    Documented(pattern="^[A-Za-z0-9-]+$", minLength=1),
]
Text100 = Annotated[str, Str, MaxLength(100), Req, Printable, REQUIRED]
Text255 = Annotated[str, Str, MaxLength(255), Req, Printable, REQUIRED]
OptText10 = Annotated[str, Str, MaxLength(10), Printable]
OptText20 = Annotated[str, Str, MaxLength(20), Printable]
OptText50 = Annotated[str, Str, MaxLength(50), Printable]
OptText100 = Annotated[str, Str, MaxLength(100), Printable]
OptText150 = Annotated[str, Str, MaxLength(150), Printable]
OptText255 = Annotated[str, Str, MaxLength(255), Printable]
OptText1024 = Annotated[str, Str, MaxLength(1024), Printable]
Email = Annotated[str, Str, MaxLength(255), Req, AfterValidator(email), EMAIL]
Phone = Annotated[str, Str, MaxLength(20), Req, PhoneNumber()]
Url = Annotated[str, Str, MaxLength(2048), Req, AfterValidator(http_url), URL]


def _upper_in(value: str, allowed: tuple[str, ...], name: str) -> str:
    upper = value.strip().upper()
    if upper not in allowed:
        raise PydanticCustomError(name, "must be one of {allowed}", {"allowed": ", ".join(allowed)})
    return upper


Currency = Annotated[
    str, Str, Req, AfterValidator(lambda value: _upper_in(value, ("IDR",), "currency")), Documented(enum=["IDR"])
]


class LinkCustomer(VaModel):
    model_config = ConfigDict(extra="ignore", json_schema_extra=defaults_undocumented)

    full_name: Text100
    email: Email
    phone: Phone | None = None
    address: Text255
    is_email_show: Annotated[Boolean, Field(description="Default true: the page shows the e-mail")] = True
    is_phone_show: Annotated[Boolean, Field(description="Default true: the page shows the phone")] = True


class LinkItem(VaModel):
    item_id: Annotated[str, Str, MaxLength(100), Req, Printable, REQUIRED]
    name: Text255
    amount: ItemAmount
    qty: Qty
    description: OptText255 | None = None


class LinkAddress(VaModel):
    """Free text, every field optional (§9.2, `phone` ≤ 20): mcp-php sends the country `ID`."""

    full_name: OptText100 | None = None
    phone: OptText20 | None = None
    address: OptText150 | None = None
    city: OptText50 | None = None
    postal_code: OptText10 | None = None
    country: OptText100 | None = None


class SelectedChannel(VaModel):
    """One offered method (§10.3). `payment_system` and `is_multi_use` (mcp-php) are accepted and ignored."""

    channel: Annotated[str, Str, Req, Documented(enum=list(CHANNELS)), REQUIRED]
    acq: Annotated[str, Str, Documented(description="The acquirer or bank (§10.3)")] | None = None


def parse_channels(entries: list[Any]) -> list[SelectedChannel]:
    """The entries checked against §10.3, in upper case with `acq` defaulted; `01` naming the entry's field
    (`selected_channels[2].acq`) otherwise."""
    chosen: list[SelectedChannel] = []
    for index, entry in enumerate(entries):
        where = f"selected_channels[{index}]"
        try:
            parsed = SelectedChannel.model_validate(entry)
        except ValidationError as exc:
            raise from_pydantic_errors(exc.errors(), prefix=("selected_channels", index)) from exc
        channel = parsed.channel.strip().upper()
        acq = parsed.acq.strip().upper() if parsed.acq is not None else None
        if channel not in CHANNELS:
            raise InvalidFieldFormat(f"{where}.channel", "must be one of " + ", ".join(CHANNELS))
        if channel == CARD:
            acq = acq or CARD
            if acq not in CARD_ACQUIRERS:
                raise InvalidFieldFormat(f"{where}.acq", "must be one of " + ", ".join(CARD_ACQUIRERS) + " for CARD")
        elif channel == VA:
            if acq is None:
                raise InvalidMandatoryField(f"{where}.acq")
            if acq not in VA_CHANNELS:
                raise InvalidFieldFormat(f"{where}.acq", "must be one of " + ", ".join(VA_CHANNELS) + " for VA")
        elif acq is not None and acq != channel:
            raise InvalidFieldFormat(f"{where}.acq", f"must be absent or {channel} for {channel}")
        chosen.append(SelectedChannel(channel=channel, acq=acq or channel))
    return chosen


class CreateLinkRequest(VaModel):
    """The body of `POST /payment-page/payment`."""

    model_config = ConfigDict(extra="ignore", json_schema_extra=defaults_undocumented)

    external_id: ExternalId
    order_id: OrderId
    amount: LinkAmount
    currency: Currency | None = None
    description: Text255
    is_customer_paying_fee: Annotated[Boolean, Field(description="Default false; changes nothing, echoed")] = False
    customer_details: LinkCustomer
    item_details: Annotated[list[LinkItem], AfterValidator(_items), Documented(maxItems=ITEMS_MAX)] | None = None
    selected_channels: Annotated[
        list[dict[str, Any]], AfterValidator(_channels), Documented(minItems=1, maxItems=CHANNELS_MAX)
    ]
    billing_address: LinkAddress | None = None
    shipping_address: LinkAddress | None = None
    save_card: Annotated[Boolean, Field(description='Default false; true offers "save this card"')] = False
    callback_url: Url | None = None
    success_redirect_url: Url | None = None
    failed_redirect_url: Url | None = None
    expired_time: Timestamp | None = None
    additional_data: OptText1024 | None = None


class LinkErrorBody(BaseModel):
    """Every link failure: the wallet family's (docs/decisions.md §4)."""

    response_code: str
    response_message: str


# --- the answers (kasir.links.service builds them) -------------------------------------------------------

_TIME = "ISO 8601 with milliseconds and +07:00, like 2026-11-28T10:15:00.000+07:00"


class ChannelEcho(BaseModel):
    channel: str = Field(examples=["DANA"])
    acq: str = Field(description="The entry's acq in upper case, the channel code where it had none", examples=["DANA"])


class LinkCreated(BaseModel):
    """`data` of create (§10.2)."""

    transaction_id: str = Field(examples=["PPL7Q2M9K4X1B8N3C5D6F0G"])
    external_id: str
    order_id: str
    currency: str = Field(json_schema_extra={"enum": ["IDR"]})
    amount: int
    description: str
    transaction_status: str = Field(json_schema_extra={"enum": ["PENDING"]})
    payment_url: str = Field(
        description="The customer's checkout: {KASIR_PUBLIC_URL}/payment-page/pages/{transaction_id}"
    )
    transaction_time: str = Field(description=_TIME)
    expired_time: str = Field(description=_TIME)
    selected_channels: list[ChannelEcho]


class LinkCreatedAnswer(BaseModel):
    response_code: str = Field(examples=["00"])
    response_message: str = Field(examples=["Success"])
    data: LinkCreated


class LinkData(PaymentPageNotification):
    """`data` of the read: every key of the payment-page callback's payload (transaction_status PENDING,
    SUCCESS or EXPIRED; "" where nothing happened yet), and these."""

    transaction_status: str = Field(json_schema_extra={"enum": ["PENDING", "SUCCESS", "EXPIRED"]})
    payment_url: str
    description: str
    transaction_time: str = Field(description=_TIME)
    additional_data: str = Field(description='"" when the link had none')


class LinkAnswer(BaseModel):
    """`GET /payment-page/payment/{transaction_id}`: `data` is the link as it is now."""

    response_code: str = Field(examples=["00"])
    response_message: str = Field(examples=["Success"])
    data: LinkData
