"""KASIR_SECRET_KEY rotation: the merchant secrets the key seals, re-sealed with a new key.

Sealed with the key (SecretBox) and stored:

    merchant                    client_secret_encrypted, secret_encrypted, hash_key_encrypted
    merchant_credential_grace   value, for a replaced client secret, secret or hash key (a public key is a PEM)

Derived from the key and never stored, so nothing to re-seal: access tokens (900 s), idempotency-key
fingerprints (24 h), the card pages' form tokens and staging one-time passwords. Each verifies under a
key in KASIR_SECRET_KEY_PREVIOUS too, until it expires.

Rotating (README "Rotating the secret key"): every process gets KASIR_SECRET_KEY=new and
KASIR_SECRET_KEY_PREVIOUS=old; `kasir secrets rotate` re-seals every value with the new key, one
transaction per batch of rows (`reseal_batch`, in a unit the command opens); then the old key can go.
A row whose value changed between the read and the write (a merchant's rotation meanwhile) is left as
the other writer made it, sealed with the key that writer had: a second run says whether anything
still needs a previous key.

At start-up (`kasir serve`, `kasir worker`, the app's lifespan) `check_secret_key` opens a sample of
the sealed values, so a wrong key stops the process there instead of answering 500 later.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from kasir.audit.service import Actor, audit
from kasir.db import Session
from kasir.kit.crypto import SecretBox
from kasir.merchants.repository import SEALED, merchant_repository

log = logging.getLogger("kasir.merchants")

BATCH_ROWS = 200


class SecretKeyMismatch(RuntimeError):
    """KASIR_SECRET_KEY (and KASIR_SECRET_KEY_PREVIOUS) cannot open the secrets in the database."""


@dataclass
class Resealed:
    """What a pass over one table found and did. Counts are of sealed values (a merchant row has three)."""

    table: str
    current: int = 0  # already sealed with the current key
    resealed: int = 0  # re-sealed with it now (or, when only checking, that would be)
    changed_meanwhile: int = 0  # another writer changed the row between the read and the write: left as it is
    unreadable: list[str] = field(default_factory=list)  # "<table> <row id> <column>" that no key opens

    def counts(self) -> dict[str, int]:
        return {
            "resealed": self.resealed,
            "current": self.current,
            "changed_meanwhile": self.changed_meanwhile,
            "unreadable": len(self.unreadable),
        }


async def reseal_batch(
    session: Session, box: SecretBox, report: Resealed, after: str | int | None, *, write: bool, batch_rows: int
) -> str | int | None:
    """The next batch of `report.table`'s rows after `after`, re-sealed with `box`'s current key in the
    caller's unit (`write=False`: only counted into `report`); the id to go on after, or None at the end.
    Idempotent: a value already sealed with the current key is not written."""
    table = report.table
    column_names = SEALED[table].column_names
    rows = await merchant_repository.sealed_batch(session, table, after, batch_rows)
    for row_id, *values in rows:
        new = list(values)
        for i, value in enumerate(values):
            try:
                resealed = box.reseal(value)
            except ValueError:
                report.unreadable.append(f"{table} {row_id} {column_names[i]}")
                continue
            if resealed is None:
                report.current += 1
            else:
                new[i] = resealed
        to_write = sum(a != b for a, b in zip(values, new, strict=True))
        if to_write and write and not await merchant_repository.reseal(session, table, row_id, values, new):
            report.changed_meanwhile += to_write
        else:
            report.resealed += to_write
    if len(rows) < batch_rows:
        return None
    last: str | int = rows[-1][0]
    return last


async def record_rotation(session: Session, reports: list[Resealed]) -> None:
    """The audit log keeps each run of `kasir secrets rotate` and its counts (never a key or a value)."""
    await audit.record(
        session,
        Actor.cli(),
        "secret_key.rotate",
        target_type="service",
        target_id="secret_key",
        after={report.table: report.counts() for report in reports},
    )


async def check_secret_key(session: Session, box: SecretBox, *, warn: bool = True) -> None:
    """Raise SecretKeyMismatch when the keys cannot open the sealed secrets the database holds; with `warn`,
    log a warning when one still needs a key in KASIR_SECRET_KEY_PREVIOUS.

    A sample, to keep start-up quick: the merchant changed last (sealed with the newest key in use), the one
    changed first (the likeliest to need an old key) and the oldest replaced secret still kept.
    """
    sample = await merchant_repository.sealed_sample(session)
    needs_previous = False
    for where, value in sample:
        try:
            box.open(value)
        except ValueError:
            raise SecretKeyMismatch(
                f"KASIR_SECRET_KEY does not open the secrets stored in the database ({where}): set the key they "
                "were sealed with, or put it in KASIR_SECRET_KEY_PREVIOUS until `kasir secrets rotate` has "
                "re-sealed them with the new one"
            ) from None
        needs_previous = needs_previous or not box.is_current(value)
    if needs_previous and warn:
        log.warning("merchant secrets are sealed with a key in KASIR_SECRET_KEY_PREVIOUS: run `kasir secrets rotate`")
