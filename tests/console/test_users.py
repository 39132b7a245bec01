"""The console's users page: operators manage every console user, a merchant's admin only its own merchant's."""

from __future__ import annotations

import re

import httpx
from fastapi import FastAPI
from sqlalchemy import select

from kasir.audit.models import AuditEvent
from kasir.db import fetch
from kasir.merchants.service import merchant_service
from tests.console.helpers import PASSWORD, closing, make_user, page_csrf, sign_in, signed_in
from tests.support.builders import make_merchant


async def audit_of(app: FastAPI, email: str) -> list[tuple[str, str]]:
    """(action, actor) of every audit event about the console user `email`, oldest first."""
    async with app.state.database.unit_of_work(read_only=True) as session:
        rows = await fetch(
            session,
            select(AuditEvent.action, AuditEvent.actor)
            .where(AuditEvent.target_type == "console_user", AuditEvent.target_id == email)
            .order_by(AuditEvent.id),
        )
    return [(row.action, row.actor) for row in rows]


async def name_of(app: FastAPI, merchant_id: str) -> str:
    async with app.state.database.unit_of_work(read_only=True) as session:
        return (await merchant_service.get(session, merchant_id)).name


def user_id_of(html: str, email: str) -> int:
    found = re.search(rf'<tr id="user-(\d+)">\s*<td data-label="Email" class="email">{re.escape(email)}</td>', html)
    assert found, f"{email} is not on the page"
    return int(found.group(1))


def shown_password(html: str) -> str:
    found = re.search(r'id="new-password">([^<]+)</p>', html)
    assert found, "no password shown"
    return found.group(1)


async def test_an_operator_creates_disables_enables_resets_and_unlocks_a_user(app: FastAPI) -> None:
    merchant = await make_merchant(app)
    async with closing(await signed_in(app)) as operator:
        csrf = await page_csrf(operator, "/console/users")
        email = f"kasir-{merchant.id.lower()}@example.id"
        created = await operator.post(
            "/console/users", data={"email": email, "role": "merchant", "merchant": merchant.id, "csrf_token": csrf}
        )
        assert created.status_code == 200, created.text
        password = shown_password(created.text)
        listing = await operator.get("/console/users")
        user_id = user_id_of(listing.text, email)
        assert await name_of(app, merchant.id) in listing.text
        assert f'id="state-{user_id}">active<' in listing.text

        # The shown password signs in; disabling ends that session, and the user cannot sign in again.
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://kasir.test") as them:
            assert (await sign_in(them, email, password)).status_code == 303
            disabled = await operator.post(f"/console/users/{user_id}/disable", data={"csrf_token": csrf})
            assert disabled.status_code == 303
            ended = await them.get("/console/overview")
            assert ended.status_code == 303
            assert ended.headers["location"].startswith("/console/sign-in")
            assert (await sign_in(them, email, password)).status_code == 401
        listing = await operator.get("/console/users")
        assert f'id="state-{user_id}">disabled<' in listing.text

        assert (await operator.post(f"/console/users/{user_id}/enable", data={"csrf_token": csrf})).status_code == 303
        reset = await operator.post(f"/console/users/{user_id}/reset-password", data={"csrf_token": csrf})
        assert reset.status_code == 200
        assert shown_password(reset.text) != password

        # Locked by five wrong passwords, then unlocked from the page.
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://kasir.test") as them:
            for _ in range(5):
                await sign_in(them, email, "a wrong password")
            assert f'id="state-{user_id}">locked<' in (await operator.get("/console/users")).text
            unlocked = await operator.post(f"/console/users/{user_id}/unlock", data={"csrf_token": csrf})
            assert unlocked.status_code == 303
            assert (await sign_in(them, email, shown_password(reset.text))).status_code == 303
        without_token = await operator.post(f"/console/users/{user_id}/disable")
        assert without_token.status_code == 403
    actions = [action for action, _actor in await audit_of(app, email)]
    for action in ("user.create", "user.disable", "user.enable", "user.reset_password", "user.locked", "user.unlock"):
        assert action in actions
    assert all(actor.startswith("console:") for action, actor in await audit_of(app, email) if action != "user.locked")


async def test_a_merchant_admin_manages_only_its_own_merchants_users(app: FastAPI) -> None:
    mine = await make_merchant(app)
    theirs = await make_merchant(app)
    colleague = await make_user(app, role="merchant", merchant_id=mine.id)
    stranger = await make_user(app, role="merchant", merchant_id=theirs.id)
    operator = await make_user(app)
    async with closing(await signed_in(app, role="operator")) as ops:
        everyone = (await ops.get("/console/users")).text
        stranger_id, operator_id = user_id_of(everyone, stranger), user_id_of(everyone, operator)
        colleague_id = user_id_of(everyone, colleague)
    async with closing(await signed_in(app, role="merchant_admin", merchant_id=mine.id)) as admin:
        csrf = await page_csrf(admin, "/console/users")
        listing = (await admin.get("/console/users")).text
        assert colleague in listing
        assert stranger not in listing
        assert operator not in listing
        assert theirs.id not in listing
        assert '<option value="operator"' not in listing
        # Another merchant's user and an operator answer as if they did not exist, and nothing changes.
        for other in (stranger_id, operator_id):
            for action in ("disable", "reset-password", "unlock"):
                refused = await admin.post(f"/console/users/{other}/{action}", data={"csrf_token": csrf})
                assert refused.status_code == 404, (other, action)
        # It creates users of its own merchant only, never an operator.
        as_operator = await admin.post(
            "/console/users", data={"email": "boss@example.id", "role": "operator", "csrf_token": csrf}
        )
        assert as_operator.status_code == 400
        elsewhere = await admin.post(
            "/console/users",
            data={"email": "spy@example.id", "role": "merchant", "merchant": theirs.id, "csrf_token": csrf},
        )
        assert elsewhere.status_code == 404
        email = f"staff-{mine.id.lower()}@example.id"
        made = await admin.post("/console/users", data={"email": email, "role": "merchant", "csrf_token": csrf})
        assert made.status_code == 200
        assert mine.id in made.text
        disabled = await admin.post(f"/console/users/{colleague_id}/disable", data={"csrf_token": csrf})
        assert disabled.status_code == 303
    for untouched in (stranger, operator, "boss@example.id", "spy@example.id"):
        assert [a for a, _ in await audit_of(app, untouched) if a != "user.create"] == []
    assert [a for a, _ in await audit_of(app, "spy@example.id")] == []
    assert [a for a, _ in await audit_of(app, "boss@example.id")] == []
    assert "user.disable" in [a for a, _ in await audit_of(app, colleague)]
    async with closing(await signed_in(app, role="merchant", merchant_id=mine.id)) as plain:
        assert (await plain.get("/console/users")).status_code == 404  # a merchant user manages nobody
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://kasir.test") as them:
        assert (await sign_in(them, stranger, PASSWORD)).status_code == 303  # still enabled
