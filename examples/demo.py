"""`make demo`: a merchant goes through every product against a running `make run` service.

Reads the demo merchant from var/demo/, receives callbacks on a local receiver, verifies every
signature with kasir-client, and ends with a table of what happened and how long it took.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from kasir_client import AsyncClient, Credentials, verify_bnpl_notification
from rich.console import Console
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

    async def start(self) -> None:
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
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
            # The merchant closed the connection, or the demo is over.
            writer.close()

    async def wait(self, path: str, count: int = 1, timeout: float = 20) -> list[Received]:
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


@dataclass
class Demo:
    client: AsyncClient
    credentials: Credentials
    receiver: Receiver
    http: httpx.AsyncClient

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
        approved = await self.http.post(f"{checkout.qr_content}/approve", data={"tenure": "3"})
        if approved.status_code != 303:
            raise RuntimeError(f"approval answered {approved.status_code}")
        [notification] = await self.receiver.wait("/bnpl")
        event = verify_bnpl_notification(
            notification.body,
            notification.headers,
            client_secret=self.credentials.client_secret,
            callback_url=callback_url,
            merchant_id=self.credentials.merchant_id,
        )
        status = await self.client.bnpl_status(reference_no=checkout.reference_no)
        if event.latest_transaction_status != "00" or status.status != "00":
            raise RuntimeError(f"BNPL ended {event.latest_transaction_status}/{status.status}")
        return f"options {tenures}; approved 3 months; notification 00 verified; inquiry 00"


def steps(demo: Demo) -> list[Step]:
    return [
        Step("token", "access token (RSA-signed request)", demo.token),
        Step("bnpl", "calculate → checkout → approve → notification", demo.bnpl),
    ]


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
        demo = Demo(client, credentials, receiver, http)
        for step in steps(demo):
            started = time.perf_counter()
            with console.status(f"{step.product}: {step.name}"):
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
