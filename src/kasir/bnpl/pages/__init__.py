"""The staging BNPL approval page (qrContent), rendered with Jinja2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from sqlalchemy.ext.asyncio import AsyncSession

from kasir.bnpl.models import BnplTransaction
from kasir.bnpl.states import BnplStatus
from kasir.merchants.service import merchant_service

_env = Environment(
    loader=FileSystemLoader(Path(__file__).parent),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)


def qr_content(tx: BnplTransaction) -> str:
    from kasir.bnpl.service import page_url

    return page_url(tx)


async def render_approval(session: AsyncSession, tx: BnplTransaction) -> str:
    from kasir.bnpl.service import bnpl_service, money, option_body

    merchant = await merchant_service.get(session, tx.merchant_id)
    details: dict[str, Any] = json.loads(tx.details)
    options = [option_body(o) for o in await bnpl_service.options(session, tx.merchant_id, tx.amount)]
    return _env.get_template("approval.html").render(
        tx=tx,
        merchant_name=merchant.name,
        items=details.get("itemDetails", []),
        customer=details.get("customerDetails", {}),
        amount=money(tx.amount),
        options=options,
        pending=tx.status == BnplStatus.INITIATED.value,
    )


def render_refusal(reference_no: str, message: str) -> str:
    return _env.get_template("refusal.html").render(reference_no=reference_no, message=message)
