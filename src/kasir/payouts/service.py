"""Disbursement balances (docs/decisions.md §11.3): `ledger`, `hold`, `available` = `ledger` − `hold`, whole rupiah.

Credited only by the operator (a top-up: the admin API, the CLI, the console), audited. Transfers hold and debit
it (kasir.payouts.transfers).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from kasir.audit.service import Actor, audit
from kasir.db import Session
from kasir.errors import InvalidFieldFormat, InvalidMandatoryField, from_pydantic_errors
from kasir.kit.clock import clock, isoformat_seconds, parse_aware
from kasir.kit.ids import new_id
from kasir.merchants.repository import MerchantRow
from kasir.merchants.service import merchant_service
from kasir.payouts.repository import BalanceRow, TopUpRow, TransferRow, payout_repository, transfer_repository
from kasir.payouts.schemas import (
    BalanceInquiryRequest,
    DisbursementBalanceView,
    HistoryDetailRequest,
    HistoryListRequest,
    TopUpView,
    TransferStatusRequest,
)
from kasir.payouts.states import DESCRIPTIONS, HISTORY_STATUS, TransferStatus
from kasir.payouts.transfers import TransferNotFound, check_own_account, money
from kasir.snap.codes import (
    SERVICE_BALANCE_INQUIRY,
    SERVICE_HISTORY_DETAIL,
    SERVICE_HISTORY_LIST,
    SERVICE_TRANSFER,
    SERVICE_TRANSFER_STATUS,
    SUCCESS_MESSAGE,
    success_code,
)
from kasir.snap.headers import parse_json_body

Model = TypeVar("Model", bound=BaseModel)


class PayoutService:
    async def balance(self, session: Session, merchant_id: str) -> DisbursementBalanceView:
        merchant = await merchant_service.get(session, merchant_id)  # an unknown merchant: 404
        balance = await payout_repository.balance(session, merchant.id)
        return _view(merchant.id, merchant.account_no, balance)

    async def latest_top_ups(self, session: Session, merchant_id: str, limit: int = 20) -> list[TopUpRow]:
        """The merchant's latest top-ups, newest first (the console)."""
        return await payout_repository.latest_top_ups(session, merchant_id, limit)

    async def top_up(self, session: Session, merchant_id: str, amount: int, note: str, actor: Actor) -> TopUpView:
        """Credit the merchant's ledger by `amount`, audited, in the caller's unit of work."""
        merchant = await merchant_service.get(session, merchant_id)
        now = clock.now()
        before = await payout_repository.balance(session, merchant.id)
        after = await payout_repository.credit(session, merchant.id, amount, now)
        top_up_id = await payout_repository.add_top_up(session, merchant.id, amount, note, now)
        await audit.record(
            session,
            actor,
            "disbursement.top_up",
            target_type="merchant",
            target_id=merchant.id,
            merchant_id=merchant.id,
            before={"ledger": before.ledger, "hold": before.hold},
            after={"ledger": after.ledger, "hold": after.hold, "amount": amount, "note": note, "top_up_id": top_up_id},
        )
        return TopUpView(
            top_up_id=top_up_id,
            merchant_id=merchant.id,
            amount=amount,
            available=after.available,
            hold=after.hold,
            ledger=after.ledger,
            created_at=now,
        )


def _view(merchant_id: str, account_no: str | None, balance: BalanceRow) -> DisbursementBalanceView:
    return DisbursementBalanceView(
        merchant_id=merchant_id,
        account_no=account_no,
        available=balance.available,
        hold=balance.hold,
        ledger=balance.ledger,
    )


payout_service = PayoutService()


def parse_request(model: type[Model], body: bytes) -> Model:
    """The raw (already verified) body as `model`, or a KasirError naming the first bad field."""
    data = parse_json_body(body)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise from_pydantic_errors(exc.errors()) from exc


