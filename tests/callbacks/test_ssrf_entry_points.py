"""Issue 24, deliverable 5: every non-public form of a callback URL, refused in production at every entry
point that takes one, in that route's own 400 format naming its field.

A production app of its own (tests/callbacks/production.py) with no callback worker: nothing is ever
delivered from here. Names resolve through an injected resolver (kasir.callbacks.ssrf.use_resolver), so no
look-up leaves the process; IP literals and numeric spellings never reach a resolver at all.
"""

from __future__ import annotations

import html
import re
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest
from fastapi import FastAPI

from kasir.callbacks.ssrf import use_resolver
from tests.callbacks.helpers import give_up, record
from tests.callbacks.production import isolated_database, production_app
from tests.conftest import TEST_ADMIN_TOKEN
from tests.console.helpers import make_user, page_csrf, sign_in
from tests.support import builders
from tests.support.builders import make_merchant, public_pem, rsa_key, unique_name
from tests.support.wire import wallet
from tests.support.wire.card import charge_body, post_charge
from tests.support.wire.snap import access_token, checkout_body, post_signed

ADMIN = {"Authorization": f"Bearer {TEST_ADMIN_TOKEN}"}
BNPL_CHECKOUT = "/v1.0/bnpl/qr-checkout"

# The injected resolver's answers; any other name does not resolve (no DNS is ever asked).
NAMES = {
    "public.example": ["8.8.8.8", "2606:4700:4700::1111"],
    "localhost": ["127.0.0.1", "::1"],
    "loopback.example": ["127.0.0.1"],
    "private.example": ["10.1.2.3"],
    "metadata.example": ["169.254.169.254"],
    "mixed.example": ["8.8.8.8", "192.168.1.10"],  # one public answer does not make the others safe
    "mapped.example": ["::ffff:127.0.0.1"],
    "sixtofour.example": ["2002:a9fe:a9fe::1"],
}


async def resolve(host: str, port: int) -> list[str]:
    name = host.removesuffix(".")  # a fully qualified name, as DNS reads it
    if name in NAMES:
        return NAMES[name]
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


NON_PUBLIC = "resolves to a non-public address"

