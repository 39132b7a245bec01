"""Every HTML page outside the console (card, 3-D Secure, wallet and BNPL simulator pages) carries a
Content-Security-Policy without inline scripts, refuses framing, sends no referrer and is never cached;
its scripts are files the package serves. In production the docs and /metrics are not served unless asked,
and the admin API can be removed (hardening, finding 9)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import httpx
import pytest
from fastapi import FastAPI

from kasir.app import create_app
from kasir.config import Settings, configure
from tests.support.builders import make_merchant
from tests.support.wire import compact, wallet
from tests.support.wire import snap as bnpl
from tests.support.wire.card import charge_body, post_charge


def assert_page_headers(page: httpx.Response) -> None:
    assert page.status_code == 200, page.text[:300]
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy
    assert "'unsafe-inline'" not in policy.split("script-src", 1)[1].split(";", 1)[0]
    assert "frame-ancestors 'none'" in policy
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["referrer-policy"] == "no-referrer"
    assert page.headers["cache-control"] == "no-store"
    assert page.headers["x-content-type-options"] == "nosniff"
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", page.text), "an inline script"


async def test_every_payment_page_carries_the_headers_and_no_inline_script(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await make_merchant(app)
    opened = await post_charge(client, merchant, charge_body(mode="OPEN", number=None))
    card_page = await client.get(urlsplit(opened.json()["data"]["link"]).path)
    assert_page_headers(card_page)
    scripts = re.findall(r'<script src="([^"]+)"', card_page.text)
    assert scripts == ["/card/static/payment.js"]
    script = await client.get(scripts[0])
    assert script.status_code == 200
    assert script.headers["content-type"].startswith("text/javascript")
    assert "luhn" in script.text
    assert (await client.get("/card/static/nothing.js")).status_code == 404
    tx = await wallet.create(client, merchant)
    assert_page_headers(await client.get(urlsplit(tx["payment_url"]).path))
    path = "/v1.0/bnpl/qr-checkout"
    text = compact(bnpl.checkout_body())
    checkout = await client.post(path, content=text.encode(), headers=bnpl.snap_headers(merchant, path, text))
    assert checkout.status_code == 200, checkout.text
    assert_page_headers(await client.get(urlsplit(checkout.json()["qrContent"]).path))


@pytest.mark.parametrize(
    ("update", "served", "hidden"),
    [
        ({"env": "staging"}, ["/openapi.json", "/docs", "/metrics", "/admin/merchants"], []),
        ({"env": "production"}, ["/admin/merchants"], ["/openapi.json", "/docs", "/redoc", "/metrics"]),
        (
            {"env": "production", "public_docs": True, "public_metrics": True, "admin_api": False},
            ["/openapi.json", "/docs", "/metrics"],
            ["/admin/merchants"],
        ),
    ],
)
async def test_what_a_deployment_exposes(
    settings: Settings, migrated: None, update: dict[str, object], served: list[str], hidden: list[str]
) -> None:
    app = create_app(settings.model_copy(update=update))
    try:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://kasir.test") as client:
                headers = {"Authorization": "Bearer test-admin-token"}
                for path in served:
                    assert (await client.get(path, headers=headers)).status_code == 200, path
                for path in hidden:
                    assert (await client.get(path, headers=headers)).status_code == 404, path
    finally:
        configure(settings)
