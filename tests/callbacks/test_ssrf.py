"""Production refuses non-https and non-public callback targets (decisions.md §8)."""

from __future__ import annotations

import pytest

from kasir.callbacks.dispatcher import ClaimedCallback, send_attempt
from kasir.callbacks.models import CallbackKind
from kasir.callbacks.ssrf import UnsafeCallbackUrl, check_callback_url, is_public_address


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "100.127.255.254",
        "224.0.0.1",
        "240.0.0.1",
        "0.0.0.0",
        "255.255.255.255",
        "::1",
        "fe80::1",
        "fc00::1",
        "ff02::1",
        "::",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "::ffff:169.254.169.254",
        "2001:db8::1",
        "192.0.2.1",
        # Found by the hardening audit: Python's is_global lets these through.
        "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
        "2002:7f00:1::1",  # 6to4 of 127.0.0.1
        "fec0::1",  # site-local
        "192.0.0.8",  # IETF protocol assignments
        "198.18.0.1",  # benchmarking
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
        "::7f00:1",  # IPv4-compatible 127.0.0.1
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
    ],
)
def test_non_public_addresses(address):
    assert not is_public_address(address)


@pytest.mark.parametrize(
    "address", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "2002:808:808::1", "64:ff9b::808:808"]
)
def test_public_addresses(address):
    assert is_public_address(address)


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/cb",
        "https://127.0.0.1/cb",
        "https://localhost/cb",
        "https://[::1]/cb",
        "https://10.0.0.8/cb",
        "ftp://example.com",
        "https:///nohost",
    ],
)
async def test_production_refuses_at_request_time(url):
    with pytest.raises(UnsafeCallbackUrl):
        await check_callback_url(url, production=True)


async def test_staging_allows_loopback():
    await check_callback_url("http://127.0.0.1:9/cb", production=False)


async def test_production_delivery_to_loopback_is_refused_without_connecting(settings, receiver):
    production = settings.model_copy(update={"env": "production"})
    callback = ClaimedCallback(
        id=1,
        fence=1,
        kind=CallbackKind.WALLET,
        merchant_id="M",
        transaction_ref="T",
        url=receiver.url(),
        payload=b"{}",
        svc_signature="s",
        attempt_number=1,
        max_attempts=3,
        created_at_unix=0,
        client_secret=None,
    )
    import httpx

    async with httpx.AsyncClient() as http:
        result = await send_attempt(http, callback, production)
    assert not result.accepted
    assert result.error.startswith("refused")
    assert receiver.requests == []
