"""The card charge's reference look-ups search an index on both columns (SQLite's plan of the migrated schema).

A look-up that searched by merchant alone would read every card order or wallet transaction
of the merchant: a charge growing slower with each payment, which no functional test sees.

The statements are the ones the card repository sends through a unit's `Session` (its public
interface: `fetch_rows`, `count_rows`), recorded on their way, with their values; their plans are
asked of a connection of the test's own on the same file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.engine import make_url

from kasir.card.repository import card_repository
from kasir.config import Settings
from kasir.db import Session
from tests.support.builders import make_merchant
from tests.support.wire.card import charge_body, post_charge


class RecordingSession:
    """A unit's session whose statements are recorded as they are sent, then run as they would have been."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.sent: list[tuple[str, Sequence[Any]]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)

    async def fetch_rows(self, sql: str, values: Sequence[Any], *, first: bool = False) -> Sequence[Sequence[Any]]:
        self.sent.append((sql, values))
        return await self.session.fetch_rows(sql, values, first=first)

    async def count_rows(self, sql: str, values: Sequence[Any]) -> int:
        self.sent.append((sql, values))
        return await self.session.count_rows(sql, values)


async def add_the_same_order_again(session: Any, order: dict[str, Any]) -> None:
    assert not await card_repository.add_order(session, order)  # its references are taken: refused


async def look_up_its_references(session: Any, order: dict[str, Any]) -> None:
    found = await card_repository.used_reference(session, order["merchant_id"], order["order_id"], order["external_id"])
    assert found == (order["order_id"], order["external_id"])


LOOK_UPS: dict[str, Callable[[Any, dict[str, Any]], Awaitable[None]]] = {
    "the order's guarded INSERT": add_the_same_order_again,
    "used_reference": look_up_its_references,
}


@pytest.mark.parametrize("look_up", LOOK_UPS.values(), ids=LOOK_UPS.keys())
async def test_reference_lookups_search_both_columns(
    settings: Settings,
    app: FastAPI,
    client: httpx.AsyncClient,
    look_up: Callable[[Any, dict[str, Any]], Awaitable[None]],
) -> None:
    url = make_url(settings.resolved_database_url)
    if not url.drivername.startswith("sqlite"):
        pytest.skip("SQLite's query plans")
    merchant = await make_merchant(app)
    charged = await post_charge(client, merchant, charge_body())
    assert charged.status_code == 200, charged.text
    async with app.state.database.unit_of_work() as session:
        order = await card_repository.get(session, charged.json()["data"]["transactionId"])
        assert order is not None
        recording = RecordingSession(session)
        await look_up(recording, asdict(order))
    [(sql, values)] = recording.sent
    with sqlite3.connect(url.database or "") as connection:
        plan = [row[3] for row in connection.execute(f"EXPLAIN QUERY PLAN {sql}", values)]
    tables = [step for step in plan if "card_order" in step or "wallet_transaction" in step]
    assert tables, plan
    for step in tables:
        assert step.startswith("SEARCH "), plan
        assert "merchant_id=? AND order_id=?" in step or "merchant_id=? AND external_id=?" in step, plan
    assert not [step for step in plan if step.startswith("SCAN") and step != "SCAN CONSTANT ROW"], plan
