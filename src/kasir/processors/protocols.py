"""What a processor is: one small interface per kind of money mover, and the notifications it sends.

A product service (card, wallet, BNPL, VA, payouts) owns its state machine, its callbacks and its wire format;
a processor answers one question, "did the money move?". Kasir calls a processor:

- outside any unit of work: a charge, refund or void is held (recorded as asked) in one unit,
  asked with none open, and recorded in a second (kasir.processors.calls); a process that stops
  in between leaves the call for the worker, which asks again (`status` for a card attempt; the
  refund or void itself, idempotent) and records the answer;
- with Kasir's own reference (the transaction id; a refund's own reference): every call is
  **idempotent by that reference**, so asking twice (a retry after a timeout, a page opened twice)
  never moves money twice;
- with a timeout the processor enforces itself and names as its `timeout_seconds` attribute (a
  few seconds; 30 assumed when it names none): past it, it raises `ProcessorUnavailable`. The
  worker asks again about a call left unrecorded only after twice that (kasir.processors.calls).

What an exception means:

    ProcessorError                 (500, never raised as such)
    ├── ProcessorUnavailable       an outage in the route's format (kasir.errors.ServiceUnavailable): the
    │                              processor did not answer (timeout, connection refused, 5xx). What was
    │                              held is taken back; the request may be retried with the same
    │                              X-Idempotency-Key (the call is idempotent).
    ├── ProcessorRefused           409 in the route's format: the processor answered no (a refund it
    │                              will not make). Nothing is recorded.
    └── ForgedNotification         401 at /processors/{name}/notify: the notification's signature does
                                   not verify; nothing is applied.

A card acquirer's *declined* is not an exception: it is a `CardDecision`, recorded as a failed
attempt, with a structured `DeclineReason` the product maps to its codes (its `message` is the
acquirer's text, shown and sent on, never interpreted). A *no answer* on a charge is one too
(`CardResult.NO_ANSWER`): the attempt fails, the customer may try again.

Notifications: a processor's own signed message, posted to `POST /processors/{name}/notify`,
is handed to `Processor.notifications()`, which verifies it and turns it into `Notification`s
(paid, failed, expired, approved, rejected): data, what happened to which reference. The
product that owns the payment applies each in one unit of work with its callback, through the
applier its offer declared (kasir.processors.service, kasir.processors.offers). The simulator's
pages apply theirs through the same function. Nothing here knows a product's states or codes:
a decline's `DeclineReason` is the acquirer's, its wire code the product's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from kasir.errors import Conflict, KasirError, ServiceUnavailable, Unauthorized

if TYPE_CHECKING:
    from fastapi import APIRouter

Product = Literal["card", "wallet", "bnpl", "va", "payout"]
PRODUCTS: tuple[Product, ...] = ("card", "wallet", "bnpl", "va", "payout")


# --- errors ------------------------------------------------------------------------------


class ProcessorError(KasirError):
    default_message = "The payment processor failed"


class ProcessorUnavailable(ProcessorError, ServiceUnavailable):
    default_message = "The payment processor did not answer; retry later"

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message, headers={"Retry-After": "5"})


class ProcessorRefused(ProcessorError, Conflict):
    default_message = "Failed Request: the payment processor refused"


class ForgedNotification(ProcessorError, Unauthorized):
    def __init__(self, reason: str = "The notification's signature does not verify") -> None:
        super().__init__(reason, field="signature")


# --- card acquirer -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CardDetails:
    """The card as entered: handed to the acquirer for one call, never stored, never logged."""

    number: str = field(repr=False)
    cvn: str = field(repr=False)
    exp_month: str  # "MM"
    exp_year: str  # "YYYY"
    holder_name: str
    masked: str  # first 6, last 4
    brand: str
    # A card stored by an earlier charge, named by its token (kasir.card.dialect): `number` and
    # perhaps `cvn` are then empty, and `masked` names the card the acquirer charged before.
    stored_token: str | None = None

    def __repr__(self) -> str:
        return f"CardDetails({self.masked}, {self.brand}, {self.exp_month}/{self.exp_year})"


@dataclass(frozen=True, slots=True)
class CardCharge:
    """One attempt at charging a card. `reference` + `attempt` are Kasir's: the call is idempotent by them."""

    reference: str  # Kasir's transaction id
    attempt: int  # 1, 2, 3: each attempt is a charge of its own at the acquirer
    amount: int  # rupiah
    currency: str
    channel: str  # paymentChannel (CARD, BCACC, ...)
    acquirer_code: str  # the bank the channel names (`acq` of the callback)
    tenor: str  # "0", "3", "6", "12"
    card: CardDetails
    return_url: str  # where a challenge sends the customer back (Kasir's page)


