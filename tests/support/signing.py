"""The formulas of docs/decisions.md §3, written out independently of Kasir's own helpers.

Tests sign and check with these, so a wrong formula in the service cannot agree with itself.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa


def rsa_sign(private_key: rsa.RSAPrivateKey, message: str) -> str:
    return base64.b64encode(private_key.sign(message.encode(), padding.PKCS1v15(), hashes.SHA256())).decode()


def token_signature(private_key: rsa.RSAPrivateKey, client_id: str, timestamp: str) -> str:
    """§3.1: Base64(SHA256withRSA(client_id + "|" + X-TIMESTAMP))."""
    return rsa_sign(private_key, f"{client_id}|{timestamp}")


def minify_json(body: str) -> str:
    """Whitespace outside strings removed: tokenise strings, strip the rest."""
    parts = re.split(r'("(?:\\.|[^"\\])*")', body)
    return "".join(part if part.startswith('"') else re.sub(r"\s+", "", part) for part in parts)


def body_hash(body: str) -> str:
    # surrogateescape: a body that is not UTF-8 (a fuzzer's) was decoded with it and hashes as its own bytes.
    return hashlib.sha256(minify_json(body).encode("utf-8", "surrogateescape")).hexdigest()


def snap_symmetric(client_secret: str, method: str, path: str, token: str, body: str, timestamp: str) -> str:
    message = f"{method}:{path}:{token}:{body_hash(body)}:{timestamp}"
    return base64.b64encode(hmac.new(client_secret.encode(), message.encode(), hashlib.sha512).digest()).decode()


def snap_asymmetric(private_key: rsa.RSAPrivateKey, method: str, path: str, body: str, timestamp: str) -> str:
    return rsa_sign(private_key, f"{method}:{path}:{body_hash(body)}:{timestamp}")


def x_req_signature(hash_key: str, external_id: str, order_id: str) -> str:
    """§3.3: lowercase hex SHA-256 of hash_key + external_id + order_id."""
    return hashlib.sha256(f"{hash_key}{external_id}{order_id}".encode()).hexdigest()


def callback_signature(transaction_id: str, x_req_sig: str) -> str:
    """§3.5: lowercase hex SHA-256 of transaction_id + x_req_signature."""
    return hashlib.sha256(f"{transaction_id}{x_req_sig}".encode()).hexdigest()


def notify_signature(client_secret: str, callback_url: str, body: bytes, timestamp: str) -> str:
    """§3.6: Base64(HMAC-SHA512(client_secret, callbackUrl:v1:sha256hex(minify(body)):X-TIMESTAMP))."""
    digest = hashlib.sha256(minify_json(body.decode()).encode()).hexdigest()
    message = f"{callback_url}:v1:{digest}:{timestamp}"
    return base64.b64encode(hmac.new(client_secret.encode(), message.encode(), hashlib.sha512).digest()).decode()


def basic_auth(*parts: str) -> str:
    return "Basic " + base64.b64encode(":".join(parts).encode()).decode()


def compact(body: object) -> str:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)