# (URL, what the refusal says): every form of deliverable 5.
FORMS = [
    # not https, or not a URL
    ("http://public.example/cb", "must be an https URL"),
    ("ftp://public.example/cb", "must be an absolute http(s) URL"),
    ("https:///no-host", "must be an absolute http(s) URL"),
    ("https://public.example:99999/cb", "has an invalid port"),
    ("https://public.example:0/cb", "has an invalid port"),
    # loopback
    ("https://127.0.0.1/cb", f"{NON_PUBLIC} (127.0.0.1)"),
    ("https://127.8.9.10:8443/cb", f"{NON_PUBLIC} (127.8.9.10)"),
    ("https://[::1]/cb", f"{NON_PUBLIC} (::1)"),
    ("https://localhost/cb", f"{NON_PUBLIC} (127.0.0.1)"),
    ("https://LOOPBACK.example./cb", f"{NON_PUBLIC} (127.0.0.1)"),
    ("https://public.example@127.0.0.1/cb", f"{NON_PUBLIC} (127.0.0.1)"),  # userinfo: the host is after the @
    # private
    ("https://10.0.0.8/cb", f"{NON_PUBLIC} (10.0.0.8)"),
    ("https://172.16.0.1/cb", f"{NON_PUBLIC} (172.16.0.1)"),
    ("https://192.168.1.1/cb", f"{NON_PUBLIC} (192.168.1.1)"),
    ("https://[fc00::1]/cb", f"{NON_PUBLIC} (fc00::1)"),
    ("https://[fd00:ec2::254]/cb", f"{NON_PUBLIC} (fd00:ec2::254)"),
    # link-local, the cloud metadata address
    ("https://169.254.169.254/latest/meta-data/", f"{NON_PUBLIC} (169.254.169.254)"),
    ("https://[fe80::1]/cb", f"{NON_PUBLIC} (fe80::1)"),
    ("https://[fe80::1%25eth0]/cb", NON_PUBLIC),
    # CGNAT, IETF protocol assignments, benchmarking, documentation
    ("https://100.64.0.1/cb", f"{NON_PUBLIC} (100.64.0.1)"),
    ("https://100.100.100.200/cb", f"{NON_PUBLIC} (100.100.100.200)"),
    ("https://192.0.0.8/cb", f"{NON_PUBLIC} (192.0.0.8)"),
    ("https://198.18.0.1/cb", f"{NON_PUBLIC} (198.18.0.1)"),
    ("https://192.0.2.1/cb", f"{NON_PUBLIC} (192.0.2.1)"),
    ("https://[2001:db8::1]/cb", f"{NON_PUBLIC} (2001:db8::1)"),
    # multicast, reserved, broadcast, unspecified, site-local
    ("https://224.0.0.1/cb", f"{NON_PUBLIC} (224.0.0.1)"),
    ("https://[ff02::1]/cb", f"{NON_PUBLIC} (ff02::1)"),
    ("https://240.0.0.1/cb", f"{NON_PUBLIC} (240.0.0.1)"),
    ("https://255.255.255.255/cb", f"{NON_PUBLIC} (255.255.255.255)"),
    ("https://0.0.0.0/cb", f"{NON_PUBLIC} (0.0.0.0)"),
    ("https://[::]/cb", f"{NON_PUBLIC} (::)"),
    ("https://[fec0::1]/cb", f"{NON_PUBLIC} (fec0::1)"),
    # IPv6 forms carrying an IPv4 address: mapped, compatible, 6to4, NAT64; Teredo
    ("https://[::ffff:127.0.0.1]/cb", "which carries 127.0.0.1)"),
    ("https://[::ffff:a9fe:a9fe]/cb", "which carries 169.254.169.254)"),
    ("https://[::127.0.0.1]/cb", f"{NON_PUBLIC} (::7f00:1, which carries 127.0.0.1)"),
    ("https://[::a00:1]/cb", f"{NON_PUBLIC} (::a00:1, which carries 10.0.0.1)"),
    ("https://[2002:7f00:1::1]/cb", f"{NON_PUBLIC} (2002:7f00:1::1, which carries 127.0.0.1)"),
    ("https://[2002:a9fe:a9fe::1]/cb", f"{NON_PUBLIC} (2002:a9fe:a9fe::1, which carries 169.254.169.254)"),
    ("https://[64:ff9b::7f00:1]/cb", f"{NON_PUBLIC} (64:ff9b::7f00:1, which carries 127.0.0.1)"),
    ("https://[64:ff9b::a9fe:a9fe]/cb", f"{NON_PUBLIC} (64:ff9b::a9fe:a9fe, which carries 169.254.169.254)"),
    ("https://[64:ff9b:1::808:808]/cb", f"{NON_PUBLIC} (64:ff9b:1::808:808)"),  # local-use NAT64, to anywhere
    ("https://[3fff::1]/cb", f"{NON_PUBLIC} (3fff::1)"),
    ("https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/cb", f"{NON_PUBLIC} (2001:0:4136:e378:8000:63bf:3fff:fdd2)"),
    # IPv4 numbers in the spellings a resolver reads (inet_aton, WHATWG URL)
    ("https://2130706433/cb", f"{NON_PUBLIC} (127.0.0.1)"),
    ("https://0x7f000001/cb", f"{NON_PUBLIC} (127.0.0.1)"),
    ("https://017700000001/cb", f"{NON_PUBLIC} (127.0.0.1)"),
    ("https://0177.0.0.1/cb", f"{NON_PUBLIC} (127.0.0.1)"),
    ("https://0x7f.0.0.1/cb", f"{NON_PUBLIC} (127.0.0.1)"),
    ("https://0X7F.0x0.0.0x1/cb", f"{NON_PUBLIC} (127.0.0.1)"),
    ("https://127.1/cb", f"{NON_PUBLIC} (127.0.0.1)"),
    ("https://0x7f.1/cb", f"{NON_PUBLIC} (127.0.0.1)"),
    ("https://127.0.1/cb", f"{NON_PUBLIC} (127.0.0.1)"),
    ("https://127.0.0.1./cb", f"{NON_PUBLIC} (127.0.0.1)"),
    ("https://0/cb", f"{NON_PUBLIC} (0.0.0.0)"),
    ("https://2852039166/cb", f"{NON_PUBLIC} (169.254.169.254)"),
    ("https://0xa9.0xfe.0xa9.0xfe/cb", f"{NON_PUBLIC} (169.254.169.254)"),
    ("https://0251.0376.0251.0376/cb", f"{NON_PUBLIC} (169.254.169.254)"),
    ("https://169.254.43518/cb", f"{NON_PUBLIC} (169.254.169.254)"),
    ("https://10.1/cb", f"{NON_PUBLIC} (10.0.0.1)"),
    ("https://\uff11\uff12\uff17\uff0e\uff10\uff0e\uff10\uff0e\uff11/cb", f"{NON_PUBLIC} (127.0.0.1)"),  # full-width
    ("https://256.0.0.1/cb", "is not a valid IPv4 address"),
    ("https://1.2.3.4.5/cb", "is not a valid IPv4 address"),
    ("https://09.0.0.1/cb", "is not a valid IPv4 address"),
    # names resolving to any of these
    ("https://private.example/cb", f"{NON_PUBLIC} (10.1.2.3)"),
    ("https://metadata.example/latest/meta-data/", f"{NON_PUBLIC} (169.254.169.254)"),
    ("https://mixed.example/cb", f"{NON_PUBLIC} (192.168.1.10)"),
    ("https://mapped.example/cb", "which carries 127.0.0.1)"),
    ("https://sixtofour.example/cb", f"{NON_PUBLIC} (2002:a9fe:a9fe::1, which carries 169.254.169.254)"),
    ("https://nowhere.example/cb", "does not resolve"),
    ("https://bad%20host.example/cb", "is not a valid name"),
]
ACCEPTED = [
    "https://public.example/cb",
    "https://public.example:8443/cb?order=1",
    "https://8.8.8.8/cb",
    "https://134744072/cb",  # 8.8.8.8
    "https://[2606:4700:4700::1111]/cb",
    "https://[::ffff:8.8.8.8]/cb",
]


