"""Typed results and events. Every one keeps the full decoded body in `raw`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from kasir_client._errors import APIError


@dataclass(frozen=True)
class Credentials:
    """A merchant's credentials (as `kasir merchant create --json` prints them) and its RSA private key."""

    merchant_id: str
    client_id: str
    client_secret: str
    secret: str
    hash_key: str
    private_key_pem: bytes | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        return f"Credentials(merchant_id={self.merchant_id!r}, client_id={self.client_id!r}, <secrets hidden>)"

    @classmethod
    def from_files(cls, credentials_json: str | Path, private_key: str | Path | None = None) -> Credentials:
        data = json.loads(Path(credentials_json).read_text())
        return cls(
            merchant_id=data["merchant_id"],
            client_id=data["client_id"],
            client_secret=data["client_secret"],
            secret=data["secret"],
            hash_key=data["hash_key"],
            private_key_pem=Path(private_key).read_bytes() if private_key else None,
        )


@dataclass(frozen=True)
class AccessToken:
    value: str
    product: str
    expires_at: float  # time.monotonic() deadline


@dataclass(frozen=True)
class InstallmentOption:
    id: str
    tenure: int
    monthly_installment: Decimal
    installment_amount: Decimal
    total_interest: Decimal
    provision: Decimal
    amount: Decimal
    rate: int
    raw: dict[str, Any]


@dataclass(frozen=True)
class BnplCalculation:
    response_code: str
    options: list[InstallmentOption]
    raw: dict[str, Any]
    request_id: str | None = None  # the answer's X-Request-ID


@dataclass(frozen=True)
class BnplTransaction:
    """Checkout and status inquiry share the checkout response's field names."""

    response_code: str
    reference_no: str
    partner_reference_no: str
    status: str  # latestTransactionStatus: 01 initiated, 00 success, 05 canceled/expired, 06 failed
    status_description: str
    qr_content: str | None
    qr_url: str | None
    raw: dict[str, Any]
    replayed: bool = False  # a checkout's answer given again to a repeat of its X-Idempotency-Key
    request_id: str | None = None  # the answer's X-Request-ID


@dataclass(frozen=True)
class WalletResult:
    """The answer of a wallet call (docs/decisions.md §5), snake_case fields as on the wire.

    create-payment, create-qr, inquiry, refund and void answer the whole transaction;
    the dummy payment answers interface.md's short result (external_id, order_id,
    transaction_status, paid_time, reference_id, response_code), so its `transaction_id`
    is the one the request named. Amounts are whole rupiah (int).
    """

    response_code: str
    response_message: str
    transaction_id: str | None
    transaction_status: str | None
    raw: dict[str, Any]
    external_id: str | None = None
    order_id: str | None = None
    reference_id: str | None = None
    payment_channel: str | None = None
    amount: int | None = None
    refunded_amount: int | None = None
    paid_time: str | None = None
    expired_time: str | None = None
    payment_url: str | None = None  # the customer's checkout page (create-payment)
    qr_string: str | None = None  # QRIS payload (create-qr)
    qr_url: str | None = None  # QRIS image, PNG (create-qr)
    replayed: bool = False  # the answer given again to a repeat of the call's X-Idempotency-Key
    request_id: str | None = None  # the answer's X-Request-ID

    def get(self, name: str) -> Any:
        """Any other field of the answer (refund_history, void_history, payment_details, ...)."""
        return self.raw.get(name)


@dataclass(frozen=True)
class VaPayment:
    """One payment into a virtual account (an entry of `VaResult.payment_history`)."""

    reference_id: str  # the payment's, as its callback says it
    amount: int  # whole rupiah
    paid_time: str  # ISO 8601, +07:00


