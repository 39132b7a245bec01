"""Every audit query: append and read, nothing else (the log is append-only)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select

from kasir.audit.models import AuditEvent
from kasir.db import Session


class AuditRepository:
    async def add(self, session: Session, event: AuditEvent) -> None:
        session.add(event)
        await session.flush()

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
    ) -> Sequence[AuditEvent]:
        query = select(AuditEvent).order_by(AuditEvent.id.desc()).limit(limit)
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
        return (await session.scalars(query)).all()


audit_repository = AuditRepository()
