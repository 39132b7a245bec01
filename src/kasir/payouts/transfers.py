"""Disbursement transfers (docs/decisions.md §11.5 to §11.9): account inquiry, transfer, the rail's answers.

A transfer takes three steps, like a card refund (docs/contributor/architecture.md, "Processors"):

1. **accept**, in the request's unit of work (its X-Idempotency-Key claimed first): every check of §11.6 in its
   order, then the hold (one conditional UPDATE: the available balance covers it, or `4031814`) and the transfer
   `01`, with its key. The beneficiary's account inquiry is asked of the rail *before* the unit opens (nothing
   slow inside one) and its refusal raised in its place in the order, after the balance's.
2. **ask** the rail `transfer`, with no unit open.
3. **record** the answer in a unit of its own (`03`, `00`, `06`; no answer: still `01`) and the key's answer with
   it. Whoever records the transfer's first answer (the request, or the worker after a crash) stores the key's
   answer and forgets the key, so it is stored once.

A transfer not final yet has `next_check_at`: the worker (kasir.payouts.jobs) asks the rail `status` then, and
`transfer` only when the rail says it never received it (UNKNOWN): the rail is idempotent by Kasir's reference,
so a transfer is never sent twice. At acceptance the check is set past the rail's timeout twice over, so the
worker never asks about a transfer the accepting request is still asking.

    KasirError
    ├── FeatureNotAllowed (403)
    │   ├── ExceedsLimit              403xx02 Exceeds Transaction Amount Limit
    │   ├── InsufficientFunds         403xx14 Insufficient Funds
    │   └── InactiveAccount           403xx18 Inactive Card/Account/Customer
    ├── NotFound (404)
    │   ├── BankNotSupported          404xx03 Bank Not Supported By Switch
    │   ├── InvalidAccount            404xx11 Invalid Card/Account/Customer
    │   ├── BelowMinimum              404xx13 Invalid Amount
    │   └── TransferNotFound          404xx01 Transaction Not Found
    ├── DuplicateReference
    │   └── DuplicatePartnerReference 409xx01 Duplicate partnerReferenceNo
    └── RailUnavailable               503xx00: the rail did not answer before acceptance; nothing recorded
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from kasir.callbacks.models import CallbackKind
from kasir.callbacks.service import SignedIds, callback_outbox
from kasir.db import Database, Session
from kasir.errors import (
    DuplicateReference,
    FeatureNotAllowed,
    InvalidFieldFormat,
    KasirError,
    NotFound,
)
from kasir.idempotency.service import KeyRef, keep_answer
from kasir.kit.clock import clock, isoformat_seconds
from kasir.kit.ids import new_id
from kasir.kit.money import format_snap_amount
from kasir.merchants.repository import MerchantRow
from kasir.payouts import banks
from kasir.payouts.repository import TransferRow, payout_repository, transfer_repository
from kasir.payouts.schemas import AccountInquiryRequest, TransferRequest
from kasir.payouts.states import DESCRIPTIONS, NOTIFIED, TERMINAL, UNSETTLED, TransferStatus, allowed, transition
from kasir.processors.protocols import (
    AccountInfo,
    AccountStatus,
    PayoutAnswer,
    PayoutOrder,
    PayoutRail,
    PayoutState,
    ProcessorUnavailable,
)
from kasir.processors.registry import payout_rail, payout_rail_name
from kasir.snap.codes import SERVICE_ACCOUNT_INQUIRY, SERVICE_TRANSFER, SUCCESS_MESSAGE, success_code

log = logging.getLogger("kasir.payouts")

CURRENCY = "IDR"
# The one X-Idempotency-Key scope of the three transfer versions (§11.1: they behave alike).
TRANSFER_SCOPE = "POST /api/v1.2/transfer-interbank"
# How often the worker asks a rail that names no `status_after_seconds` about a transfer not final yet.
STATUS_POLL_SECONDS = 30.0
# A rail that names no `timeout_seconds` is given this long (kasir.processors.calls: the same assumption).
UNNAMED_TIMEOUT_SECONDS = 30.0
STALL_MARGIN = timedelta(seconds=10)

_STATE_OF: dict[PayoutState, TransferStatus] = {
    PayoutState.PENDING: TransferStatus.PENDING,
    PayoutState.SENT: TransferStatus.SUCCESS,
    PayoutState.FAILED: TransferStatus.FAILED,
    PayoutState.RETURNED: TransferStatus.REFUNDED,
    PayoutState.CANCELED: TransferStatus.CANCELED,
}


class ExceedsLimit(FeatureNotAllowed):
    snap_case = "02"

    def __init__(self) -> None:
        super().__init__("Exceeds Transaction Amount Limit", field="amount.value")


class InsufficientFunds(FeatureNotAllowed):
    snap_case = "14"

    def __init__(self) -> None:
        super().__init__("Insufficient Funds", field="amount.value")


class InactiveAccount(FeatureNotAllowed):
    snap_case = "18"

    def __init__(self) -> None:
        super().__init__("Inactive Card/Account/Customer", field="beneficiaryAccountNo")


class BankNotSupported(NotFound):
    snap_case = "03"

    def __init__(self) -> None:
        super().__init__("Bank Not Supported By Switch", field="beneficiaryBankCode")


class InvalidAccount(NotFound):
    snap_case = "11"

    def __init__(self) -> None:
        super().__init__("Invalid Card/Account/Customer", field="beneficiaryAccountNo")


class BelowMinimum(NotFound):
    snap_case = "13"

    def __init__(self) -> None:
        super().__init__("Invalid Amount", field="amount.value")


class TransferNotFound(NotFound):
    def __init__(self) -> None:
        super().__init__("Transaction Not Found", field="originalReferenceNo")


class DuplicatePartnerReference(DuplicateReference):
    def __init__(self) -> None:
        super().__init__("Duplicate partnerReferenceNo", field="partnerReferenceNo")


class RailUnavailable(KasirError):
    """§11.1 `503xx00`: the rail did not answer before acceptance; nothing recorded, retry (the key is freed)."""

    http_status = 503
    default_message = "Service Unavailable: the payout rail did not answer; retry"

    def __init__(self) -> None:
        super().__init__(headers={"Retry-After": "5"})


def money(amount: int) -> dict[str, str]:
    return {"value": format_snap_amount(amount), "currency": CURRENCY}


def check_own_account(merchant: MerchantRow, account_no: str | None, field: str) -> None:
    """§11.2: `sourceAccountNo` and `accountNo` are optional; sent, they must be the merchant's account_no."""
    if account_no is not None and account_no != merchant.account_no:
        raise InvalidFieldFormat(field, "must be the merchant's disbursement account number")


