"""A payment link in production through the reference connector (examples/processor-http; the fixtures of
tests/processors/test_http_connector.py): the VA bank numbers the link's VA, no staging pay is served, and
the bank's signed notification of the payment makes the link SUCCESS with its payment-page callback."""

from __future__ import annotations

import httpx
import pytest

from tests.links.test_flow import choose
from tests.processors.fake_money_mover import FakeMoneyMover
from tests.processors.test_http_connector import Production, fake, production  # noqa: F401  (the fixtures)
from tests.support.forms import page_forms
from tests.support.receiver import CallbackReceiver
from tests.support.wire.links import check_callback, create

pytestmark = pytest.mark.slow


async def test_the_banks_notification_pays_the_links_va(
    production: Production,  # noqa: F811
    fake: FakeMoneyMover,  # noqa: F811
    receiver: CallbackReceiver,
) -> None:
    merchant = await production.merchant()
    async with httpx.AsyncClient(base_url=production.url) as http:
        link = await create(http, merchant, receiver.url("/prod-link"), channels=[{"channel": "VA", "acq": "BCA"}])
        va_page = await choose(http, link, "VA")
        page = await http.get(va_page)
        assert page.status_code == 200
        assert 'id="pay-form"' not in page.text  # production never simulates
        assert "pay-form" not in await page_forms(http, va_page)
        [va_id] = [reference for (reference, _draw) in fake.accounts if reference.startswith("VA")][-1:]
        paid = {"product": "va", "reference": va_id, "event": "paid", "amount": link["amount"],
                "bank_reference": "BCA-LINK-1"}  # fmt: skip
        assert await fake.notify(paid) == 200
        [callback] = await receiver.wait_for(1, path="/prod-link")
        payload = check_callback(callback, merchant, link)
        assert payload["transaction_status"] == "SUCCESS"
        assert (payload["payment_method"], payload["payment_channel"], payload["acq"]) == (
            "VIRTUAL_ACCOUNT",
            "VA",
            "BCA",
        )
        assert (await http.get(va_page)).status_code == 200
