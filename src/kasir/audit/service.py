"""Who did what, when, from where: `audit.record(session, actor, "merchant.disable", ...)`.

Written in the same unit of work as the change it describes, so a change and its audit row
commit (or roll back) together. Values are JSON; secrets never appear in them (fingerprints do).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kasir.audit.repository import AuditEventRow, audit_repository
from kasir.db import Session
from kasir.kit.clock import clock


@dataclass(frozen=True, slots=True)
class Actor:
    """Who acts: `console:siti@example.id` from 203.0.113.7, `admin-api`, `cli:root`."""

    name: str
    channel: str  # console | admin-api | cli
    ip: str | None = None
    user_id: int | None = None

    @classmethod
    def cli(cls) -> Actor:
        import getpass

        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = "unknown"
        return cls(f"cli:{user}", "cli")

    @classmethod
    def admin_api(cls, ip: str | None) -> Actor:
        return cls("admin-api", "admin-api", ip)


def _json(value: Any) -> str | None:
    if value is None:
        return None
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


class AuditService:
    async def record(
        self,
        session: Session,
        actor: Actor,
        action: str,
        *,
        target_type: str,
        target_id: str,
        merchant_id: str | None = None,
        before: Any = None,
        after: Any = None,
    ) -> AuditEventRow:
        return await audit_repository.add(
            session,
            at=clock.now(),
            actor=actor.name[:320],
            channel=actor.channel,
            action=action,
            target_type=target_type,
            target_id=target_id[:128],
            merchant_id=merchant_id,
            ip=actor.ip,
            before=_json(before),
            after=_json(after),
        )

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
    ) -> Sequence[AuditEventRow]:
        return await audit_repository.search(
            session, merchant_id=merchant_id, action=action, actor=actor, since=since, before_id=before_id, limit=limit
        )


audit = AuditService()
