"""A payment link in production (docs/decisions.md §10, issue 45 item 4): each method's processor decides its
part; nothing is simulated outside staging; a method whose processor is switched off is refused at creation
(`03`) naming its entry. The fast half: the in-process app switched to production (as
tests/processors/test_switched_off.py does); the connector's half is tests/links/test_connector.py."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI

from kasir.callbacks.ssrf import use_resolver
from kasir.config import get_settings
from tests.links.test_flow import choose, local
from tests.support.builders import make_merchant
from tests.support.forms import page_forms
from tests.support.wire.links import create, create_body, post
from tests.support.wire.wallet import assert_problem

PUBLIC_CALLBACK = "https://merchant.example/kasir/callback"


@pytest.fixture
def production(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    async def public_address(host: str, port: int) -> list[str]:
        return ["93.184.216.34"]

    monkeypatch.setattr(get_settings(), "env", "production")
    with use_resolver(public_address):
        yield


@pytest.mark.usefixtures("production")
async def test_production_without_processors_refuses_every_entry_by_name(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await make_merchant(app)
    for channels in (
        [{"channel": "CARD"}],
        [{"channel": "DANA"}],
        [{"channel": "QRIS"}],
        [{"channel": "VA", "acq": "BCA"}],
    ):
        body = create_body(PUBLIC_CALLBACK, channels=channels)
        assert_problem(await post(client, merchant, body), 409, "03", "selected_channels[0].channel")


async def test_the_staging_va_pay_is_not_served_in_production(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    merchant = await make_merchant(app)
    link = await create(client, merchant, channels=[{"channel": "VA", "acq": "BRI"}])
    va_page = await choose(client, link, "VA")
    form = (await page_forms(client, va_page))["pay-form"]
    monkeypatch.setattr(get_settings(), "env", "production")
    page = await client.get(va_page)
    assert page.status_code == 200  # the instructions stay: the bank decides
    assert 'id="pay-form"' not in page.text
    assert (await client.post(f"{local(link['payment_url'])}/va/pay", data=form.fields)).status_code == 404
