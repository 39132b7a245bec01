"""Disbursement routes. The operator's (admin Bearer, docs/decisions.md §11.3): a merchant's balance, and its
top-ups. The merchants' SNAP routes (§11.1: account inquiry, balance, transfer, status, history) are to come."""

from __future__ import annotations

from fastapi import APIRouter, Request

from kasir.audit.service import Actor
from kasir.auth.admin import ADMIN
from kasir.db import ReadSession, WriteSession
from kasir.payouts.schemas import DisbursementBalanceView, TopUpRequest, TopUpView
from kasir.payouts.service import payout_service

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