def check_account_form(bank_code: str, account_no: str) -> None:
    """§11.4: a bank account is 6 to 34 digits, an e-wallet's the phone registered with it (400xx01)."""
    bank = banks.bank_of(bank_code)
    if not banks.account_no_fits(bank, account_no):
        rule = "an e-wallet's phone: 08 or 628 and 8 to 11 more digits" if banks.is_ewallet(bank) else "6 to 34 digits"
        raise InvalidFieldFormat("beneficiaryAccountNo", f"must be {rule}")


def check_bank(bank_code: str) -> str:
    """The rail's channel of a supported bank or e-wallet (404xx03 otherwise)."""
    bank = banks.bank_of(bank_code)
    if not banks.supported(bank):
        raise BankNotSupported()
    return bank


def check_amount(bank: str, amount: int) -> None:
    minimum, maximum = banks.limits(bank)
    if amount < minimum:
        raise BelowMinimum()
    if amount > maximum:
        raise ExceedsLimit()


@dataclass(frozen=True, slots=True)
class Beneficiary:
    """What the rail said of the beneficiary before the unit opened: its info, or the refusal to raise in its
    place in the order of checks."""

    info: AccountInfo | None
    refusal: KasirError | None
    rail: str | None


async def ask_beneficiary(bank_code: str, account_no: str) -> Beneficiary:
    """The rail's account inquiry (no unit of work open). A refusal is returned, not raised: the checks before it
    in §11.6's order (made in the unit) answer first."""
    if not banks.well_formed_code(bank_code) or not banks.supported(banks.bank_of(bank_code)):
        return Beneficiary(None, None, None)  # refused by its own check, in the unit
    bank = banks.bank_of(bank_code)
    try:
        rail = payout_rail(bank)
    except KasirError as error:  # no payout processor: 403xx01
        return Beneficiary(None, error, None)
    try:
        info = await rail.account_inquiry(bank, account_no)
    except ProcessorUnavailable:
        return Beneficiary(None, RailUnavailable(), payout_rail_name(bank))
    if info.status is AccountStatus.INVALID:
        return Beneficiary(info, InvalidAccount(), payout_rail_name(bank))
    if info.status is AccountStatus.INACTIVE:
        return Beneficiary(info, InactiveAccount(), payout_rail_name(bank))
    return Beneficiary(info, None, payout_rail_name(bank))


