"""docs/decisions.md §7: the full card number and the CVN never reach the database, a log line or a callback."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import MetaData, select

from kasir.card.repository import card_repository
from tests.support.builders import make_merchant
from tests.support.engine import engine_of
from tests.support.receiver import CallbackReceiver
from tests.support.server import ServedKasir
from tests.support.wire.card import (
    APPROVED,
    CHALLENGE,
    DECLINED,
    INSUFFICIENT,
    card,
    charge_body,
    future_year,
    post_charge,
)

pytestmark = pytest.mark.slow

CVN = "8642"  # four digits: a three-digit string turns up by chance in timestamps
BAD_PAN = "4811111111111115"  # fails the Luhn check
ALL_TEST_PANS = [p.replace(" ", "") for p in (APPROVED, CHALLENGE, DECLINED, INSUFFICIENT)] + [BAD_PAN]


def forms_of(pan: str) -> list[str]:
    return [pan, " ".join(pan[i : i + 4] for i in range(0, len(pan), 4)), pan[6:12] + pan[12:]]


def cvn_pattern() -> re.Pattern[str]:
    return re.compile(rf"(?<![0-9A-Za-z.]){CVN}(?![0-9A-Za-z.])")


def assert_clean(text: str, where: str) -> None:
    for pan in ALL_TEST_PANS:
        for form in forms_of(pan):
            assert form not in text, f"card number {form} found in {where}"
    assert not cvn_pattern().search(text), f"CVN found in {where}"


async def database_dump(app: FastAPI) -> str:
    """Every row of every table, as text (works on SQLite and PostgreSQL)."""
    metadata = MetaData()
    async with engine_of(app.state.database) as engine, engine.connect() as connection:
        await connection.run_sync(metadata.reflect)
        lines = []
        for table in metadata.sorted_tables:
            for row in (await connection.execute(select(table))).all():
                lines.append(f"{table.name}: " + " | ".join(str(value) for value in row))
    return "\n".join(lines)


async def test_no_card_data_anywhere(
    app: FastAPI,
    served: ServedKasir,
    receiver: CallbackReceiver,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    merchant = await make_merchant(app)
    log_start = len(served.log())
    async with httpx.AsyncClient(base_url=served.base_url) as http:
        # CLOSE: charged at once, with an idempotency key (its stored answer is in the database too)
        close = charge_body(number=APPROVED, callback_url=receiver.url("/data/close"))
        close["cardDetails"] = card(APPROVED, cardCvn=CVN)
        assert (await post_charge(http, merchant, close, key="data-key-1")).status_code == 200
        # refused card data: the 422 names fields, never values
        bad = charge_body(number=APPROVED)
        bad["cardDetails"] = card(BAD_PAN, cardCvn=CVN, cardExpiredYear="2020")
        refused = await post_charge(http, merchant, bad)
        assert refused.status_code == 422
        assert [e["field"] for e in refused.json()["errors"]] == [
            "cardDetails.cardNumber",
            "cardDetails.cardExpiredYear",
        ]
        assert_clean(refused.text, "the 422 body")

        # OPEN: a declined attempt, then 3-D Secure on the page
        open_body = charge_body(mode="OPEN", callback_url=receiver.url("/data/open"))
        data = (await post_charge(http, merchant, open_body)).json()["data"]
        page = await http.get(data["link"])
        for number in (DECLINED, CHALLENGE):
            attempt = re.search(r'name="attempt" value="(\d+)"', page.text)
            csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
            assert attempt is not None
            assert csrf is not None
            form = {
                "attempt": attempt.group(1),
                "csrf": csrf.group(1),
                "cardNumber": number,
                "cardExpiredMonth": "10",
                "cardExpiredYear": future_year(),
                "cardCvn": CVN,
                "cardHolderName": "Siti",
                "tenor": "3",
                "saveCard": "true",
            }
            page = await http.post(f"{data['link']}/pay", data=form, follow_redirects=True)
            assert page.status_code == 200
            assert_clean(
                re.sub(r'<section class="card" id="test-cards">.*?</section>', "", page.text, flags=re.S), "the page"
            )
        otp = re.search(r'id="staging-otp">(\d{6})<', page.text)
        attempt = re.search(r'name="attempt" value="(\d+)"', page.text)
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
        assert otp is not None
        assert attempt is not None
        assert csrf is not None
        verified = await http.post(
            f"{data['link']}/3ds", data={"attempt": attempt.group(1), "csrf": csrf.group(1), "otp": otp.group(1)}
        )
        assert verified.status_code == 303

    callbacks = await receiver.wait_for(3)  # SUCCESS (close), FAILED and SUCCESS (open)
    assert sorted(c.json()["transaction_status"] for c in callbacks) == ["FAILED", "SUCCESS", "SUCCESS"]
    for callback in callbacks:
        assert_clean(callback.body.decode() + json.dumps(callback.headers) + callback.raw_query, "a callback")
    saved = [c.json() for c in callbacks if c.json()["card_token"]]
    assert len(saved) == 1
    assert re.fullmatch(r"CTK[A-Z0-9]{32}", saved[0]["card_token"])

    # what is kept: the masked number, the brand, the expiry
    async with app.state.database.unit_of_work(read_only=True) as session:
        order = await card_repository.get(session, data["transactionId"])
        assert order is not None
        attempts = await card_repository.attempts(session, order.id)
    assert [(a.masked_card, a.card_brand, a.card_exp_month) for a in attempts] == [
        ("400000******0002", "VISA", "10"),
        ("400000******3220", "VISA", "10"),
    ]

    assert_clean(await database_dump(app), "the database tables")
    if app.state.database.url.startswith("sqlite"):
        path = Path(app.state.database.url.split(":///", 1)[1])
        for file in (path, path.with_name(path.name + "-wal")):
            if file.exists():
                assert_clean(file.read_bytes().decode("latin-1"), file.name)
    served_log = served.log()[log_start:]
    assert "card attempt" in served_log  # the log is the one the charges went through
    assert_clean(served_log, "the kasir serve log")
    assert_clean(
        caplog.text + "\n".join(json.dumps(r.__dict__, default=str) for r in caplog.records), "this process's log"
    )
