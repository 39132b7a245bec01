"""Disbursement bodies: the admin API's (docs/decisions.md §11.3: figures are JSON integers of whole rupiah) and
the merchants' SNAP routes' (§11.1 to §11.7: money as `{value, currency}`, `value` a string with two decimals)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StringConstraints,
    field_validator,
)
from pydantic_core import PydanticCustomError

from kasir.kit.clock import parse_aware
from kasir.kit.fields import REQUIRED, URL, Documented, http_url, required
from kasir.kit.money import parse_snap_amount
from kasir.payouts.banks import BANK_CODE_PATTERN, well_formed_code
from kasir.snap.schemas import SnapModel

AMOUNT_MAX = 9_999_999_999_999  # 13 digits, as every product's amounts


class TopUpRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    amount: Annotated[StrictInt, Field(ge=1, le=AMOUNT_MAX, description="Whole rupiah, a JSON integer")]
    note: Annotated[str, Field(min_length=1, max_length=255, description="Why: shown in the history (remark)")]

    @field_validator("note")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip() or not value.isprintable():
            raise ValueError("must be printable text, not blank")
        return value


class DisbursementBalanceView(BaseModel):
    merchant_id: str
    account_no: str | None
    available: int
    hold: int
    ledger: int


class TopUpView(BaseModel):
    top_up_id: int
    merchant_id: str
    amount: int
    available: int
    hold: int
    ledger: int
    created_at: datetime


# --- the merchants' SNAP bodies (docs/decisions.md §11.1 to §11.7), camelCase on the wire -----------------------
# A blank mandatory string counts as missing (`400xx02`), anything else wrong is `400xx01 Invalid Field Format
# {field}`. Rules across fields (the account number's form by the bank code's kind, the version's mandatory
# originatorInfos) are the models' validators; what needs the merchant or the database is the service's.


def _idr(value: str) -> str:
    if value != "IDR":
        raise PydanticCustomError("currency", "must be IDR")
    return value


def _whole_rupiah(value: str) -> str:
    try:
        parse_snap_amount(value)
    except ValueError as exc:
        raise PydanticCustomError("amount", str(exc)) from exc
    if not value.endswith(".00"):
        raise PydanticCustomError("amount", "must be whole rupiah, ending .00")
    return value


def _bank_code(value: str) -> str:
    if not well_formed_code(value):
        raise PydanticCustomError(
            "bank_code",
            "must be a bank's 3-digit code (or 7: code and branch), or OVO, DANA, GOPAY, SHOPEEPAY, LINKAJA",
        )
    return value


def _aware(value: str) -> str:
    try:
        parse_aware(value)
    except ValueError as exc:
        raise PydanticCustomError(
            "datetime", "must be ISO 8601 with an offset, like 2026-11-28T10:00:00+07:00"
        ) from exc
    return value


def _text(max_length: int) -> Any:
    return StringConstraints(max_length=max_length)


_Req = AfterValidator(required)
Str11 = Annotated[str, _text(11), _Req, REQUIRED]
Str34 = Annotated[str, _text(34), _Req, REQUIRED]
Str64 = Annotated[str, _text(64), _Req, REQUIRED]
Str100 = Annotated[str, _text(100), _Req, REQUIRED]
BankCode = Annotated[str, _text(7), _Req, AfterValidator(_bank_code), Documented(pattern=BANK_CODE_PATTERN), REQUIRED]
WholeRupiah = Annotated[
    str,
    _text(17),
    _Req,
    AfterValidator(_whole_rupiah),
    Field(
        description="Whole rupiah with two decimals .00", json_schema_extra={"pattern": r"^(0|[1-9][0-9]{0,13})\.00$"}
    ),
]
Currency = Annotated[str, _text(3), _Req, AfterValidator(_idr), Documented(enum=["IDR"])]
AwareTime = Annotated[str, _text(40), AfterValidator(_aware), Documented(description="ISO 8601 with an offset")]


class PayoutAmount(SnapModel):
    value: WholeRupiah
    currency: Currency

    @property
    def rupiah(self) -> int:
        return int(Decimal(self.value))


class OriginatorInfo(SnapModel):
    originator_customer_no: Str34
    originator_customer_name: Str100
    originator_bank_code: Str11


class TransferAdditionalInfo(SnapModel):
    """Any object, recorded as sent; `remark` shows in the history, `callbackUrl` asks for the notification."""

    model_config = ConfigDict(extra="allow")

    remark: Annotated[str, _text(255)] | None = None
    callback_url: Annotated[str, _text(2048), AfterValidator(http_url), URL] | None = None


class AccountInquiryRequest(SnapModel):
    """Account inquiry (service 16, §11.5)."""

    beneficiary_bank_code: BankCode
    beneficiary_account_no: Str34
    partner_reference_no: Annotated[str, _text(64)] | None = None
    additional_info: dict[str, Any] | None = None


class BalanceInquiryRequest(SnapModel):
    """Balance inquiry (service 11, §11.3): `balanceTypes` (array) or `balanceType` (the provider's client)."""

    partner_reference_no: Annotated[str, _text(64)] | None = None
    account_no: Annotated[str, _text(34)] | None = None
    balance_types: list[Annotated[str, _text(16)]] | None = None
    balance_type: Annotated[str, _text(16)] | None = None

    @field_validator("balance_types")
    @classmethod
    def _cash_only(cls, values: list[str] | None) -> list[str] | None:
        for value in values or ():
            if value.lower() != "cash":
                raise PydanticCustomError("balance_type", "the only balance type is cash")
        return values

    @field_validator("balance_type")
    @classmethod
    def _cash(cls, value: str | None) -> str | None:
        if value is not None and value.lower() != "cash":
            raise PydanticCustomError("balance_type", "the only balance type is cash")
        return value


class TransferRequest(SnapModel):
    """Transfer interbank (service 18, §11.6) on v1.0 and v1.1: `originatorInfos` optional."""

    partner_reference_no: Str64
    amount: PayoutAmount
    beneficiary_account_name: Str100
    beneficiary_account_no: Str34
    beneficiary_bank_code: BankCode
    beneficiary_address: Annotated[str, _text(100)] | None = None
    beneficiary_bank_name: Annotated[str, _text(50)] | None = None
    beneficiary_email: Annotated[str, _text(50)] | None = None
    customer_reference: Annotated[str, _text(30)] | None = None
    currency: Currency | None = None
    source_account_no: Annotated[str, _text(34)] | None = None
    transaction_date: AwareTime | None = None
    fee_type: Literal["OUR", "BEN", "SHA"] | None = None
    originator_infos: Annotated[list[OriginatorInfo], Field(max_length=10)] | None = None
    additional_info: TransferAdditionalInfo | None = None


class TransferRequestV12(TransferRequest):
    """Transfer interbank on v1.2: `originatorInfos` mandatory (the provider's v1.2 client calls it so)."""

    originator_infos: Annotated[list[OriginatorInfo], Field(min_length=1, max_length=10)]  # type: ignore[assignment]


class TransferStatusRequest(SnapModel):
    """Transfer status inquiry (service 36, §11.7): by either reference; other SNAP fields accepted, unchecked."""

    model_config = ConfigDict(extra="allow")

    service_code: Annotated[str, _text(2), _Req, REQUIRED]
    original_partner_reference_no: Annotated[str, _text(64)] | None = None
    original_reference_no: Annotated[str, _text(64)] | None = None

    @field_validator("service_code")
    @classmethod
    def _transfers(cls, value: str) -> str:
        if value != "18":
            raise PydanticCustomError("service_code", "must be 18 (transfer interbank)")
        return value


class HistoryFilter(SnapModel):
    original_partner_reference_no: Annotated[str, _text(64)] | None = None


class HistoryListRequest(SnapModel):
    """Transaction history list (service 12, §11.7)."""

    partner_reference_no: Annotated[str, _text(64)] | None = None
    from_date_time: AwareTime | None = None
    to_date_time: AwareTime | None = None
    page_size: Annotated[StrictInt, Field(ge=1, le=99)] | None = None
    page_number: Annotated[StrictInt, Field(ge=0)] | None = None
    filter: HistoryFilter | None = None
    additional_info: dict[str, Any] | None = None


class HistoryDetailRequest(SnapModel):
    """Transaction history detail (service 13, §11.7)."""

    original_partner_reference_no: Str64
    additional_info: dict[str, Any] | None = None


# --- answers (200 bodies), documented for the OpenAPI document and generated clients ------------------------


class PayoutMoney(BaseModel):
    value: str = Field(pattern=r"^[0-9]{1,14}\.[0-9]{2}$", examples=["150000.00"])
    currency: str = Field(examples=["IDR"])


_STATES = "01 Initiated; 03 Pending; 00 Success; 06 Failed; 04 Refunded; 05 Canceled"


class AccountInquiryResponse(BaseModel):
    responseCode: str = Field(examples=["2001600"])  # noqa: N815 (wire names)
    responseMessage: str = Field(examples=["Successful"])  # noqa: N815
    referenceNo: str  # noqa: N815
    partnerReferenceNo: str | None = None  # noqa: N815
    beneficiaryAccountName: str  # noqa: N815
    beneficiaryAccountNo: str  # noqa: N815
    beneficiaryBankCode: str  # noqa: N815
    beneficiaryBankName: str  # noqa: N815
    currency: str = Field(examples=["IDR"])


class AccountInfoView(BaseModel):
    balanceType: str = Field(examples=["cash"])  # noqa: N815
    amount: PayoutMoney
    floatAmount: PayoutMoney  # noqa: N815
    holdAmount: PayoutMoney  # noqa: N815
    availableBalance: PayoutMoney  # noqa: N815
    ledgerBalance: PayoutMoney  # noqa: N815
    status: str = Field(examples=["0001"])


class BalanceInquiryResponse(BaseModel):
    responseCode: str = Field(examples=["2001100"])  # noqa: N815
    responseMessage: str = Field(examples=["Successful"])  # noqa: N815
    referenceNo: str  # noqa: N815
    partnerReferenceNo: str | None = None  # noqa: N815
    accountNo: str  # noqa: N815
    name: str
    accountInfos: list[AccountInfoView]  # noqa: N815


class TransferStateInfo(BaseModel):
    latestTransactionStatus: str = Field(description=_STATES)  # noqa: N815
    transactionStatusDesc: str  # noqa: N815


class OriginatorInfoView(BaseModel):
    """An originator as the transfer sent it (echoed): typed, so a generated client reads its fields."""

    originatorCustomerNo: str  # noqa: N815
    originatorCustomerName: str  # noqa: N815
    originatorBankCode: str  # noqa: N815


class TransferResponse(BaseModel):
    responseCode: str = Field(examples=["2001800"])  # noqa: N815
    responseMessage: str = Field(examples=["Successful"])  # noqa: N815
    referenceNo: str  # noqa: N815
    partnerReferenceNo: str  # noqa: N815
    amount: PayoutMoney
    beneficiaryAccountNo: str  # noqa: N815
    beneficiaryBankCode: str  # noqa: N815
    sourceAccountNo: str  # noqa: N815
    originatorInfos: list[OriginatorInfoView] | None = Field(None, description="When the transfer sent them")  # noqa: N815
    additionalInfo: TransferStateInfo  # noqa: N815


class TransferStatusInfo(BaseModel):
    beneficiaryAccountName: str  # noqa: N815
    reason: str | None = None


class TransferStatusResponse(BaseModel):
    responseCode: str = Field(examples=["2003600"])  # noqa: N815
    responseMessage: str = Field(examples=["Successful"])  # noqa: N815
    originalReferenceNo: str  # noqa: N815
    originalPartnerReferenceNo: str  # noqa: N815
    originalExternalId: str  # noqa: N815
    serviceCode: str = Field(examples=["18"])  # noqa: N815
    transactionDate: str  # noqa: N815
    amount: PayoutMoney
    beneficiaryAccountNo: str  # noqa: N815
    beneficiaryBankCode: str  # noqa: N815
    currency: str  # noqa: N815
    previousResponseCode: str = Field(examples=["2001800"])  # noqa: N815
    referenceNumber: str  # noqa: N815
    sourceAccountNo: str  # noqa: N815
    latestTransactionStatus: str = Field(description=_STATES)  # noqa: N815
    transactionStatusDesc: str  # noqa: N815
    additionalInfo: TransferStatusInfo  # noqa: N815


class HistoryEntryInfo(BaseModel):
    partnerReferenceNo: str | None = None  # noqa: N815
    referenceNo: str  # noqa: N815
    latestTransactionStatus: str | None = None  # noqa: N815
    beneficiaryAccountNo: str | None = None  # noqa: N815
    beneficiaryBankCode: str | None = None  # noqa: N815


class HistoryEntry(BaseModel):
    dateTime: str  # noqa: N815
    amount: PayoutMoney
    remark: str
    status: str = Field(description="INIT, SUCCESS, CANCELLED, CLOSED")
    type: str = Field(description="SEND_MONEY, REFUND, TOP_UP")
    additionalInfo: HistoryEntryInfo  # noqa: N815


class HistoryListResponse(BaseModel):
    responseCode: str = Field(examples=["2001200"])  # noqa: N815
    responseMessage: str = Field(examples=["Successful"])  # noqa: N815
    referenceNo: str  # noqa: N815
    partnerReferenceNo: str | None = None  # noqa: N815
    detailData: list[HistoryEntry]  # noqa: N815


class HistoryDetailInfo(HistoryEntryInfo):
    transactionStatusDesc: str | None = None  # noqa: N815


class HistoryDetailResponse(BaseModel):
    responseCode: str = Field(examples=["2001300"])  # noqa: N815
    responseMessage: str = Field(examples=["Successful"])  # noqa: N815
    referenceNo: str  # noqa: N815
    partnerReferenceNo: str  # noqa: N815
    amount: PayoutMoney
    dateTime: str  # noqa: N815
    cancelledTime: str | None = None  # noqa: N815
    refundAmount: PayoutMoney | None = None  # noqa: N815
    remark: str
    status: str
    type: str = Field(examples=["SEND_MONEY"])
    additionalInfo: HistoryDetailInfo  # noqa: N815
