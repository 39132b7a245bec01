"""The SNAP edge's queries: claiming a request's X-EXTERNAL-ID, forgetting those of past days."""

from __future__ import annotations

from datetime import date, datetime

from sqlalchemy import bindparam, delete

from kasir.db import Session, Statement, binds
from kasir.snap.models import SnapExternalId

# The unique constraint decides races, with no look-up before it and no savepoint around it.
_CLAIM_EXTERNAL_ID = Statement(
    lambda insert: (
        insert(SnapExternalId)
        .values(binds(SnapExternalId, ("merchant_id", "day", "external_id", "created_at")))
        .on_conflict_do_nothing(index_elements=["merchant_id", "day", "external_id"])
        .returning(SnapExternalId.id)
    )
)
_FORGET_EXTERNAL_IDS = Statement(
    delete(SnapExternalId).where(SnapExternalId.day < bindparam("day", type_=SnapExternalId.day.type))
)


class SnapRepository:
    async def claim_external_id(
        self, session: Session, merchant_id: str, day: date, external_id: str, now: datetime
    ) -> bool:
        """Record the (merchant, day, X-EXTERNAL-ID); False when it is taken.

        One `INSERT ... ON CONFLICT DO NOTHING` (SQLite and PostgreSQL alike): the unique constraint
        decides races (every SNAP request pays this).
        """
        claimed = await _CLAIM_EXTERNAL_ID.scalar(
            session, merchant_id=merchant_id, day=day, external_id=external_id, created_at=now
        )
        return claimed is not None

    async def forget_external_ids_before(self, session: Session, day: date) -> None:
        await _FORGET_EXTERNAL_IDS.execute(session, day=day)


snap_repository = SnapRepository()
