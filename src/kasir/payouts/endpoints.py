"""Disbursement routes. The operator's (admin Bearer, docs/decisions.md §11.3): a merchant's balance, and its
top-ups. The merchants' SNAP routes (§11.1): balance inquiry, account inquiry, transfer interbank (v1.0, v1.1,
v1.2), transfer status, transaction history list and detail."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from kasir.audit.service import Actor
from kasir.auth import DisbursementSigned
from kasir.auth.admin import ADMIN
from kasir.auth.snap import SNAP_HEADERS, claim_external_id
from kasir.callbacks.ssrf import check_callback_url
from kasir.config import get_settings
from kasir.db import ReadSession, Session, WriteSession
from kasir.errors import KasirError
from kasir.idempotency.service import KEY_HEADER, Keyed, KeyRef
from kasir.merchants.service import merchant_service
from kasir.payouts import service
from kasir.payouts.repository import payout_repository
from kasir.payouts.schemas import (
    AccountInquiryRequest,
    AccountInquiryResponse,
    BalanceInquiryRequest,
    BalanceInquiryResponse,
    DisbursementBalanceView,
    HistoryDetailRequest,
    HistoryDetailResponse,
    HistoryListRequest,
    HistoryListResponse,
    TopUpRequest,
    TopUpView,
    TransferRequest,
    TransferRequestV12,
    TransferResponse,
    TransferStatusRequest,
    TransferStatusResponse,
)
from kasir.payouts.service import balance_body, parse_request, payout_service
from kasir.payouts.transfers import (
    TRANSFER_SCOPE,
    Beneficiary,
    TransferAsk,
    accept,
    account_inquiry_body,
    ask_beneficiary,
    check_account_form,
    check_bank,
)
from kasir.snap.codes import (
    SERVICE_ACCOUNT_INQUIRY,
    SERVICE_BALANCE_INQUIRY,
    SERVICE_HISTORY_DETAIL,
    SERVICE_HISTORY_LIST,
    SERVICE_TRANSFER,
    SERVICE_TRANSFER_STATUS,
)
from kasir.snap.headers import parse_json_body
from kasir.snap.openapi import snap_errors, snap_header_params, snap_route

router = APIRouter(prefix="/admin/merchants", tags=["admin"], dependencies=[ADMIN])


@router.get("/{merchant_id}/disbursement-balance", summary="A merchant's disbursement balance")
async def disbursement_balance(merchant_id: str, session: ReadSession) -> DisbursementBalanceView:
    return await payout_service.balance(session, merchant_id)


@router.post(
    "/{merchant_id}/disbursement-balance/top-ups",
    status_code=201,
    summary="Credit a merchant's disbursement balance (audited)",
)
async def top_up(merchant_id: str, body: TopUpRequest, request: Request, session: WriteSession) -> TopUpView:
    actor = Actor.admin_api(request.client.host if request.client else None)
    return await payout_service.top_up(session, merchant_id, body.amount, body.note, actor)


# --- the merchants' SNAP routes (docs/decisions.md §11.1) ----------------------------------------------------------
# Each is `DisbursementSigned` (kasir.auth.snap: a disbursement token and §3.2's symmetric signature, verified before
# any unit of work opens); X-EXTERNAL-ID is claimed first in the route's unit (one namespace with BNPL), so a
# refusal after it rolls the claim back with everything else.

snap_router = APIRouter(tags=["payouts"])


def _snap_post(
    paths: tuple[str, ...], service_code: str, model: type[Any], answer: type[Any], summary: str, *, keyed: bool = False
) -> Callable[[Any], Any]:
    parameters = snap_header_params("Content-Type", *SNAP_HEADERS)
    statuses: tuple[int, ...] = (400, 401, 403, 404, 409, 429, 500)
    if keyed:  # moves money: X-Idempotency-Key (kasir.idempotency)
        key = {"name": KEY_HEADER, "in": "header", "required": False, "schema": {"type": "string", "maxLength": 255}}
        parameters = [*parameters, key]
        statuses = (400, 401, 403, 404, 409, 422, 429, 500)

    def register(handler: Any) -> Any:
        for path in paths:
            extra = {**snap_route(service_code, model_for(path, model)), "parameters": parameters}
            snap_router.add_api_route(
                path,
                handler,
                methods=["POST"],
                summary=f"{summary} ({path.split('/')[2]})",
                openapi_extra=extra,
                responses={200: {"model": answer, "description": "Successful"}, **snap_errors(*statuses)},
            )
        return handler

    return register


def model_for(path: str, model: type[Any]) -> type[Any]:
    """§11.1: the transfer on v1.2 requires originatorInfos."""
    return TransferRequestV12 if model is TransferRequest and path.startswith("/api/v1.2/") else model


def _bank_and_account(body: bytes) -> tuple[str, str] | None:
    """The beneficiary a body names, if it names one plainly (else its fields' own check refuses it)."""
    try:
        data = parse_json_body(body)
    except KasirError:
        return None
    if not isinstance(data, dict):
        return None
    bank, account = data.get("beneficiaryBankCode"), data.get("beneficiaryAccountNo")
    return (bank, account) if isinstance(bank, str) and isinstance(account, str) else None


async def _beneficiary(body: bytes) -> Beneficiary:
    """The rail's account inquiry, asked before the unit opens (nothing slow inside one)."""
    named = _bank_and_account(body)
    return Beneficiary(None, None, None) if named is None else await ask_beneficiary(*named)


@_snap_post(
    ("/api/v1.0/balance-inquiry",),
    SERVICE_BALANCE_INQUIRY,
    BalanceInquiryRequest,
    BalanceInquiryResponse,
    "Disbursement balance inquiry",
)
async def balance_inquiry(request: Request, caller: DisbursementSigned) -> JSONResponse:
    async with request.app.state.database.unit_of_work() as session:
        await claim_external_id(session, caller)
        inquiry = parse_request(BalanceInquiryRequest, caller.body)
        merchant = await merchant_service.get(session, caller.merchant_id)
        body = balance_body(merchant, inquiry, await payout_repository.balance(session, merchant.id))
    return JSONResponse(body)


@_snap_post(
    ("/api/v1.0/account-inquiry-external",),
    SERVICE_ACCOUNT_INQUIRY,
    AccountInquiryRequest,
    AccountInquiryResponse,
    "Disbursement account inquiry",
)
async def account_inquiry(request: Request, caller: DisbursementSigned) -> JSONResponse:
    beneficiary = await _beneficiary(caller.body)
    async with request.app.state.database.unit_of_work() as session:
        await claim_external_id(session, caller)
        inquiry = parse_request(AccountInquiryRequest, caller.body)
        check_account_form(inquiry.beneficiary_bank_code, inquiry.beneficiary_account_no)
        check_bank(inquiry.beneficiary_bank_code)
        body = account_inquiry_body(inquiry, beneficiary)
    return JSONResponse(body)


@_snap_post(
    ("/api/v1.2/transfer-interbank", "/api/v1.0/transfer-interbank", "/api/v1.1/transfer-interbank"),
    SERVICE_TRANSFER,
    TransferRequest,
    TransferResponse,
    "Disbursement transfer interbank",
    keyed=True,
)
async def transfer_interbank(request: Request, caller: DisbursementSigned, once: Keyed) -> Response:
    model = model_for(request.scope["path"], TransferRequest)
    beneficiary = await _beneficiary(caller.body)
    callback_refusal = await _callback_refusal(caller.body)  # DNS: before the unit of work
    key = KeyRef(caller.merchant_id, TRANSFER_SCOPE, once.key) if once.key is not None else None

    async def accept_in(session: Session) -> TransferAsk:
        await claim_external_id(session, caller)
        transfer = parse_request(model, caller.body)
        if callback_refusal is not None:
            raise callback_refusal
        merchant = await merchant_service.get(session, caller.merchant_id)
        return TransferAsk(await accept(session, merchant, caller.external_id, transfer, beneficiary, key))

    return await once.run(caller.merchant_id, accept_in, scope=TRANSFER_SCOPE)


async def _callback_refusal(body: bytes) -> KasirError | None:
    """additionalInfo.callbackUrl's check (in production it resolves the host): its refusal, raised in the unit
    after the fields' checks."""
    try:
        data = parse_json_body(body)
    except KasirError:
        return None
    info = data.get("additionalInfo") if isinstance(data, dict) else None
    url = info.get("callbackUrl") if isinstance(info, dict) else None
    if not isinstance(url, str) or not url:
        return None
    try:
        await check_callback_url(url, production=get_settings().is_production, field="additionalInfo.callbackUrl")
    except KasirError as error:
        return error
    return None


@_snap_post(
    ("/api/v1.0/transfer/status",),
    SERVICE_TRANSFER_STATUS,
    TransferStatusRequest,
    TransferStatusResponse,
    "Disbursement transfer status inquiry",
)
async def transfer_status(request: Request, caller: DisbursementSigned) -> JSONResponse:
    async with request.app.state.database.unit_of_work() as session:
        await claim_external_id(session, caller)
        inquiry = parse_request(TransferStatusRequest, caller.body)
        body = await service.transfer_status(session, caller.merchant_id, inquiry)
    return JSONResponse(body)


@_snap_post(
    ("/api/v1.0/transaction-history-list",),
    SERVICE_HISTORY_LIST,
    HistoryListRequest,
    HistoryListResponse,
    "Disbursement transaction history list",
)
async def history_list(request: Request, caller: DisbursementSigned) -> JSONResponse:
    async with request.app.state.database.unit_of_work() as session:
        await claim_external_id(session, caller)
        listing = parse_request(HistoryListRequest, caller.body)
        body = await service.history_list(session, caller.merchant_id, listing)
    return JSONResponse(body)


@_snap_post(
    ("/api/v1.0/transaction-history-detail",),
    SERVICE_HISTORY_DETAIL,
    HistoryDetailRequest,
    HistoryDetailResponse,
    "Disbursement transaction history detail",
)
async def history_detail(request: Request, caller: DisbursementSigned) -> JSONResponse:
    async with request.app.state.database.unit_of_work() as session:
        await claim_external_id(session, caller)
        detail = parse_request(HistoryDetailRequest, caller.body)
        body = await service.history_detail(session, caller.merchant_id, detail)
    return JSONResponse(body)