# --- account inquiry (16) ----------------------------------------------------------------------------------------


def account_inquiry_body(request: AccountInquiryRequest, beneficiary: Beneficiary) -> dict[str, Any]:
    """The answer of an account inquiry whose checks passed (`beneficiary` without a refusal)."""
    if beneficiary.refusal is not None:
        raise beneficiary.refusal
    assert beneficiary.info is not None
    bank = banks.bank_of(request.beneficiary_bank_code)
    return {
        "responseCode": success_code(SERVICE_ACCOUNT_INQUIRY),
        "responseMessage": SUCCESS_MESSAGE,
        "referenceNo": new_id("AIQ"),
        "partnerReferenceNo": request.partner_reference_no or "",
        "beneficiaryAccountName": beneficiary.info.name or "",
        "beneficiaryAccountNo": request.beneficiary_account_no,
        "beneficiaryBankCode": request.beneficiary_bank_code,
        "beneficiaryBankName": banks.bank_name(bank),
        "currency": CURRENCY,
    }


# --- transfer (18) -----------------------------------------------------------------------------------------------


def _rail_timeout(rail: PayoutRail) -> float:
    return float(getattr(rail, "timeout_seconds", UNNAMED_TIMEOUT_SECONDS))


def ask_window(rail: PayoutRail) -> timedelta:
    """How long an ask of `rail` may take, twice over and a margin: a check not recorded by then was left by a
    process that stopped (kasir.processors.calls.stalled_after, for one rail)."""
    return timedelta(seconds=2 * _rail_timeout(rail)) + STALL_MARGIN


def _status_after(rail: PayoutRail) -> timedelta:
    return timedelta(seconds=float(getattr(rail, "status_after_seconds", STATUS_POLL_SECONDS)))


async def accept(
    session: Session,
    merchant: MerchantRow,
    external_id: str,
    request: TransferRequest,
    beneficiary: Beneficiary,
    key: KeyRef | None,
) -> TransferRow:
    """§11.6's checks after the fields, in order, then the hold and the transfer `01` (the caller's unit)."""
    check_own_account(merchant, request.source_account_no, "sourceAccountNo")
    check_account_form(request.beneficiary_bank_code, request.beneficiary_account_no)
    if await transfer_repository.by_partner_reference(session, merchant.id, request.partner_reference_no):
        raise DuplicatePartnerReference()
    bank = check_bank(request.beneficiary_bank_code)
    amount = request.amount.rupiah
    check_amount(bank, amount)
    now = clock.now()
    if (await payout_repository.balance(session, merchant.id)).available < amount:
        raise InsufficientFunds()
    if beneficiary.refusal is not None:
        raise beneficiary.refusal
    assert beneficiary.rail is not None
    rail = payout_rail(bank)
    additional = request.additional_info
    details = request.model_dump(
        by_alias=True,
        exclude_none=True,
        include={
            "beneficiary_address",
            "beneficiary_bank_name",
            "beneficiary_email",
            "customer_reference",
            "currency",
            "originator_infos",
            "additional_info",
        },
    )
    transfer = TransferRow(
        id=new_id("DSB"),
        merchant_id=merchant.id,
        partner_reference_no=request.partner_reference_no,
        external_id=external_id,
        amount=amount,
        currency=CURRENCY,
        held=amount,
        beneficiary_account_no=request.beneficiary_account_no,
        beneficiary_account_name=request.beneficiary_account_name,
        beneficiary_bank_code=request.beneficiary_bank_code,
        bank=bank,
        beneficiary_bank_name=banks.bank_name(bank)[:50],
        source_account_no=merchant.account_no or "",
        fee_type=request.fee_type or "OUR",
        status=TransferStatus.INITIATED.value,
        reason=None,
        rail=beneficiary.rail,
        rail_reference=None,
        callback_url=additional.callback_url if additional else None,
        transaction_date=request.transaction_date,
        remark=additional.remark if additional else None,
        details=json.dumps(details, ensure_ascii=False),
        created_at=now,
        updated_at=now,
        finished_at=None,
        refunded_at=None,
        # Past the accepting request's own ask, twice over: then only a stopped process left it unrecorded.
        next_check_at=now + ask_window(rail),
        key_scope=key.scope if key else None,
        idempotency_key=key.key if key else None,
    )
    # The hold first: its row lock orders concurrent transfers of the merchant, and the second's WHERE sees the
    # first's hold (two transfers never spend the same rupiah).
    if not await transfer_repository.hold(session, merchant.id, amount, now):
        raise InsufficientFunds()
    if not await transfer_repository.add(session, transfer):
        raise DuplicatePartnerReference()  # accepted meanwhile by a concurrent request
    return transfer


