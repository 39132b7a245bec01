"""Console users, sign-in through the real form, and payments made through the real API."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from fastapi import FastAPI

from kasir.audit.service import Actor
from kasir.console.service import console_users
from tests.support.builders import TestMerchant, unique_name
from tests.support.wire.wallet import create, dummy_payment

PASSWORD = "correct horse battery staple"
TEST_ACTOR = Actor("test", "cli")


async def make_user(app: FastAPI, *, role: str = "operator", merchant_id: str | None = None) -> str:
    email = f"{unique_name('user')}@example.id"
    async with app.state.database.unit_of_work() as session:
        await console_users.create(
            session, email=email, role=role, merchant_id=merchant_id, password=PASSWORD, actor=TEST_ACTOR
        )
    return email


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found, "no CSRF token on the page"
    return found.group(1)


async def sign_in(client: httpx.AsyncClient, email: str, password: str = PASSWORD) -> httpx.Response:
    page = await client.get("/console/sign-in")
    assert page.status_code == 200
    return await client.post(
        "/console/sign-in",
        data={"email": email, "password": password, "csrf_token": csrf_of(page.text), "next": "/console/overview"},
    )


async def signed_in(app: FastAPI, *, role: str = "operator", merchant_id: str | None = None) -> httpx.AsyncClient:
    """A client with its own cookie jar, signed in as a new user."""
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://kasir.test")
    email = await make_user(app, role=role, merchant_id=merchant_id)
    response = await sign_in(client, email)
    assert response.status_code == 303, response.text
    return client


async def page_csrf(client: httpx.AsyncClient, path: str = "/console/overview") -> str:
    response = await client.get(path)
    assert response.status_code == 200, response.text
    return csrf_of(response.text)


async def paid_wallet_payment(
    client: httpx.AsyncClient, merchant: TestMerchant, callback_url: str, **extra: Any
) -> dict[str, Any]:
    tx = await create(client, merchant, callback_url, **extra)
    paid = await dummy_payment(client, merchant, tx)
    assert paid.status_code == 200, paid.text
    return tx


@asynccontextmanager
async def closing(client: httpx.AsyncClient) -> AsyncIterator[httpx.AsyncClient]:
    try:
        yield client
    finally:
        await client.aclose()
