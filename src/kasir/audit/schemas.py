from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from kasir.audit.repository import AuditEventRow


class AuditEventView(BaseModel):
    id: int
    at: datetime
    actor: str
    channel: str
    action: str
    target_type: str
    target_id: str
    merchant_id: str | None
    ip: str | None
    before: Any
    after: Any

    @classmethod
    def of(cls, event: AuditEventRow) -> AuditEventView:
        return cls(
            id=event.id,
            at=event.at,
            actor=event.actor,
            channel=event.channel,
            action=event.action,
            target_type=event.target_type,
            target_id=event.target_id,
            merchant_id=event.merchant_id,
            ip=event.ip,
            before=json.loads(event.before) if event.before else None,
            after=json.loads(event.after) if event.after else None,
        )


class AuditList(BaseModel):
    events: list[AuditEventView]
