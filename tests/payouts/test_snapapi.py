"""A SNAP client nobody here wrote signs disbursement requests Kasir accepts (issue 46): PyPI's `snapapi` 0.1.9, its
`SNAPCrypto.create_signature_transactional` with HMAC-SHA512 (snapapi/security/crypto.py), run in a subprocess of
its own virtual environment (`make snapapi-deps`, which `make test` runs: it pins starlette<0.47, which Kasir's
FastAPI does not take). Nothing is fetched at run time.

Its string to sign is `POST:PATH:accessToken:lowerhex(sha256(body)):X-TIMESTAMP` with the body minified by
`json.dumps(body, separators=(",", ":"))` (ASCII escapes kept): the request sends that same text, which §3.2's
minify leaves as it is."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from kasir.audit.service import Actor
from kasir.payouts.service import payout_service
from tests.support import builders
from tests.support.builders import make_merchant
from tests.support.wire.payouts import TRANSFER, TRANSFER_STATUS, disbursement_token, status_body, transfer_body
from tests.support.wire.snap import external_id, snap_timestamp

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / ".venv-snapapi" / "bin" / "python"

SIGNER = """
import json, sys
from snapapi.security.crypto import SNAPCrypto

asked = json.load(sys.stdin)
crypto = SNAPCrypto(client_id=asked["client_id"], client_secret=asked["client_secret"])
signature = crypto.create_signature_transactional(
    path=asked["path"],
    timestamp=asked["timestamp"],
    request_body=asked["body"],
    http_method="POST",
    access_token=asked["token"],
    algorithm="HMAC-SHA512",
)
print(json.dumps({"signature": signature}))
"""


def snapapi_signature(
    merchant: builders.TestMerchant, path: str, token: str, body: dict[str, Any], timestamp: str
) -> str:
    asked = {
        "client_id": merchant.client_id,
        "client_secret": merchant.credentials.client_secret,
        "path": path,
        "token": token,
        "body": body,
        "timestamp": timestamp,
    }
    done = subprocess.run(  # noqa: S603 (the test's own interpreter of snapapi's environment)
        [str(PYTHON), "-c", SIGNER], input=json.dumps(asked), capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["signature"])


async def post_signed_by_snapapi(
    client: httpx.AsyncClient, merchant: builders.TestMerchant, path: str, token: str, body: dict[str, Any]
) -> httpx.Response:
    timestamp = snap_timestamp()
    headers = {
        "Content-Type": "application/json",
        "Authorization": f"Bearer {token}",
        "X-TIMESTAMP": timestamp,
        "X-SIGNATURE": snapapi_signature(merchant, path, token, body, timestamp),
        "X-PARTNER-ID": merchant.client_id,  # the provider's pages say Client ID
        "X-EXTERNAL-ID": external_id(),
        "CHANNEL-ID": "api",
    }
    text = json.dumps(body, separators=(",", ":"))  # what snapapi hashed
    return await client.post(path, content=text.encode(), headers=headers)


async def test_snapapis_signer_signs_a_transfer_and_a_status_inquiry_kasir_accepts(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    if not PYTHON.exists():
        pytest.fail(f"snapapi is not installed in {PYTHON.parent.parent}: run `make snapapi-deps` (make test does)")
    merchant = await make_merchant(app)
    async with app.state.database.unit_of_work() as session:
        await payout_service.top_up(session, merchant.id, 1_000_000, "Saldo awal", Actor.cli())
    token = await disbursement_token(client, merchant)
    body = transfer_body(amount="125000.00")
    body["beneficiaryAccountName"] = "Budi Santoso – Toko Maju"  # a character its minify writes as \\u2013
    accepted = await post_signed_by_snapapi(client, merchant, TRANSFER, token, body)
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["responseCode"] == "2001800"
    reference = accepted.json()["referenceNo"]
    status = await post_signed_by_snapapi(client, merchant, TRANSFER_STATUS, token, status_body(reference_no=reference))
    assert status.status_code == 200, status.text
    assert status.json()["latestTransactionStatus"] == "00"
    assert status.json()["additionalInfo"]["beneficiaryAccountName"] == "Budi Santoso – Toko Maju"
    # and a signature it made for another body is refused
    forged = dict(body, partnerReferenceNo="OTHER")
    timestamp = snap_timestamp()
    headers = {
        "Content-Type": "application/json",
        "Authorization": f"Bearer {token}",
        "X-TIMESTAMP": timestamp,
        "X-SIGNATURE": snapapi_signature(merchant, TRANSFER, token, body, timestamp),
        "X-PARTNER-ID": merchant.client_id,
        "X-EXTERNAL-ID": external_id(),
        "CHANNEL-ID": "api",
    }
    refused = await client.post(TRANSFER, content=json.dumps(forged, separators=(",", ":")), headers=headers)
    assert refused.json()["responseCode"] == "4011800"
