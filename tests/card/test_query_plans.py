"""The card charge's reference look-ups search an index on both columns (SQLite's plan of the migrated schema).

A look-up that searched by merchant alone would read every card order or wallet transaction
of the merchant: a charge growing slower with each payment, which no functional test sees.
"""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import make_url

from kasir.card import repository
from kasir.config import Settings
from kasir.db import Statement

STATEMENTS = {"the order's guarded INSERT": repository._ADD_ORDER, "used_reference": repository._USED_REFERENCE}


@pytest.mark.parametrize("prepared", STATEMENTS.values(), ids=STATEMENTS.keys())
async def test_reference_lookups_search_both_columns(settings: Settings, migrated: None, prepared: Statement) -> None:
    url = make_url(settings.resolved_database_url)
    if not url.drivername.startswith("sqlite"):
        pytest.skip("SQLite's query plans")
    compiled = prepared.statement("sqlite").compile(dialect=sqlite.dialect())
    values = [None] * len(compiled.positiontup or ())
    with sqlite3.connect(url.database or "") as connection:
        plan = [row[3] for row in connection.execute(f"EXPLAIN QUERY PLAN {compiled}", values)]
    tables = [step for step in plan if "card_order" in step or "wallet_transaction" in step]
    assert tables, plan
    for step in tables:
        assert step.startswith("SEARCH "), plan
        assert "merchant_id=? AND order_id=?" in step or "merchant_id=? AND external_id=?" in step, plan
    assert not [step for step in plan if step.startswith("SCAN") and step != "SCAN CONSTANT ROW"], plan
