"""What `make bench` sends. Each scenario builds its requests before the clock starts."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from kasir_client import Credentials
from kasir_client._client import _Core

BIN = Path(sys.executable).parent
# Unique requests are built for this rate (req/s) times the run's length, with headroom. A faster
# run sends them again from the first (bench/lua/replay.lua), and Kasir refuses each as a duplicate:
# the run's errors column counts them, and the benchmark fails.
MAX_EXPECTED_RPS = 5000


def raw_request(port: int, method: str, path: str, headers: dict[str, str], body: bytes) -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    head += f"Content-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def write_requests_file(path: Path, requests: list[bytes]) -> None:
    """Requests as `<length>\n<bytes>` records, read by bench/lua/replay.lua.

    A data file, not a Lua chunk: a chunk of more than 65536 string constants does not load.
    """
    with path.open("wb") as handle:
        for request in requests:
            handle.write(b"%d\n" % len(request))
            handle.write(request)


@dataclass
class BenchContext:
    workdir: Path
    env: dict[str, str]
    callback_url: str
    server_port: int
    credentials: Credentials
    base_url: str = ""
    state: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def create(cls, workdir: Path, env: dict[str, str], callback_url: str, server_port: int) -> BenchContext:
        created = subprocess.run(
            [
                str(BIN / "kasir"),
                "merchant",
                "create",
                "--name",
                "Bench Merchant",
                "--generate-key",
                str(workdir / "keys"),
                "--callback-url",
                callback_url,
                "--json",
            ],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        (workdir / "credentials.json").write_text(created.stdout)
        credentials = Credentials.from_files(workdir / "credentials.json", workdir / "keys" / "private.pem")
        return cls(workdir, env, callback_url, server_port, credentials)

    @property
    def signer(self) -> _Core:
        return _Core(self.base_url, self.credentials)

    def raw(self, method: str, path: str, headers: dict[str, str], body: bytes) -> bytes:
        return raw_request(self.server_port, method, path, headers, body)

    def routes(self) -> set[str]:
        if "routes" not in self.state:
            self.state["routes"] = set(httpx.get(f"{self.base_url}/openapi.json").json()["paths"])
        return set(self.state["routes"])

    def callback_benchmarks(self, server: Any, receipts: Path, log: Path, phases: set[str]) -> dict[str, Any]:
        from bench.callbacks import run_callback_benchmarks

        return run_callback_benchmarks(self, server, receipts, log, phases)


class Scenario:
    name = ""
    route: str | None = None
    unavailable_reason = "its endpoint is not in this build"

    def available(self, ctx: BenchContext) -> bool:
        return self.route is None or self.route in ctx.routes()

    def prepare(self, ctx: BenchContext) -> None:
        """Work before the first run (objects the requests refer to)."""

    def build(self, ctx: BenchContext, count: int) -> list[bytes]:
        raise NotImplementedError

    def unique(self) -> bool:
        return False

    def write_requests(self, ctx: BenchContext, path: Path, concurrency: int, seconds: float) -> None:
        count = int(MAX_EXPECTED_RPS * seconds * 1.2) if self.unique() else max(2, concurrency)
        write_requests_file(path, self.build(ctx, count))


CARD_BODY: dict[str, Any] = {
    "externalId": "EXT",
    "orderId": "ORD",
    "currency": "IDR",
    "paymentMethod": "card",
    "paymentChannel": "CARD",
    "paymentMode": "OPEN",
    "paymentDetails": {"amount": 150000, "isCustomerPayingFee": False, "transactionDescription": "Sepatu lari"},
    "itemDetails": [{"itemId": "SKU-1", "name": "Sepatu lari", "amount": 150000, "qty": 1}],
    "customerDetails": {
        "email": "budi@example.com",
        "fullName": "Budi Santoso",
        "phone": "081234567890",
        "ipAddress": "127.0.0.1",
    },
    "billingAddress": {
        "fullName": "Budi Santoso",
        "phone": "081234567890",
        "address": "Jl. Merdeka 1",
        "city": "Jakarta",
        "postalCode": "10110",
        "country": "ID",
    },
    "shippingAddress": {
        "fullName": "Budi Santoso",
        "phone": "081234567890",
        "address": "Jl. Merdeka 1",
        "city": "Jakarta",
        "postalCode": "10110",
        "country": "ID",
    },
    "returnUrl": "https://merchant.example/return",
}


class Ceiling(Scenario):
    """Same framework, middleware and server; parses the card charge body and answers."""

    name = "ceiling"
    route = None

    def build(self, ctx: BenchContext, count: int) -> list[bytes]:
        body = json.dumps(CARD_BODY, separators=(",", ":")).encode()
        return [ctx.raw("POST", "/bench/ceiling", {"Content-Type": "application/json"}, body)] * count


class AccessToken(Scenario):
    name = "access-token"
    route = "/auth/merchants/v1.0/access-token/b2b"

    def build(self, ctx: BenchContext, count: int) -> list[bytes]:
        # One signature stays valid for the allowed skew (5 min): the token endpoint takes replays.
        request = ctx.signer._token_request("payment")
        return [ctx.raw(request.method, request.path, request.headers, request.body)] * count


def _bnpl_item(**extra: Any) -> dict[str, Any]:
    return {
        "itemId": "SKU-1",
        "name": "Headphones",
        "amount": {"value": "75000.00", "currency": "IDR"},
        "category": "ELEC",
        "qty": 2,
        **extra,
    }


class _Snap(Scenario):
    """A SNAP request signed per request (symmetric, with a token) and a fresh X-EXTERNAL-ID."""

    path = ""

    def unique(self) -> bool:
        return True

    def prepare(self, ctx: BenchContext) -> None:
        from kasir_client import Client

        with Client(ctx.base_url, ctx.credentials) as client:
            ctx.state["token"] = client.access_token()

    def body(self, ctx: BenchContext, n: int) -> dict[str, Any]:
        raise NotImplementedError

    def build(self, ctx: BenchContext, count: int) -> list[bytes]:
        signer, token = ctx.signer, ctx.state["token"]
        run = ctx.state["run"] = ctx.state.get("run", 0) + 1
        requests = []
        for n in range(count):
            body = json.dumps(self.body(ctx, run * 10_000_000 + n), separators=(",", ":")).encode()
            request = signer._snap_request(self.path, body, f"{run}{n:09d}", token)
            requests.append(ctx.raw(request.method, request.path, request.headers, request.body))
        return requests


class BnplCalculation(_Snap):
    name = "bnpl-calculation"
    route = path = "/v1.0/bnpl/payment-calculation"

    def body(self, ctx: BenchContext, n: int) -> dict[str, Any]:
        item = _bnpl_item(url="https://shop.example/sku-1", parentType="SELLER", parentId="SELLER-1")
        return {"amount": {"value": "150000.00", "currency": "IDR"}, "itemDetails": [item]}


class BnplCheckout(_Snap):
    name = "bnpl-checkout"
    route = path = "/v1.0/bnpl/qr-checkout"

    def body(self, ctx: BenchContext, n: int) -> dict[str, Any]:
        return {
            "partnerReferenceNo": f"BENCH-{n}",
            "paymentDetails": {"amount": {"value": "150000.00", "currency": "IDR"}},
            "itemDetails": [_bnpl_item()],
            "customerDetails": {"firstName": "Budi", "email": "budi@example.com", "phone": "081234567890"},
            "callbackUrl": ctx.callback_url,
        }


class CardCharge(Scenario):
    """OPEN mode (the SDK's hosted-page flow): a unique orderId, externalId and idempotency key per request."""

    name = "card-charge"
    route = "/card-v2/v1/charge"

    def unique(self) -> bool:
        return True

    def build(self, ctx: BenchContext, count: int) -> list[bytes]:
        signer = ctx.signer
        run = ctx.state["card-run"] = ctx.state.get("card-run", 0) + 1
        requests = []
        for n in range(count):
            body = {**CARD_BODY, "externalId": f"EXT-{run}-{n}", "orderId": f"ORD-{run}-{n}"}
            request = signer._card_request(body, f"IDEM-{run}-{n}")
            requests.append(ctx.raw(request.method, request.path, request.headers, request.body))
        return requests


def wallet_body(external_id: str, order_id: str, callback_url: str) -> dict[str, Any]:
    return {
        "external_id": external_id,
        "order_id": order_id,
        "currency": "IDR",
        "payment_method": "wallet",
        "payment_channel": "DANA",
        "payment_details": {"amount": 150000, "transaction_description": "Kopi and cake"},
        "customer_details": {"email": "siti@example.id", "full_name": "Siti Rahayu", "phone": "081234567890"},
        "item_details": [
            {"item_id": "KOPI-1", "name": "Kopi Susu", "amount": 25000, "qty": 2},
            {"item_id": "CAKE-1", "name": "Cake", "amount": 100000, "qty": 1},
        ],
        "wallet_details": {"id": "081234567890", "id_type": "HP"},
        "callback_url": callback_url,
    }


class WalletCreatePayment(Scenario):
    """A unique external_id (and so x-req-signature) per request."""

    name = "wallet-create"
    route = "/ewallet/v2/create-payment"

    def unique(self) -> bool:
        return True

    def build(self, ctx: BenchContext, count: int) -> list[bytes]:
        signer = ctx.signer
        run = ctx.state["wallet-run"] = ctx.state.get("wallet-run", 0) + 1
        requests = []
        for n in range(count):
            body = wallet_body(f"W-{run}-{n}", f"ORDER-{run}-{n}", ctx.callback_url)
            request = signer._wallet_request(self.route, body)
            requests.append(ctx.raw(request.method, request.path, request.headers, request.body))
        return requests


def va_body(external_id: str, order_id: str, callback_url: str) -> dict[str, Any]:
    return {
        "external_id": external_id,
        "order_id": order_id,
        "currency": "IDR",
        "payment_method": "bank_transfer",
        "payment_channel": "BCA",
        "payment_details": {
            "billing_name": "Siti Rahayu",
            "payment_system": "CLOSED",
            "amount": 150000,
            "transaction_description": "Kopi and cake",
        },
        "customer_details": {"email": "siti@example.id", "full_name": "Siti Rahayu", "phone": "081234567890"},
        "callback_url": callback_url,
    }


class VaCreate(Scenario):
    """A closed virtual account with a drawn number; a unique external_id (and so x-req-signature) per request.
    Signed as the wallet's (Basic + x-req-signature, x-version v3)."""

    name = "va-create"
    route = "/va"

    def unique(self) -> bool:
        return True

    def build(self, ctx: BenchContext, count: int) -> list[bytes]:
        signer = ctx.signer
        run = ctx.state["va-run"] = ctx.state.get("va-run", 0) + 1
        requests = []
        for n in range(count):
            body = va_body(f"V-{run}-{n}", f"VORDER-{run}-{n}", ctx.callback_url)
            request = signer._wallet_request(self.route, body)
            requests.append(ctx.raw(request.method, request.path, request.headers, request.body))
        return requests


class WalletInquiry(Scenario):
    """Inquiries of a few existing transactions, replayed (a read path)."""

    name = "wallet-inquiry"
    route = "/ewallet/v2/inquiry"

    def prepare(self, ctx: BenchContext) -> None:
        from kasir_client import Client

        references = []
        with Client(ctx.base_url, ctx.credentials) as client:
            for n in range(16):
                created = client.wallet_create_payment(wallet_body(f"WQ-{n}", f"ORDER-Q-{n}", ctx.callback_url))
                references.append(
                    {"transaction_id": created.transaction_id, "external_id": f"WQ-{n}", "order_id": f"ORDER-Q-{n}"}
                )
        ctx.state["wallet-references"] = references

    def build(self, ctx: BenchContext, count: int) -> list[bytes]:
        signer, references = ctx.signer, ctx.state["wallet-references"]
        requests = []
        for n in range(count):
            request = signer._wallet_request(self.route, references[n % len(references)])
            requests.append(ctx.raw(request.method, request.path, request.headers, request.body))
        return requests


SCENARIOS: list[Scenario] = [
    Ceiling(),
    AccessToken(),
    CardCharge(),
    WalletCreatePayment(),
    VaCreate(),
    WalletInquiry(),
    BnplCalculation(),
    BnplCheckout(),
]
