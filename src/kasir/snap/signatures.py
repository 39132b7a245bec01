"""The strings SNAP signs (docs/decisions.md §3.1, §3.2, §3.6), and their checks."""

from __future__ import annotations

from kasir.kit.crypto import constant_time_equals, hmac_sha512_b64, rsa_sha256_verify, sha256_hex
from kasir.kit.minify import minify


def token_string_to_sign(client_id: str, timestamp: str) -> str:
    """§3.1: `client_id + "|" + X-TIMESTAMP`."""
    return f"{client_id}|{timestamp}"


def body_digest(body: bytes) -> str:
    """lowerhex(SHA-256(minify(body))); an empty body is the empty string."""
    return sha256_hex(minify(body))


def symmetric_string_to_sign(method: str, path: str, access_token: str, body: bytes, timestamp: str) -> str:
    """§3.2 symmetric: METHOD:PATH:accessToken:lowerhex(sha256(minify(body))):X-TIMESTAMP."""
    return f"{method.upper()}:{path}:{access_token}:{body_digest(body)}:{timestamp}"


def asymmetric_string_to_sign(method: str, path: str, body: bytes, timestamp: str) -> str:
    """§3.2 asymmetric: METHOD:PATH:lowerhex(sha256(minify(body))):X-TIMESTAMP."""
    return f"{method.upper()}:{path}:{body_digest(body)}:{timestamp}"


def verify_symmetric(client_secret: str, string_to_sign: str, signature: str) -> bool:
    return constant_time_equals(hmac_sha512_b64(client_secret, string_to_sign), signature)


def verify_asymmetric(public_key_pem: str, string_to_sign: str, signature: bytes) -> bool:
    """SHA256withRSA of `string_to_sign` under the merchant's key; `signature` already Base64-decoded
    (its callers decode it to check its form)."""
    return rsa_sha256_verify(public_key_pem, string_to_sign, signature)


def notify_signature(client_secret: str, callback_url: str, body: bytes, timestamp: str) -> str:
    """§3.6: Base64(HMAC-SHA512(client_secret, callbackUrl:v1:lowerhex(sha256(minify(body))):X-TIMESTAMP))."""
    return hmac_sha512_b64(client_secret, f"{callback_url}:v1:{body_digest(body)}:{timestamp}")
