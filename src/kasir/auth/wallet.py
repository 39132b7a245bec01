"""Basic + x-req-signature: the wallet API's scheme, and the card dialect's (docs/decisions.md §3.3, §3.4).

Checks, in order (each failure in the wallet format, docs/decisions.md §4):

    x-version missing / not v3                        01  400
    Content-Type not application/json                 01  400
    Authorization not valid Basic credentials         04  401 (kasir.auth.basic)
    x-req-signature missing                           04  401 (as a wrong one, issue 26)
    body not a JSON object, external_id / order_id
      missing (they are signed)                       01  400
    x-req-signature ≠ sha256(hash_key + external_id + order_id)   04  401
    too many failed authentications (Basic or
      x-req-signature) from this address              04  429 Retry-After (kasir.ratelimit)

A wrong signature is counted as a failed authentication of the merchant from that address; a
missing one is not (it is a client's bug, not a guess).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import Request

from kasir.auth.basic import BasicCaller, basic
from kasir.auth.scheme import Authenticator, source
from kasir.callbacks.signing import x_req_signature
from kasir.errors import BadRequest, InvalidFieldFormat, InvalidMandatoryField, Unauthorized
from kasir.kit.crypto import constant_time_equals
from kasir.merchants.service import CredentialKind
from kasir.snap.headers import parse_json_body

API_VERSION = "v3"  # interface.md: x-version v3 on a v2 path


@dataclass(frozen=True, slots=True)
class WalletCaller:
    """A verified wallet request: the merchant, its JSON body (an object), and the body's bytes."""

    merchant: BasicCaller
    body: dict[str, Any]
    raw: bytes

    @property
    def merchant_id(self) -> str:
        return self.merchant.merchant.id


def _signed_field(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise InvalidMandatoryField(name)
    if not isinstance(value, str):
        raise InvalidFieldFormat(name, "must be a string")
    return value


def _signed_by_a_hash_key(caller: BasicCaller, signature: str, external_id: str, order_id: str) -> bool:
    """The current hash key, or one replaced within its grace period (the console's rotation)."""
    hash_keys = [caller.secrets.hash_key, *caller.secrets.previous(CredentialKind.HASH_KEY)]
    return any(constant_time_equals(signature, x_req_signature(key, external_id, order_id)) for key in hash_keys)


class WalletSignatureAuthenticator(Authenticator[WalletCaller]):
    """Basic credentials, then x-req-signature over the body's external_id and order_id."""

    scheme = "basic + x-req-signature"

    def __init__(self) -> None:
        self.rate_limit = basic.rate_limit  # the same counters: a wrong signature is a failed Basic proof

    async def __call__(self, request: Request) -> WalletCaller:
        headers = request.headers
        version = headers.get("x-version")
        if version is None or not version.strip():
            raise InvalidMandatoryField("x-version")
        if version.strip() != API_VERSION:
            raise InvalidFieldFormat("x-version", f"must be {API_VERSION}")
        content_type = headers.get("content-type", "")
        if content_type.split(";", 1)[0].strip().lower() != "application/json":
            raise InvalidFieldFormat("Content-Type", "must be application/json")
        # A cached merchant needs no database; otherwise a read-only unit of work of its own.
        database, address = source(request)
        caller = await basic.authenticate(database, headers.get("authorization"), address=address)
        signature = headers.get("x-req-signature")
        if signature is None or not signature.strip():
            # The same code as a wrong signature (README), not counted as a failed proof of identity.
            raise Unauthorized("x-req-signature is missing", field="x-req-signature")
        raw = await request.body()
        body = parse_json_body(raw)
        if not isinstance(body, dict):
            raise BadRequest("body must be a JSON object", field="body")
        external_id, order_id = _signed_field(body, "external_id"), _signed_field(body, "order_id")
        if not _signed_by_a_hash_key(caller, signature.strip(), external_id, order_id):
            await self.rate_limit.failed(database, address, caller.merchant.id)
            raise Unauthorized("x-req-signature does not match sha256(hash_key + external_id + order_id)")
        return WalletCaller(caller, body, raw)


wallet_signature = WalletSignatureAuthenticator()
