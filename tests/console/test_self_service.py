"""My merchant (issue 41 item 5): a merchant's users look after their own merchant, and only their own.

Signatures of test callbacks are checked against values computed here from the decisions' formulas
(tests/support/wire/callbacks.py), with the merchant's secrets as the test knows them.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import FastAPI
from sqlalchemy import select

from kasir.audit.models import AuditEvent
from kasir.callbacks.models import Callback
from kasir.callbacks.repository import callback_repository
from kasir.db import fetch
from kasir.kit.clock import clock
from kasir.merchants.service import merchant_service
from tests.console.helpers import closing, make_user, page_csrf, sign_in, signed_in
from tests.support import builders
from tests.support.builders import make_merchant, public_pem, rsa_key
from tests.support.receiver import Answer, CallbackReceiver
from tests.support.wire import x_req_signature
from tests.support.wire.callbacks import callback_signature, check_notification

ADMIN = {"Authorization": "Bearer test-admin-token"}
HERE = "/console/my-merchant"


async def audit_actions(app: FastAPI, merchant_id: str) -> list[tuple[str, str]]:
    """(action, actor) of every audit event of the merchant, oldest first."""
    async with app.state.database.unit_of_work(read_only=True) as session:
        rows = await fetch(
            session,
            select(AuditEvent.action, AuditEvent.actor)
            .where(AuditEvent.merchant_id == merchant_id)
            .order_by(AuditEvent.id),
        )
    return [(row.action, row.actor) for row in rows if row.action not in ("user.create", "user.sign_in")]


async def as_user(app: FastAPI, merchant: builders.TestMerchant, role: str) -> tuple[httpx.AsyncClient, str]:
    """A client signed in as a new `role` user of `merchant`, and its email."""
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://kasir.test")
    email = await make_user(app, role=role, merchant_id=merchant.id)
    assert (await sign_in(client, email)).status_code == 303
    return client, email


def shown_value(html: str) -> str:
    found = re.search(r'id="new-value">([^<]+)<', html)
    assert found, "no new value on the page"
    return found.group(1)


def error_of(html: str) -> str:
    found = re.search(r'id="my-error"[^>]*>([^<]+)<', html)
    assert found, "no error on the page"
    return found.group(1)


async def test_a_merchant_user_sees_its_own_merchant_and_nothing_of_another(app: FastAPI) -> None:
    mine = await make_merchant(app, callback_url="http://127.0.0.1:9/mine")
    other = await make_merchant(app, callback_url="http://127.0.0.1:9/other")
    for role in ("merchant", "merchant_admin"):
        client, _ = await as_user(app, mine, role)
        async with closing(client):
            page = await client.get(HERE)
            assert page.status_code == 200, page.text
            assert f'id="my-merchant-id">{mine.id}<' in page.text
            assert f'id="my-client-id">{mine.client_id}<' in page.text
            assert 'href="/console/my-merchant" aria-current="page"' in page.text  # in the navigation
            assert other.id not in page.text
            assert other.client_id not in page.text
            csrf = await page_csrf(client, HERE)
            # The operators' merchant pages, of the other merchant and of its own: as if they did not exist.
            for path in (f"/console/merchants/{other.id}", f"/console/merchants/{mine.id}"):
                assert (await client.get(path)).status_code == 404
            for action, data in (
                ("rotate", {"kind": "hash_key", "grace_hours": "0"}),
                ("callback-url", {"callback_url": "http://127.0.0.1:9/stolen"}),
                ("confirm-rotation", {"kind": "hash_key"}),
                ("disable", {"confirmed": "yes"}),
            ):
                answer = await client.post(f"/console/merchants/{other.id}/{action}", data={**data, "csrf_token": csrf})
                assert answer.status_code == 404, (action, answer.text)
                assert other.client_id not in answer.text
    async with app.state.database.unit_of_work(read_only=True) as session:
        untouched = await merchant_service.get(session, other.id)
        assert untouched.callback_url == "http://127.0.0.1:9/other"
        assert merchant_service.secrets(untouched).hash_key == other.credentials.hash_key
    assert await audit_actions(app, other.id) == []


async def test_an_operator_has_no_my_merchant_page(app: FastAPI) -> None:
    async with closing(await signed_in(app)) as operator:
        assert (await operator.get(HERE)).status_code == 404
        assert 'href="/console/my-merchant"' not in (await operator.get("/console/overview")).text


async def test_only_the_merchant_admin_changes_credentials_and_the_callback_url(app: FastAPI) -> None:
    merchant = await make_merchant(app, callback_url="http://127.0.0.1:9/cb")
    client, _ = await as_user(app, merchant, "merchant")
    async with closing(client):
        page = await client.get(HERE)
        assert 'id="rotate-form"' not in page.text
        assert 'id="callback-url-form"' not in page.text
        assert "Only your merchant's admin user" in page.text
        csrf = await page_csrf(client, HERE)
        for action, data in (
            ("rotate", {"kind": "hash_key"}),
            ("callback-url", {"callback_url": "http://127.0.0.1:9/other"}),
            ("public-key", {"public_key": public_pem(rsa_key())}),
            ("confirm-rotation", {"kind": "hash_key"}),
        ):
            answer = await client.post(f"{HERE}/{action}", data={**data, "csrf_token": csrf})
            assert answer.status_code == 404, (action, answer.text)
    assert await audit_actions(app, merchant.id) == []


async def test_a_change_without_the_session_csrf_token_is_refused(app: FastAPI) -> None:
    merchant = await make_merchant(app, callback_url="http://127.0.0.1:9/cb")
    client, _ = await as_user(app, merchant, "merchant_admin")
    async with closing(client):
        for action, data in (
            ("rotate", {"kind": "hash_key"}),
            ("callback-url", {"callback_url": "http://127.0.0.1:9/other"}),
            ("test-callback", {"kind": "wallet"}),
        ):
            refused = await client.post(f"{HERE}/{action}", data={**data, "csrf_token": "not-the-token"})
            assert refused.status_code == 403, action
            assert "This form has expired" in refused.text
    assert await audit_actions(app, merchant.id) == []


async def test_the_admin_sets_the_callback_url_through_the_callback_url_checks(app: FastAPI) -> None:
    merchant = await make_merchant(app, callback_url="http://127.0.0.1:9/cb")
    client, email = await as_user(app, merchant, "merchant_admin")
    async with closing(client):
        csrf = await page_csrf(client, HERE)
        refused = await client.post(
            f"{HERE}/callback-url", data={"callback_url": "ftp://shop.example/cb", "csrf_token": csrf}
        )
        assert refused.status_code == 400
        assert error_of(refused.text) == "Callback URL: must be an absolute http(s) URL"
        assert 'value="ftp://shop.example/cb"' in refused.text  # what was typed stays in the field
        saved = await client.post(
            f"{HERE}/callback-url", data={"callback_url": "http://127.0.0.1:9/new", "csrf_token": csrf}
        )
        assert saved.status_code == 303
        assert saved.headers["location"] == f"{HERE}?done=callback_url"
        page = await client.get(saved.headers["location"])
        assert 'id="my-callback-url">http://127.0.0.1:9/new<' in page.text
        assert "Default callback URL saved." in page.text
    assert await audit_actions(app, merchant.id) == [("merchant.callback_url", f"console:{email}")]


@pytest.mark.parametrize("kind", ["client_secret", "secret", "hash_key"])
async def test_the_admin_rotates_a_secret_shown_once_with_its_grace(app: FastAPI, kind: str) -> None:
    merchant = await make_merchant(app, callback_url="http://127.0.0.1:9/cb")
    client, email = await as_user(app, merchant, "merchant_admin")
    async with closing(client):
        csrf = await page_csrf(client, HERE)
        rotated = await client.post(f"{HERE}/rotate", data={"kind": kind, "grace_hours": "2", "csrf_token": csrf})
        assert rotated.status_code == 200, rotated.text
        new_value = shown_value(rotated.text)
        assert f'href="{HERE}"' in rotated.text
        assert "The old value is still accepted until" in rotated.text
        assert ('id="signing-note"' in rotated.text) is (kind != "secret")
        page = await client.get(HERE)
        assert new_value not in page.text  # shown once
        assert f"<strong>{kind.replace('_', ' ')}</strong> accepted until" in page.text
        assert (f'id="confirm-{kind}"' in page.text) is (kind != "secret")
    async with app.state.database.unit_of_work(read_only=True) as session:
        secrets = await merchant_service.secrets_with_grace(session, await merchant_service.get(session, merchant.id))
    assert getattr(secrets, kind) == new_value != getattr(merchant.credentials, kind)
    assert [g.value for g in secrets.grace] == [getattr(merchant.credentials, kind)]
    assert await audit_actions(app, merchant.id) == [(f"merchant.rotate.{kind}", f"console:{email}")]


async def test_an_unknown_secret_kind_is_refused_naming_the_field(app: FastAPI) -> None:
    merchant = await make_merchant(app)
    client, _ = await as_user(app, merchant, "merchant_admin")
    async with closing(client):
        csrf = await page_csrf(client, HERE)
        refused = await client.post(f"{HERE}/rotate", data={"kind": "public_key", "csrf_token": csrf})
        assert refused.status_code == 400
        assert error_of(refused.text) == "Kind: must be client_secret, secret or hash_key"
    assert await audit_actions(app, merchant.id) == []


def weak_key_pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


async def test_the_admin_uploads_a_public_key_checked_with_a_clear_error(app: FastAPI) -> None:
    merchant = await make_merchant(app)
    client, email = await as_user(app, merchant, "merchant_admin")
    private = rsa_key()
    private_pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    async with closing(client):
        csrf = await page_csrf(client, HERE)
        for pem, says in (
            (private_pem, "Public key: this is a private key; give the public key (BEGIN PUBLIC KEY)"),
            ("hello", "Public key: not a PEM public key (expected a '-----BEGIN PUBLIC KEY-----' block)"),
            (weak_key_pem(), "Public key: RSA key is 1024 bits; 2048 bits are required"),
            ("", "Public key: paste the new PEM public key or choose its .pem file"),
        ):
            refused = await client.post(f"{HERE}/public-key", data={"public_key": pem, "csrf_token": csrf})
            assert refused.status_code == 400, pem
            assert error_of(refused.text) == says.replace("'", "&#39;")
        new_key = rsa_key()
        uploaded = await client.post(
            f"{HERE}/public-key",
            data={"grace_hours": "1", "csrf_token": csrf},
            files={"public_key_file": ("key.pem", public_pem(new_key).encode(), "application/x-pem-file")},
        )
        assert uploaded.status_code == 200, uploaded.text
        async with app.state.database.unit_of_work(read_only=True) as session:
            stored = await merchant_service.get(session, merchant.id)
        assert stored.public_key_pem.strip() == public_pem(new_key).strip()
        assert re.search(r'id="new-value">[0-9a-f]{64}<', uploaded.text)  # its fingerprint, no secret
    assert await audit_actions(app, merchant.id) == [("merchant.rotate.public_key", f"console:{email}")]


async def test_the_merchant_admin_confirms_the_switch_of_a_rotation_in_its_grace(app: FastAPI) -> None:
    merchant = await make_merchant(app, callback_url="http://127.0.0.1:9/cb")
    client, email = await as_user(app, merchant, "merchant_admin")
    async with closing(client):
        csrf = await page_csrf(client, HERE)
        nothing = await client.post(f"{HERE}/confirm-rotation", data={"kind": "hash_key", "csrf_token": csrf})
        assert nothing.status_code == 409
        assert "no replaced hash_key" in error_of(nothing.text)
        rotated = await client.post(f"{HERE}/rotate", data={"kind": "hash_key", "grace_hours": "2", "csrf_token": csrf})
        new_hash_key = shown_value(rotated.text)
        async with app.state.database.unit_of_work(read_only=True) as session:
            before = await merchant_service.callback_signing(session, merchant.id)
        assert before.hash_key.now() == merchant.credentials.hash_key  # decisions §12.4: the old value, in grace
        confirmed = await client.post(f"{HERE}/confirm-rotation", data={"kind": "hash_key", "csrf_token": csrf})
        assert confirmed.status_code == 303
        page = await client.get(confirmed.headers["location"])
        assert "Switch confirmed" in page.text
        assert 'id="confirm-hash_key"' not in page.text
    async with app.state.database.unit_of_work(read_only=True) as session:
        after = await merchant_service.callback_signing(session, merchant.id)
    assert after.hash_key.now() == new_hash_key
    assert await audit_actions(app, merchant.id) == [
        ("merchant.rotate.hash_key", f"console:{email}"),
        ("merchant.confirm.hash_key", f"console:{email}"),
    ]


def shown_attempt(html: str) -> dict[str, str]:
    return {
        name: re.search(rf'id="test-{name}">([^<]+)<', html).group(1)  # type: ignore[union-attr]
        for name in ("callback-id", "transaction", "status", "latency")
    }


async def send(client: httpx.AsyncClient, kind: str) -> httpx.Response:
    csrf = await page_csrf(client, HERE)
    return await client.post(f"{HERE}/test-callback", data={"kind": kind, "csrf_token": csrf})


async def test_a_wallet_test_callback_is_signed_as_a_real_one_and_its_answer_shown(app: FastAPI) -> None:
    async with CallbackReceiver() as receiver:
        url = receiver.url("/wallet")
        merchant = await make_merchant(app, callback_url=url)
        client, email = await as_user(app, merchant, "merchant")  # any merchant role sends one
        async with closing(client):
            sent = await send(client, "wallet")
            assert sent.status_code == 200, sent.text
            [request] = await receiver.wait_for(1)
    shown = shown_attempt(sent.text)
    assert shown["status"].startswith("HTTP 200")
    assert re.fullmatch(r"\d+ ms", shown["latency"])
    assert "Test callback accepted" in sent.text
    body: dict[str, Any] = request.json()
    assert body["external_id"].startswith("TEST-")
    assert body["order_id"] == body["external_id"]
    assert body["transaction_id"].startswith("WLTTEST")
    assert body["transaction_id"] == shown["transaction"]
    assert body["transaction_status"] == "PAID"
    assert body["merchant_id"] == merchant.id
    expected = callback_signature(
        body["transaction_id"], x_req_signature(merchant.credentials.hash_key, body["external_id"], body["order_id"])
    )
    assert request.headers["svc-signature"] == expected
    assert request.query["svc-signature"] == expected
    assert request.headers["x-kasir-callback-id"] == shown["callback-id"]
    assert request.headers["x-kasir-attempt"] == "1"
    async with app.state.database.unit_of_work(read_only=True) as session:
        [row] = await fetch(session, select(Callback.event, Callback.status).where(Callback.merchant_id == merchant.id))
    assert tuple(row) == ("TEST", "delivered")
    assert await audit_actions(app, merchant.id) == [("merchant.test_callback", f"console:{email}")]


async def test_a_card_test_callback_carries_the_payment_page_payload(app: FastAPI) -> None:
    async with CallbackReceiver() as receiver:
        merchant = await make_merchant(app, callback_url=receiver.url("/card"))
        client, _ = await as_user(app, merchant, "merchant_admin")
        async with closing(client):
            sent = await send(client, "card")
            [request] = await receiver.wait_for(1)
    body = request.json()
    assert body["transaction_status"] == "SUCCESS"
    assert body["payment_method"] == "CARD"
    assert body["transaction_id"].startswith("CARDTEST")
    assert body["external_id"].startswith("TEST-")
    expected = callback_signature(
        body["transaction_id"], x_req_signature(merchant.credentials.hash_key, body["external_id"], body["order_id"])
    )
    assert request.headers["svc-signature"] == expected
    assert "svc-signature" not in request.query  # the wallet's alone repeats it on the URL
    assert shown_attempt(sent.text)["status"].startswith("HTTP 200")


async def test_a_bnpl_test_notification_is_signed_as_a_snap_notification(app: FastAPI) -> None:
    async with CallbackReceiver() as receiver:
        url = receiver.url("/bnpl")
        merchant = await make_merchant(app, callback_url=url)
        client, _ = await as_user(app, merchant, "merchant")
        async with closing(client):
            await send(client, "bnpl")
            [request] = await receiver.wait_for(1)
    payload = check_notification(request, merchant, url)
    assert payload["latestTransactionStatus"] == "00"
    assert payload["originalPartnerReferenceNo"].startswith("TEST-")
    assert payload["originalReferenceNo"].startswith("BNPLTEST")


async def test_a_test_callback_in_a_rotation_grace_is_signed_with_the_old_hash_key(app: FastAPI) -> None:
    async with CallbackReceiver() as receiver:
        merchant = await make_merchant(app, callback_url=receiver.url("/grace"))
        client, _ = await as_user(app, merchant, "merchant_admin")
        async with closing(client):
            csrf = await page_csrf(client, HERE)
            rotated = await client.post(
                f"{HERE}/rotate", data={"kind": "hash_key", "grace_hours": "1", "csrf_token": csrf}
            )
            new_hash_key = shown_value(rotated.text)
            await send(client, "wallet")
            await client.post(f"{HERE}/confirm-rotation", data={"kind": "hash_key", "csrf_token": csrf})
            await send(client, "wallet")
            first, second = await receiver.wait_for(2)
    for request, hash_key in ((first, merchant.credentials.hash_key), (second, new_hash_key)):
        body = request.json()
        signed = x_req_signature(hash_key, body["external_id"], body["order_id"])
        assert request.headers["svc-signature"] == callback_signature(body["transaction_id"], signed)


async def test_a_refused_test_callback_shows_the_answer_and_can_be_replayed(app: FastAPI) -> None:
    async with CallbackReceiver() as receiver:
        receiver.answer(Answer(status=503, body="down for maintenance", content_type="text/plain"))
        merchant = await make_merchant(app, callback_url=receiver.url("/down"))
        client, email = await as_user(app, merchant, "merchant")
        async with closing(client):
            sent = await send(client, "wallet")
            assert sent.status_code == 200
            shown = shown_attempt(sent.text)
            assert shown["status"].startswith("HTTP 503")
            assert "Test callback not accepted" in sent.text
            assert "down for maintenance" in sent.text
            page = await client.get(HERE)
            callback_id = int(shown["callback-id"])
            assert f'id="replay-{callback_id}"' in page.text
            assert "given up" in page.text
            # A refused test is the merchant's to fix, not a given-up payment event: no overview count, no recovery.
            async with app.state.database.unit_of_work(read_only=True) as session:
                assert await callback_repository.count_given_up(session, merchant.id) == 0
                assert await callback_repository.given_up(session, merchant.id, clock.now() - timedelta(days=1)) == []
            csrf = await page_csrf(client, HERE)
            replayed = await client.post(f"{HERE}/callbacks/{callback_id}/replay", data={"csrf_token": csrf})
            assert replayed.status_code == 303
            page = await client.get(replayed.headers["location"])
            assert "Callback queued for delivery again." in page.text
            # Not offered while the replay is waiting to be delivered (no worker runs here), and refused.
            assert f'id="replay-{callback_id}"' not in page.text
            assert "delivering…" in page.text
            again = await client.post(f"{HERE}/callbacks/{callback_id}/replay", data={"csrf_token": csrf})
            assert again.status_code == 409
            assert "still being delivered" in error_of(again.text)
    actions = await audit_actions(app, merchant.id)
    assert actions[0] == ("merchant.test_callback", f"console:{email}")
    assert [action for action, _ in actions[1:]] == ["callback.replay"]


async def test_a_merchant_user_cannot_replay_another_merchants_callback(app: FastAPI) -> None:
    async with CallbackReceiver() as receiver:
        receiver.answer(default=Answer(status=500))
        other = await make_merchant(app, callback_url=receiver.url("/other"))
        other_client, _ = await as_user(app, other, "merchant")
        async with closing(other_client):
            theirs = int(shown_attempt((await send(other_client, "wallet")).text)["callback-id"])
    mine = await make_merchant(app)
    client, _ = await as_user(app, mine, "merchant_admin")
    async with closing(client):
        csrf = await page_csrf(client, HERE)
        refused = await client.post(f"{HERE}/callbacks/{theirs}/replay", data={"csrf_token": csrf})
        assert refused.status_code == 404
        assert other.id not in refused.text
        assert f'id="callback-{theirs}"' not in (await client.get(HERE)).text
    assert [a for a, _ in await audit_actions(app, other.id)] == ["merchant.test_callback"]


async def test_a_test_callback_needs_a_callback_url(app: FastAPI) -> None:
    merchant = await make_merchant(app)
    client, _ = await as_user(app, merchant, "merchant")
    async with closing(client):
        page = await client.get(HERE)
        assert 'id="send-test"' not in page.text
        refused = await send(client, "wallet")
        assert refused.status_code == 409
        assert error_of(refused.text) == "Callback URL: set a default callback URL first: test callbacks go there"
        wrong = await send(client, "payout")
        assert wrong.status_code == 400
        assert error_of(wrong.text) == "Kind: must be wallet, card or bnpl"


async def test_the_operator_confirms_a_rotation_on_the_merchant_page(app: FastAPI) -> None:
    merchant = await make_merchant(app)
    async with closing(await signed_in(app)) as operator:
        csrf = await page_csrf(operator, f"/console/merchants/{merchant.id}")
        await operator.post(
            f"/console/merchants/{merchant.id}/rotate",
            data={"kind": "client_secret", "grace_hours": "1", "csrf_token": csrf},
        )
        page = await operator.get(f"/console/merchants/{merchant.id}")
        assert 'id="confirm-client_secret"' in page.text
        confirmed = await operator.post(
            f"/console/merchants/{merchant.id}/confirm-rotation", data={"kind": "client_secret", "csrf_token": csrf}
        )
        assert confirmed.status_code == 303
        page = await operator.get(confirmed.headers["location"])
        assert 'id="confirm-client_secret"' not in page.text
        assert "Switch confirmed" in page.text
        nothing = await operator.post(
            f"/console/merchants/{merchant.id}/confirm-rotation", data={"kind": "hash_key", "csrf_token": csrf}
        )
        assert nothing.status_code == 409
    actions = [action for action, _ in await audit_actions(app, merchant.id)]
    assert actions == ["merchant.rotate.client_secret", "merchant.confirm.client_secret"]


async def test_a_user_is_unlocked_through_the_admin_api_and_the_cli(app: FastAPI, client: httpx.AsyncClient) -> None:
    from kasir.console.repository import console_repository
    from kasir.console.service import console_users
    from kasir.kit.clock import clock
    from tests.support.cli import kasir_beside_app

    merchant = await make_merchant(app)
    emails = [await make_user(app, role="merchant", merchant_id=merchant.id) for _ in range(2)]
    async with app.state.database.unit_of_work() as session:
        users = [await console_users.get(session, email) for email in emails]
        for user in users:
            await console_repository.lock(session, user.id, clock.now().replace(year=clock.now().year + 1))
    unlocked = await client.post(f"/admin/users/{users[0].id}/unlock", headers=ADMIN)
    assert unlocked.status_code == 200, unlocked.text
    assert unlocked.json()["locked_until"] is None
    assert (await client.post("/admin/users/2147483647/unlock", headers=ADMIN)).status_code == 404
    result = await kasir_beside_app("user", "unlock", emails[1])
    assert result.exit_code == 0, result.output
    assert f"console user {emails[1]} unlocked" in result.output
    for email in emails:  # each signs in again
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://kasir.test") as them:
            assert (await sign_in(them, email)).status_code == 303
    async with app.state.database.unit_of_work(read_only=True) as session:
        rows = await fetch(
            session,
            select(AuditEvent.target_id, AuditEvent.actor)
            .where(AuditEvent.action == "user.unlock", AuditEvent.target_id.in_(emails))
            .order_by(AuditEvent.id),
        )
    assert [row.target_id for row in rows] == emails
    assert rows[0].actor == "admin-api"
    assert rows[1].actor.startswith("cli:")
