from __future__ import annotations

from collections.abc import Callable, Sequence
from importlib.metadata import entry_points

from cryptography.hazmat.primitives import serialization
from kasir_client import Credentials

from tests.support.builders import TestMerchant


def sdk_credentials(merchant: TestMerchant) -> Credentials:
    c = merchant.credentials
    return Credentials(
        merchant_id=c.merchant_id,
        client_id=c.client_id,
        client_secret=c.client_secret,
        secret=c.secret,
        hash_key=c.hash_key,
        private_key_pem=merchant.private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
    )


def kasir_client_command() -> Callable[[Sequence[str] | None], int]:
    """The `kasir-client` command as the SDK's distribution declares it (its console script), to run in-process:
    where it lives inside the package is the SDK's own business."""
    [script] = entry_points(group="console_scripts", name="kasir-client")
    command: Callable[[Sequence[str] | None], int] = script.load()
    return command
