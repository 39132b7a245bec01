"""The simulator's queries: the wrong one-time passwords of a challenge (kasir.simulator.models)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import bindparam, func, insert, select

from kasir.db import Session, Statement, binds
from kasir.simulator.models import SimulatorWrongOtp

_ADD = Statement(insert(SimulatorWrongOtp).values(binds(SimulatorWrongOtp, ("card_order_id", "attempt", "created_at"))))
_COUNT = Statement(
    select(func.count()).where(
        SimulatorWrongOtp.card_order_id == bindparam("card_order_id"),
        SimulatorWrongOtp.attempt == bindparam("attempt"),
    )
)


class WrongOtpRepository:
    async def add(self, session: Session, order_id: str, attempt: int, now: datetime) -> None:
        await _ADD.execute(session, card_order_id=order_id, attempt=attempt, created_at=now)

    async def count(self, session: Session, order_id: str, attempt: int) -> int:
        return int(await _COUNT.scalar(session, card_order_id=order_id, attempt=attempt) or 0)


wrong_otps = WrongOtpRepository()