class CardResult(StrEnum):
    APPROVED = "approved"
    DECLINED = "declined"
    CHALLENGE = "challenge"  # the customer must pass 3-D Secure at `redirect_url`
    NO_ANSWER = "no_answer"  # the issuer did not answer: a failed attempt, the customer may retry


class DeclineReason(StrEnum):
    """Why a card attempt failed, as the acquirer says it: a product maps it to its own wire codes (the
    provider SDK's dialect: ISO 8583 response codes), never the acquirer's text."""

    DO_NOT_HONOUR = "do_not_honour"  # declined, no reason given
    INSUFFICIENT_FUNDS = "insufficient_funds"
    EXPIRED_CARD = "expired_card"
    INVALID_CARD = "invalid_card"  # no such card at the issuer
    ISSUER_UNAVAILABLE = "issuer_unavailable"  # NO_ANSWER: the issuer did not respond


@dataclass(frozen=True, slots=True)
class CardDecision:
    result: CardResult
    message: str  # response_message of the callback: "Approved", the decline reason, ...
    redirect_url: str | None = None  # CHALLENGE only
    reason: DeclineReason | None = None  # DECLINED, NO_ANSWER: why, when the acquirer says


@runtime_checkable
class CardAcquirer(Protocol):
    async def charge(self, charge: CardCharge) -> CardDecision:
        """Authorize and capture `charge.amount`. Idempotent by (reference, attempt): asked again, the
        same decision. Raises ProcessorUnavailable only when it cannot tell (no decision was made)."""
        ...

    async def complete_challenge(self, reference: str, attempt: int, params: Mapping[str, str]) -> CardDecision:
        """The result of a challenge the customer came back from (`params`: the return URL's query).
        APPROVED or DECLINED; CHALLENGE while the customer has not finished. Idempotent."""
        ...

    async def status(self, reference: str, attempt: int) -> CardDecision:
        """The decision on an attempt whose answer Kasir did not record (it stopped between asking and
        recording): what `charge` answered, or NO_ANSWER for an attempt the acquirer never received."""
        ...

    def page_notice(self) -> str | None:
        """HTML the hosted payment page shows under the form (the simulator's test cards); None for
        a real acquirer. Trusted: it comes from the installed processor, not from a request."""
        ...


# --- wallet issuer -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WalletItem:
    name: str
    qty: int
    amount: int


@dataclass(frozen=True, slots=True)
class WalletPayment:
    """A wallet payment waiting for the customer, as the issuer needs it (and the simulator shows it)."""

    reference: str  # Kasir's transaction_id
    order_id: str
    merchant_name: str
    channel: str  # OVO, DANA, ... or QRIS
    amount: int
    currency: str
    description: str | None
    customer_name: str
    customer_phone: str
    items: Sequence[WalletItem]
    expires_at: datetime
    status: str  # PENDING, or where it went (the page is shown again after it changed)
    failure_reason: str | None
    return_url: str | None
    qr_image_url: str | None  # QRIS: Kasir's QR image


@dataclass(frozen=True, slots=True)
class Checkout:
    """Where the customer goes: a processor's `url` (redirect), or an in-process processor's own `html`."""

    url: str | None = None
    html: str | None = None


