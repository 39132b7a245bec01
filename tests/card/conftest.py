"""Card fixtures: the receiver, and nothing left pointing at it afterwards."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest


@pytest.fixture
async def receiver(app: Any) -> AsyncIterator[Any]:
    """The shared receiver, and afterwards nothing left pointing at it.

    Orders still open would send EXPIRED when a later test moves the clock, and callbacks still
    due would be retried: either could reach a later test's receiver that got the same port.
    """
    from sqlalchemy import update

    from kasir.callbacks.models import Callback
    from kasir.card.models import CardOrder
    from kasir.db import run
    from tests.support.receiver import CallbackReceiver

    async with CallbackReceiver() as callback_receiver:
        yield callback_receiver
    prefix = callback_receiver.url("/")
    async with app.state.database.unit_of_work() as session:
        await run(
            session,
            update(CardOrder)
            .where(CardOrder.callback_url.startswith(prefix), CardOrder.status.in_(("PENDING", "AUTHENTICATING")))
            .values(callback_url=None),
        )
        await run(
            session,
            update(Callback)
            .where(Callback.url.startswith(prefix), Callback.status.in_(("pending", "delivering")))
            .values(status="failed", last_error="test receiver closed"),
        )