def order_of(transfer: TransferRow) -> PayoutOrder:
    return PayoutOrder(
        reference=transfer.id,
        partner_reference_no=transfer.partner_reference_no,
        amount=transfer.amount,
        currency=transfer.currency,
        bank_code=transfer.bank,
        account_no=transfer.beneficiary_account_no,
        account_name=transfer.beneficiary_account_name,
        fee_type=transfer.fee_type,
        remark=transfer.remark,
        accepted_at=transfer.created_at,
    )


def transfer_body(transfer: TransferRow) -> dict[str, Any]:
    """§11.6's answer, with the state when it was written."""
    body: dict[str, Any] = {
        "responseCode": success_code(SERVICE_TRANSFER),
        "responseMessage": SUCCESS_MESSAGE,
        "referenceNo": transfer.id,
        "partnerReferenceNo": transfer.partner_reference_no,
        "amount": money(transfer.amount),
        "beneficiaryAccountNo": transfer.beneficiary_account_no,
        "beneficiaryBankCode": transfer.beneficiary_bank_code,
        "sourceAccountNo": transfer.source_account_no,
    }
    originators = json.loads(transfer.details).get("originatorInfos")
    if originators is not None:
        body["originatorInfos"] = originators
    status = TransferStatus(transfer.status)
    body["additionalInfo"] = {"latestTransactionStatus": status.value, "transactionStatusDesc": DESCRIPTIONS[status]}
    return body


@dataclass(slots=True)
class TransferAsk:
    """The accepting handler's answer (kasir.idempotency.service.Deferred): the transfer is committed `01` with its
    key; then the rail is asked and the answer recorded."""

    transfer: TransferRow

    async def hold(self, session: Session, key: KeyRef | None) -> None:
        return None  # the transfer row, written by the handler, is the record of what is about to be asked

    async def finish(self, request: Request, database: Database) -> Response:
        return JSONResponse(transfer_body(await send(database, self.transfer)))


async def send(database: Database, transfer: TransferRow) -> TransferRow:
    """Ask the rail `transfer` (no unit open) and record its answer; no answer leaves `01`. The transfer after."""
    rail = payout_rail(transfer.bank)
    try:
        answer: PayoutAnswer | None = await rail.transfer(order_of(transfer))
    except ProcessorUnavailable:
        log.warning("payout rail did not answer a transfer", extra={"transaction_id": transfer.id})
        answer = None
    return await record(database, transfer.id, answer, rail)


async def record(database: Database, transfer_id: str, answer: PayoutAnswer | None, rail: PayoutRail) -> TransferRow:
    """Record the rail's answer (None: none came) in a unit of its own, and the key's answer if still owed."""
    async with database.unit_of_work() as session:
        transfer = await transfer_repository.get(session, transfer_id, lock=True)
        assert transfer is not None
        moved = answer is not None and await apply_answer(session, transfer, answer, rail=rail)
        if not moved and TransferStatus(transfer.status) in UNSETTLED:
            # No answer, or one that moves nothing (still pending): ask again later.
            transfer.next_check_at = clock.now() + _status_after(rail)
            transfer.updated_at = clock.now()
            await transfer_repository.save(session, transfer)
        await answer_key(session, transfer)
    return transfer


async def reschedule(database: Database, transfer_id: str, rail: PayoutRail | None) -> None:
    """Ask about the transfer again later (its rail did not answer, or there is none now)."""
    async with database.unit_of_work() as session:
        transfer = await transfer_repository.get(session, transfer_id, lock=True)
        if transfer is None or transfer.next_check_at is None:
            return
        after = _status_after(rail) if rail is not None else timedelta(seconds=STATUS_POLL_SECONDS)
        transfer.next_check_at = clock.now() + after
        await transfer_repository.save(session, transfer)


async def answer_key(session: Session, transfer: TransferRow) -> None:
    """Store the transfer's answer with its X-Idempotency-Key, once (then the key is forgotten here)."""
    if transfer.key_scope is None or transfer.idempotency_key is None:
        return
    key = KeyRef(transfer.merchant_id, transfer.key_scope, transfer.idempotency_key)
    await keep_answer(session, key, JSONResponse(transfer_body(transfer)))
    transfer.key_scope = transfer.idempotency_key = None
    await transfer_repository.forget_key(session, transfer.id)


