from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Table, bindparam, select, true, update

from kasir.db import Session, Statement
from kasir.merchants.models import Merchant, MerchantCredentialGrace, SubMerchant

# Every callback a payment records is signed with its merchant's hash key: read alone, no ORM object.
_HASH_KEY = Statement(select(Merchant.hash_key_encrypted).where(Merchant.id == bindparam("merchant_id")))


class MerchantRepository:
    async def add(self, session: Session, merchant: Merchant) -> None:
        session.add(merchant)
        await session.flush()

    async def get(self, session: Session, merchant_id: str) -> Merchant | None:
        return await session.get(Merchant, merchant_id)

    async def sealed_hash_key(self, session: Session, merchant_id: str) -> str | None:
        """The merchant's hash key as stored (sealed); None when there is no such merchant."""
        return await _HASH_KEY.scalar(session, merchant_id=merchant_id)  # type: ignore[no-any-return]

    async def get_by_client_id(self, session: Session, client_id: str) -> Merchant | None:
        result = await session.execute(select(Merchant).where(Merchant.client_id == client_id))
        return result.scalar_one_or_none()

    async def get_by_name(self, session: Session, name: str) -> Merchant | None:
        result = await session.execute(select(Merchant).where(Merchant.name == name))
        return result.scalar_one_or_none()

    async def list(self, session: Session) -> Sequence[Merchant]:
        result = await session.execute(select(Merchant).order_by(Merchant.created_at, Merchant.id))
        return result.scalars().all()

    async def add_grace(self, session: Session, grace: MerchantCredentialGrace) -> None:
        session.add(grace)
        await session.flush()

    async def cut_grace(self, session: Session, merchant_id: str, kind: str, until: datetime) -> None:
        """Every replaced `kind` of the merchant accepted until `until` at the latest."""
        await session.execute(
            update(MerchantCredentialGrace)
            .where(
                MerchantCredentialGrace.merchant_id == merchant_id,
                MerchantCredentialGrace.kind == kind,
                MerchantCredentialGrace.expires_at > until,
            )
            .values(expires_at=until)
        )

    async def grace(self, session: Session, merchant_id: str, now: datetime) -> Sequence[MerchantCredentialGrace]:
        """The merchant's replaced credentials whose grace period has not ended at `now`."""
        result = await session.scalars(
            select(MerchantCredentialGrace)
            .where(MerchantCredentialGrace.merchant_id == merchant_id, MerchantCredentialGrace.expires_at > now)
            .order_by(MerchantCredentialGrace.id)
        )
        return result.all()

    # --- sub-merchants (the card dialect's `sub-merchant-id`) ------------------------------

    async def sub_merchants(self, session: Session, merchant_id: str) -> Sequence[SubMerchant]:
        result = await session.scalars(
            select(SubMerchant).where(SubMerchant.merchant_id == merchant_id).order_by(SubMerchant.sub_merchant_id)
        )
        return result.all()

    async def sub_merchant(self, session: Session, merchant_id: str, sub_merchant_id: str) -> SubMerchant | None:
        return await session.scalar(
            select(SubMerchant).where(
                SubMerchant.merchant_id == merchant_id, SubMerchant.sub_merchant_id == sub_merchant_id
            )
        )

    async def add_sub_merchant(self, session: Session, sub_merchant: SubMerchant) -> None:
        session.add(sub_merchant)
        await session.flush()

    async def remove_sub_merchant(self, session: Session, sub_merchant: SubMerchant) -> None:
        await session.delete(sub_merchant)
        await session.flush()

    # --- the values KASIR_SECRET_KEY seals (kasir.merchants.sealing) ---------------------

    async def sealed_batch(
        self, session: Session, table: str, after: str | int | None, limit: int
    ) -> Sequence[tuple[Any, ...]]:
        """Up to `limit` rows of `table` after the row id `after`, by id: (id, *sealed values)."""
        sealed = SEALED[table]
        statement = select(sealed.table.c.id, *sealed.columns()).where(sealed.only).order_by(sealed.table.c.id)
        if after is not None:
            statement = statement.where(sealed.table.c.id > after)
        result = await session.execute(statement.limit(limit))
        return [tuple(row) for row in result.all()]

    async def reseal(
        self, session: Session, table: str, row_id: str | int, old: Sequence[str], new: Sequence[str]
    ) -> bool:
        """Write the row's sealed values `new` if they are still `old`; False when another writer changed them."""
        sealed = SEALED[table]
        columns = sealed.columns()
        result = await session.execute(
            update(sealed.table)
            .where(sealed.table.c.id == row_id, *(column == value for column, value in zip(columns, old, strict=True)))
            .values({column.name: value for column, value in zip(columns, new, strict=True)})
        )
        return int(getattr(result, "rowcount", 0)) == 1

    async def sealed_sample(self, session: Session) -> Sequence[tuple[str, str]]:
        """(where, sealed value) of the merchant changed last and first, and of the oldest replaced secret."""
        merchant = Merchant.__table__
        found: list[tuple[str, str]] = []
        for order in (merchant.c.updated_at.desc(), merchant.c.updated_at.asc()):
            row = (
                await session.execute(
                    select(merchant.c.id, merchant.c.client_secret_encrypted).order_by(order, merchant.c.id).limit(1)
                )
            ).first()
            if row is not None:
                found.append((f"merchant {row.id}", row.client_secret_encrypted))
        grace = SEALED["merchant_credential_grace"]
        row = (
            await session.execute(
                select(grace.table.c.id, grace.table.c.value).where(grace.only).order_by(grace.table.c.id).limit(1)
            )
        ).first()
        if row is not None:
            found.append((f"merchant_credential_grace {row.id}", row.value))
        return found


class SealedTable:
    """A table with values sealed by KASIR_SECRET_KEY: which columns, in which rows."""

    def __init__(self, table: Any, column_names: tuple[str, ...], only: ColumnElement[bool] | None = None) -> None:
        self.table: Table = table
        self.column_names = column_names
        self.only: ColumnElement[bool] = only if only is not None else true()

    def columns(self) -> list[Any]:
        return [self.table.c[name] for name in self.column_names]


SEALED: dict[str, SealedTable] = {
    "merchant": SealedTable(Merchant.__table__, ("client_secret_encrypted", "secret_encrypted", "hash_key_encrypted")),
    # A replaced public key is kept as its PEM, not sealed.
    "merchant_credential_grace": SealedTable(
        MerchantCredentialGrace.__table__, ("value",), MerchantCredentialGrace.__table__.c.kind != "public_key"
    ),
}


merchant_repository = MerchantRepository()
