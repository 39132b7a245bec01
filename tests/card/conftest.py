"""Card fixtures: a Chromium for the page tests (Debian's /usr/bin/chromium, never downloaded)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("KASIR_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "browser: drives Chromium through Playwright (run alone: -m browser)")


@pytest.fixture(scope="session")
async def chromium() -> AsyncIterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run `make test` (scripts/system-deps.sh installs Debian's chromium)")
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            await browser.close()


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture
async def receiver(app: Any) -> AsyncIterator[Any]:
    """The shared receiver, and afterwards nothing left pointing at it.

    Orders still open would send EXPIRED when a later test moves the clock, and callbacks still
    due would be retried: either could reach a later test's receiver that got the same port.
    """
    from sqlalchemy import update

    from kasir.callbacks.models import Callback
    from kasir.card.models import CardOrder
    from tests.support.receiver import CallbackReceiver

    async with CallbackReceiver() as callback_receiver:
        yield callback_receiver
    prefix = callback_receiver.url("/")
    async with app.state.database.unit_of_work() as session:
        await session.execute(
            update(CardOrder)
            .where(CardOrder.callback_url.startswith(prefix), CardOrder.status.in_(("PENDING", "AUTHENTICATING")))
            .values(callback_url=None)
        )
        await session.execute(
            update(Callback)
            .where(Callback.url.startswith(prefix), Callback.status.in_(("pending", "delivering")))
            .values(status="failed", last_error="test receiver closed")
        )