def balance_body(merchant: MerchantRow, request: BalanceInquiryRequest, balance: BalanceRow) -> dict[str, Any]:
    """§11.3: the balance inquiry's answer (money objects of two decimals)."""
    check_own_account(merchant, request.account_no, "accountNo")
    return {
        "responseCode": success_code(SERVICE_BALANCE_INQUIRY),
        "responseMessage": SUCCESS_MESSAGE,
        "referenceNo": new_id("BLI"),
        "partnerReferenceNo": request.partner_reference_no or "",
        "accountNo": merchant.account_no or "",
        "name": merchant.name,
        "accountInfos": [
            {
                "balanceType": "cash",
                "amount": money(balance.available),
                "floatAmount": money(0),
                "holdAmount": money(balance.hold),
                "availableBalance": money(balance.available),
                "ledgerBalance": money(balance.ledger),
                "status": "0001",
            }
        ],
    }


# --- status inquiry (36), history list (12) and detail (13): docs/decisions.md §11.7 ------------------------------

HISTORY_WINDOW = timedelta(days=31)
PAGE_SIZE_DEFAULT = 10


async def find_transfer(
    session: Session, merchant_id: str, partner_reference_no: str | None, reference_no: str | None
) -> TransferRow:
    """The merchant's transfer by either reference; both given must name the same one (404xx01 otherwise)."""
    if not partner_reference_no and not reference_no:
        raise InvalidMandatoryField("originalPartnerReferenceNo")
    found = None
    if reference_no:
        found = await transfer_repository.by_reference(session, merchant_id, reference_no)
    if partner_reference_no:
        by_partner = await transfer_repository.by_partner_reference(session, merchant_id, partner_reference_no)
        if found is not None and (by_partner is None or by_partner.id != found.id):
            raise TransferNotFound()
        found = by_partner
    if found is None:
        raise TransferNotFound()
    return found


def status_body(transfer: TransferRow) -> dict[str, Any]:
    status = TransferStatus(transfer.status)
    info: dict[str, Any] = {"beneficiaryAccountName": transfer.beneficiary_account_name}
    if transfer.reason is not None and status in (TransferStatus.FAILED, TransferStatus.REFUNDED):
        info["reason"] = transfer.reason
    return {
        "responseCode": success_code(SERVICE_TRANSFER_STATUS),
        "responseMessage": SUCCESS_MESSAGE,
        "originalReferenceNo": transfer.id,
        "originalPartnerReferenceNo": transfer.partner_reference_no,
        "originalExternalId": transfer.external_id,
        "serviceCode": SERVICE_TRANSFER,
        "transactionDate": transfer.transaction_date or isoformat_seconds(transfer.created_at),
        "amount": money(transfer.amount),
        "beneficiaryAccountNo": transfer.beneficiary_account_no,
        "beneficiaryBankCode": transfer.beneficiary_bank_code,
        "currency": transfer.currency,
        "previousResponseCode": success_code(SERVICE_TRANSFER),
        "referenceNumber": transfer.rail_reference or transfer.id,
        "sourceAccountNo": transfer.source_account_no,
        "latestTransactionStatus": status.value,
        "transactionStatusDesc": DESCRIPTIONS[status],
        "additionalInfo": info,
    }


async def transfer_status(session: Session, merchant_id: str, inquiry: TransferStatusRequest) -> dict[str, Any]:
    transfer = await find_transfer(
        session, merchant_id, inquiry.original_partner_reference_no, inquiry.original_reference_no
    )
    return status_body(transfer)


def _entry_info(transfer: TransferRow) -> dict[str, Any]:
    return {
        "partnerReferenceNo": transfer.partner_reference_no,
        "referenceNo": transfer.id,
        "latestTransactionStatus": transfer.status,
        "beneficiaryAccountNo": transfer.beneficiary_account_no,
        "beneficiaryBankCode": transfer.beneficiary_bank_code,
    }


def _send_money(transfer: TransferRow) -> tuple[datetime, str, dict[str, Any]]:
    return (
        transfer.created_at,
        transfer.id,
        {
            "dateTime": isoformat_seconds(transfer.created_at),
            "amount": money(transfer.amount),
            "remark": transfer.remark or "",
            "status": HISTORY_STATUS[TransferStatus(transfer.status)],
            "type": "SEND_MONEY",
            "additionalInfo": _entry_info(transfer),
        },
    )


