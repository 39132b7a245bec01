from __future__ import annotations

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