@dataclass
class Refusal:
    status: int
    field: str  # the field the answer names
    reason: str | None  # what it says about it (SNAP says only the field)


@dataclass
class EntryPoints:
    app: FastAPI
    client: httpx.AsyncClient
    merchant: builders.TestMerchant
    bnpl_token: str
    console: httpx.AsyncClient  # signed in as the merchant's admin (My merchant)


@pytest.fixture(scope="module")
def resolver() -> Iterator[None]:
    with use_resolver(resolve):
        yield


@pytest.fixture(scope="module")
async def entry(settings, postgres, data_dir, resolver) -> AsyncIterator[EntryPoints]:
    database_url = await isolated_database(settings, postgres, data_dir)
    async with production_app(settings, database_url, "", embedded_worker=False) as application:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://kasir.test") as http:
            merchant = await make_merchant(application, callback_url="https://public.example/default")
            # https: the console's cookies are Secure when the public URL is.
            async with httpx.AsyncClient(transport=transport, base_url="https://kasir.test") as console:
                email = await make_user(application, role="merchant_admin", merchant_id=merchant.id)
                assert (await sign_in(console, email)).status_code == 303
                yield EntryPoints(application, http, merchant, await access_token(http, merchant), console)


def plain(answer: httpx.Response) -> Refusal:
    body = answer.json()
    assert set(body) == {"error", "message", "request_id"}, body
    field, _, reason = body["message"].partition(" ")
    return Refusal(answer.status_code, field, reason)


async def merchant_created(entry: EntryPoints, url: str) -> Refusal | None:
    body = {"name": unique_name(), "public_key": public_pem(rsa_key()), "callback_url": url}
    answer = await entry.client.post("/admin/merchants", headers=ADMIN, json=body)
    return None if answer.status_code == 201 else plain(answer)


async def merchant_default_changed(entry: EntryPoints, url: str) -> Refusal | None:
    path = f"/admin/merchants/{entry.merchant.id}/callback-url"
    answer = await entry.client.post(path, headers=ADMIN, json={"callback_url": url})
    return None if answer.status_code == 200 else plain(answer)


async def my_merchant_default_changed(entry: EntryPoints, url: str) -> Refusal | None:
    csrf = await page_csrf(entry.console, "/console/my-merchant")
    data = {"callback_url": url, "csrf_token": csrf}
    answer = await entry.console.post("/console/my-merchant/callback-url", data=data)
    if answer.status_code == 303:
        return None
    found = re.search(r'id="my-error" data-field="([^"]+)">([^<]+)<', answer.text)
    assert found, answer.text
    label, _, reason = html.unescape(found.group(2)).partition(": ")
    assert label == "Callback URL", found.group(2)
    return Refusal(answer.status_code, found.group(1), reason)


