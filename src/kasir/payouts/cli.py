"""`kasir merchant top-up`: the operator credits a merchant's disbursement balance (docs/decisions.md §11.3)."""

from __future__ import annotations

from typing import Annotated

import typer

from kasir.audit.service import Actor
from kasir.cli_support import console, fail, run_in_session
from kasir.db import Session
from kasir.payouts.schemas import AMOUNT_MAX, TopUpView
from kasir.payouts.service import payout_service


def top_up(
    merchant_id: str,
    amount: Annotated[int, typer.Argument(help="Whole rupiah, at least 1")],
    note: Annotated[str, typer.Option("--note", help="Why (shown in the merchant's transaction history)")],
) -> None:
    """Credit the merchant's disbursement balance by AMOUNT rupiah (audited)."""
    if not 1 <= amount <= AMOUNT_MAX:
        fail(f"AMOUNT must be whole rupiah from 1 to {AMOUNT_MAX}")
    if not note.strip() or len(note) > 255 or not note.isprintable():
        fail("--note must be 1 to 255 printable characters")

    async def work(session: Session) -> TopUpView:
        return await payout_service.top_up(session, merchant_id, amount, note, Actor.cli())

    done = run_in_session(work)
    console.print(
        f"merchant {done.merchant_id}: +{done.amount:,} rupiah; available {done.available:,}, hold {done.hold:,}, "
        f"ledger {done.ledger:,} (top-up {done.top_up_id})",
        highlight=False,
    )
