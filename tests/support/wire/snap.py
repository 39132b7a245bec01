"""SNAP on the wire: the access token (§3.1), symmetric and asymmetric request signatures (§3.2), BNPL bodies."""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import re
import secrets
import time
from typing import Any, Protocol

import httpx
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tests.support.builders import TestMerchant
from tests.support.wire import compact, jakarta_time

TOKEN_PATH = "/auth/merchants/v1.0/access-token/b2b"  # interface.md endpoint 1: a payment token
DISBURSEMENT_TOKEN_PATH = "/api/v1.0/access-token/b2b"  # endpoint 2: a disbursement token
GRANT = json.dumps({"grantType": "client_credentials"})
CALCULATION = "/v1.0/bnpl/payment-calculation"
CHECKOUT = "/v1.0/bnpl/qr-checkout"
STATUS = "/v1.0/bnpl/status"

_external = itertools.count(int(time.time() * 1000))


class TokenSigner(Protocol):
    """What signs a token request: a test merchant, or the fuzz's merchant made over HTTP."""

    @property
    def client_id(self) -> str: ...

    @property
    def private_key(self) -> rsa.RSAPrivateKey: ...


def rsa_sign(private_key: rsa.RSAPrivateKey, message: str) -> str:
    """Base64(SHA256withRSA): RSASSA-PKCS1-v1_5 over SHA-256."""
    return base64.b64encode(private_key.sign(message.encode(), padding.PKCS1v15(), hashes.SHA256())).decode()


def token_signature(private_key: rsa.RSAPrivateKey, client_id: str, timestamp: str) -> str:
    """§3.1: Base64(SHA256withRSA(client_id + "|" + X-TIMESTAMP))."""
    return rsa_sign(private_key, f"{client_id}|{timestamp}")


def minify_json(body: str) -> str:
    """§3.2 minify: whitespace outside strings removed (tokenise the strings, strip the rest), nothing else.
    Whitespace is JSON's four characters: Python's \\s also takes \\x0b, \\x0c and \\x1c-\\x1f, which a fuzzed
    body holds and the server (kasir.kit.minify) rightly keeps."""
    parts = re.split(r'("(?:\\.|[^"\\])*")', body)
    return "".join(part if part.startswith('"') else re.sub(r"[ \t\n\r]+", "", part) for part in parts)


def body_hash(body: str) -> str:
    """lowerhex(SHA-256(minify(body)))."""
    # surrogateescape: a body that is not UTF-8 (a fuzzer's) was decoded with it and hashes as its own bytes.
    return hashlib.sha256(minify_json(body).encode("utf-8", "surrogateescape")).hexdigest()


def snap_symmetric(client_secret: str, method: str, path: str, token: str, body: str, timestamp: str) -> str:
    """§3.2 with a token: Base64(HMAC-SHA512(client_secret, METHOD:PATH:token:bodyhash:X-TIMESTAMP))."""
    message = f"{method}:{path}:{token}:{body_hash(body)}:{timestamp}"
    return base64.b64encode(hmac.new(client_secret.encode(), message.encode(), hashlib.sha512).digest()).decode()


def snap_asymmetric(private_key: rsa.RSAPrivateKey, method: str, path: str, body: str, timestamp: str) -> str:
    """§3.2 without a token: Base64(SHA256withRSA(METHOD:PATH:bodyhash:X-TIMESTAMP))."""
    return rsa_sign(private_key, f"{method}:{path}:{body_hash(body)}:{timestamp}")


def snap_timestamp(offset_seconds: float = 0) -> str:
    """X-TIMESTAMP for now (the movable clock) in Asia/Jakarta: 2026-11-22T10:00:00+07:00."""
    return jakarta_time(offset_seconds)


def external_id() -> str:
    """X-EXTERNAL-ID: numeric, at most 36 characters, unique per merchant per day."""
    return str(next(_external)) + str(secrets.randbelow(10**6)).zfill(6)


