"""Every audit query: append and read, nothing else (the log is append-only)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select

from kasir.audit.models import AuditEvent
from kasir.db import Session, Statement, binds, fetch


@dataclass(frozen=True, slots=True)
class AuditEventRow:
    """One audit event as written: every column of `audit_event`."""

    id: int
    at: datetime
    actor: str
    channel: str
    action: str
    target_type: str
    target_id: str
    merchant_id: str | None
    ip: str | None
    before: str | None
    after: str | None


EVENT_COLUMNS = tuple(field.name for field in fields(AuditEventRow))

_event_table = AuditEvent.__table__
# The id is the database's: it orders the log.
_ADD = Statement(insert(AuditEvent).values(binds(AuditEvent, EVENT_COLUMNS[1:])).returning(AuditEvent.id))


class AuditRepository:
    async def add(
        self,
        session: Session,
        *,
        at: datetime,
        actor: str,
        channel: str,
        action: str,
        target_type: str,
        target_id: str,
        merchant_id: str | None,
        ip: str | None,
        before: str | None,
        after: str | None,
    ) -> AuditEventRow:
        values: dict[str, Any] = {
            "at": at,
            "actor": actor,
            "channel": channel,
            "action": action,
            "target_type": target_type,
            "target_id": target_id,
            "merchant_id": merchant_id,
            "ip": ip,
            "before": before,
            "after": after,
        }
        event_id = await _ADD.scalar(session, **values)
        return AuditEventRow(id=int(event_id), **values)

    async def search(
        self,
        session: Session,
        *,
        merchant_id: str | None = None,
        action: str | None = None,
        actor: str | None = None,
        since: datetime | None = None,
        before_id: int | None = None,
        limit: int = 100,
    ) -> list[AuditEventRow]:
        query = select(*(_event_table.c[name] for name in EVENT_COLUMNS)).order_by(AuditEvent.id.desc()).limit(limit)
        if merchant_id:
            query = query.where(AuditEvent.merchant_id == merchant_id)
        if action:
            query = query.where(AuditEvent.action.startswith(action, autoescape=True))
        if actor:
            query = query.where(AuditEvent.actor == actor)
        if since is not None:
            query = query.where(AuditEvent.at >= since)
        if before_id is not None:
            query = query.where(AuditEvent.id < before_id)
        return [AuditEventRow(*row) for row in await fetch(session, query)]


audit_repository = AuditRepository()
