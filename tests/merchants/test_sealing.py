"""KASIR_SECRET_KEY rotation: old sealed secrets open under KASIR_SECRET_KEY_PREVIOUS, `kasir secrets rotate`
re-seals them, then the old key can go; a wrong key stops the server at start-up."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import FastAPI
from kasir_client import AsyncClient, AuthenticationError, Credentials, ValidationError
from pydantic import SecretStr

from kasir.card.service import check_page_token, page_token
from kasir.config import Settings, configure
from kasir.db import Database, upgrade_schema
from kasir.errors import InvalidToken
from kasir.idempotency.service import request_fingerprint
from kasir.kit.crypto import SecretBox
from kasir.merchants.cli import reseal_all
from kasir.merchants.repository import merchant_repository
from kasir.merchants.sealing import SecretKeyMismatch, check_secret_key
from kasir.merchants.service import CredentialKind, MerchantCredentials, merchant_service
from kasir.simulator.cards import check_one_time_password, one_time_password
from kasir.tokens.service import Product, mint_access_token, read_access_token
from tests.conftest import TEST_SECRET_KEY
from tests.support import builders
from tests.support.builders import public_pem, rsa_key, unique_name
from tests.support.demo import kasir, own_database, run_demo
from tests.support.postgres import PostgresCluster
from tests.support.receiver import CallbackReceiver
from tests.support.server import ServedKasir
from tests.support.wire import compact
from tests.support.wire.card import charge_body, post_charge
from tests.support.wire.snap import post_signed

KEY_A = "rotation-key-a-" + uuid.uuid4().hex
KEY_B = "rotation-key-b-" + uuid.uuid4().hex
KEY_WRONG = "rotation-key-wrong-" + uuid.uuid4().hex


# --- end to end: a merchant's calls and callbacks across a rotation, on its own database ---------------


async def restart(server: ServedKasir, env: dict[str, str]) -> None:
    """The same server (address, log) again with the settings `env`."""
    await asyncio.to_thread(server.stop)
    server.env = {**server.env, **env}
    for name in ("KASIR_SECRET_KEY_PREVIOUS",):
        if name not in env:
            server.env.pop(name, None)
    await asyncio.to_thread(server.start)


async def refused_at_start_up(env: dict[str, str]) -> str:
    """What `kasir serve` says when it stops before serving (it must)."""
    server = ServedKasir(env)
    with pytest.raises(RuntimeError, match="kasir serve exited") as refused:
        await asyncio.to_thread(server.start)
    return str(refused.value)


@pytest.mark.slow
async def test_a_rotated_key_goes_unnoticed_by_merchants_and_the_old_one_can_then_be_dropped(
    tmp_path: Path, postgres: PostgresCluster | None, receiver: CallbackReceiver
) -> None:
    data_dir, demo_dir = tmp_path / "data", tmp_path / "demo"
    data_dir.mkdir()
    base = {
        "KASIR_ENV": "staging",
        "KASIR_DATA_DIR": str(data_dir),
        "KASIR_DATABASE_URL": own_database(data_dir, postgres, "rotation"),
        "KASIR_ADMIN_TOKEN": "rotation-admin-token",
        "KASIR_CALLBACK_POLL_SECONDS": "0.1",
        "KASIR_CREDENTIAL_CACHE_SECONDS": "0",
    }
    with_a = {**base, "KASIR_SECRET_KEY": KEY_A}
    with_b_and_a = {**base, "KASIR_SECRET_KEY": KEY_B, "KASIR_SECRET_KEY_PREVIOUS": f"{KEY_WRONG[:9]}-unused, {KEY_A}"}
    with_b = {**base, "KASIR_SECRET_KEY": KEY_B}

    # Sealed with A: the demo merchant's three secrets, and a replaced Basic secret still in its grace period.
    await kasir("db", "upgrade", env=with_a)
    await kasir("demo-merchant", "--out", str(demo_dir), env=with_a)
    credentials = Credentials.from_files(demo_dir / "credentials.json", demo_dir / "private.pem")
    rotated = json.loads(
        (
            await kasir(
                "merchant",
                "rotate",
                credentials.merchant_id,
                "--kind",
                "secret",
                "--grace",
                "3600",
                "--json",
                env=with_a,
            )
        ).stdout
    )
    old_secret, credentials = credentials.secret, dataclasses.replace(credentials, secret=rotated["new_value"])
    order = {
        "external_id": f"ROT-{uuid.uuid4().hex[:12]}",
        "order_id": f"ROT-{uuid.uuid4().hex[:12]}",
        "currency": "IDR",
        "payment_method": "wallet",
        "payment_channel": "DANA",
        "payment_details": {"amount": 25_000, "transaction_description": "rotation"},
        "customer_details": {"email": "a@example.id", "full_name": "Siti", "phone": "081234567890"},
        "item_details": [{"item_id": "SKU-1", "name": "Kopi", "amount": 25_000, "qty": 1}],
        "wallet_details": {"id": "081234567890", "id_type": "HP"},
        "callback_url": receiver.url("/rotation"),
    }
    reference = {"external_id": str(order["external_id"]), "order_id": str(order["order_id"])}

    # One address for every restart: the merchant's client (and the token it keeps) lives through them.
    server = ServedKasir(with_a)
    await asyncio.to_thread(server.start)
    try:
        async with AsyncClient(server.base_url, credentials) as client:
            created = await client.wallet_create_payment(order, idempotency_key="rotation-key-1")
            reference["transaction_id"] = created.transaction_id
            token_under_a = await client.access_token()

            # B with A as previous: everything A sealed opens, everything A signed verifies.
            await restart(server, with_b_and_a)
            # The client keeps the token A signed, as a merchant's would, for the demo's SNAP calls;
            # the callbacks are signed with the hash key and the client secret A sealed.
            await run_demo(client)
            assert await client.access_token() == token_under_a
            retried = await client.wallet_create_payment(order, idempotency_key="rotation-key-1")
            assert retried.transaction_id == created.transaction_id  # the key's fingerprint (A) still matches
            async with AsyncClient(server.base_url, dataclasses.replace(credentials, secret=old_secret)) as old:
                assert (await old.wallet_inquiry(reference)).transaction_id == created.transaction_id  # grace, sealed A

            # B alone cannot start yet: what A sealed would not open.
            assert "does not open the secrets" in await refused_at_start_up(with_b)

            first = json.loads((await kasir("secrets", "rotate", "--json", "--batch", "1", env=with_b_and_a)).stdout)
            assert first["merchant"] == {"resealed": 3, "current": 0, "changed_meanwhile": 0, "unreadable": 0}
            assert first["merchant_credential_grace"]["resealed"] == 1
            again = json.loads((await kasir("secrets", "rotate", "--json", env=with_b_and_a)).stdout)
            assert again["merchant"] == {"resealed": 0, "current": 3, "changed_meanwhile": 0, "unreadable": 0}
            assert again["merchant_credential_grace"] == {
                "resealed": 0,
                "current": 1,
                "changed_meanwhile": 0,
                "unreadable": 0,
            }
    finally:
        await asyncio.to_thread(server.stop)

    # A dropped: everything still works, the replaced secret too (its grace row was re-sealed).
    assert (await kasir("secrets", "check", env=with_b, check=False)).returncode == 0
    server = ServedKasir(with_b)
    await asyncio.to_thread(server.start)
    try:
        async with AsyncClient(server.base_url, credentials) as client:
            await run_demo(client)
            # The key's fingerprint was made with A, and nothing tells it from another body's now.
            with pytest.raises(ValidationError) as reused:
                await client.wallet_create_payment(order, idempotency_key="rotation-key-1")
            assert reused.value.status == 422
        async with AsyncClient(server.base_url, dataclasses.replace(credentials, secret=old_secret)) as old:
            assert (await old.wallet_inquiry(reference)).transaction_id == created.transaction_id
        async with AsyncClient(server.base_url, dataclasses.replace(credentials, secret="not-the-secret")) as wrong:
            with pytest.raises(AuthenticationError):
                await wrong.wallet_inquiry(reference)
        # What A signed and nothing stored: its tokens end with it.
        assert await bnpl_inquiry_status(server.base_url, credentials, token_under_a) == 401
    finally:
        await asyncio.to_thread(server.stop)

    # A wrong key stops the server at start-up with a sentence, and so does `kasir worker`.
    with_wrong = {**base, "KASIR_SECRET_KEY": KEY_WRONG}
    said = await refused_at_start_up(with_wrong)
    assert "KASIR_SECRET_KEY does not open the secrets stored in the database" in said
    assert "Traceback" not in said
    worker = await kasir("worker", env=with_wrong, check=False)
    assert worker.returncode == 2
    assert "KASIR_SECRET_KEY does not open" in worker.stderr
    check = await kasir("secrets", "check", env=with_wrong, check=False)
    assert check.returncode == 1
    assert "open with neither KASIR_SECRET_KEY nor KASIR_SECRET_KEY_PREVIOUS" in check.stderr


async def bnpl_inquiry_status(base_url: str, credentials: Credentials, token: str) -> int:
    """The HTTP status of a BNPL status inquiry for no such payment, with `token` (a symmetric SNAP signature)."""
    assert credentials.private_key_pem is not None
    key = serialization.load_pem_private_key(credentials.private_key_pem, password=None)
    assert isinstance(key, rsa.RSAPrivateKey)
    merchant_credentials = MerchantCredentials(
        credentials.merchant_id,
        "demo",
        credentials.client_id,
        credentials.client_secret,
        credentials.secret,
        credentials.hash_key,
        None,
    )
    merchant = builders.TestMerchant(merchant_credentials, key)
    async with httpx.AsyncClient(base_url=base_url) as http:
        answer = await post_signed(
            http, merchant, "/v1.0/bnpl/status", {"originalPartnerReferenceNo": "NONE"}, token=token
        )
    return answer.status_code


# --- in the session's process: what the old key signed, while it is the previous one -------------------


def with_keys(settings: Settings, current: str, *previous: str) -> Settings:
    return settings.model_copy(
        update={"secret_key": SecretStr(current), "secret_key_previous": [SecretStr(key) for key in previous]}
    )


def test_what_the_old_key_signed_verifies_while_it_is_the_previous_key(settings: Settings, app: FastAPI) -> None:
    # No await from here to the end: the session's callback worker runs between awaits only, and
    # must never see a configuration that cannot open the test database's secrets.
    body = b'{"amount": 10000}'
    token = mint_access_token("MCHROTATION", Product.PAYMENT)
    csrf, otp = page_token("CARD1", 1, "pay"), one_time_password("CARD1", 1)
    fingerprint = request_fingerprint(body)
    try:
        configure(with_keys(settings, KEY_B, TEST_SECRET_KEY))
        assert read_access_token(token.value, Product.PAYMENT).merchant_id == "MCHROTATION"
        assert check_page_token("CARD1", 1, "pay", csrf)
        assert check_one_time_password("CARD1", 1, otp)
        assert request_fingerprint(body) != fingerprint  # new keys are made with B

        configure(with_keys(settings, KEY_B))  # the old key dropped
        with pytest.raises(InvalidToken):
            read_access_token(token.value, Product.PAYMENT)
        assert not check_page_token("CARD1", 1, "pay", csrf)
        assert not check_one_time_password("CARD1", 1, otp)
    finally:
        configure(settings)


async def test_a_key_stored_before_a_rotation_is_the_same_request_while_the_old_key_is_previous(
    settings: Settings, app: FastAPI, client: httpx.AsyncClient
) -> None:
    """A retry after the rotation is answered from the key (its fingerprint was made with the old key); another
    body is still refused. B alone cannot open the session's merchants: that half is the end-to-end test's."""
    merchant = await builders.make_merchant(app)
    body, key = compact(charge_body()), f"rotation-{uuid.uuid4().hex}"
    first = await post_charge(client, merchant, body, key=key)
    assert first.status_code == 200, first.text
    try:
        configure(with_keys(settings, KEY_B, TEST_SECRET_KEY))  # the worker opens every secret under it too
        again = await post_charge(client, merchant, body, key=key)
        assert again.headers.get("idempotent-replayed") == "true"
        assert again.content == first.content
        other = await post_charge(client, merchant, compact(charge_body()), key=key)
        assert other.status_code == 422
        assert other.json()["statusMessage"] == "IDEMPOTENCY_KEY_REUSED"
    finally:
        configure(settings)


async def test_rotation_reseals_in_batches_leaves_a_concurrent_change_and_is_idempotent(
    settings: Settings, tmp_path: Path, postgres: PostgresCluster | None, app: FastAPI
) -> None:
    own = settings.model_copy(update={"database_url": own_database(tmp_path, postgres, "reseal")})
    database = Database(own)
    try:
        await upgrade_schema(database)
        # Sealed with the session's key (A here): five merchants, one replaced secret kept in grace.
        async with database.unit_of_work() as session:
            ids = [
                (await merchant_service.create(session, name=unique_name(), public_key=public_pem(rsa_key())))[0].id
                for _ in range(5)
            ]
            await merchant_service.rotate(session, ids[0], CredentialKind.HASH_KEY, grace_seconds=600)
        old = SecretBox(TEST_SECRET_KEY)
        new = SecretBox(KEY_B, [TEST_SECRET_KEY])

        checked = await reseal_all(database, new, write=False)
        assert [(r.table, r.resealed, r.current) for r in checked] == [
            ("merchant", 15, 0),
            ("merchant_credential_grace", 1, 0),
        ]
        async with database.unit_of_work(read_only=True) as session:
            await check_secret_key(session, new)  # opens, with a warning that a previous key is needed
        with pytest.raises(SecretKeyMismatch, match="does not open the secrets stored in the database"):
            async with database.unit_of_work(read_only=True) as session:
                await check_secret_key(session, SecretBox(KEY_B))

        # A writer that changed a row after it was read wins: the stale write changes nothing.
        async with database.unit_of_work() as session:
            [row] = [r for r in await merchant_repository.sealed_batch(session, "merchant", None, 10) if r[0] == ids[1]]
            stale = list(row[1:])
            await merchant_service.rotate(session, ids[1], CredentialKind.SECRET)
            assert not await merchant_repository.reseal(session, "merchant", ids[1], stale, ["x", "y", "z"])

        resealed = await reseal_all(database, new, batch_rows=2)
        assert [(r.table, r.resealed, r.current, r.unreadable) for r in resealed] == [
            ("merchant", 15, 0, []),
            ("merchant_credential_grace", 1, 0, []),
        ]
        again = await reseal_all(database, new, batch_rows=2)
        assert [(r.resealed, r.current) for r in again] == [(0, 15), (0, 1)]

        only_b = SecretBox(KEY_B)
        async with database.unit_of_work(read_only=True) as session:
            await check_secret_key(session, only_b)
        async with database.unit_of_work(read_only=True) as session:
            for merchant_id in ids:
                merchant = await merchant_service.get(session, merchant_id)
                for column in ("client_secret_encrypted", "secret_encrypted", "hash_key_encrypted"):
                    value = getattr(merchant, column)
                    assert only_b.is_current(value)
                    with pytest.raises(ValueError, match="cannot be decrypted"):
                        old.open(value)
            rows = await merchant_repository.sealed_batch(session, "merchant_credential_grace", None, 10)
            assert [only_b.is_current(value) for _id, value in rows] == [True]
    finally:
        await database.dispose()
