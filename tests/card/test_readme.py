"""The README's card section: its test-card table is the service's, its curl example is a charge Kasir accepts."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
from fastapi import FastAPI

from kasir.processors.simulator.cards import TEST_CARDS
from tests.card.helpers import auth
from tests.support.builders import make_merchant

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
SECTION = README.split("## Card charge", 1)[1].split("\n## ", 1)[0]


def test_section_sits_right_before_development() -> None:
    assert README.index("## Card charge") < README.index("## Development")
    assert "\n## " not in README[README.index("## Card charge") + 3 : README.index("## Development") - 1]


def test_test_card_table_is_the_services() -> None:
    rows = re.findall(r"^\| `([0-9 ]+)` \| (.+) \|$", SECTION, re.M)
    assert [(number.replace(" ", ""), text) for number, text in rows] == [
        (card.number, card.description[0].lower() + card.description[1:]) for card in TEST_CARDS
    ]


async def test_curl_example_is_accepted(app: FastAPI, client: httpx.AsyncClient) -> None:
    match = re.search(r"-d '(\{.*?\})'\n```", SECTION, re.S)
    assert match is not None
    text = match.group(1).replace("'\"$(date +%s%N)\"'", "README-1")
    body = json.loads(text)
    assert body.pop("callbackUrl").startswith("https://")  # not called from a test: no traffic leaves the machine
    merchant = await make_merchant(app)
    response = await client.post(
        "/card-v2/v1/charge",
        content=json.dumps(body),
        headers={"Authorization": auth(merchant, three_part=True), "Content-Type": "application/json"},
    )
    assert response.status_code == 200, response.text
    assert response.json()["data"]["paymentStatus"] == "SUCCESS"