def token_headers(
    merchant: TokenSigner, timestamp: str | None = None, *, wrong: bool = False, **overrides: str | None
) -> dict[str, str]:
    """The token endpoints' headers, signed per §3.1; `wrong` signs another string with the right key. An
    override names a header with `_` for `-` (`X_SIGNATURE="..."`); None leaves the header out."""
    timestamp = timestamp or snap_timestamp()
    signed = timestamp + "x" if wrong else timestamp
    headers = {
        "Content-Type": "application/json",
        "X-TIMESTAMP": timestamp,
        "X-CLIENT-KEY": merchant.client_id,
        "X-SIGNATURE": token_signature(merchant.private_key, merchant.client_id, signed),
    }
    for name, value in overrides.items():
        name = name.replace("_", "-")
        if value is None:
            headers.pop(name, None)
        else:
            headers[name] = value
    return headers


async def access_token(client: httpx.AsyncClient, merchant: TestMerchant, path: str = TOKEN_PATH) -> str:
    body = compact({"grantType": "client_credentials"})
    response = await client.post(path, content=body, headers=token_headers(merchant))
    assert response.status_code == 200, response.text
    return str(response.json()["accessToken"])


def snap_headers(
    merchant: TestMerchant,
    path: str,
    body: str,
    *,
    token: str | None = None,
    timestamp: str | None = None,
    external: str | None = None,
    channel: str = "95221",
    partner_id: str | None = None,
) -> dict[str, str]:
    """A BNPL request's headers: symmetric with a token, asymmetric without (§3.2)."""
    timestamp = timestamp or snap_timestamp()
    if token is not None:
        signature = snap_symmetric(merchant.credentials.client_secret, "POST", path, token, body, timestamp)
    else:
        signature = snap_asymmetric(merchant.private_key, "POST", path, body, timestamp)
    headers = {
        "Content-Type": "application/json",
        "X-TIMESTAMP": timestamp,
        "X-SIGNATURE": signature,
        "X-PARTNER-ID": partner_id or merchant.id,
        "X-EXTERNAL-ID": external or external_id(),
        "CHANNEL-ID": channel,
    }
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return headers


async def post_signed(
    client: httpx.AsyncClient,
    merchant: TestMerchant,
    path: str,
    body: Any,
    *,
    token: str | None = None,
    **kwargs: Any,
) -> httpx.Response:
    text = body if isinstance(body, str) else compact(body)
    headers = snap_headers(merchant, path, text, token=token, **kwargs)
    return await client.post(path, content=text.encode(), headers=headers)


def item(
    amount: str = "50000.00", qty: int = 2, item_id: str = "SKU-1", category: str = "ELEC", **extra: Any
) -> dict[str, Any]:
    return {
        "itemId": item_id,
        "name": "Headphones",
        "amount": {"value": amount, "currency": "IDR"},
        "category": category,
        "qty": qty,
        **extra,
    }


def calculation_item(**kwargs: Any) -> dict[str, Any]:
    return {
        **item(**kwargs),
        "url": "https://shop.example/sku-1",
        "parentType": "SELLER",
        "parentId": "SELLER-1",
    }


def calculation_body(total: str = "100000.00", items: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"amount": {"value": total, "currency": "IDR"}, "itemDetails": items or [calculation_item()]}


def checkout_body(
    callback_url: str = "http://127.0.0.1:9/cb",
    *,
    partner_reference_no: str | None = None,
    total: str = "100000.00",
    items: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "partnerReferenceNo": partner_reference_no or f"ORDER-{secrets.token_hex(6)}",
        "paymentDetails": {"amount": {"value": total, "currency": "IDR"}},
        "itemDetails": items or [item()],
        "customerDetails": {
            "firstName": "Siti",
            "lastName": "Rahayu",
            "email": "siti@example.id",
            "phone": "081234567890",
        },
        "sellers": [
            {
                "id": "SELLER-1",
                "name": "Toko Maju",
                "url": "https://shop.example/toko-maju",
                "address": {
                    "firstName": "Budi",
                    "address": "Jl. Sudirman 1",
                    "city": "Jakarta",
                    "postalCode": "10220",
                    "phone": "0215550100",
                    "countryCode": "ID",
                },
            }
        ],
        "callbackUrl": callback_url,
        **extra,
    }


def pretty(body: Any) -> str:
    """A whitespace-laden rendering: what is signed is its minified form."""
    return json.dumps(body, indent=4, ensure_ascii=False).replace(": ", " :  ")
