"""The staging checkout page (payment_url) of a wallet transaction, rendered with Jinja2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from sqlalchemy.ext.asyncio import AsyncSession

from kasir.merchants.service import merchant_service
from kasir.wallet.models import WalletTransaction
from kasir.wallet.states import WalletStatus

_env = Environment(
    loader=FileSystemLoader(Path(__file__).parent),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)


def rupiah(amount: int) -> str:
    """`150000` -> `Rp150.000` (Indonesian thousands separator)."""
    return "Rp" + f"{amount:,}".replace(",", ".")


async def render_checkout(session: AsyncSession, tx: WalletTransaction) -> str:
    merchant = await merchant_service.get(session, tx.merchant_id)
    details: dict[str, Any] = json.loads(tx.details)
    items = [
        {**item, "price": rupiah(item["amount"]), "subtotal": rupiah(item["amount"] * item["qty"])}
        for item in details["item_details"]
    ]
    return _env.get_template("checkout.html").render(
        tx=tx,
        merchant_name=merchant.name,
        items=items,
        total=rupiah(tx.amount),
        customer=details["customer_details"],
        pending=tx.status == WalletStatus.PENDING.value,
        qr_image=f"/ewallet/qr/{tx.id}.png" if tx.qr_string else None,
    )


def render_refusal(transaction_id: str, message: str) -> str:
    return _env.get_template("refusal.html").render(transaction_id=transaction_id, message=message)
