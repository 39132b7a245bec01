"""A full demo run leaves no credential, card number or CVN in the server's log, the database or a callback.

The demo (examples/demo.py, what `make demo` runs against `make run`) goes through every product against
its own `kasir serve` on its own database, logging at DEBUG, with the merchant talking through a recording
proxy: so the test knows every access token issued and every signature sent. Then it greps, as bytes:

    the server's log (stdout and stderr), at DEBUG
    the database: SQLite's .db, -wal and -shm files (while served and after), or a pg_dump of the
    database and the PostgreSQL server's own log
    every callback received: body, query and headers

for the demo merchant's client secret, secret, hash key, console passwords, private key (PEM, its
Base64 body and each of its lines, DER), Basic credentials, access tokens, request signatures,
Kasir's own secret key, the card numbers and the CVN: zero hits. Each needle is also found where it
must be (the demo-merchant files, the merchant's own requests), and each haystack holds what it
should (the merchant's id, the transactions), so the grep cannot pass by looking at nothing.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import secrets
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from examples.demo import CHALLENGE_CARD, DECLINED_CARD
from kasir_client import AsyncClient, Credentials

from tests.support.demo import kasir, own_database, run_demo
from tests.support.postgres import PostgresCluster, _pg_bin
from tests.support.proxy import RecordingProxy
from tests.support.server import ServedKasir

pytestmark = pytest.mark.slow

CVN = "123"  # examples/demo.py's cardCvn
# Where a CVN would show: as a JSON string or number beside a cvn-like name, or as a form or query value.
CVN_PATTERNS = (
    re.compile(rb"""(?i)c[vs][vnc]\w*[\\"']*\s*[:=]\s*[\\"']*""" + CVN.encode() + rb"(?!\d)"),
    re.compile(rb"""(?<![\w.-])\\?["']""" + CVN.encode() + rb"""\\?["']"""),
)


@dataclass
class Needle:
    """One secret in every form it could be written in."""

    name: str
    forms: list[bytes] = field(default_factory=list)
    patterns: tuple[re.Pattern[bytes], ...] = ()

    def found_in(self, haystack: bytes) -> list[str]:
        hits = [f"{self.name} as {form[:24]!r}…" for form in self.forms if form in haystack]
        hits += [
            f"{self.name} by /{p.pattern[:32]!r}/: {m.group(0)!r}" for p in self.patterns for m in p.finditer(haystack)
        ]
        return hits


def secret_needle(name: str, value: str) -> Needle:
    raw = value.encode()
    return Needle(name, [raw, base64.b64encode(raw), base64.urlsafe_b64encode(raw)])


def private_key_needles(pem: bytes) -> list[Needle]:
    key = serialization.load_pem_private_key(pem, password=None)
    der = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    body_lines = [line for line in pem.splitlines() if line and not line.startswith(b"-----")]
    needles = [
        Needle("private key PEM", [pem, pem.replace(b"\n", b"\\n")]),
        Needle("private key Base64 body", [b"".join(body_lines)]),
        Needle("private key DER", [der]),
    ]
    # Any one line of the body (64 characters but the last) is enough to know it leaked.
    needles += [Needle(f"private key line {i}", [line]) for i, line in enumerate(body_lines) if len(line) >= 24]
    return needles


def card_needles() -> list[Needle]:
    numbers = (CHALLENGE_CARD, DECLINED_CARD)
    forms = [form.encode() for number in numbers for form in (number, number.replace(" ", ""))]
    return [Needle("card number", forms), Needle("CVN", patterns=CVN_PATTERNS)]


def hits(needles: Iterable[Needle], haystacks: dict[str, bytes]) -> list[str]:
    return [f"{where}: {hit}" for where, data in haystacks.items() for n in needles for hit in n.found_in(data)]


def sqlite_files(directory: Path) -> dict[str, bytes]:
    return {f"{p.name}": p.read_bytes() for p in sorted(directory.glob("kasir.db*")) if not p.name.endswith(".lock")}


async def postgres_dump(cluster: PostgresCluster, database: str) -> dict[str, bytes]:
    dump = await asyncio.to_thread(
        subprocess.run,
        [*cluster.run_as, _pg_bin("pg_dump"), "-h", "127.0.0.1", "-p", str(cluster.port), "-U", "kasir", database],
        capture_output=True,
        timeout=120,
        check=True,
        cwd="/",
    )
    # The server's own log too: a failed statement's DETAIL would show the values it was given.
    return {"pg_dump": dump.stdout, "postgresql log": (cluster.root / "log").read_bytes()}


