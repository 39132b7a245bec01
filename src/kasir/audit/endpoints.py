"""Admin API of the audit log (Bearer KASIR_ADMIN_TOKEN): read only, newest first."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query

from kasir.audit.schemas import AuditEventView, AuditList
from kasir.audit.service import audit
from kasir.auth.admin import ADMIN
from kasir.db import ReadSession
from kasir.kit.ids import INT64_MAX

router = APIRouter(prefix="/admin/audit", tags=["admin"], dependencies=[ADMIN])


@router.get("", summary="Audit events, newest first")
async def list_events(
    session: ReadSession,
    merchant_id: str | None = None,
    action: Annotated[str | None, Query(description="Actions starting with this, e.g. `merchant.`")] = None,
    actor: str | None = None,
    since: datetime | None = None,
    before_id: Annotated[int | None, Query(ge=1, le=INT64_MAX)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> AuditList:
    events = await audit.search(
        session, merchant_id=merchant_id, action=action, actor=actor, since=since, before_id=before_id, limit=limit
    )
    return AuditList(events=[AuditEventView.of(event) for event in events])
