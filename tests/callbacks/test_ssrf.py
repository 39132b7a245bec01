"""Production refuses non-https and non-public callback targets (docs/decisions.md §8)."""

from __future__ import annotations

import asyncio
import ipaddress
import socket

import httpx
import pytest
from fastapi import FastAPI
from hypothesis import example, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from kasir.callbacks.dispatcher import send_attempt
from kasir.callbacks.ssrf import UnsafeCallbackUrl, check_callback_url, is_public_address, use_resolver
from kasir.kit.addresses import numeric_ipv4
from tests.callbacks.helpers import claimed, db, load, record, wait_attempts, wait_status
from tests.callbacks.production import isolated_database, production_app
from tests.conftest import TEST_ADMIN_TOKEN
from tests.support.builders import public_pem, rsa_key, unique_name
from tests.support.receiver import Answer
from tests.support.worker import callback_hang_guard


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
        "64:ff9b:1::808:808",  # local-use NAT64: a translator of the network's own, to anywhere
        "3fff::1",  # documentation (RFC 9637), global to Python 3.11
        "::ffff:0:808:808",  # IPv4-translated (SIIT)
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
    callback = claimed(receiver.url())
    import httpx

    async with httpx.AsyncClient() as http:
        result = await send_attempt(http, callback, production)
    assert not result.accepted
    assert result.error.startswith("refused")
    assert receiver.requests == []


# --- KASIR_CALLBACK_ALLOWED_NETWORKS: which addresses it lets through ---------------------------------

ALLOWED = [ipaddress.ip_network("10.20.0.0/16"), ipaddress.ip_network("fd12:3456::/48")]
INTERNAL = {
    "shop.internal": ["10.20.0.5"],
    "shop6.internal": ["fd12:3456::5", "::ffff:10.20.0.6"],
    "dual.example": ["10.20.0.5", "8.8.8.8"],
    "partly.internal": ["10.20.0.5", "10.99.0.1"],
}


async def internal_names(host: str, port: int) -> list[str]:
    return INTERNAL[host]


@pytest.mark.parametrize(
    "url",
    [
        "http://shop.internal:8080/cb",
        "https://shop.internal/cb",
        "http://shop6.internal/cb",
        "http://10.20.0.5/cb",
        "http://0x0a140005/cb",  # 10.20.0.5
        "http://[fd12:3456::5]/cb",
        "https://dual.example/cb",  # each address allowed or public, over https
    ],
)
async def test_the_allowed_networks_let_their_addresses_through(url):
    with use_resolver(internal_names):
        await check_callback_url(url, production=True, allowed_networks=ALLOWED)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://dual.example/cb", "must be an https URL in production (or reach only allowed networks)"),
        ("https://partly.internal/cb", "non-public address (10.99.0.1)"),
        ("http://10.21.0.1/cb", "must be an https URL"),
        ("https://10.21.0.1/cb", "non-public address (10.21.0.1)"),
        ("https://127.0.0.1/cb", "non-public address (127.0.0.1)"),
        ("https://169.254.169.254/cb", "non-public address (169.254.169.254)"),
        ("https://[::ffff:10.21.0.1]/cb", "which carries 10.21.0.1"),
        ("https://[2002:a14:5::1]/cb", "which carries 10.20.0.5"),  # 6to4 of an allowed address: not the network
    ],
)
async def test_every_other_address_still_has_to_be_public(url, reason):
    with use_resolver(internal_names), pytest.raises(UnsafeCallbackUrl) as refused:
        await check_callback_url(url, production=True, allowed_networks=ALLOWED)
    assert reason in refused.value.reason


# --- KASIR_CALLBACK_ALLOWED_NETWORKS: a production app and a receiver on 127.0.0.1 -----------------


@pytest.fixture(scope="module")
async def production_database_url(settings, postgres, data_dir) -> str:
    return await isolated_database(settings, postgres, data_dir)