@runtime_checkable
class WalletIssuer(Protocol):
    async def create(self, payment: WalletPayment) -> Checkout:
        """The checkout of the payment (asked when the customer opens payment_url). Idempotent by
        reference: the same checkout each time. The issuer notifies paid / failed / expired."""
        ...

    async def refund(self, reference: str, refund_reference: str, amount: int) -> None:
        """Give `amount` back. Idempotent by refund_reference. ProcessorRefused when the issuer says no."""
        ...

    async def void(self, reference: str) -> None:
        """Cancel a payment made today in full. Idempotent by reference."""
        ...

    async def status(self, reference: str) -> Notification | None:
        """The payment's last state change the issuer knows of, or None while it waits."""
        ...


# --- BNPL lender -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BnplApplication:
    reference: str  # Kasir's referenceNo
    partner_reference_no: str
    merchant_name: str
    amount: str  # "150000.00"
    currency: str
    customer_name: str | None
    items: Sequence[Mapping[str, Any]]  # itemDetails as the checkout sent them
    plans: Sequence[Mapping[str, Any]]  # the installment options, as the payment calculation answers them
    status: str  # "01" while waiting, or where it went (the page is shown again after it changed)
    status_desc: str
    tenure: int | None


@runtime_checkable
class BnplLender(Protocol):
    async def checkout(self, application: BnplApplication) -> Checkout:
        """The approval page of the application (asked when the customer opens qrContent).
        Idempotent by reference. The lender notifies approved (with the tenure) or rejected."""
        ...

    async def status(self, reference: str) -> Notification | None:
        """The application's decision, or None while it waits."""
        ...


# --- VA issuer -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VaOpening:
    """A virtual account to open at the issuing bank (docs/decisions.md §9)."""

    reference: str  # Kasir's transaction_id
    channel: str  # as the merchant named it (an alias: BCA-MCP)
    bank: str  # the channel's bank (BCA)
    payment_system: str  # CLOSED, OPEN or PARTIAL
    chosen_digits: str | None  # the merchant's free digits, or None: the issuer draws them
    amount: int
    billing_name: str
    expires_at: datetime
    draw: int = 0  # asked again for another number (the last one drawn is another open VA's)


@runtime_checkable
class VaIssuer(Protocol):
    async def create(self, opening: VaOpening) -> str:
        """Open the VA; its full number. Idempotent by reference and draw (asked again, the same number)."""
        ...

    async def cancel(self, reference: str) -> None:
        """Stop further payments into the VA (its expiry or the merchant's cancel)."""
        ...

    async def status(self, reference: str) -> Notification | None:
        """The VA's latest payment the issuer knows, or None."""
        ...


# --- payout rail ---------------------------------------------------------------------------


class AccountStatus(StrEnum):
    """What the rail says of a beneficiary account (docs/decisions.md §11.5)."""

    ACTIVE = "active"  # it exists and takes credits: `name` is its holder's
    INVALID = "invalid"  # no such account (404xx11)
    INACTIVE = "inactive"  # it exists but takes no credit (403xx18)


@dataclass(frozen=True, slots=True)
class AccountInfo:
    status: AccountStatus
    name: str | None = None  # ACTIVE: the account holder's name


class PayoutState(StrEnum):
    """Where a transfer is at the rail; the payouts room maps it to its states (§11.7)."""

    PENDING = "pending"  # taken, result awaited (03)
    SENT = "sent"  # credited to the beneficiary (00)
    FAILED = "failed"  # rejected (06); `reason` says why
    RETURNED = "returned"  # returned by the beneficiary bank after SENT (04); `reason` says why
    CANCELED = "canceled"  # stopped before sending (05)
    UNKNOWN = "unknown"  # `status` only: the rail never received this reference (Kasir may send it, once)


@dataclass(frozen=True, slots=True)
class PayoutOrder:
    """One transfer, as the rail needs it. `reference` is Kasir's referenceNo: every call is idempotent by it."""

    reference: str
    partner_reference_no: str
    amount: int  # rupiah
    currency: str
    bank_code: str  # Bank Indonesia's 3-digit code, or the e-wallet (OVO, DANA, ...)
    account_no: str
    account_name: str
    fee_type: str  # OUR, BEN, SHA
    remark: str | None
    accepted_at: datetime


