"""Every merchant query: merchants, their replaced credentials in grace, sub-merchants, and the
values KASIR_SECRET_KEY seals.

Statements are compiled once (kasir.db.Statement) and hand back plain rows (`MerchantRow`,
`GraceRow`, `SubMerchantRow`) instead of ORM objects. The lifecycle (rotation, callback URL,
disabling) changes a merchant's row and `save`s the columns it changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Table, bindparam, delete, insert, select, true, update

from kasir.db import Session, Statement, binds, fetch, fetch_one, run
from kasir.merchants.models import Merchant, MerchantCredentialGrace, SubMerchant


@dataclass(slots=True)
class MerchantRow:
    """A merchant as read (or just written): every column of `merchant`.

    Changed only by the lifecycle (kasir.merchants.service), and written back by `save`.
    """

    id: str
    name: str
    client_id: str
    client_secret_encrypted: str
    secret_encrypted: str
    hash_key_encrypted: str
    public_key_pem: str
    callback_url: str | None
    created_at: datetime
    updated_at: datetime
    disabled_at: datetime | None
    account_no: str | None  # the disbursement account (§11.2); every merchant has one since migration 0022


@dataclass(frozen=True, slots=True)
class GraceRow:
    """A replaced credential still accepted until `expires_at`: every column of `merchant_credential_grace`."""

    id: int
    merchant_id: str
    kind: str
    value: str
    created_at: datetime
    expires_at: datetime
    confirmed_at: datetime | None


@dataclass(frozen=True, slots=True)
class SubMerchantRow:
    """A sub-merchant id a merchant may name: every column of `sub_merchant`."""

    id: int
    merchant_id: str
    sub_merchant_id: str
    name: str | None
    created_at: datetime


MERCHANT_COLUMNS = tuple(field.name for field in fields(MerchantRow))
GRACE_COLUMNS = tuple(field.name for field in fields(GraceRow))
SUB_MERCHANT_COLUMNS = tuple(field.name for field in fields(SubMerchantRow))

_merchant_table = Merchant.__table__
_grace_table = MerchantCredentialGrace.__table__
_sub_merchant_table = SubMerchant.__table__
_merchant = select(*(_merchant_table.c[name] for name in MERCHANT_COLUMNS))

_ADD = Statement(insert(Merchant).values(binds(Merchant, MERCHANT_COLUMNS)))
_BY_ID = Statement(_merchant.where(Merchant.id == bindparam("merchant_id")))
_BY_CLIENT_ID = Statement(_merchant.where(Merchant.client_id == bindparam("client_id")))
_BY_NAME = Statement(_merchant.where(Merchant.name == bindparam("name")))
_ALL = Statement(_merchant.order_by(Merchant.created_at, Merchant.id))
# The UPDATE of each set of columns the lifecycle changes (a rotation, a callback URL, disabling).
_SAVES: dict[tuple[str, ...], Statement] = {}

_ADD_GRACE = Statement(
    insert(MerchantCredentialGrace)
    .values(binds(MerchantCredentialGrace, GRACE_COLUMNS[1:]))
    .returning(MerchantCredentialGrace.id)
)
_CUT_GRACE = Statement(
    update(MerchantCredentialGrace)
    .where(
        MerchantCredentialGrace.merchant_id == bindparam("merchant_id"),
        MerchantCredentialGrace.kind == bindparam("kind"),
        MerchantCredentialGrace.expires_at > bindparam("until", type_=MerchantCredentialGrace.expires_at.type),
    )
    .values(expires_at=bindparam("until", type_=MerchantCredentialGrace.expires_at.type))
)
# The merchant verifies callbacks with the new value: its replaced ones sign them no more.
_confirmed_now = bindparam("now", type_=MerchantCredentialGrace.confirmed_at.type)
_CONFIRM_GRACE = Statement(
    update(MerchantCredentialGrace)
    .where(
        MerchantCredentialGrace.merchant_id == bindparam("merchant_id"),
        MerchantCredentialGrace.kind == bindparam("kind"),
        MerchantCredentialGrace.expires_at > _confirmed_now,
        MerchantCredentialGrace.confirmed_at.is_(None),
    )
    .values(confirmed_at=_confirmed_now)
)
_GRACE = Statement(
    select(*(_grace_table.c[name] for name in GRACE_COLUMNS))
    .where(
        MerchantCredentialGrace.merchant_id == bindparam("merchant_id"),
        MerchantCredentialGrace.expires_at > bindparam("now", type_=MerchantCredentialGrace.expires_at.type),
    )
    .order_by(MerchantCredentialGrace.id)
)

_sub_merchant = select(*(_sub_merchant_table.c[name] for name in SUB_MERCHANT_COLUMNS))
_SUB_MERCHANTS = Statement(
    _sub_merchant.where(SubMerchant.merchant_id == bindparam("merchant_id")).order_by(SubMerchant.sub_merchant_id)
)
_SUB_MERCHANT = Statement(
    _sub_merchant.where(
        SubMerchant.merchant_id == bindparam("merchant_id"), SubMerchant.sub_merchant_id == bindparam("sub_merchant_id")
    )
)
_ADD_SUB_MERCHANT = Statement(
    insert(SubMerchant).values(binds(SubMerchant, SUB_MERCHANT_COLUMNS[1:])).returning(SubMerchant.id)
)
_REMOVE_SUB_MERCHANT = Statement(delete(SubMerchant).where(SubMerchant.id == bindparam("sub_merchant_row_id")))


# What verifying a SNAP request needs of its merchant: five columns, on every SNAP request the cache misses.
_SNAP_MERCHANT = Statement(
    select(
        Merchant.id, Merchant.client_secret_encrypted, Merchant.public_key_pem, Merchant.disabled_at, Merchant.client_id
    ).where(Merchant.id == bindparam("merchant_id"))
)


@dataclass(frozen=True, slots=True)
class SnapMerchant:
    """The merchant named by X-PARTNER-ID: its id, its client secret (sealed) and its public key."""

    id: str
    client_secret_encrypted: str
    public_key_pem: str
    disabled_at: datetime | None
    client_id: str  # the disbursement routes take it as X-PARTNER-ID too (docs/decisions.md §11.2)


class MerchantRepository:
    async def add(self, session: Session, merchant: MerchantRow) -> None:
        """Insert a merchant (every column); a name or client id taken meanwhile is refused by a unique constraint."""
        await _ADD.execute(session, **{name: getattr(merchant, name) for name in MERCHANT_COLUMNS})

    async def get(self, session: Session, merchant_id: str) -> MerchantRow | None:
        found = await _BY_ID.first(session, merchant_id=merchant_id)
        return None if found is None else MerchantRow(*found)

    async def save(self, session: Session, merchant: MerchantRow, columns: tuple[str, ...]) -> None:
        """Write the `columns` the lifecycle changed, and only those: an action changing another
        column of the same merchant meanwhile (a rotation of another credential) keeps its change."""
        statement = _SAVES.get(columns)
        if statement is None:
            statement = _SAVES[columns] = Statement(
                update(Merchant).where(Merchant.id == bindparam("merchant_id")).values(binds(Merchant, columns))
            )
        await statement.execute(session, merchant_id=merchant.id, **{name: getattr(merchant, name) for name in columns})

    async def snap_merchant(self, session: Session, merchant_id: str) -> SnapMerchant | None:
        row = await _SNAP_MERCHANT.first(session, merchant_id=merchant_id)
        return None if row is None else SnapMerchant(*row)

    async def get_by_client_id(self, session: Session, client_id: str) -> MerchantRow | None:
        found = await _BY_CLIENT_ID.first(session, client_id=client_id)
        return None if found is None else MerchantRow(*found)

    async def get_by_name(self, session: Session, name: str) -> MerchantRow | None:
        found = await _BY_NAME.first(session, name=name)
        return None if found is None else MerchantRow(*found)

    async def list(self, session: Session) -> Sequence[MerchantRow]:
        return [MerchantRow(*row) for row in await _ALL.rows(session)]

    async def add_grace(
        self, session: Session, merchant_id: str, kind: str, value: str, created_at: datetime, expires_at: datetime
    ) -> GraceRow:
        """Keep a replaced credential (`value` as stored) accepted until `expires_at`."""
        values: dict[str, Any] = {
            "merchant_id": merchant_id,
            "kind": kind,
            "value": value,
            "created_at": created_at,
            "expires_at": expires_at,
            "confirmed_at": None,
        }
        grace_id = await _ADD_GRACE.scalar(session, **values)
        return GraceRow(id=int(grace_id), **values)

    async def cut_grace(self, session: Session, merchant_id: str, kind: str, until: datetime) -> None:
        """Every replaced `kind` of the merchant accepted until `until` at the latest."""
        await _CUT_GRACE.execute(session, merchant_id=merchant_id, kind=kind, until=until)

    async def confirm_grace(self, session: Session, merchant_id: str, kind: str, now: datetime) -> int:
        """Mark the merchant's replaced `kind` values still in grace as confirmed at `now`: how many."""
        return await _CONFIRM_GRACE.execute(session, merchant_id=merchant_id, kind=kind, now=now)

    async def grace(self, session: Session, merchant_id: str, now: datetime) -> Sequence[GraceRow]:
        """The merchant's replaced credentials whose grace period has not ended at `now`."""
        return [GraceRow(*row) for row in await _GRACE.rows(session, merchant_id=merchant_id, now=now)]

    # --- sub-merchants (the card dialect's `sub-merchant-id`) ------------------------------

    async def sub_merchants(self, session: Session, merchant_id: str) -> Sequence[SubMerchantRow]:
        return [SubMerchantRow(*row) for row in await _SUB_MERCHANTS.rows(session, merchant_id=merchant_id)]

    async def sub_merchant(self, session: Session, merchant_id: str, sub_merchant_id: str) -> SubMerchantRow | None:
        found = await _SUB_MERCHANT.first(session, merchant_id=merchant_id, sub_merchant_id=sub_merchant_id)
        return None if found is None else SubMerchantRow(*found)

    async def add_sub_merchant(
        self, session: Session, merchant_id: str, sub_merchant_id: str, name: str | None, created_at: datetime
    ) -> SubMerchantRow:
        """Insert a sub-merchant id; one the merchant has already is refused by the unique constraint."""
        values: dict[str, Any] = {
            "merchant_id": merchant_id,
            "sub_merchant_id": sub_merchant_id,
            "name": name,
            "created_at": created_at,
        }
        row_id = await _ADD_SUB_MERCHANT.scalar(session, **values)
        return SubMerchantRow(id=int(row_id), **values)

    async def remove_sub_merchant(self, session: Session, sub_merchant: SubMerchantRow) -> None:
        await _REMOVE_SUB_MERCHANT.execute(session, sub_merchant_row_id=sub_merchant.id)

    # --- the values KASIR_SECRET_KEY seals (kasir.merchants.sealing) ---------------------

    async def sealed_batch(
        self, session: Session, table: str, after: str | int | None, limit: int
    ) -> Sequence[tuple[Any, ...]]:
        """Up to `limit` rows of `table` after the row id `after`, by id: (id, *sealed values)."""
        sealed = SEALED[table]
        statement = select(sealed.table.c.id, *sealed.columns()).where(sealed.only).order_by(sealed.table.c.id)
        if after is not None:
            statement = statement.where(sealed.table.c.id > after)
        return [tuple(row) for row in await fetch(session, statement.limit(limit))]

    async def reseal(
        self, session: Session, table: str, row_id: str | int, old: Sequence[str], new: Sequence[str]
    ) -> bool:
        """Write the row's sealed values `new` if they are still `old`; False when another writer changed them."""
        sealed = SEALED[table]
        columns = sealed.columns()
        changed = await run(
            session,
            update(sealed.table)
            .where(sealed.table.c.id == row_id, *(column == value for column, value in zip(columns, old, strict=True)))
            .values({column.name: value for column, value in zip(columns, new, strict=True)}),
        )
        return changed == 1

    async def sealed_sample(self, session: Session) -> Sequence[tuple[str, str]]:
        """(where, sealed value) of the merchant changed last and first, and of the oldest replaced secret."""
        merchant = _merchant_table
        found: list[tuple[str, str]] = []
        for order in (merchant.c.updated_at.desc(), merchant.c.updated_at.asc()):
            row = await fetch_one(
                session,
                select(merchant.c.id, merchant.c.client_secret_encrypted).order_by(order, merchant.c.id).limit(1),
            )
            if row is not None:
                found.append((f"merchant {row.id}", row.client_secret_encrypted))
        grace = SEALED["merchant_credential_grace"]
        row = await fetch_one(
            session, select(grace.table.c.id, grace.table.c.value).where(grace.only).order_by(grace.table.c.id).limit(1)
        )
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
    "merchant": SealedTable(_merchant_table, ("client_secret_encrypted", "secret_encrypted", "hash_key_encrypted")),
    # A replaced public key is kept as its PEM, not sealed.
    "merchant_credential_grace": SealedTable(_grace_table, ("value",), _grace_table.c.kind != "public_key"),
}


merchant_repository = MerchantRepository()