def _refund(transfer: TransferRow) -> tuple[datetime, str, dict[str, Any]]:
    assert transfer.refunded_at is not None
    return (
        transfer.refunded_at,
        transfer.id + "R",
        {
            "dateTime": isoformat_seconds(transfer.refunded_at),
            "amount": money(transfer.amount),
            "remark": transfer.reason or "",
            "status": "SUCCESS",
            "type": "REFUND",
            "additionalInfo": _entry_info(transfer),
        },
    )


def _top_up(top_up: TopUpRow) -> tuple[datetime, str, dict[str, Any]]:
    return (
        top_up.created_at,
        f"TOPUP{top_up.id:012d}",
        {
            "dateTime": isoformat_seconds(top_up.created_at),
            "amount": money(top_up.amount),
            "remark": top_up.note,
            "status": "SUCCESS",
            "type": "TOP_UP",
            "additionalInfo": {"referenceNo": f"TOPUP-{top_up.id}"},
        },
    )


def _moment(value: str | None, field: str, default: datetime) -> datetime:
    return default if value is None else parse_aware(value)


async def history_list(session: Session, merchant_id: str, request: HistoryListRequest) -> dict[str, Any]:
    """§11.7: transfers (SEND_MONEY), returns (REFUND) and top-ups (TOP_UP) in the window, newest first, paged."""
    now = clock.now()
    midnight = clock.local_now().replace(hour=0, minute=0, second=0, microsecond=0)
    start = _moment(request.from_date_time, "fromDateTime", midnight)
    end = _moment(request.to_date_time, "toDateTime", now)
    if end < start:
        raise InvalidFieldFormat("toDateTime", "must not be before fromDateTime")
    if end - start > HISTORY_WINDOW:
        raise InvalidFieldFormat("fromDateTime", "the window is at most 31 days")
    size = request.page_size or PAGE_SIZE_DEFAULT
    page = request.page_number or 0
    wanted = size * (page + 1)
    only = request.filter.original_partner_reference_no if request.filter else None
    entries = [
        _send_money(t)
        for t in await transfer_repository.history(session, merchant_id, start, end, wanted, partner_reference_no=only)
    ]
    entries += [
        _refund(t)
        for t in await transfer_repository.history(
            session, merchant_id, start, end, wanted, refunds=True, partner_reference_no=only
        )
    ]
    if only is None:
        entries += [_top_up(t) for t in await payout_repository.top_ups(session, merchant_id, start, end, wanted)]
    entries.sort(key=lambda entry: (entry[0], entry[1]), reverse=True)
    return {
        "responseCode": success_code(SERVICE_HISTORY_LIST),
        "responseMessage": SUCCESS_MESSAGE,
        "referenceNo": new_id("HIS"),
        "partnerReferenceNo": request.partner_reference_no or "",
        "detailData": [entry for _, _, entry in entries[page * size : wanted]],
    }


async def history_detail(session: Session, merchant_id: str, request: HistoryDetailRequest) -> dict[str, Any]:
    transfer = await transfer_repository.by_partner_reference(
        session, merchant_id, request.original_partner_reference_no
    )
    if transfer is None:
        raise TransferNotFound()
    status = TransferStatus(transfer.status)
    info = {**_entry_info(transfer), "transactionStatusDesc": DESCRIPTIONS[status]}
    body: dict[str, Any] = {
        "responseCode": success_code(SERVICE_HISTORY_DETAIL),
        "responseMessage": SUCCESS_MESSAGE,
        "referenceNo": transfer.id,
        "partnerReferenceNo": transfer.partner_reference_no,
        "amount": money(transfer.amount),
        "dateTime": isoformat_seconds(transfer.created_at),
        "remark": transfer.remark or "",
        "status": HISTORY_STATUS[status],
        "type": "SEND_MONEY",
        "additionalInfo": info,
    }
    if status in (TransferStatus.CANCELED, TransferStatus.FAILED) and transfer.finished_at is not None:
        body["cancelledTime"] = isoformat_seconds(transfer.finished_at)
    if status is TransferStatus.REFUNDED:
        body["refundAmount"] = money(transfer.amount)
    return body
