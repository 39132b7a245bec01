"""Kasir's signature formulas (docs/decisions.md §3), for requests and for callbacks."""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import datetime, timedelta, timezone

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

JAKARTA = timezone(timedelta(hours=7))
_WHITESPACE = frozenset(b" \t\n\r")


def timestamp(moment: datetime | None = None) -> str:
    """X-TIMESTAMP: `2026-11-22T10:00:00+07:00`."""
    return (moment or datetime.now(JAKARTA)).astimezone(JAKARTA).isoformat(timespec="seconds")


def load_private_key(pem: bytes | str) -> rsa.RSAPrivateKey:
    data = pem.encode() if isinstance(pem, str) else pem
    key = serialization.load_pem_private_key(data, password=None)
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ValueError("not an RSA private key")
    return key


def minify(body: bytes) -> bytes:
    """Whitespace outside JSON strings removed; nothing else changes."""
    out = bytearray()
    in_string = escaped = False
    for byte in body:
        if in_string:
            out.append(byte)
            if escaped:
                escaped = False
            elif byte == 0x5C:
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
            out.append(byte)
        elif byte not in _WHITESPACE:
            out.append(byte)
    return bytes(out)


def _rsa_sign(key: rsa.RSAPrivateKey, message: str) -> str:
    return base64.b64encode(key.sign(message.encode(), padding.PKCS1v15(), hashes.SHA256())).decode()


def _hmac512(secret: str, message: str) -> str:
    return base64.b64encode(hmac.new(secret.encode(), message.encode(), hashlib.sha512).digest()).decode()


def token_signature(key: rsa.RSAPrivateKey, client_id: str, ts: str) -> str:
    """§3.1: SHA256withRSA over `client_id|X-TIMESTAMP`."""
    return _rsa_sign(key, f"{client_id}|{ts}")


def body_digest(body: bytes) -> str:
    return hashlib.sha256(minify(body)).hexdigest()


def snap_symmetric(client_secret: str, method: str, path: str, token: str, body: bytes, ts: str) -> str:
    """§3.2 with a Bearer token: HMAC-SHA512(client_secret, METHOD:PATH:token:sha256(minify(body)):ts)."""
    return _hmac512(client_secret, f"{method.upper()}:{path}:{token}:{body_digest(body)}:{ts}")


def snap_asymmetric(key: rsa.RSAPrivateKey, method: str, path: str, body: bytes, ts: str) -> str:
    """§3.2 without a token: SHA256withRSA over METHOD:PATH:sha256(minify(body)):ts."""
    return _rsa_sign(key, f"{method.upper()}:{path}:{body_digest(body)}:{ts}")


def x_req_signature(hash_key: str, external_id: str, order_id: str) -> str:
    """§3.3: hex SHA-256 of hash_key + external_id + order_id."""
    return hashlib.sha256(f"{hash_key}{external_id}{order_id}".encode()).hexdigest()


def svc_signature(transaction_id: str, x_req_sig: str, sub_merchant_id: str | None = None) -> str:
    """§3.5: hex SHA-256 of transaction_id + x_req_signature; of a card payment that named a sub-merchant
    (the provider SDK's `sub-merchant-id`), of transaction_id + x_req_signature + sub_merchant_id."""
    return hashlib.sha256(f"{transaction_id}{x_req_sig}{sub_merchant_id or ''}".encode()).hexdigest()


def notify_signature(client_secret: str, callback_url: str, body: bytes, ts: str) -> str:
    """§3.6: HMAC-SHA512(client_secret, callbackUrl:v1:sha256(minify(body)):ts)."""
    return _hmac512(client_secret, f"{callback_url}:v1:{body_digest(body)}:{ts}")


def basic_authorization(merchant_id: str, secret: str, hash_key: str | None = None) -> str:
    parts = [merchant_id, secret] + ([hash_key] if hash_key else [])
    return "Basic " + base64.b64encode(":".join(parts).encode()).decode()
