"""Disbursement balances (docs/decisions.md §11.3): `ledger`, `hold`, `available` = `ledger` − `hold`, whole rupiah.

Credited only by the operator (a top-up: the admin API, the CLI, the console), audited. Transfers (§11.6) will
hold and debit it; until then the balance is what the top-ups made it.
"""

from __future__ import annotations

from kasir.audit.service import Actor, audit
from kasir.db import Session
from kasir.kit.clock import clock
from kasir.merchants.service import merchant_service
from kasir.payouts.repository import BalanceRow, TopUpRow, payout_repository
from kasir.payouts.schemas import DisbursementBalanceView, TopUpView


class PayoutService:
    async def balance(self, session: Session, merchant_id: str) -> DisbursementBalanceView:
        merchant = await merchant_service.get(session, merchant_id)  # an unknown merchant: 404
        balance = await payout_repository.balance(session, merchant.id)
        return _view(merchant.id, merchant.account_no, balance)

    async def top_ups(self, session: Session, merchant_id: str, limit: int = 20) -> list[TopUpRow]:
        """The merchant's latest top-ups, newest first."""
        return await payout_repository.top_ups(session, merchant_id, limit)

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