async def create_merchant(application: FastAPI, callback_url: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://kasir.test") as http:
        return await http.post(
            "/admin/merchants",
            headers={"Authorization": f"Bearer {TEST_ADMIN_TOKEN}"},
            json={"name": unique_name(), "public_key": public_pem(rsa_key()), "callback_url": callback_url},
        )


async def test_production_delivers_to_loopback_only_when_the_operator_allows_it(
    settings, production_database_url, receiver
):
    async with production_app(settings, production_database_url, "127.0.0.1/32") as application:
        created = await create_merchant(application, receiver.url("/default"))
        assert created.status_code == 201, created.text  # http too: the operator trusts that network
        callback_id = await record(db(application), merchant_id=created.json()["merchant_id"], url=receiver.url())
        [request] = await receiver.wait_for(1, timeout=callback_hang_guard())
        callback = await wait_status(db(application), callback_id, "delivered")
        assert callback.attempts_made == 1
    assert request.path == "/callback"
    assert request.headers["host"] == f"127.0.0.1:{receiver.port}"


@pytest.mark.parametrize("allowed", ["", "10.0.0.0/8,fd12:3456::/48", "127.0.0.2/32"])
async def test_production_refuses_loopback_outside_the_allowed_networks(
    settings, production_database_url, receiver, allowed
):
    async with production_app(settings, production_database_url, allowed) as application:
        refused = await create_merchant(application, receiver.url("/default"))
        assert refused.status_code == 400, refused.text
        assert refused.json()["message"].startswith("callback_url")
        created = await create_merchant(application, "https://[2606:4700:4700::1111]/cb")
        assert created.status_code == 201, created.text
        # Recorded while the setting allowed it (or by an older version): delivery checks again.
        callback_id = await record(db(application), merchant_id=created.json()["merchant_id"], url=receiver.url())
        callback = await wait_attempts(db(application), callback_id, 1)
        _, [attempt] = await load(db(application), callback_id)
    assert callback.status == "pending"
    assert attempt.error.startswith("refused:"), attempt.error
    assert receiver.requests == []


async def test_dns_rebinding_is_refused_at_delivery(settings, production_database_url, receiver):
    """The name answers a public address when the URL is given and 127.0.0.1 when the callback is sent:
    delivery resolves again, checks what it will connect to, and sends nothing."""
    answers = {"rebind.example": ["8.8.8.8"]}
    asked: list[str] = []

    async def resolver(host: str, port: int) -> list[str]:
        asked.append(host)
        return answers[host]

    url = f"https://rebind.example:{receiver.port}{receiver.prefix}/cb"
    with use_resolver(resolver):
        async with production_app(settings, production_database_url, "") as application:
            created = await create_merchant(application, url)
            assert created.status_code == 201, created.text
            answers["rebind.example"] = ["127.0.0.1"]  # the attacker's DNS now answers loopback
            callback_id = await record(db(application), merchant_id=created.json()["merchant_id"], url=url)
            callback = await wait_attempts(db(application), callback_id, 1)
            _, [attempt] = await load(db(application), callback_id)
    assert asked == ["rebind.example", "rebind.example"]  # given, then delivered: two look-ups
    assert callback.status == "pending"
    assert attempt.error == "refused: resolves to a non-public address (127.0.0.1)"
    assert receiver.requests == []


async def test_delivery_connects_to_the_checked_address_and_follows_no_redirect(
    settings, production_database_url, receiver
):
    """A name only the injected resolver knows is reached (so the HTTP client never looked it up itself),
    under its own name in Host; a redirect, even to an allowed address, is an answer, not followed."""

    async def resolver(host: str, port: int) -> list[str]:
        if host == "merchant.internal":
            return ["127.0.0.1"]
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    receiver.answer(Answer(status=302, body="", location=receiver.url("/elsewhere")))
    url = f"http://merchant.internal:{receiver.port}{receiver.prefix}/cb?order=7"
    with use_resolver(resolver):
        async with production_app(settings, production_database_url, "127.0.0.0/8") as application:
            created = await create_merchant(application, url)
            assert created.status_code == 201, created.text
            merchant_id = created.json()["merchant_id"]
            redirected = await record(db(application), merchant_id=merchant_id, url=url, transaction_ref="TX-302")
            callback = await wait_attempts(db(application), redirected, 1)
            _, [attempt] = await load(db(application), redirected)
            delivered = await record(db(application), merchant_id=merchant_id, url=url, transaction_ref="TX-200")
            await wait_status(db(application), delivered, "delivered")
    assert (callback.status, attempt.http_status) == ("pending", 302)
    assert attempt.error == "HTTP 302 redirect (not followed)"
    assert [(r.path, r.headers["host"]) for r in receiver.requests] == [
        ("/cb", f"merchant.internal:{receiver.port}"),
        ("/cb", f"merchant.internal:{receiver.port}"),
    ]


async def test_a_resolver_that_never_answers_at_delivery_times_the_attempt_out(
    settings, production_database_url, receiver
):
    async def resolver(host: str, port: int) -> list[str]:
        if delivering:
            await asyncio.sleep(60)  # cancelled by the attempt's timeout (2 s in the tests)
        return ["8.8.8.8"]

    delivering = False
    url = f"https://slow-dns.example:{receiver.port}{receiver.prefix}/cb"
    with use_resolver(resolver):
        async with production_app(settings, production_database_url, "") as application:
            created = await create_merchant(application, url)
            assert created.status_code == 201, created.text
            delivering = True
            callback_id = await record(db(application), merchant_id=created.json()["merchant_id"], url=url)
            await wait_attempts(db(application), callback_id, 1)
            _, [attempt] = await load(db(application), callback_id)
    assert attempt.error == "timeout after 2 s"
    assert receiver.requests == []


# --- IPv4 numbers in every spelling, read as the system's resolver reads them -----------------------

SPELLINGS = [
    ("2130706433", "127.0.0.1"),
    ("0x7f000001", "127.0.0.1"),
    ("0X7F000001", "127.0.0.1"),
    ("017700000001", "127.0.0.1"),
    ("0177.0.0.1", "127.0.0.1"),
    ("0x7f.0.0.1", "127.0.0.1"),
    ("127.1", "127.0.0.1"),
    ("127.0.1", "127.0.0.1"),
    ("0x7f.1", "127.0.0.1"),
    ("0", "0.0.0.0"),
    ("169.254.43518", "169.254.169.254"),
    ("0xa9fea9fe", "169.254.169.254"),
    ("4294967295", "255.255.255.255"),
    ("000000000127.0.0.1", "87.0.0.1"),  # octal 127
]


@pytest.mark.parametrize(("host", "address"), SPELLINGS)
def test_numeric_hosts_are_read_as_inet_aton_reads_them(host, address):
    assert numeric_ipv4(host) == ipaddress.IPv4Address(address)
    assert socket.inet_ntoa(socket.inet_aton(host)) == address  # the C library agrees


@pytest.mark.parametrize("host", ["256.0.0.1", "1.2.3.4.5", "09.0.0.1", "0x.0x.0x.0xg", "4294967296", "1.16777216"])
def test_numbers_that_spell_no_address_are_not_hosts(host):
    assert numeric_ipv4(host) is None


_part = st.one_of(
    st.integers(0, 2**32 - 1).map(str),
    st.integers(0, 2**32 - 1).map(lambda n: f"0{n:o}"),
    st.integers(0, 2**32 - 1).map(lambda n: f"0x{n:x}"),
    st.integers(0, 2**32 - 1).map(lambda n: f"0X{n:X}"),
)


@hypothesis_settings(max_examples=300, deadline=None)
@given(st.lists(_part, min_size=1, max_size=4).map(".".join))
@example("0x7f.0.0.1")
def test_every_numeric_spelling_reads_as_the_c_library_reads_it(host):
    """Whatever IPv4 number a URL spells, the guard reads the address inet_aton would connect to."""
    try:
        expected = ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        expected = None
    assert numeric_ipv4(host) == expected
