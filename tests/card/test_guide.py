"""The card guide (docs/merchant/card.md): its test-card table is the service's, its curl example's body is a
charge Kasir accepts (tests/docs/test_examples.py also runs the example whole against `kasir serve`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
from fastapi import FastAPI

from kasir.simulator.cards import TEST_CARDS
from tests.support.builders import make_merchant
from tests.support.wire import auth

SECTION = (Path(__file__).resolve().parents[2] / "docs" / "merchant" / "card.md").read_text()


def test_test_card_table_is_the_services() -> None:
    rows = re.findall(r"^\| `([0-9 ]+)` \| (.+) \|$", SECTION, re.M)
    assert [(number.replace(" ", ""), text) for number, text in rows] == [
        (card.number, card.description[0].lower() + card.description[1:]) for card in TEST_CARDS
    ]


async def test_curl_example_is_accepted(app: FastAPI, client: httpx.AsyncClient) -> None:
    match = re.search(r"-d '(\{.*?\})'\)\n", SECTION, re.S)
    assert match is not None
    text = match.group(1).replace("'\"$ORDER\"'", "GUIDE-1").replace("'\"$CALLBACK_URL\"'", "http://127.0.0.1:9/card")
    body = json.loads(text)
    assert body.pop("callbackUrl") == "http://127.0.0.1:9/card"  # $CALLBACK_URL: the test sends no callback
    merchant = await make_merchant(app)
    response = await client.post(
        "/card-v2/v1/charge",
        content=json.dumps(body),
        headers={"Authorization": auth(merchant, three_part=True), "Content-Type": "application/json"},
    )
    assert response.status_code == 200, response.text
    assert response.json()["data"]["paymentStatus"] == "SUCCESS"