async def wallet_payment(entry: EntryPoints, url: str) -> Refusal | None:
    answer = await wallet.post_wallet(entry.client, entry.merchant, wallet.CREATE, wallet.create_body(url))
    if answer.status_code == 200:
        return None
    body = answer.json()
    assert set(body) == {"response_code", "response_message"}, body
    assert body["response_code"] == "01", body
    field, _, reason = body["response_message"].partition(" ")
    return Refusal(answer.status_code, field, reason)


async def _card(entry: EntryPoints, body: dict[str, object]) -> Refusal | None:
    answer = await post_charge(entry.client, entry.merchant, body)
    if answer.status_code == 200:
        return None
    data = answer.json()
    assert (data["statusCode"], data["statusMessage"]) == ("400", "VALIDATION_ERROR"), data
    [error] = data["errors"]
    return Refusal(answer.status_code, error["field"], error["message"])


async def card_charge(entry: EntryPoints, url: str) -> Refusal | None:
    return await _card(entry, charge_body(mode="OPEN", number=None, callback_url=url))


async def card_ewallet_charge(entry: EntryPoints, url: str) -> Refusal | None:
    body = charge_body(mode="OPEN", number=None, channel="DANA", callback_url=url, paymentMethod="ewallet")
    return await _card(entry, body)


async def bnpl_checkout(entry: EntryPoints, url: str) -> Refusal | None:
    answer = await post_signed(entry.client, entry.merchant, BNPL_CHECKOUT, checkout_body(url), token=entry.bnpl_token)
    body = answer.json()
    if answer.status_code == 200:
        return None
    assert body["responseCode"] == "4009201", body
    prefix = "Invalid Field Format "
    assert body["responseMessage"].startswith(prefix), body
    return Refusal(answer.status_code, body["responseMessage"].removeprefix(prefix), None)


async def replay_to_url(entry: EntryPoints, url: str) -> Refusal | None:
    # An event of its own each time, given up: one with a delivery in flight is refused (409) whatever the URL.
    database = entry.app.state.database
    callback_id = await record(
        database, merchant_id=entry.merchant.id, url="https://public.example/cb", transaction_ref=unique_name("TX")
    )
    await give_up(database, callback_id)
    path = f"/admin/callbacks/{callback_id}/replay-to"
    answer = await entry.client.post(path, headers=ADMIN, json={"target": "url", "url": url})
    return None if answer.status_code == 201 else plain(answer)


async def recover_to_url(entry: EntryPoints, url: str) -> Refusal | None:
    body = {"merchant_id": entry.merchant.id, "since": "2026-11-01T00:00:00+07:00", "url": url}
    answer = await entry.client.post("/admin/callbacks/recover", headers=ADMIN, json=body)
    return None if answer.status_code == 200 else plain(answer)


EntryPoint = Callable[[EntryPoints, str], Awaitable[Refusal | None]]
ENTRY_POINTS: list[tuple[EntryPoint, str]] = [
    (merchant_created, "callback_url"),
    (merchant_default_changed, "callback_url"),
    (my_merchant_default_changed, "callback_url"),
    (wallet_payment, "callback_url"),
    (card_charge, "callbackUrl"),
    (card_ewallet_charge, "callbackUrl"),
    (bnpl_checkout, "callbackUrl"),
    (replay_to_url, "url"),
    (recover_to_url, "url"),
]


@pytest.mark.parametrize(("entry_point", "field"), ENTRY_POINTS, ids=[e.__name__ for e, _ in ENTRY_POINTS])
async def test_every_non_public_form_is_refused_at_every_entry_point(
    entry: EntryPoints, entry_point: EntryPoint, field: str
) -> None:
    wrong: list[str] = []
    for url, reason in FORMS:
        refusal = await entry_point(entry, url)
        if refusal is None:
            wrong.append(f"{url}: accepted")
        elif refusal.status != 400 or refusal.field != field:
            wrong.append(f"{url}: {refusal}")
        elif refusal.reason is not None and reason not in refusal.reason:
            wrong.append(f"{url}: says {refusal.reason!r}, not {reason!r}")
    assert not wrong, "\n".join(wrong)
    for url in ACCEPTED:  # the same route takes a public https URL: the refusals were the URL's
        assert await entry_point(entry, url) is None, url
