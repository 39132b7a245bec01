"""The merchant lifecycle reaches every credential check: BNPL's SNAP signatures (both variants) and the
wallet's x-req-signature refuse a disabled merchant and accept a rotated credential during its grace period."""

from __future__ import annotations

import dataclasses

import httpx
from fastapi import FastAPI

from kasir.kit.clock import clock
from tests.support import builders
from tests.support.builders import make_merchant, public_pem, rsa_key
from tests.support.wire import wallet
from tests.support.wire.snap import access_token, calculation_body, post_signed

ADMIN = {"Authorization": "Bearer test-admin-token"}
CALCULATION = "/v1.0/bnpl/payment-calculation"


async def calculate(client: httpx.AsyncClient, merchant: builders.TestMerchant, token: str | None) -> httpx.Response:
    return await post_signed(client, merchant, CALCULATION, calculation_body(), token=token)


async def test_a_disabled_merchant_is_refused_on_bnpl_with_its_token_and_without(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await make_merchant(app)
    token = await access_token(client, merchant)  # minted before the merchant is disabled
    assert (await calculate(client, merchant, token)).status_code == 200
    assert (await client.post(f"/admin/merchants/{merchant.id}/disable", headers=ADMIN)).status_code == 200
    for used_token in (token, None):
        refused = await calculate(client, merchant, used_token)
        assert refused.status_code == 401, refused.text
        assert refused.json()["responseCode"] == "4019000"
    assert (await client.post(f"/admin/merchants/{merchant.id}/enable", headers=ADMIN)).status_code == 200
    assert (await calculate(client, merchant, token)).status_code == 200
    assert (await calculate(client, merchant, None)).status_code == 200


async def test_a_rotated_client_secret_signs_bnpl_requests_until_its_grace_ends(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await make_merchant(app)
    token = await access_token(client, merchant)
    rotated = await client.post(
        f"/admin/merchants/{merchant.id}/rotate", json={"kind": "client_secret", "grace_seconds": 600}, headers=ADMIN
    )
    assert rotated.status_code == 200, rotated.text
    assert (await calculate(client, merchant, token)).status_code == 200  # signed with the old secret
    credentials = dataclasses.replace(merchant.credentials, client_secret=rotated.json()["new_value"])
    renewed = builders.TestMerchant(credentials, merchant.private_key)
    assert (await calculate(client, renewed, token)).status_code == 200
    clock.advance(601)
    token = await access_token(client, merchant)
    assert (await calculate(client, merchant, token)).status_code == 401
    assert (await calculate(client, renewed, token)).status_code == 200


async def test_a_rotated_public_key_verifies_bnpl_signatures_until_its_grace_ends(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await make_merchant(app)
    new_key = rsa_key(1)
    rotated = await client.post(
        f"/admin/merchants/{merchant.id}/rotate",
        json={"kind": "public_key", "public_key": public_pem(new_key), "grace_seconds": 600},
        headers=ADMIN,
    )
    assert rotated.status_code == 200, rotated.text
    renewed = builders.TestMerchant(merchant.credentials, new_key)
    assert (await calculate(client, merchant, None)).status_code == 200  # the old key, in its grace
    assert (await calculate(client, renewed, None)).status_code == 200
    clock.advance(601)
    assert (await calculate(client, merchant, None)).status_code == 401
    assert (await calculate(client, renewed, None)).status_code == 200


async def test_a_rotated_hash_key_signs_wallet_requests_until_its_grace_ends(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    """x-req-signature with the old hash key and the two-part Basic form (no hash key to prove)."""
    merchant = await make_merchant(app)
    body = {"transaction_id": "none", "external_id": "EXT-1", "order_id": "ORD-1"}
    rotated = await client.post(
        f"/admin/merchants/{merchant.id}/rotate", json={"kind": "hash_key", "grace_seconds": 600}, headers=ADMIN
    )
    assert rotated.status_code == 200, rotated.text
    in_grace = await wallet.post_wallet(client, merchant, wallet.INQUIRY, body)
    wallet.assert_problem(in_grace, 404, "02")  # authenticated: there is no such transaction
    clock.advance(601)
    after = await wallet.post_wallet(client, merchant, wallet.INQUIRY, body)
    wallet.assert_problem(after, 401, "04", "x-req-signature")
