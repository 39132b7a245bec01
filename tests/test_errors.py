"""An outage (the database or a processor cannot take the work) in each wire format, as docs/decisions.md §4
pairs codes with statuses: wallet `98` and SNAP `500xx00` with HTTP 500, the card format 503
SERVICE_UNAVAILABLE (interface.md's table; tests/card/test_errors.py); each with Retry-After."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from kasir.bnpl.service import bnpl_service
from kasir.db import DatabaseUnavailable
from kasir.processors.protocols import ProcessorUnavailable
from kasir.simulator import SimulatedIssuer
from kasir.tokens.service import access_token_service
from kasir.wallet.service import wallet_service
from tests.support.builders import make_merchant
from tests.support.wire import wallet
from tests.support.wire.snap import GRANT, checkout_body, post_signed, token_headers


async def _unreachable(*_args: Any, **_kwargs: Any) -> Any:
    raise DatabaseUnavailable("PostgreSQL: ConnectionRefusedError: INSERT ... connection refused")


async def test_a_wallet_route_answers_an_unavailable_database_98_with_http_500(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    merchant = await make_merchant(app)
    monkeypatch.setattr(wallet_service, "create_payment", _unreachable)
    response = await wallet.post_wallet(client, merchant, wallet.CREATE, wallet.create_body())
    assert response.status_code == 500, response.text
    assert response.json()["response_code"] == "98"
    assert "retry" in response.json()["response_message"]
    assert "INSERT" not in response.text
    assert response.headers["retry-after"] == "1"


async def test_a_wallet_refund_whose_issuer_does_not_answer_is_98_with_http_500(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    merchant = await make_merchant(app)
    tx = await wallet.create(client, merchant)
    assert (await wallet.dummy_payment(client, merchant, tx)).status_code == 200

    async def unavailable(*_args: Any, **_kwargs: Any) -> None:
        raise ProcessorUnavailable()

    monkeypatch.setattr(SimulatedIssuer, "refund", unavailable)
    response = await wallet.refund(client, merchant, tx, 1000)
    assert response.status_code == 500, response.text
    assert response.json()["response_code"] == "98"
    assert response.headers["retry-after"] == "5"


async def test_a_bnpl_route_answers_an_unavailable_database_500xx00(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    merchant = await make_merchant(app)
    monkeypatch.setattr(bnpl_service, "checkout", _unreachable)
    response = await post_signed(client, merchant, "/v1.0/bnpl/qr-checkout", checkout_body())
    assert response.status_code == 500, response.text
    assert response.json()["responseCode"] == "5009200"  # service 92, QR checkout
    assert response.headers["retry-after"] == "1"


async def test_the_token_route_answers_an_unavailable_database_5007300(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    merchant = await make_merchant(app)
    monkeypatch.setattr(access_token_service, "issue", _unreachable)
    response = await client.post("/v1.0/access-token/b2b", headers=token_headers(merchant), content=GRANT)
    assert response.status_code == 500, response.text
    assert response.json()["responseCode"] == "5007300"
    assert response.headers["retry-after"] == "1"
