"""Admin API of merchants."""

from __future__ import annotations

from tests.conftest import TEST_ADMIN_TOKEN
from tests.support.builders import public_pem, rsa_key, unique_name

ADMIN = {"Authorization": f"Bearer {TEST_ADMIN_TOKEN}"}


async def test_create_list_show_rotate(client):
    name = unique_name()
    created = await client.post(
        "/admin/merchants",
        headers=ADMIN,
        json={"name": name, "public_key": public_pem(rsa_key()), "callback_url": "http://127.0.0.1:9/cb"},
    )
    assert created.status_code == 201, created.text
    body = created.json()
    assert {"client_secret", "secret", "hash_key", "client_id", "merchant_id"} <= set(body)
    merchant_id = body["merchant_id"]

    shown = (await client.get(f"/admin/merchants/{merchant_id}", headers=ADMIN)).json()
    assert shown["name"] == name
    assert "secret" not in shown
    listed = (await client.get("/admin/merchants", headers=ADMIN)).json()
    assert merchant_id in [m["merchant_id"] for m in listed["merchants"]]

    rotated = await client.post(
        f"/admin/merchants/{merchant_id}/rotate-key", headers=ADMIN, json={"public_key": public_pem(rsa_key(1))}
    )
    assert rotated.json()["public_key_sha256"] != shown["public_key_sha256"]


async def test_bad_key_and_duplicate_name_say_why(client):
    bad = await client.post("/admin/merchants", headers=ADMIN, json={"name": unique_name(), "public_key": "nope"})
    assert bad.status_code == 400
    assert "PEM" in bad.json()["message"]
    name = unique_name()
    first = await client.post(
        "/admin/merchants", headers=ADMIN, json={"name": name, "public_key": public_pem(rsa_key())}
    )
    assert first.status_code == 201
    again = await client.post(
        "/admin/merchants", headers=ADMIN, json={"name": name, "public_key": public_pem(rsa_key())}
    )
    assert again.status_code == 409
    assert "already exists" in again.json()["message"]


async def test_requires_admin_token(client):
    assert (await client.get("/admin/merchants")).status_code == 401
    missing = await client.get("/admin/merchants/MCH-NOBODY", headers=ADMIN)
    assert missing.status_code == 404
