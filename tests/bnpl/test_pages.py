"""The staging approval page (qrContent) as the customer reads it: rupiah, each plan's provision and interest
(none on a 0 % plan, whatever the rounding adds), the outcome in words, the card page's look."""

from __future__ import annotations

import re
from typing import Any

import httpx
from fastapi import FastAPI

from kasir.config import get_settings
from kasir.kit.templates import templates
from tests.support import builders
from tests.support.builders import make_merchant
from tests.support.forms import page_forms, post_form, submit, visible_text
from tests.support.wire.snap import CHECKOUT, checkout_body, item, post_signed

# Words of the wire a customer has no use for: SNAP codes and descriptions, field names, wire amounts.
WIRE_WORDS = re.compile(
    r"\b(Initiated|Success|Failed|Canceled|Paying|Pending|0[0-9]|[a-z]+[A-Z][A-Za-z]+|[0-9]+\.[0-9]{2})\b"
)


async def checkout(client: httpx.AsyncClient, merchant: builders.TestMerchant, **kw: Any) -> dict[str, Any]:
    response = await post_signed(client, merchant, CHECKOUT, checkout_body(**kw))
    assert response.status_code == 200, response.text
    return dict(response.json())


def page_path(data: dict[str, Any]) -> str:
    return str(data["qrContent"]).removeprefix(get_settings().public_url)


def style_of(html: str) -> str:
    found = re.search(r"<style>(.*?)</style>", html, re.DOTALL)
    assert found is not None
    return found.group(1)


async def test_the_plans_in_rupiah_with_provision_and_no_interest_on_a_0_percent_plan(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    """The default table on Rp100.000: provision 1.5 % (Rp1.500) on every plan; 3 months at 0 %, where the
    installments rounded up to whole rupiah come to Rp2 more (the wire's totalInterest 2.00), which is not
    interest; 6 and 12 months at 2 % a month."""
    merchant = await make_merchant(app)
    items = [item("40000.00", 2, name="Sepatu Lari"), item("20000.00", 1, item_id="shippingfee", category="FEES")]
    data = await checkout(client, merchant, items=items)
    html = (await client.get(page_path(data))).text
    text = visible_text(html)
    assert WIRE_WORDS.search(text) is None, (WIRE_WORDS.search(text), text)
    assert "Interest 2.00" not in text
    assert f"{merchant.credentials.name} Rp100.000 " in text
    assert "Sepatu Lari 2 Rp80.000" in text
    assert "Total Rp100.000" in text
    assert (
        "3 months · Rp33.834 a month Total Rp101.502 · provision Rp1.500 · "
        "no interest (Rp2 from rounding the installments up)"
    ) in text
    assert "6 months · Rp18.947 a month Total Rp113.682 · provision Rp1.500 · interest Rp12.182 (2% a month)" in text
    assert "12 months · Rp10.489 a month Total Rp125.868 · provision Rp1.500 · interest Rp24.368 (2% a month)" in text
    assert re.findall(r'name="tenure" value="(\d+)"', html) == ["3", "6", "12"]
    # The card page's look: its layout's styles, its buttons (Approve the primary one, Decline the secondary)
    card_layout = templates.get_template("card/layout.html").render(merchant_name="x")
    assert style_of(html) == style_of(card_layout)
    assert '<button type="submit" id="approve">Approve</button>' in html
    assert '<button type="submit" id="reject" class="secondary">Decline</button>' in html


async def test_the_outcome_in_words_and_a_way_back_to_the_shop(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    name = merchant.credentials.name
    approved = await checkout(client, merchant)
    forms = await page_forms(client, page_path(approved))
    assert (await post_form(client, forms["approve-form"], tenure=6)).status_code == 303
    after = visible_text((await client.get(page_path(approved))).text)
    assert "Approved: you pay in 6 monthly installments of Rp18.947." in after
    assert f"You can close this page and go back to {name}: the shop has been told." in after
    assert WIRE_WORDS.search(after) is None, after

    again = await post_form(client, forms["reject-form"])
    assert again.status_code == 409
    assert visible_text(again.text) == (
        f"Staging simulator: no money moves. {name} You already approved this plan. Back to the application"
    )

    declined = await checkout(client, merchant)
    assert (await submit(client, page_path(declined), "reject-form")).status_code == 303
    after = visible_text((await client.get(page_path(declined))).text)
    assert "You declined paying later: nothing will be charged." in after
    assert f"go back to {name}" in after
    assert WIRE_WORDS.search(after) is None, after

    unknown = await checkout(client, merchant)
    refused = await submit(client, page_path(unknown), "approve-form", tenure=5)
    assert refused.status_code == 400
    assert "Choose one of the plans on the page." in visible_text(refused.text)