@dataclass(frozen=True)
class VaResult:
    """The answer of create_va, va_inquiry and cancel_va: the virtual account (docs/merchant/va.md).

    `transaction_status`: PENDING, PARTIALLY_PAID, PAID, EXPIRED or CANCELLED. `va_number` is the full
    number the customer pays into (a string of digits). Amounts are whole rupiah; `remaining_amount` is
    what a PARTIAL VA still takes (0 for the other payment systems). `payment_history`: the last five
    payments, newest first.
    """

    response_code: str
    response_message: str
    transaction_id: str
    external_id: str
    order_id: str
    transaction_status: str
    payment_channel: str
    payment_system: str  # CLOSED, OPEN or PARTIAL
    va_number: str
    is_multi_use: bool
    amount: int
    total_paid_amount: int
    remaining_amount: int
    expired_time: str
    payment_history: list[VaPayment]
    raw: dict[str, Any]  # the whole answer: response_code, response_message and data
    replayed: bool = False  # the answer given again to a repeat of the call's X-Idempotency-Key
    request_id: str | None = None  # the answer's X-Request-ID

    def get(self, name: str) -> Any:
        """Any other field of `data` (customer_details, item_details, callback_url, ...)."""
        data = self.raw.get("data")
        return data.get(name) if isinstance(data, dict) else None


@dataclass(frozen=True)
class VaPaymentResult:
    """The answer of simulate_va_payment (staging): the payment, and the VA's state after it."""

    response_code: str
    transaction_id: str
    external_id: str
    order_id: str
    va_number: str
    reference_id: str
    amount: int
    paid_time: str
    transaction_status: str  # PAID, or PARTIALLY_PAID while a PARTIAL VA has a remainder
    raw: dict[str, Any]
    replayed: bool = False
    request_id: str | None = None


@dataclass(frozen=True)
class ChargeResult:
    """Card charge, mapped as the interface's SDK does: success exactly when statusCode is "00".

    A refusal is returned, not raised: `is_success` is False and `error` is the APIError (the
    same class and fields a wallet or BNPL call would raise: status, code, message, errors,
    request_id); `raise_for_error()` raises it if you prefer exceptions.
    """

    is_success: bool
    status_code: str
    message: str
    http_status: int
    transaction_id: str | None
    payment_status: str | None
    link: str | None
    errors: list[dict[str, str]]
    replayed: bool  # the answer given again to a repeat of the call's X-Idempotency-Key
    raw: Any
    request_id: str | None = None  # the answer's X-Request-ID
    error: APIError | None = None  # when not is_success

    def raise_for_error(self) -> ChargeResult:
        """Raise `error` when the charge did not succeed; else return self."""
        if self.error is not None:
            raise self.error
        return self


@dataclass(frozen=True)
class WalletCallback:
    """A verified wallet callback. `transaction_status`: PAID, EXPIRED, REFUNDED, VOID or failed (OVO)."""

    transaction_id: str
    external_id: str
    order_id: str
    transaction_status: str
    amount: Decimal | None
    raw: dict[str, Any]
    payment_channel: str = ""
    response_code: str = ""
    response_message: str = ""  # the failure reason of OVO's `failed` (response_code 03)
    # X-Kasir-Callback-Id: the event's, the same on every attempt and every replay; deduplicate with it.
    callback_id: str | None = None
    attempt: int | None = None  # X-Kasir-Attempt: 1 for the first; counted across the event, replays included


@dataclass(frozen=True)
class SelectedChannel:
    """A method a payment link offers, as its answers and callbacks echo it (upper case; `acq` the channel's
    own code where the request named none: {"channel": "DANA", "acq": "DANA"})."""

    channel: str
    acq: str


