"""Schemathesis against a real `kasir serve` (hardening, issue 24 item 8): every operation of the OpenAPI
document, positive and negative data, every check, each request signed as a merchant signs it
(tests/support/fuzz_hooks.py). Never a 500.

Run as Schemathesis's own CLI, configured by tests/schemathesis.toml. The server has a database of its
own (fuzzed admin calls create, rotate and disable things) and no callback worker (fuzzed callback URLs
point anywhere: nothing is sent off 127.0.0.1).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from kasir.config import Settings
from kasir.db import Database, upgrade_schema
from tests.conftest import TEST_ADMIN_TOKEN, TEST_SECRET_KEY
from tests.support.builders import public_pem, rsa_key
from tests.support.fuzz_signer import SIGNED_HEADERS, FuzzMerchant
from tests.support.postgres import PostgresCluster
from tests.support.process import end_with_parent
from tests.support.server import ServedKasir
from tests.support.wire import compact
from tests.support.wire.snap import token_headers

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "tests" / "schemathesis.toml"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
async def fuzz_server(
    settings_env: dict[str, str], data_dir: Path, postgres: PostgresCluster | None
) -> AsyncIterator[tuple[ServedKasir, FuzzMerchant]]:
    url = postgres.create_database("kasir_fuzz") if postgres else f"sqlite+aiosqlite:///{data_dir / 'kasir-fuzz.db'}"
    database = Database(Settings(database_url=url, data_dir=data_dir, secret_key=TEST_SECRET_KEY))
    try:
        await upgrade_schema(database)
    finally:
        await database.dispose()
    server = ServedKasir(
        {
            **settings_env,
            "KASIR_DATABASE_URL": url,
            "KASIR_EMBEDDED_WORKER": "false",
            # Thousands of requests from one address, many of them with credentials the fuzz breaks on
            # purpose: the rate limits (tested in tests/ratelimit) would answer most of them 429 before
            # the parsers under test saw them.
            "KASIR_RATE_LIMIT_TOKEN_REQUESTS_PER_IP": "0",
            "KASIR_RATE_LIMIT_TOKENS_PER_CLIENT": "0",
            "KASIR_RATE_LIMIT_FAILURES_PER_IP": "0",
            "KASIR_RATE_LIMIT_FAILURES_PER_MERCHANT": "0",
        }
    )
    await asyncio.to_thread(server.start)
    try:
        yield server, await asyncio.to_thread(_make_merchant, server.base_url)
    finally:
        await asyncio.to_thread(server.stop)


def _make_merchant(base_url: str) -> FuzzMerchant:
    """A merchant made through the admin API, and its access token (BNPL is signed with it)."""
    key = rsa_key(0)
    with httpx.Client(base_url=base_url, timeout=30) as http:
        created = http.post(
            "/admin/merchants",
            json={"name": "fuzz", "public_key": public_pem(key)},
            headers={"Authorization": f"Bearer {TEST_ADMIN_TOKEN}"},
        )
        assert created.status_code == 201, created.text
        fields = created.json()
        merchant = FuzzMerchant(
            fields["merchant_id"], fields["client_id"], fields["client_secret"], fields["secret"],
            fields["hash_key"], key,
        )  # fmt: skip
        token = http.post(
            "/auth/merchants/v1.0/access-token/b2b",
            content=compact({"grantType": "client_credentials"}),
            headers=token_headers(merchant),
        )
        assert token.status_code == 200, token.text
        merchant.access_token = token.json()["accessToken"]
        decoy = http.post(
            "/admin/merchants",
            json={"name": "fuzz-decoy", "public_key": public_pem(key)},
            headers={"Authorization": f"Bearer {TEST_ADMIN_TOKEN}"},
        )
        assert decoy.status_code == 201, decoy.text
        merchant.decoy_id = decoy.json()["merchant_id"]
    return merchant


async def test_schemathesis_finds_nothing(fuzz_server: tuple[ServedKasir, FuzzMerchant], data_dir: Path) -> None:
    server, merchant = fuzz_server
    statuses_path = data_dir / f"fuzz-statuses-{server.port}.json"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "SCHEMATHESIS_HOOKS": "tests.support.fuzz_hooks",
        "KASIR_FUZZ_MERCHANT": merchant.to_json(),
        "KASIR_FUZZ_ADMIN_TOKEN": TEST_ADMIN_TOKEN,
        "KASIR_FUZZ_DECOY": merchant.decoy_id,
        "KASIR_FUZZ_STATUSES": str(statuses_path),
    }
    command = [
        str(Path(sys.executable).parent / "schemathesis"), "--config-file", str(CONFIG), "run",
        f"{server.base_url}/openapi.json", "--no-color",
    ]  # fmt: skip
    run = await asyncio.to_thread(
        subprocess.run, command, env=env, cwd=data_dir, capture_output=True, text=True, timeout=600,
        preexec_fn=end_with_parent,
    )  # fmt: skip
    report = run.stdout + run.stderr
    assert run.returncode == 0, report
    print(report[-1500:])  # the summary, shown with -s
    answers = json.loads(statuses_path.read_text())  # "POST /card-v2/v1/charge 400": count (fuzz_hooks.py)
    document = httpx.get(f"{server.base_url}/openapi.json", timeout=30).json()
    operations = {f"{method.upper()} {path}" for path, item in document["paths"].items() for method in item}
    answered = {key.rsplit(" ", 1)[0] for key in answers}
    per_operation: Counter[str] = Counter()
    for key, count in answers.items():
        per_operation[key.rsplit(" ", 1)[0]] += count
    print("requests per operation:", per_operation.most_common())  # shown with -s
    assert operations <= answered, f"never called: {sorted(operations - answered)}"
    assert not [key for key in answers if key.endswith(tuple(f" 5{n:02}" for n in range(100)))], answers
    # Every request was signed right: none of the signed routes said 401 (the fuzz got past authentication).
    refused = [key for key in answers if key.endswith(" 401") and key.split(" ")[1].startswith(tuple(SIGNED_HEADERS))]
    assert not refused, refused
