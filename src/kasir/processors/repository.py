"""Every processor-call query: a card charge runs two of them (the call written, then deleted)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, delete, select

from kasir.db import Session, Statement, binds
from kasir.processors.models import ProcessorCall

_COLUMNS = ("product", "reference", "action", "details", "key_merchant_id", "key_scope", "key", "started_at")
_THE_PAYMENTS = (ProcessorCall.product == bindparam("product"), ProcessorCall.reference == bindparam("reference"))

# The unique (product, reference) keeps one call per payment in flight: a second writes nothing.
_ADD = Statement(
    lambda insert: (
        insert(ProcessorCall)
        .values(binds(ProcessorCall, _COLUMNS))
        .on_conflict_do_nothing(index_elements=["product", "reference"])
    )
)
_FORGET = Statement(delete(ProcessorCall).where(*_THE_PAYMENTS))
_IN_FLIGHT = Statement(select(ProcessorCall.id).where(*_THE_PAYMENTS))
_STALLED = Statement(
    select(*(ProcessorCall.__table__.c[name] for name in _COLUMNS))
    .where(ProcessorCall.started_at <= bindparam("before", type_=ProcessorCall.started_at.type))
    .order_by(ProcessorCall.started_at)
    .limit(100)
)


class ProcessorCallRepository:
    async def add(self, session: Session, values: dict[str, Any]) -> bool:
        """Write the call; False when the payment has one in flight already."""
        return await _ADD.execute(session, **{**values, "details": json.dumps(values["details"])}) == 1

    async def forget(self, session: Session, product: str, reference: str) -> bool:
        """Delete the payment's call; False when another unit of work finished it first."""
        return await _FORGET.execute(session, product=product, reference=reference) == 1

    async def in_flight(self, session: Session, product: str, reference: str) -> bool:
        return await _IN_FLIGHT.first(session, product=product, reference=reference) is not None

    async def stalled(self, session: Session, before: datetime) -> list[dict[str, Any]]:
        """The calls started at or before `before`, oldest first (at most 100 at a time)."""
        rows = await _STALLED.rows(session, before=before)
        found = [dict(zip(_COLUMNS, row, strict=True)) for row in rows]
        for values in found:
            values["details"] = json.loads(values["details"])
        return found


processor_call_repository = ProcessorCallRepository()
