"""`kasir-client` commands: keygen, token, sign, verify-callback."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from kasir_client import AsyncClient

from tests.sdk.helpers import kasir_client_command, sdk_credentials
from tests.sdk.test_card import charge_body
from tests.support.builders import make_merchant
from tests.support.wire import x_req_signature
from tests.support.wire.callbacks import signed_callback, sub_merchant_signature
from tests.support.wire.snap import token_signature

main = kasir_client_command()


async def _files(app, tmp_path: Path):
    merchant = await make_merchant(app)
    credentials = tmp_path / "credentials.json"
    credentials.write_text(
        json.dumps(
            {
                "merchant_id": merchant.id,
                "client_id": merchant.client_id,
                "client_secret": merchant.credentials.client_secret,
                "secret": merchant.credentials.secret,
                "hash_key": merchant.credentials.hash_key,
            }
        )
    )
    key = tmp_path / "private.pem"
    key.write_bytes(
        merchant.private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return merchant, credentials, key


def test_keygen(tmp_path, capsys):
    assert main(["keygen", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "private.pem").read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")


async def test_sign_prints_curl_headers(app, tmp_path, capsys):
    merchant, credentials, key = await _files(app, tmp_path)
    assert main(["sign", "token", "--credentials", str(credentials), "--private-key", str(key)]) == 0
    lines = dict(line[4:-1].split(": ", 1) for line in capsys.readouterr().out.splitlines())
    assert lines["X-SIGNATURE"] == token_signature(merchant.private_key, merchant.client_id, lines["X-TIMESTAMP"])
    body = tmp_path / "body.json"
    body.write_text('{"external_id": "E1", "order_id": "O1"}')
    assert main(["sign", "wallet", "--credentials", str(credentials), "--body", str(body)]) == 0
    out = capsys.readouterr().out
    assert f"x-req-signature: {x_req_signature(merchant.credentials.hash_key, 'E1', 'O1')}" in out
    assert "X-Idempotency-Key" not in out  # the default path is a read
    wallet = ["sign", "wallet", "--credentials", str(credentials), "--body", str(body)]
    assert main([*wallet, "--path", "/ewallet/v2/refund", "--idempotency-key", "refund-1"]) == 0
    assert "-H 'X-Idempotency-Key: refund-1'" in capsys.readouterr().out


async def test_verify_callback_from_a_raw_request(app, tmp_path, capsys):
    merchant, credentials, _key = await _files(app, tmp_path)
    body, headers = signed_callback(
        {"transaction_id": "T", "external_id": "E", "order_id": "O", "transaction_status": "PAID"},
        hash_key=merchant.credentials.hash_key,
    )
    raw = "POST /cb?svc-signature={} HTTP/1.1\r\n".format(headers["svc-signature"])
    raw += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    request = tmp_path / "request.http"
    request.write_bytes(raw.encode() + body)
    assert main(["verify-callback", "wallet", "--credentials", str(credentials), "--file", str(request)]) == 0
    assert capsys.readouterr().out.startswith("OK WalletCallback")
    # The status is not covered by the signature (transaction_id, external_id, order_id are); a changed
    # transaction id is refused.
    request.write_bytes(raw.encode() + body.replace(b'"T"', b'"T2"'))
    assert main(["verify-callback", "wallet", "--credentials", str(credentials), "--file", str(request)]) == 1


async def test_verify_callback_of_a_va_with_a_sub_merchant(app, tmp_path, capsys):
    merchant, credentials, _key = await _files(app, tmp_path)
    payload = {"transaction_id": "VA1", "external_id": "E", "order_id": "O", "sub_merchant_id": "SUB-1"}
    body = json.dumps(payload).encode()
    x_req = x_req_signature(merchant.credentials.hash_key, "E", "O")
    signature = sub_merchant_signature("VA1", x_req, "SUB-1")  # the formula, computed here
    request = tmp_path / "va.http"
    request.write_bytes(
        f"POST /va?svc-signature={signature} HTTP/1.1\r\nContent-Type: application/json\r\n\r\n".encode() + body
    )
    command = ["verify-callback", "va", "--credentials", str(credentials), "--file", str(request)]
    assert main(command) == 0  # the query parameter alone
    assert capsys.readouterr().out.startswith("OK VaCallback")
    assert main([*command, "--external-id", "E", "--order-id", "O"]) == 0
    assert main([*command, "--external-id", "E", "--order-id", "O2"]) == 1  # another order of ours


@pytest.mark.slow
async def test_token_command_against_the_served_service(app, served, tmp_path, capsys):
    _merchant, credentials, key = await _files(app, tmp_path)
    common = ["--credentials", str(credentials), "--private-key", str(key), "--base-url", served.base_url]
    assert await asyncio.to_thread(main, ["token", *common]) == 0
    payment = capsys.readouterr().out.strip()
    assert await asyncio.to_thread(main, ["token", *common, "--product", "disbursement"]) == 0
    disbursement = capsys.readouterr().out.strip()
    assert payment
    assert disbursement
    assert payment != disbursement


@pytest.mark.slow
async def test_verify_callback_of_a_real_payment_page_callback(app, served, receiver, tmp_path, capsys):
    merchant, credentials, _key = await _files(app, tmp_path)
    body = charge_body(receiver.url("/card"))
    async with AsyncClient(served.base_url, sdk_credentials(merchant)) as client:
        assert (await client.card_charge(body)).is_success
    [callback] = await receiver.wait_for(1, path="/card")
    head = f"POST {callback.path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in callback.headers.items())
    request = tmp_path / "callback.http"
    request.write_bytes(head.encode() + b"\r\n" + callback.body)
    own_order = ["--external-id", body["externalId"], "--order-id", body["orderId"]]
    args = ["verify-callback", "payment-page", "--credentials", str(credentials), "--file", str(request)]
    assert main([*args, *own_order]) == 0
    assert capsys.readouterr().out.startswith("OK PaymentPageCallback")
    assert main([*args, "--external-id", body["externalId"], "--order-id", "ORD-another"]) == 1
    assert "INVALID" in capsys.readouterr().err