async def apply_answer(
    session: Session,
    transfer: TransferRow,
    answer: PayoutAnswer,
    *,
    rail: PayoutRail | None = None,
    strict: bool = False,
) -> bool:
    """Move the (locked) transfer where the rail's answer says, with its balance effect; False when it changes
    nothing (already there, or UNKNOWN). A move the states do not allow is ignored (logged), or with `strict`
    refused (kasir.payouts.states)."""
    if answer.rail_reference and not transfer.rail_reference:
        transfer.rail_reference = answer.rail_reference[:64]
    target = _STATE_OF.get(answer.state)
    current = TransferStatus(transfer.status)
    if target is None or target is current:
        return False
    if not allowed(current, target):
        if strict:
            transition(transfer, target)  # raises TransferStateRefused
        log.warning(
            "payout rail answer out of order ignored",
            extra={"transaction_id": transfer.id, "status": current.value, "event": target.value},
        )
        return False
    now = clock.now()
    transfer.status = target.value
    transfer.updated_at = now
    if answer.reason:
        transfer.reason = answer.reason[:255]
    if target is TransferStatus.SUCCESS:
        await transfer_repository.settle(
            session, transfer.merchant_id, debit=transfer.held, release=transfer.held, now=now
        )
        transfer.held = 0
        transfer.finished_at = now
    elif target in (TransferStatus.FAILED, TransferStatus.CANCELED):
        await transfer_repository.settle(session, transfer.merchant_id, debit=0, release=transfer.held, now=now)
        transfer.held = 0
        transfer.finished_at = now
    elif target is TransferStatus.REFUNDED:
        await transfer_repository.settle(session, transfer.merchant_id, debit=-transfer.amount, release=0, now=now)
        transfer.refunded_at = now
    if target is TransferStatus.PENDING and rail is not None:
        transfer.next_check_at = now + _status_after(rail)
    elif target is TransferStatus.PENDING:
        transfer.next_check_at = now + timedelta(seconds=STATUS_POLL_SECONDS)
    elif target is TransferStatus.SUCCESS or target in TERMINAL:
        transfer.next_check_at = None  # a return after 00 comes as the rail's notification
    await transfer_repository.save(session, transfer)
    await on_moved(session, transfer)
    return True


async def on_moved(session: Session, transfer: TransferRow) -> None:
    """What follows a move of state in its unit: §11.8's notification, when the transfer asked for one and moved
    into 00, 06 or 04 (recorded in the outbox with the move; sent after commit, kasir.callbacks)."""
    status = TransferStatus(transfer.status)
    if transfer.callback_url is None or status not in NOTIFIED:
        return
    await callback_outbox.record(
        session,
        kind=CallbackKind.PAYOUT,
        merchant_id=transfer.merchant_id,
        transaction_ref=transfer.id,
        event=status.value,
        url=transfer.callback_url,
        payload=notification_payload(transfer),
        # §11.8: svc-signature as BNPL's, sha256hex(referenceNo + sha256hex(hash_key + partnerReferenceNo twice)).
        signed_ids=SignedIds(transfer.id, transfer.partner_reference_no, transfer.partner_reference_no),
    )


def notification_payload(transfer: TransferRow) -> dict[str, Any]:
    """§11.8: the body of a transfer's notification."""
    status = TransferStatus(transfer.status)
    info: dict[str, Any] = {}
    if transfer.reason is not None and status in (TransferStatus.FAILED, TransferStatus.REFUNDED):
        info["reason"] = transfer.reason
    return {
        "originalPartnerReferenceNo": transfer.partner_reference_no,
        "originalReferenceNo": transfer.id,
        "originalExternalId": transfer.external_id,
        "serviceCode": SERVICE_TRANSFER,
        "latestTransactionStatus": status.value,
        "transactionStatusDesc": DESCRIPTIONS[status],
        "amount": money(transfer.amount),
        "beneficiaryAccountNo": transfer.beneficiary_account_no,
        "beneficiaryAccountName": transfer.beneficiary_account_name,
        "beneficiaryBankCode": transfer.beneficiary_bank_code,
        "sourceAccountNo": transfer.source_account_no,
        "transactionDate": transfer.transaction_date or isoformat_seconds(transfer.created_at),
        "finishedTime": isoformat_seconds(transfer.refunded_at or transfer.finished_at or transfer.updated_at),
        "additionalInfo": info,
    }
