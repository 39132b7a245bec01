"""`kasir keygen` and `kasir merchant ...` (docs/decisions.md §2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from sqlalchemy import text

from tests.support.builders import public_pem, rsa_key, unique_name
from tests.support.cli import kasir, kasir_beside_app
from tests.support.engine import engine_of


@pytest.fixture
def _settings_installed(app):
    """The CLI reads the process settings, which the app fixture installed (the test database)."""


def test_keygen_writes_pkcs8_and_spki(tmp_path: Path):
    result = kasir("keygen", "--out", str(tmp_path / "keys"))
    assert result.exit_code == 0, result.output
    private_pem = (tmp_path / "keys" / "private.pem").read_bytes()
    public = (tmp_path / "keys" / "public.pem").read_bytes()
    assert private_pem.startswith(b"-----BEGIN PRIVATE KEY-----")  # PKCS#8, not "BEGIN RSA PRIVATE KEY"
    assert public.startswith(b"-----BEGIN PUBLIC KEY-----")
    key = serialization.load_pem_private_key(private_pem, password=None)
    assert isinstance(key, rsa.RSAPrivateKey)
    assert key.key_size == 2048
    assert (tmp_path / "keys" / "private.pem").stat().st_mode & 0o077 == 0
    # Refuses to overwrite.
    again = kasir("keygen", "--out", str(tmp_path / "keys"))
    assert again.exit_code == 2
    assert "already exists" in again.output


@pytest.mark.usefixtures("_settings_installed")
async def test_create_with_generated_key_prints_credentials_as_json(tmp_path: Path):
    name = unique_name()
    result = await kasir_beside_app(
        "merchant",
        "create",
        "--name",
        name,
        "--generate-key",
        str(tmp_path),
        "--json",
        "--callback-url",
        "http://127.0.0.1:9/cb",
    )
    assert result.exit_code == 0, result.output
    credentials = json.loads(result.output)
    assert set(credentials) == {
        "merchant_id",
        "name",
        "client_id",
        "client_secret",
        "secret",
        "hash_key",
        "callback_url",
    }
    assert credentials["name"] == name
    assert (tmp_path / "private.pem").exists()

    listed = json.loads((await kasir_beside_app("merchant", "list", "--json")).output)
    assert credentials["merchant_id"] in [row["merchant_id"] for row in listed]

    shown = await kasir_beside_app("merchant", "show", credentials["merchant_id"], "--json")
    assert shown.exit_code == 0
    for secret in ("client_secret", "secret", "hash_key"):
        assert credentials[secret] not in shown.output
    assert json.loads(shown.output)["client_id"] == credentials["client_id"]


@pytest.mark.usefixtures("_settings_installed")
async def test_secrets_are_encrypted_at_rest(app, tmp_path: Path):
    result = await kasir_beside_app(
        "merchant", "create", "--name", unique_name(), "--generate-key", str(tmp_path), "--json"
    )
    credentials = json.loads(result.output)

    async def row() -> str:
        from kasir.config import get_settings
        from kasir.db import Database

        database = Database(get_settings())
        try:
            async with engine_of(database) as engine, engine.connect() as connection:
                found = await connection.execute(
                    text("SELECT * FROM merchant WHERE id = :id"), {"id": credentials["merchant_id"]}
                )
                return repr(found.one())
        finally:
            await database.dispose()

    stored = await row()
    for secret in ("client_secret", "secret", "hash_key"):
        assert credentials[secret] not in stored


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.usefixtures("_settings_installed")
@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"hello", "not a PEM public key"),
        (b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", "could not be parsed"),
        ("ec", "not an RSA key"),
        ("rsa1024", "1024 bits"),
        ("private", "private key"),
    ],
)
async def test_bad_public_key_is_one_line_exit_2(tmp_path: Path, content, message):
    if content == "ec":
        content = (
            ec.generate_private_key(ec.SECP256R1())
            .public_key()
            .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        )
    elif content == "rsa1024":
        content = (
            rsa.generate_private_key(public_exponent=65537, key_size=1024)
            .public_key()
            .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        )
    elif content == "private":
        content = rsa_key().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    key = _write(tmp_path / "key.pem", content)
    result = await kasir_beside_app("merchant", "create", "--name", unique_name(), "--public-key", str(key))
    assert result.exit_code == 2
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.usefixtures("_settings_installed")
async def test_duplicate_name_exit_2(tmp_path: Path):
    key = _write(tmp_path / "key.pem", public_pem(rsa_key()).encode())
    name = unique_name()
    assert (await kasir_beside_app("merchant", "create", "--name", name, "--public-key", str(key))).exit_code == 0
    result = await kasir_beside_app("merchant", "create", "--name", name, "--public-key", str(key))
    assert result.exit_code == 2
    assert "already exists" in result.output


@pytest.mark.usefixtures("_settings_installed")
async def test_unknown_merchant_exit_2():
    result = await kasir_beside_app("merchant", "show", "MCH-NOBODY")
    assert result.exit_code == 2
    assert "no merchant" in result.output


@pytest.mark.usefixtures("_settings_installed")
async def test_rotate_key(tmp_path: Path):
    key = _write(tmp_path / "key.pem", public_pem(rsa_key()).encode())
    create = await kasir_beside_app("merchant", "create", "--name", unique_name(), "--public-key", str(key), "--json")
    created = json.loads(create.output)
    new_key = _write(tmp_path / "new.pem", public_pem(rsa_key(1)).encode())
    result = await kasir_beside_app("merchant", "rotate-key", created["merchant_id"], "--public-key", str(new_key))
    assert result.exit_code == 0, result.output
    missing = str(tmp_path / "missing.pem")
    bad = await kasir_beside_app("merchant", "rotate-key", created["merchant_id"], "--public-key", missing)
    assert bad.exit_code == 2


@pytest.mark.usefixtures("_settings_installed")
async def test_demo_merchant_is_idempotent(tmp_path: Path):
    """What `make run` does twice must leave one demo merchant with the same credentials."""
    out = tmp_path / "demo"

    async def demo_merchant() -> str:
        result = await kasir_beside_app("demo-merchant", "--out", str(out))
        assert result.exit_code == 0, result.output
        return result.stdout

    first = await demo_merchant()
    credentials = json.loads((out / "credentials.json").read_text())
    second = await demo_merchant()
    assert json.loads((out / "credentials.json").read_text()) == credentials
    assert credentials["client_id"] in first
    assert credentials["client_id"] in second
    assert "access-token/b2b" in second
    assert (out / "private.pem").exists()


async def test_confirm_rotation_switches_callback_signing_and_is_audited(app):
    from sqlalchemy import select

    from kasir.audit.models import AuditEvent
    from kasir.db import fetch
    from tests.support.builders import make_merchant

    merchant = await make_merchant(app)
    nothing = await kasir_beside_app("merchant", "confirm-rotation", merchant.id, "--kind", "hash_key")
    assert nothing.exit_code != 0
    assert "no replaced hash_key" in nothing.output
    rotated = await kasir_beside_app("merchant", "rotate", merchant.id, "--kind", "hash_key", "--grace", "600")
    assert rotated.exit_code == 0, rotated.output
    confirmed = await kasir_beside_app("merchant", "confirm-rotation", merchant.id, "--kind", "hash_key")
    assert confirmed.exit_code == 0, confirmed.output
    assert f"callbacks of {merchant.id} are signed with its current hash_key" in confirmed.output
    again = await kasir_beside_app("merchant", "confirm-rotation", merchant.id, "--kind", "hash_key")
    assert again.exit_code == 0  # confirmed already: nothing changes
    refused = await kasir_beside_app("merchant", "confirm-rotation", merchant.id, "--kind", "secret")
    assert refused.exit_code != 0
    assert "only a hash_key or client_secret rotation signs callbacks" in refused.output
    async with app.state.database.unit_of_work(read_only=True) as session:
        rows = await fetch(
            session, select(AuditEvent.action, AuditEvent.channel).where(AuditEvent.target_id == merchant.id)
        )
    assert [(row.action, row.channel) for row in rows] == [
        ("merchant.rotate.hash_key", "cli"),
        ("merchant.confirm.hash_key", "cli"),
    ]