def selected_channels_of(value: Any) -> list[SelectedChannel]:
    """The `selected_channels` of an answer or a callback; [] when absent."""
    entries = [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []
    return [SelectedChannel(str(e.get("channel") or ""), str(e.get("acq") or "")) for e in entries]


@dataclass(frozen=True)
class PaymentPageCallback:
    """A verified payment-page callback: of a card order, or of a payment link (paid by card, wallet, QRIS or
    virtual account: `payment_method` says which)."""

    transaction_id: str
    external_id: str
    order_id: str
    transaction_status: str  # SUCCESS, FAILED or EXPIRED
    amount: Decimal | None
    raw: dict[str, Any]
    response_message: str = ""
    acq: str = ""  # card: the acquirer (BCA, CIMB, BRI); a link's wallet or QRIS: its code; a link's VA: its bank
    # X-Kasir-Callback-Id: the event's, the same on every attempt and every replay; deduplicate with it.
    callback_id: str | None = None
    attempt: int | None = None  # X-Kasir-Attempt: 1 for the first; counted across the event, replays included
    # How the attempt reported was made: CARD / CARD, or for a payment link WALLET / DANA (OVO, QRIS, ...) or
    # VIRTUAL_ACCOUNT / VA; "" in all three (with `acq`) for a link that expired never attempted.
    payment_method: str = ""
    payment_channel: str = ""
    paid_date: str = ""  # UTC, milliseconds, Z; "" unless SUCCESS
    card_token: str = ""  # a card the customer saved (save_card); a link's callback repeats it as `token`
    sub_merchant_id: str | None = None  # when the order or link has one (the signature covers it)
    selected_channels: list[SelectedChannel] = field(default_factory=list)


@dataclass(frozen=True)
class VaCallback:
    """A verified virtual-account callback: one per payment (PAID, PARTIALLY_PAID) and one when the VA
    becomes EXPIRED or CANCELLED. A multi-use VA sends one PAID per payment: key them by `reference_id`."""

    transaction_id: str
    external_id: str
    order_id: str
    transaction_status: str  # PAID, PARTIALLY_PAID, EXPIRED or CANCELLED
    reference_id: str  # the payment's; "" on EXPIRED and CANCELLED
    va_number: str
    payment_system: str
    amount: Decimal | None  # this payment's (payment_details.total_amount); 0 on EXPIRED and CANCELLED
    va_amount: Decimal | None  # the VA's amount (payment_details.amount)
    total_paid_amount: Decimal | None
    remaining_amount: Decimal | None
    paid_time: str  # this payment's; "" on EXPIRED and CANCELLED
    raw: dict[str, Any]
    payment_channel: str = ""
    sub_merchant_id: str | None = None
    # X-Kasir-Callback-Id: the event's, the same on every attempt and every replay; deduplicate with it.
    callback_id: str | None = None
    attempt: int | None = None  # X-Kasir-Attempt: 1 for the first; counted across the event, replays included


@dataclass(frozen=True)
class BnplNotification:
    original_partner_reference_no: str
    original_reference_no: str
    latest_transaction_status: str
    transaction_status_desc: str
    amount: Decimal | None
    tenure: int | None
    raw: dict[str, Any]
    # X-Kasir-Callback-Id: the event's, the same on every attempt and every replay; deduplicate with it.
    callback_id: str | None = None
    attempt: int | None = None  # X-Kasir-Attempt: 1 for the first; counted across the event, replays included
    timestamp: str | None = None  # X-TIMESTAMP, checked against the tolerance


@dataclass(frozen=True)
class PaymentLinkResult:
    """The answer of create_payment_link and payment_link: the link (docs/merchant/payment-link.md).

    Send the customer to `payment_url`. `transaction_status`: PENDING, SUCCESS or EXPIRED. `amount` is whole
    rupiah. payment_link also says how it was last attempted or paid (`payment_method`, `payment_channel`,
    `acq`, "" before any attempt) and `paid_date` (UTC, "" until paid); the rest of its fields with `get`.
    """

    response_code: str
    response_message: str
    transaction_id: str  # PPL + 20 characters
    external_id: str
    order_id: str
    transaction_status: str
    amount: int
    currency: str
    description: str
    payment_url: str
    transaction_time: str
    expired_time: str  # ISO 8601, +07:00
    selected_channels: list[SelectedChannel]
    raw: dict[str, Any]  # the whole answer: response_code, response_message and data
    payment_method: str = ""
    payment_channel: str = ""
    acq: str = ""
    paid_date: str = ""
    replayed: bool = False  # the answer given again to a repeat of the call's X-Idempotency-Key
    request_id: str | None = None  # the answer's X-Request-ID

    @property
    def is_paid(self) -> bool:
        return self.transaction_status == "SUCCESS"

    def get(self, name: str) -> Any:
        """Any other field of `data` (customer_details, item_details, card_token, additional_data, ...)."""
        data = self.raw.get("data")
        return data.get(name) if isinstance(data, dict) else None


# --- disbursement (docs/merchant/payouts.md) ---------------------------------------------

FINAL_TRANSFER_STATES = frozenset({"00", "04", "05", "06"})  # success, refunded, canceled, failed


@dataclass(frozen=True)
class PayoutAccount:
    """An account inquiry's answer: whose account it is (advisory: a transfer never compares the name)."""

    response_code: str
    reference_no: str  # AIQ + 20
    partner_reference_no: str
    account_name: str  # beneficiaryAccountName
    account_no: str
    bank_code: str
    bank_name: str
    raw: dict[str, Any]
    request_id: str | None = None


@dataclass(frozen=True)
class PayoutBalance:
    """Your disbursement balance: `available` = `ledger` − `hold` (whole rupiah, as Decimals)."""

    response_code: str
    account_no: str
    name: str
    available: Decimal
    hold: Decimal
    ledger: Decimal
    raw: dict[str, Any]
    request_id: str | None = None


@dataclass(frozen=True)
class PayoutTransfer:
    """A transfer: the transfer's own answer and the status inquiry's share these fields.

    `status` is latestTransactionStatus: 01 initiated (held, the rail has not answered), 03 pending,
    00 success, 06 failed, 04 refunded (after 00), 05 canceled. 00, 04, 05 and 06 are final (`is_final`).
    """

    response_code: str
    reference_no: str  # DSB + 20: Kasir's
    partner_reference_no: str  # yours
    status: str
    status_description: str
    amount: Decimal | None
    beneficiary_account_no: str
    beneficiary_bank_code: str
    source_account_no: str
    reason: str | None  # why, on 06 and 04
    raw: dict[str, Any]
    replayed: bool = False  # a transfer's answer given again to a repeat of its X-Idempotency-Key
    request_id: str | None = None

    @property
    def is_final(self) -> bool:
        return self.status in FINAL_TRANSFER_STATES


@dataclass(frozen=True)
class PayoutHistoryEntry:
    """One line of the transaction history: a transfer (SEND_MONEY), its return (REFUND) or a top-up (TOP_UP)."""

    date_time: str
    amount: Decimal | None
    remark: str
    status: str  # INIT, SUCCESS, CANCELLED, CLOSED
    type: str
    partner_reference_no: str | None
    reference_no: str | None
    latest_transaction_status: str | None
    raw: dict[str, Any]


@dataclass(frozen=True)
class PayoutHistory:
    response_code: str
    entries: list[PayoutHistoryEntry]
    raw: dict[str, Any]
    request_id: str | None = None


@dataclass(frozen=True)
class PayoutNotification:
    """A transfer's move into 00, 06 or 04, sent to its additionalInfo.callbackUrl (verify_payout_notification)."""

    original_partner_reference_no: str
    original_reference_no: str
    original_external_id: str
    latest_transaction_status: str
    transaction_status_desc: str
    amount: Decimal | None
    beneficiary_account_no: str
    beneficiary_bank_code: str
    finished_time: str
    reason: str | None
    raw: dict[str, Any]
    callback_id: str | None = None  # X-Kasir-Callback-Id: the event's; deduplicate with it
    attempt: int | None = None
    timestamp: str | None = None  # X-TIMESTAMP, checked against the tolerance