async def test_a_demo_run_leaks_no_credential_card_number_or_cvn(
    tmp_path: Path, postgres: PostgresCluster | None
) -> None:
    data_dir, demo_dir = tmp_path / "data", tmp_path / "demo"
    data_dir.mkdir()
    database_url = own_database(data_dir, postgres, "leaks")
    secret_key = secrets.token_urlsafe(32)
    env = {
        "KASIR_ENV": "staging",
        "KASIR_DATA_DIR": str(data_dir),
        "KASIR_DATABASE_URL": database_url,
        "KASIR_SECRET_KEY": secret_key,
        "KASIR_ADMIN_TOKEN": secrets.token_urlsafe(16),
        "KASIR_LOG_LEVEL": "DEBUG",
        "KASIR_CALLBACK_POLL_SECONDS": "0.1",
    }
    await kasir("db", "upgrade", env=env)
    made = await kasir("demo-merchant", "--out", str(demo_dir), env=env)
    credentials_json = json.loads((demo_dir / "credentials.json").read_text())
    private_pem = (demo_dir / "private.pem").read_bytes()
    console_passwords = re.findall(r"@kasir\.demo\s+(\S+)", (demo_dir / "console-users.txt").read_text())
    assert len(console_passwords) == 2, made.stdout

    server = ServedKasir(env)
    await asyncio.to_thread(server.start)
    try:
        async with RecordingProxy(server.base_url) as proxy:
            credentials = Credentials.from_files(demo_dir / "credentials.json", demo_dir / "private.pem")
            async with AsyncClient(proxy.url, credentials) as client:
                callbacks = await run_demo(client)  # each verified by the demo
        served_files = sqlite_files(data_dir) if postgres is None else {}
    finally:
        await asyncio.to_thread(server.stop)

    # --- what must never be anywhere ----------------------------------------------------
    merchant_id = credentials_json["merchant_id"]
    secret = credentials_json["secret"]
    tokens = [
        json.loads(x.response_body)["accessToken"] for x in proxy.exchanges if x.target.endswith("/access-token/b2b")
    ]
    signatures = sorted(
        {
            value
            for x in proxy.exchanges
            for name, value in x.request_headers.items()
            if "signature" in name or name == "authorization"
        }
    )
    assert tokens, "the demo took no access token"
    assert len(signatures) >= 6, signatures  # the token, BNPL, wallet and card requests sign
    needles = [
        secret_needle("client secret", credentials_json["client_secret"]),
        secret_needle("secret", secret),
        secret_needle("hash key", credentials_json["hash_key"]),
        secret_needle("Basic credentials", f"{merchant_id}:{secret}:{credentials_json['hash_key']}"),
        secret_needle("KASIR_SECRET_KEY", secret_key),
        secret_needle("KASIR_ADMIN_TOKEN", env["KASIR_ADMIN_TOKEN"]),
        *(secret_needle("console password", password) for password in console_passwords),
        *private_key_needles(private_pem),
        *(secret_needle("access token", token) for token in tokens),
        *(Needle("request signature or credential header", [value.encode()]) for value in signatures),
        *card_needles(),
    ]

    # --- each needle is found where it must be: the grep is not blind -------------------
    key = serialization.load_pem_private_key(private_pem, password=None)
    where_they_must_be = [
        *(x.wire() for x in proxy.exchanges),  # what the merchant sent and was answered
        made.stdout.encode(),
        *((demo_dir / name).read_bytes() for name in ("credentials.json", "console-users.txt", "private.pem")),
        json.dumps(private_pem.decode()).encode(),  # the PEM as a JSON string
        private_pem.replace(b"\n", b""),  # the Base64 body on one line
        key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
        json.dumps(env).encode(),  # KASIR_SECRET_KEY
    ]
    for needle in needles:
        assert any(needle.found_in(place) for place in where_they_must_be), needle.name

    # --- the haystacks: read, and holding what they should ------------------------------
    log = server.log_path.read_bytes()
    # At DEBUG the server logs its settings (secrets masked): the level was in force, and the line is grepped too.
    [settings_line] = [json.loads(line) for line in log.splitlines() if b'"message": "settings"' in line]
    assert settings_line["level"] == "debug"
    assert settings_line["settings"]["secret_key"] == "**********"
    transaction_ids = sorted(
        {
            json.loads(x.response_body)["transaction_id"]
            for x in proxy.exchanges
            if x.target == "/ewallet/v2/create-payment" and x.status == 200
        }
    )
    assert len(transaction_ids) == 2
    assert all(t.encode() in log for t in transaction_ids), "the log does not name the demo's transactions"
    if postgres is None:
        stopped_files = sqlite_files(data_dir)
        database_bytes = {
            **{f"{name} (served)": data for name, data in served_files.items()},
            **{f"{name} (stopped)": data for name, data in stopped_files.items()},
        }
        # WAL mode: the demo's writes were in the -wal file while it was served, and in the .db file after.
        assert any(t.encode() in database_bytes["kasir.db-wal (served)"] for t in transaction_ids)
        assert all(t.encode() in database_bytes["kasir.db (stopped)"] for t in transaction_ids)
    else:
        database_bytes = await postgres_dump(postgres, database_url.rsplit("/", 1)[1])
        assert all(t.encode() in database_bytes["pg_dump"] for t in transaction_ids)
    received = {
        f"callback {i} {c.path}": c.body + b"\n" + c.query.encode() + b"\n" + json.dumps(c.headers).encode()
        for i, c in enumerate(callbacks)
    }
    assert len(received) >= 7  # PAID, REFUNDED, PAID, VOID, BNPL, SUCCESS, FAILED
    assert all(b"DEMO-" in c.body for c in callbacks)  # each names the demo's order

    haystacks = {"server log": log, **database_bytes, **received}
    found = hits(needles, haystacks)
    assert not found, "\n".join(found[:50])
