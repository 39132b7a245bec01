"""`make demo`: a merchant goes through every product against a running `make run` service.

Reads the demo merchant from var/demo/, receives callbacks on a local receiver, verifies every
signature with kasir-client, and ends with a table of what happened and how long it took.

    token   access token (RSA-signed)
    wallet  create-payment → dummy payment → PAID callback; partial refund → REFUNDED callback;
            the operator replays the PAID callback → it comes with the id already seen, and is dropped
            (with the admin token: KASIR_ADMIN_TOKEN, else var/admin.token);
            a second payment → dummy payment → void → VOID callback
    va      one virtual account of each payment system, paid by the staging dummy payment, each callback
            verified and confirmed by inquiry: CLOSED paid once; OPEN (single use) paid any amount;
            PARTIAL paid in three parts; multi-use CLOSED paid twice, then cancelled
    link    one payment link per method, paid on its checkout page driven over HTTP like a browser:
            card through 3-D Secure (the staging test card and one-time password), DANA, QRIS and a
            VA (the staging pay button); each payment-page callback verified with the SDK (it says how
            the link was paid) and confirmed by reading the link
    bnpl    calculation → QR checkout → approval page → notification → status inquiry
    card    CLOSE charge with the 3-D Secure test card → the OTP page, driven over HTTP like a
            browser → SUCCESS callback; CLOSE charge with the declined test card → FAILED callback
    payout  one transfer of each outcome of the staging simulator (docs/merchant/payouts.md), on the
            disbursement token: an ordinary account → 00 at once; ...0002 → 03 → 00 and ...0003 → 03 → 06
            after the delay; each notification verified and the state confirmed by status inquiry;
            ...0004 and ...0005 refused by the rail, nothing held

KASIR_URL (default http://127.0.0.1:8000) and KASIR_DEMO_DIR (default var/demo) point it elsewhere.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import date
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urljoin, urlsplit

import httpx
from kasir_client import (
    APIError,
    AsyncClient,
    ChargeResult,
    Credentials,
    PaymentLinkResult,
    PayoutTransfer,
    VaCallback,
    VaPaymentResult,
    VaResult,
    WalletCallback,
    WalletResult,
    verify_bnpl_notification,
    verify_payment_page_callback,
    verify_payout_notification,
    verify_va_callback,
    verify_wallet_callback,
)
from rich.console import Console
from rich.status import Status
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
BASE_URL = os.environ.get("KASIR_URL", "http://127.0.0.1:8000")
DEMO_DIR = Path(os.environ.get("KASIR_DEMO_DIR", ROOT / "var" / "demo"))
console = Console()


@dataclass
class Received:
    path: str
    query: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """A small HTTP server on 127.0.0.1 that answers callbacks as a merchant must."""

    port: int = 0
    received: list[Received] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    _server: asyncio.Server | None = None
    _connections: set[asyncio.StreamWriter] = field(default_factory=set)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        """Stop listening and close the connections Kasir keeps open (the demo run in a test's own loop)."""
        if self._server is not None:
            self._server.close()
            for writer in list(self._connections):
                writer.close()
            await self._server.wait_closed()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections.add(writer)
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
                target = head[0].split(" ")[1]
                headers = {}
                for line in head[1:]:
                    if ":" in line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                path, _, query = target.partition("?")
                self.received.append(Received(path, query, headers, body))
                self.arrived.set()
                answer = b'{"message":"ok"}'
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                    + str(len(answer)).encode()
                    + b"\r\n\r\n"
                    + answer
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            # Kasir closed the connection, or the demo is over.
            writer.close()
        finally:
            self._connections.discard(writer)

    async def wait(self, path: str, count: int = 1, timeout: float = 30) -> list[Received]:
        deadline = time.monotonic() + timeout
        while True:
            matching = [r for r in self.received if r.path == path]
            if len(matching) >= count:
                return matching
            if time.monotonic() > deadline:
                raise TimeoutError(f"no callback at {path} after {timeout:.0f} s")
            self.arrived.clear()
            try:
                await asyncio.wait_for(self.arrived.wait(), 0.5)
            except TimeoutError:
                pass


@dataclass
class Step:
    product: str
    name: str
    run: Callable[[], Awaitable[str]]


# The staging test cards (README "Card charge"; also printed on the payment page).
CHALLENGE_CARD = "4000 0000 0000 3220"  # success behind the 3-D Secure one-time password
DECLINED_CARD = "4000 0000 0000 0002"  # declined by the issuer


def form_html(html: str, form_id: str) -> str:
    """The form `form_id` of a page (a page with two forms has a token per form)."""
    start = html.index(f'id="{form_id}"')
    return html[start : html.index("</form>", start)]


def hidden_fields(html: str) -> dict[str, str]:
    """The hidden inputs of a page's form (attempt number, CSRF token), as a browser would send them."""
    fields: dict[str, str] = {}
    for tag in re.findall(r"<input\b[^>]*>", html):
        attributes = dict(re.findall(r'(\w[\w-]*)="([^"]*)"', tag))
        if attributes.get("type") == "hidden" and "name" in attributes:
            fields[attributes["name"]] = unescape(attributes.get("value", ""))
    return fields


def staging_otp(html: str) -> str:
    """The one-time password the staging 3-D Secure page prints for the tester."""
    found = re.search(r'id="staging-otp"[^>]*>\s*([0-9]+)\s*<', html)
    if found is None:
        raise RuntimeError("the 3-D Secure page shows no staging one-time password")
    return found.group(1)


def rupiah(amount: int) -> str:
    return f"Rp{amount:,}".replace(",", ".")


@dataclass
class Demo:
    client: AsyncClient
    credentials: Credentials
    receiver: Receiver
    http: httpx.AsyncClient
    status: Status | None = None
    paid_wallet: tuple[WalletResult, str] | None = None  # (transaction, callback path) for the refund step
    admin_token: str | None = None  # to replay a callback as an operator would; without it, no replay step
    seen: set[str] = field(default_factory=set)  # X-Kasir-Callback-Id of every callback processed

    def progress(self, text: str) -> None:
        if self.status is not None:
            self.status.update(text)

    async def token(self) -> str:
        token = await self.client.access_token()
        return f"{len(token)}-character Bearer token, valid 900 s"

    # --- BNPL ---------------------------------------------------------------------------

    async def bnpl(self) -> str:
        item = {
            "itemId": "SKU-1",
            "name": "Headphones",
            "amount": {"value": "75000.00", "currency": "IDR"},
            "category": "ELEC",
            "qty": 2,
        }
        calc = await self.client.bnpl_calculate(
            {
                "amount": {"value": "150000.00", "currency": "IDR"},
                "itemDetails": [
                    {**item, "url": "https://shop.example/sku-1", "parentType": "SELLER", "parentId": "SELLER-1"}
                ],
            }
        )
        tenures = ", ".join(f"{o.tenure}×{o.monthly_installment}" for o in calc.options)
        callback_url = self.receiver.url("/bnpl")
        checkout = await self.client.bnpl_checkout(
            {
                "partnerReferenceNo": f"DEMO-{uuid.uuid4().hex[:12]}",
                "paymentDetails": {"amount": {"value": "150000.00", "currency": "IDR"}},
                "itemDetails": [item],
                "customerDetails": {"firstName": "Budi", "email": "budi@example.com", "phone": "081234567890"},
                "callbackUrl": callback_url,
            }
        )
        page = await self.http.get(checkout.qr_content or "")
        page.raise_for_status()
        # As a browser: the approval form's own fields (its CSRF token), and the tenure chosen.
        form = {**hidden_fields(form_html(page.text, "approve-form")), "tenure": "3"}
        approved = await self.http.post(f"{checkout.qr_content}/approve", data=form)
        if approved.status_code != 303:
            raise RuntimeError(f"approval answered {approved.status_code}")
        [notification] = await self.receiver.wait("/bnpl")
        event = verify_bnpl_notification(
            notification.body,
            notification.headers,
            client_secret=self.credentials.client_secret,
            callback_url=callback_url,
            merchant_id=self.credentials.merchant_id,
            hash_key=self.credentials.hash_key,  # svc-signature too
            partner_reference_no=checkout.partner_reference_no,
        )
        status = await self.client.bnpl_status(reference_no=checkout.reference_no)
        if event.latest_transaction_status != "00" or status.status != "00":
            raise RuntimeError(f"BNPL ended {event.latest_transaction_status}/{status.status}")
        return f"options {tenures}; approved 3 months; notification 00 verified; inquiry 00"

    # --- wallet -------------------------------------------------------------------------

    def _wallet_order(self, channel: str, amount: int) -> dict[str, Any]:
        reference = uuid.uuid4().hex[:12]
        return {
            "external_id": f"DEMO-W-{reference}",
            "order_id": f"DEMO-{reference}",
            "currency": "IDR",
            "payment_method": "wallet",
            "payment_channel": channel,
            "payment_details": {"amount": amount, "transaction_description": "Kopi Susu × 2"},
            "customer_details": {"email": "siti@example.id", "full_name": "Siti Rahayu", "phone": "081234567890"},
            "item_details": [{"item_id": "SKU-1", "name": "Kopi Susu", "amount": amount // 2, "qty": 2}],
            "wallet_details": {"id": "081234567890", "id_type": "HP"},
            "callback_url": self.receiver.url(f"/wallet/{reference}"),
        }

    @staticmethod
    def _ref(tx: WalletResult) -> dict[str, Any]:
        return {"transaction_id": tx.transaction_id, "external_id": tx.external_id, "order_id": tx.order_id}

    async def _wallet_callback(self, tx: WalletResult, path: str, count: int, status: str) -> WalletCallback:
        """The count-th callback at `path`, verified against our own order (header and query), and processed
        unless its X-Kasir-Callback-Id was seen already (delivery is at least once)."""
        callback = (await self.receiver.wait(path, count))[count - 1]
        event = verify_wallet_callback(
            callback.body,
            callback.headers,
            hash_key=self.credentials.hash_key,
            query=dict(parse_qsl(callback.query)),
            order=(tx.external_id or "", tx.order_id or ""),
        )
        if event.transaction_status != status:
            raise RuntimeError(f"callback says {event.transaction_status}, expected {status}")
        if event.callback_id in self.seen:
            return event  # seen: dropped, the order is shipped once
        if status == "PAID":  # the signature covers neither status nor amount: ask Kasir before shipping
            await self.client.confirm_wallet_payment(event, amount=tx.amount)
        if event.callback_id:
            self.seen.add(event.callback_id)
        return event

    async def _wallet_paid(self, order: dict[str, Any]) -> tuple[WalletResult, str]:
        path = urlsplit(order["callback_url"]).path
        self.progress(f"wallet: create-payment {order['payment_channel']} {rupiah(order['payment_details']['amount'])}")
        created = await self.client.wallet_create_payment(order)
        if created.transaction_status != "PENDING" or not created.payment_url:
            raise RuntimeError(f"create-payment answered {created.transaction_status}")
        self.progress(f"wallet: dummy payment of {created.transaction_id}")
        paid = await self.client.wallet_dummy_payment(
            {**self._ref(created), "payment_method": "wallet", "payment_channel": order["payment_channel"]}
        )
        if paid.transaction_status != "PAID":
            raise RuntimeError(f"dummy payment answered {paid.transaction_status}")
        self.progress("wallet: waiting for the PAID callback")
        await self._wallet_callback(created, path, 1, "PAID")
        return created, path

    async def wallet_pay(self) -> str:
        tx, path = await self._wallet_paid(self._wallet_order("DANA", 100_000))
        self.paid_wallet = (tx, path)
        return f"{tx.transaction_id} DANA {rupiah(tx.amount or 0)}: PENDING → PAID; PAID callback verified"

    async def wallet_refund(self) -> str:
        if self.paid_wallet is None:
            raise RuntimeError("no paid wallet transaction to refund (the payment step failed)")
        tx, path = self.paid_wallet
        self.progress(f"wallet: refund {rupiah(30_000)} of {tx.transaction_id}")
        refunded = await self.client.wallet_refund({**self._ref(tx), "refund_amount": 30_000, "reason": "one cup"})
        if refunded.transaction_status != "REFUNDED" or refunded.refunded_amount != 30_000:
            raise RuntimeError(f"refund answered {refunded.transaction_status} {refunded.refunded_amount}")
        await self._wallet_callback(tx, path, 2, "REFUNDED")
        inquiry = await self.client.wallet_inquiry(self._ref(tx))
        if inquiry.transaction_status != "REFUNDED":
            raise RuntimeError(f"inquiry answered {inquiry.transaction_status}")
        return f"{rupiah(30_000)} of {rupiah(tx.amount or 0)} refunded; REFUNDED callback verified; inquiry REFUNDED"

    async def wallet_replayed(self) -> str:
        if self.paid_wallet is None:
            raise RuntimeError("no paid wallet transaction (the payment step failed)")
        tx, path = self.paid_wallet
        paid = (await self.receiver.wait(path, 1))[0]
        event_id = paid.headers["x-kasir-callback-id"]
        self.progress(f"wallet: the operator replays callback {event_id}")
        answer = await self.http.post(
            f"{BASE_URL}/admin/callbacks/{event_id}/replay", headers={"Authorization": f"Bearer {self.admin_token}"}
        )
        if answer.status_code != 201:
            raise RuntimeError(f"replay answered {answer.status_code}: {answer.text}")
        event = await self._wallet_callback(tx, path, 3, "PAID")  # after PAID and REFUNDED
        if event.callback_id != event_id:
            raise RuntimeError(f"the replay came as callback {event.callback_id}, not {event_id}")
        return f"PAID callback replayed: X-Kasir-Callback-Id {event_id} (attempt {event.attempt}) seen, dropped"

    async def wallet_void(self) -> str:
        tx, path = await self._wallet_paid(self._wallet_order("SHOPEEPAY", 50_000))
        self.progress(f"wallet: void {tx.transaction_id}")
        voided = await self.client.wallet_void({**self._ref(tx), "reason": "customer cancelled"})
        if voided.transaction_status != "VOID":
            raise RuntimeError(f"void answered {voided.transaction_status}")
        await self._wallet_callback(tx, path, 2, "VOID")
        return f"{tx.transaction_id} SHOPEEPAY {rupiah(tx.amount or 0)}: PAID → VOID; both callbacks verified"

    # --- virtual accounts ---------------------------------------------------------------

    def _va_order(self, channel: str, system: str, amount: int | None, **details: Any) -> dict[str, Any]:
        reference = uuid.uuid4().hex[:12]
        return {
            "external_id": f"DEMO-V-{reference}",
            "order_id": f"DEMO-{reference}",
            "currency": "IDR",
            "payment_method": "bank_transfer",
            "payment_channel": channel,
            "payment_details": {
                "billing_name": "Toko Demo",
                "transaction_description": "Kopi beans",
                "payment_system": system,
                **({"amount": amount} if amount is not None else {}),
                **details,
            },
            "customer_details": {"email": "siti@example.id", "full_name": "Siti Rahayu", "phone": "081234567890"},
            "callback_url": self.receiver.url(f"/va/{reference}"),
        }

    @staticmethod
    def _va_ref(va: VaResult) -> dict[str, Any]:
        return {"transaction_id": va.transaction_id, "external_id": va.external_id, "order_id": va.order_id}

    async def _va_open(self, order: dict[str, Any]) -> VaResult:
        details = order["payment_details"]
        self.progress(f"va: create {order['payment_channel']} {details['payment_system']}")
        va = await self.client.create_va(order)
        if va.transaction_status != "PENDING" or not va.va_number:
            raise RuntimeError(f"create answered {va.transaction_status} {va.va_number!r}")
        return va

    async def _va_pay(self, va: VaResult, amount: int | None = None) -> VaPaymentResult:
        self.progress(f"va: the customer transfers {rupiah(amount or va.amount)} to {va.va_number} (dummy payment)")
        body: dict[str, Any] = {
            **self._va_ref(va),
            "payment_method": "bank_transfer",
            "payment_channel": va.payment_channel,
        }
        if amount is not None:
            body["amount"] = amount
        return await self.client.simulate_va_payment(body)

    async def _va_callbacks(self, va: VaResult, order: dict[str, Any], statuses: list[str]) -> list[VaCallback]:
        """The VA's callbacks, in the order of its events: each verified against our own order (header and query)
        and, unless its X-Kasir-Callback-Id was seen, confirmed by inquiry (the signature covers neither status
        nor amount)."""
        self.progress(f"va: waiting for {len(statuses)} callback(s) of {va.transaction_id}")
        received = await self.receiver.wait(urlsplit(order["callback_url"]).path, len(statuses))
        events = []
        for callback, status in zip(received, statuses, strict=True):
            event = verify_va_callback(
                callback.body,
                callback.headers,
                hash_key=self.credentials.hash_key,
                query=dict(parse_qsl(callback.query)),
                order=(va.external_id, va.order_id),
            )
            if event.transaction_status != status:
                raise RuntimeError(f"VA callback says {event.transaction_status}, expected {status}")
            if event.callback_id not in self.seen:
                await self.client.confirm_va_payment(event)
                if event.callback_id:
                    self.seen.add(event.callback_id)
            events.append(event)
        return events

    async def va_closed(self) -> str:
        order = self._va_order("BCA", "CLOSED", 150_000)
        va = await self._va_open(order)
        paid = await self._va_pay(va)  # CLOSED: the VA's own amount
        if paid.transaction_status != "PAID":
            raise RuntimeError(f"dummy payment answered {paid.transaction_status}")
        await self._va_callbacks(va, order, ["PAID"])
        return f"BCA {va.va_number} {rupiah(va.amount)}: PENDING → PAID (closed); callback verified, confirmed"

    async def va_open(self) -> str:
        order = self._va_order("BNI", "OPEN", None, is_multi_use=False)
        va = await self._va_open(order)
        await self._va_pay(va, 75_000)  # OPEN: any amount within the channel's limits
        [event] = await self._va_callbacks(va, order, ["PAID"])
        return f"BNI {va.va_number} OPEN, single use: the customer chose {rupiah(int(event.amount or 0))} → PAID"

    async def va_partial(self) -> str:
        order = self._va_order("BRI", "PARTIAL", 100_000)
        va = await self._va_open(order)
        states = [(await self._va_pay(va, part)).transaction_status for part in (30_000, 30_000, 40_000)]
        if states != ["PARTIALLY_PAID", "PARTIALLY_PAID", "PAID"]:
            raise RuntimeError(f"PARTIAL payments answered {states}")
        events = await self._va_callbacks(va, order, states)
        left = " → ".join(rupiah(int(e.remaining_amount or 0)) for e in events)
        return f"BRI {va.va_number} PARTIAL {rupiah(va.amount)} in 3 transfers; remaining {left}; 3 callbacks"

    async def va_multi_use(self) -> str:
        order = self._va_order("MANDIRI", "CLOSED", 50_000, is_multi_use=True)
        va = await self._va_open(order)
        for _ in range(2):
            if (await self._va_pay(va)).transaction_status != "PAID":
                raise RuntimeError("a payment into the multi-use VA was not PAID")
        self.progress(f"va: cancel {va.transaction_id}")
        cancelled = await self.client.cancel_va(self._va_ref(va))
        if cancelled.transaction_status != "CANCELLED" or cancelled.total_paid_amount != 100_000:
            raise RuntimeError(f"cancel answered {cancelled.transaction_status} {cancelled.total_paid_amount}")
        events = await self._va_callbacks(va, order, ["PAID", "PAID", "CANCELLED"])
        if len({e.reference_id for e in events[:2]}) != 2:
            raise RuntimeError("the two payments' callbacks share a reference_id")
        return f"MANDIRI {va.va_number} {rupiah(va.amount)} multi-use: PAID twice (two reference_ids) → CANCELLED"

    # --- payment links ------------------------------------------------------------------

    def _link_order(self) -> dict[str, Any]:
        reference = uuid.uuid4().hex[:12]
        return {
            "external_id": f"DEMO-L-{reference}",
            "order_id": f"DEMO-{reference}",
            "amount": 120_000,
            "description": "Kopi beans 1 kg",
            "customer_details": {
                "full_name": "Siti Rahayu",
                "email": "siti@example.id",
                "phone": "081234567890",
                "address": "Jl. Merdeka 1, Bandung",
            },
            "item_details": [{"item_id": "KOPI-1", "name": "Kopi beans 1 kg", "amount": 120_000, "qty": 1}],
            "selected_channels": [
                {"channel": "CARD"},
                {"channel": "DANA"},
                {"channel": "QRIS"},
                {"channel": "VA", "acq": "BCA"},
            ],
            "callback_url": self.receiver.url(f"/link/{reference}"),
            "success_redirect_url": "https://shop.example/thanks",
        }

    async def _choose(self, link: PaymentLinkResult, channel: str) -> str:
        """The customer presses the method's button on the link's page; the method's page it leads to."""
        page = await self.http.get(link.payment_url)
        page.raise_for_status()
        for form in re.findall(r"<form\b.*?</form>", page.text, re.S):
            fields = hidden_fields(form)
            if fields.get("channel") == channel:
                action = unescape(re.search(r'action="([^"]*)"', form).group(1))  # type: ignore[union-attr]
                if "wallet_id" in form:
                    fields["wallet_id"] = "081234567890"  # prefilled with the customer's phone
                chosen = await self.http.post(urljoin(str(page.url), action), data=fields)
                if chosen.status_code != 303:
                    raise RuntimeError(f"choosing {channel} answered {chosen.status_code}")
                return urljoin(str(page.url), chosen.headers["location"])
        raise RuntimeError(f"the link's page offers no {channel}")

    async def _press(self, url: str, form_id: str, **fields: str) -> httpx.Response:
        """Submit the form `form_id` of the page at `url` with its own hidden fields, as a browser would."""
        page = await self.http.get(url)
        page.raise_for_status()
        found = re.search(rf'<form\b[^>]*\bid="{form_id}"[^>]*>.*?</form>', page.text, re.S)
        if found is None:
            raise RuntimeError(f"{url} has no form {form_id}")
        form = found.group(0)
        action = unescape(re.search(r'action="([^"]*)"', form).group(1))  # type: ignore[union-attr]
        return await self.http.post(urljoin(str(page.url), action), data={**hidden_fields(form), **fields})

    async def _link_paid(self, channel: str, pay: Callable[[str], Awaitable[None]], expected: tuple[str, ...]) -> str:
        order = self._link_order()
        self.progress(f"link: create, {rupiah(order['amount'])}, four methods")
        link = await self.client.create_payment_link(order)
        if link.transaction_status != "PENDING" or not link.payment_url:
            raise RuntimeError(f"create answered {link.transaction_status}")
        self.progress(f"link: the customer chooses {channel} on {link.payment_url}")
        await pay(await self._choose(link, channel))
        self.progress(f"link: waiting for the SUCCESS callback of {link.transaction_id}")
        [callback] = await self.receiver.wait(urlsplit(order["callback_url"]).path)
        event = verify_payment_page_callback(
            callback.body, callback.headers, hash_key=self.credentials.hash_key, order=(link.external_id, link.order_id)
        )
        paid_by = (event.payment_method, event.payment_channel, event.acq)
        if event.transaction_status != "SUCCESS" or paid_by != expected:
            raise RuntimeError(f"callback says {event.transaction_status} {paid_by}, expected SUCCESS {expected}")
        await self.client.confirm_payment_link(event, amount=order["amount"])  # the signature covers no status
        paid = " / ".join(paid_by)
        return f"{link.transaction_id} {rupiah(link.amount)}: paid by {paid}; callback verified, confirmed"

    async def link_card(self) -> str:
        async def pay(card_page: str) -> None:
            self.progress("link: the card page, then 3-D Secure (the staging one-time password)")
            page = await self.http.get(card_page)
            page.raise_for_status()
            form = {
                **hidden_fields(page.text),
                "cardNumber": CHALLENGE_CARD.replace(" ", ""),
                "cardExpiredMonth": "12",
                "cardExpiredYear": str(date.today().year + 3),
                "cardCvn": "123",
                "cardHolderName": "Siti Rahayu",
                "tenor": "0",
            }
            challenge = await self.http.post(f"{card_page}/pay", data=form, follow_redirects=True)
            challenge.raise_for_status()
            otp = {**hidden_fields(challenge.text), "otp": staging_otp(challenge.text)}
            answer = await self.http.post(str(challenge.url), data=otp)
            if answer.status_code != 303:
                raise RuntimeError(f"the OTP form answered {answer.status_code}")

        return await self._link_paid("CARD", pay, ("CARD", "CARD", "BCA"))

    async def _wallet_pay(self, checkout: str) -> None:
        self.progress("link: the checkout's staging Pay")
        if (await self._press(checkout, "pay-form")).status_code != 303:
            raise RuntimeError("the checkout's Pay did not go through")

    async def link_dana(self) -> str:
        return await self._link_paid("DANA", self._wallet_pay, ("WALLET", "DANA", "DANA"))

    async def link_qris(self) -> str:
        return await self._link_paid("QRIS", self._wallet_pay, ("WALLET", "QRIS", "QRIS"))

    async def link_va(self) -> str:
        async def pay(va_page: str) -> None:
            self.progress("link: the VA's instructions, then the staging Pay (as the bank's transfer)")
            if (await self._press(va_page, "pay-form")).status_code != 303:
                raise RuntimeError("the VA page's Pay did not go through")

        return await self._link_paid("VA", pay, ("VIRTUAL_ACCOUNT", "VA", "BCA"))

    # --- card ---------------------------------------------------------------------------

    def _card_order(self, number: str) -> dict[str, Any]:
        reference = uuid.uuid4().hex[:12]
        address = {
            "fullName": "Siti Rahayu",
            "phone": "081234567890",
            "address": "Jl. Sudirman 1",
            "city": "Jakarta",
            "postalCode": "10220",
            "country": "ID",
        }
        return {
            "externalId": f"DEMO-C-{reference}",
            "orderId": f"DEMO-{reference}",
            "currency": "IDR",
            "paymentMethod": "card",
            "paymentChannel": "CARD",
            "paymentMode": "CLOSE",
            "paymentDetails": {"amount": 150_000, "isCustomerPayingFee": False, "transactionDescription": "Sepatu"},
            "itemDetails": [{"itemId": "SKU-2", "name": "Sepatu Lari", "amount": 75_000, "qty": 2}],
            "customerDetails": {
                "email": "siti@example.id",
                "fullName": "Siti Rahayu",
                "phone": "081234567890",
                "ipAddress": "203.0.113.7",
            },
            "billingAddress": address,
            "shippingAddress": address,
            "cardDetails": {
                "cardNumber": number,
                "cardExpiredMonth": "12",
                "cardExpiredYear": str(date.today().year + 3),
                "cardCvn": "123",
                "cardHolderName": "Siti Rahayu",
            },
            "returnUrl": "https://shop.example/return",
            "callbackUrl": self.receiver.url(f"/card/{reference}"),
        }

    async def _card_callback(self, order: dict[str, Any], status: str) -> str:
        path = urlsplit(order["callbackUrl"]).path
        [callback] = await self.receiver.wait(path)
        event = verify_payment_page_callback(
            callback.body,
            callback.headers,
            hash_key=self.credentials.hash_key,
            order=(order["externalId"], order["orderId"]),
        )
        if event.transaction_status != status:
            raise RuntimeError(f"payment-page callback says {event.transaction_status}, expected {status}")
        return event.response_message

    async def _charge(self, order: dict[str, Any]) -> ChargeResult:
        self.progress(f"card: CLOSE charge of {rupiah(order['paymentDetails']['amount'])}")
        result = await self.client.card_charge(order)
        if not result.is_success:
            raise RuntimeError(f"charge refused: {result.status_code} {result.message}")
        return result

    async def card_3ds(self) -> str:
        order = self._card_order(CHALLENGE_CARD)
        result = await self._charge(order)
        if result.payment_status != "PENDING" or not result.link:
            raise RuntimeError(f"charge answered {result.payment_status}, expected PENDING with a link")
        # The customer's browser: open the link, read the one-time password (staging prints it), submit.
        self.progress("card: 3-D Secure page (GET, read the OTP and the CSRF token, POST)")
        page = await self.http.get(result.link, follow_redirects=True)
        page.raise_for_status()
        form = {**hidden_fields(page.text), "otp": staging_otp(page.text)}
        answer = await self.http.post(str(page.url), data=form)
        location = answer.headers.get("location", "")
        if answer.status_code != 303 or "status=SUCCESS" not in location:
            raise RuntimeError(f"the OTP form answered {answer.status_code} {location}")
        self.progress("card: waiting for the SUCCESS callback")
        await self._card_callback(order, "SUCCESS")
        return f"{result.transaction_id}: PENDING + 3-D Secure link → OTP → SUCCESS; callback verified"

    async def card_declined(self) -> str:
        order = self._card_order(DECLINED_CARD)
        result = await self._charge(order)
        if result.payment_status != "PENDING":
            raise RuntimeError(f"charge answered {result.payment_status}, expected PENDING")
        self.progress("card: waiting for the FAILED callback")
        reason = await self._card_callback(order, "FAILED")
        return f"{result.transaction_id}: statusCode 00, PENDING (link stays open); FAILED callback verified: {reason}"

    # --- payouts (disbursement) ------------------------------------------------------------

    def _transfer_body(self, account_no: str, amount: int) -> dict[str, Any]:
        return {
            "partnerReferenceNo": f"DEMO-PAYOUT-{uuid.uuid4().hex[:12]}",
            "amount": {"value": f"{amount}.00", "currency": "IDR"},
            "beneficiaryAccountName": "Budi Santoso",
            "beneficiaryAccountNo": account_no,
            "beneficiaryBankCode": "014",
            "originatorInfos": [
                {"originatorCustomerNo": "1", "originatorCustomerName": "Toko Kopi", "originatorBankCode": "014"}
            ],
            "additionalInfo": {"remark": "Demo payout", "callbackUrl": self.receiver.url(f"/payout/{account_no}")},
        }

    async def _transfer_ends(self, account_no: str, amount: int, final: str) -> tuple[PayoutTransfer, str]:
        """A transfer to `account_no`, followed to its final state; its notification verified."""
        body = self._transfer_body(account_no, amount)
        sent = await self.client.transfer(body)  # type: ignore[arg-type]
        callback_url = body["additionalInfo"]["callbackUrl"]
        [notification] = await self.receiver.wait(f"/payout/{account_no}", timeout=90)
        event = verify_payout_notification(
            notification.body,
            notification.headers,
            client_secret=self.credentials.client_secret,
            callback_url=callback_url,
            merchant_id=self.credentials.merchant_id,
            hash_key=self.credentials.hash_key,
            partner_reference_no=sent.partner_reference_no,
        )
        status = await self.client.transfer_status(reference_no=sent.reference_no)
        if event.latest_transaction_status != final or status.status != final:
            raise RuntimeError(f"{account_no} ended {event.latest_transaction_status}/{status.status}, not {final}")
        return sent, event.reason or ""

    async def payout_sent(self) -> str:
        before = await self.client.balance()
        account = await self.client.account_inquiry(
            {"beneficiaryBankCode": "014", "beneficiaryAccountNo": "1234567890"}
        )
        sent, _ = await self._transfer_ends("1234567890", 150_000, "00")
        after = await self.client.balance()
        if before.ledger - after.ledger != 150_000:
            raise RuntimeError(f"the ledger moved {before.ledger - after.ledger}, not 150000")
        return (
            f"{sent.reference_no} to {account.account_name}: answered {sent.status} {sent.status_description}; "
            f"notification 00 verified; ledger −{rupiah(150_000)}"
        )

    async def payout_later(self) -> str:
        self.progress("payout: waiting for the simulator's delay (KASIR_SIMULATOR_PAYOUT_DELAY_SECONDS)")
        (sent, _), (failed, reason) = await asyncio.gather(
            self._transfer_ends("1234560002", 50_000, "00"), self._transfer_ends("1234560003", 60_000, "06")
        )
        return (
            f"{sent.reference_no}: {sent.status} → 00 Success; {failed.reference_no}: {failed.status} → 06 Failed "
            f"({reason}); both notifications verified"
        )

    async def payout_refused(self) -> str:
        before = await self.client.balance()
        codes = []
        for account_no in ("1234560004", "1234560005"):
            try:
                await self.client.transfer(self._transfer_body(account_no, 10_000))  # type: ignore[arg-type]
            except APIError as exc:
                codes.append(exc.code)
            else:
                raise RuntimeError(f"a transfer to {account_no} was accepted")
        after = await self.client.balance()
        if codes != ["4041811", "4031818"] or after.hold != before.hold or after.ledger != before.ledger:
            raise RuntimeError(f"refused {codes}; balance {before} → {after}")
        return "...0004: 4041811 Invalid Account; ...0005: 4031818 Inactive Account; nothing held"


def steps(demo: Demo) -> list[Step]:
    return [
        Step("token", "access token (RSA-signed request)", demo.token),
        Step("wallet", "create-payment → dummy payment → PAID callback", demo.wallet_pay),
        Step("wallet", "partial refund → REFUNDED callback → inquiry", demo.wallet_refund),
        *(
            [Step("wallet", "operator replays the PAID callback → same id, seen", demo.wallet_replayed)]
            if demo.admin_token
            else []
        ),
        Step("wallet", "second payment → dummy payment → void → VOID callback", demo.wallet_void),
        Step("va", "CLOSED → dummy payment → PAID callback", demo.va_closed),
        Step("va", "OPEN, single use → any amount → PAID callback", demo.va_open),
        Step("va", "PARTIAL → three transfers → PARTIALLY_PAID, PARTIALLY_PAID, PAID", demo.va_partial),
        Step("va", "multi-use → paid twice → cancelled → three callbacks", demo.va_multi_use),
        Step("link", "payment link → card, 3-D Secure → SUCCESS callback", demo.link_card),
        Step("link", "payment link → DANA checkout → SUCCESS callback", demo.link_dana),
        Step("link", "payment link → QRIS → SUCCESS callback", demo.link_qris),
        Step("link", "payment link → VA transfer → SUCCESS callback", demo.link_va),
        Step("bnpl", "calculate → checkout → approve → notification", demo.bnpl),
        Step("card", "CLOSE charge, 3-D Secure card → OTP page → SUCCESS callback", demo.card_3ds),
        Step("card", "CLOSE charge, declined card → FAILED callback", demo.card_declined),
        Step("payout", "transfer to an ordinary account → 00 at once → notification", demo.payout_sent),
        Step("payout", "…0002 and …0003 → 03 → 00 and 06 after the delay → notifications", demo.payout_later),
        Step("payout", "…0004 and …0005 refused by the rail → nothing held", demo.payout_refused),
    ]


def admin_token() -> str | None:
    """KASIR_ADMIN_TOKEN, else the one `make run` generated (KASIR_DATA_DIR, default var/admin.token)."""
    token = os.environ.get("KASIR_ADMIN_TOKEN")
    if token:
        return token
    path = Path(os.environ.get("KASIR_DATA_DIR", ROOT / "var")) / "admin.token"
    return path.read_text().strip() if path.exists() else None


async def main() -> int:
    credentials_file = DEMO_DIR / "credentials.json"
    if not credentials_file.exists():
        console.print(f"[red]{credentials_file} not found: start the service with `make run` first.[/red]")
        return 2
    credentials = Credentials.from_files(credentials_file, DEMO_DIR / "private.pem")
    try:
        httpx.get(f"{BASE_URL}/readyz", timeout=2).raise_for_status()
    except httpx.HTTPError:
        console.print(f"[red]Kasir is not answering at {BASE_URL}: start it with `make run` first.[/red]")
        return 2
    receiver = Receiver()
    await receiver.start()
    results: list[tuple[Step, bool, str, float]] = []
    async with AsyncClient(BASE_URL, credentials) as client, httpx.AsyncClient(timeout=20) as http:
        demo = Demo(client, credentials, receiver, http, admin_token=admin_token())
        for step in steps(demo):
            started = time.perf_counter()
            with console.status(f"{step.product}: {step.name}") as status:
                demo.status = status
                try:
                    detail, ok = await step.run(), True
                except Exception as exc:  # the demo reports every failure and goes on
                    detail, ok = f"{type(exc).__name__}: {exc}", False
            elapsed = time.perf_counter() - started
            results.append((step, ok, detail, elapsed))
            mark = "[green]✓[/green]" if ok else "[red]✗[/red]"
            console.print(f"{mark} {step.product}: {step.name} ({elapsed * 1000:.0f} ms)")
    table = Table(title=f"Kasir demo against {BASE_URL}")
    for column in ("product", "step", "result", "ms"):
        table.add_column(column)
    for step, ok, detail, elapsed in results:
        table.add_row(step.product, step.name, ("[green]" if ok else "[red]") + detail, f"{elapsed * 1000:.0f}")
    console.print(table)
    console.print(f"callbacks received and verified: {len(receiver.received)}")
    return 0 if all(ok for _step, ok, _detail, _elapsed in results) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