@dataclass(frozen=True, slots=True)
class PayoutAnswer:
    state: PayoutState
    rail_reference: str | None = None  # the rail's own reference (status inquiry's referenceNumber)
    reason: str | None = None  # FAILED, RETURNED, CANCELED: why, as the rail says it


@runtime_checkable
class PayoutRail(Protocol):
    """Sends money out (docs/decisions.md §11.9). Kasir asks `transfer` only after the unit that accepted and
    held the transfer committed; a call that raises ProcessorUnavailable leaves the transfer `01`, and the worker
    asks `status` until it is known (UNKNOWN: never received, so it is sent, idempotent by reference).

    Optional attributes of the rail object: `timeout_seconds` (its own timeout, 30 assumed: the worker asks about
    an unrecorded transfer only after twice that and a margin) and `status_after_seconds` (how long after a
    pending answer, or none, the worker asks `status` again; 30 assumed)."""

    async def account_inquiry(self, bank_code: str, account_no: str) -> AccountInfo:
        """Whether the account exists and takes credits, and its holder's name."""
        ...

    async def transfer(self, order: PayoutOrder) -> PayoutAnswer:
        """Send `order.amount`. Idempotent by `order.reference`: asked again, the same transfer, never a second."""
        ...

    async def status(self, order: PayoutOrder) -> PayoutAnswer:
        """Where the transfer is now (UNKNOWN: the rail never received it)."""
        ...


# --- notifications and the processor -----------------------------------------------------


class Event(StrEnum):
    PAID = "paid"  # card (a challenge passed), wallet, va (a payment into the VA)
    FAILED = "failed"  # card (a challenge failed), wallet (OVO reports failures), payout (06)
    EXPIRED = "expired"  # wallet
    APPROVED = "approved"  # bnpl (tenure)
    REJECTED = "rejected"  # bnpl
    # payout (failed: 06, with `message` the reason)
    PENDING = "pending"  # 03: the rail took it
    SENT = "sent"  # 00
    RETURNED = "returned"  # 04, `message` the reason
    CANCELED = "canceled"  # 05


@dataclass(frozen=True, slots=True)
class Notification:
    """A state change a processor reports for one of Kasir's references."""

    product: Product
    reference: str
    event: Event
    attempt: int | None = None  # card: the attempt whose challenge ended
    message: str | None = None  # card: response_message; wallet FAILED: failure_reason
    tenure: int | None = None  # bnpl APPROVED
    issuer: str | None = None  # wallet PAID: who paid (QRIS: the customer's issuer)
    amount: int | None = None  # va PAID: the payment's whole rupiah
    bank_reference: str | None = None  # va PAID: the bank's reference of the payment (a repeat changes nothing);
    # payout: the rail's reference of the transfer


@runtime_checkable
class Processor(Protocol):
    """A money mover: any of the three kinds, and its notifications.

    Registered under the entry-point group `kasir.processors`: the entry point is a callable
    `factory(settings) -> Processor`. `KASIR_PROCESSORS=card=NAME,...` names it per product.
    """

    name: str
    simulates: bool  # True only for the staging simulator: production refuses to start with it
    card: CardAcquirer | None
    wallet: WalletIssuer | None
    bnpl: BnplLender | None
    va: VaIssuer | None  # optional for a plug-in written before VAs: one without the attribute serves none
    payout: PayoutRail | None  # optional likewise (disbursement)

    def router(self) -> APIRouter | None:
        """Routes the processor serves itself (its pages), or None."""
        ...

    async def notifications(self, headers: Mapping[str, str], body: bytes) -> Sequence[Notification]:
        """Verify a notification posted to /processors/{name}/notify (ForgedNotification when its
        signature does not verify) and say what changed."""
        ...
