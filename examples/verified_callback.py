"""From a wallet payment to a verified callback, with Python's standard library only (3.10 or later).

Starts a callback receiver on 127.0.0.1, creates a DANA payment whose `callback_url` is that receiver, pays it
with the staging dummy payment, waits for Kasir's callback, checks its `svc-signature` against the merchant's
own order, and confirms status and amount by inquiry (the signature covers neither). Against `make run`:

    python3 examples/verified_callback.py

`KASIR_URL` (default http://127.0.0.1:8000) and `KASIR_DEMO_DIR` (default var/demo) point it elsewhere.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import queue
import secrets
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

KASIR_URL = os.environ.get("KASIR_URL", "http://127.0.0.1:8000")
if not KASIR_URL.startswith(("http://", "https://")):
    raise SystemExit("KASIR_URL must be an http(s) URL")
DEMO_DIR = os.environ.get("KASIR_DEMO_DIR", "var/demo")
with open(os.path.join(DEMO_DIR, "credentials.json")) as file:
    CREDENTIALS = json.load(file)
RECEIVED: queue.Queue[tuple[str, dict[str, str], bytes]] = queue.Queue()


class Receiver(BaseHTTPRequestHandler):
    """The merchant's callback endpoint: keep the request, answer 200 with a JSON `message`."""

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        RECEIVED.put((self.path, {name.lower(): value for name, value in self.headers.items()}, body))
        answer = b'{"message": "ok"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's name)
        pass


def x_req_signature(external_id: str, order_id: str) -> str:
    return hashlib.sha256((CREDENTIALS["hash_key"] + external_id + order_id).encode()).hexdigest()


def wallet(path: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST a wallet request with Basic auth, x-req-signature and x-version; the decoded answer."""
    basic = base64.b64encode(f"{CREDENTIALS['merchant_id']}:{CREDENTIALS['secret']}".encode()).decode()
    request = urllib.request.Request(  # noqa: S310 (KASIR_URL is checked to be http(s) above)
        f"{KASIR_URL}/ewallet/v2/{path}",
        data=json.dumps(body).encode(),
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Authorization": f"Basic {basic}",
            "x-version": "v3",
            "x-req-signature": x_req_signature(body["external_id"], body["order_id"]),
        },
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        answer: dict[str, Any] = json.load(response)
    return answer


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    callback_url = f"http://127.0.0.1:{server.server_address[1]}/kasir/wallet"

    # Your order: these ids and this amount are what you check the callback against.
    order = {"external_id": "INV-" + secrets.token_hex(8), "order_id": "ORDER-2026-001", "amount": 150000}
    created = wallet(
        "create-payment",
        {
            "external_id": order["external_id"],
            "order_id": order["order_id"],
            "currency": "IDR",
            "payment_method": "wallet",
            "payment_channel": "DANA",
            "payment_details": {"amount": order["amount"], "transaction_description": "Kopi and cake"},
            "customer_details": {"email": "siti@example.id", "full_name": "Siti Rahayu", "phone": "081234567890"},
            "item_details": [
                {"item_id": "KOPI-1", "name": "Kopi Susu", "amount": 25000, "qty": 2},
                {"item_id": "CAKE-1", "name": "Cake", "amount": 100000, "qty": 1},
            ],
            "wallet_details": {"id": "081234567890", "id_type": "HP"},
            "callback_url": callback_url,
        },
    )
    reference = {
        "transaction_id": created["transaction_id"],
        "external_id": order["external_id"],
        "order_id": order["order_id"],
    }
    print("created", created["transaction_id"], created["transaction_status"])
    wallet("dummy-payment", {**reference, "payment_method": "wallet", "payment_channel": "DANA"})  # staging only

    path, headers, body = RECEIVED.get(timeout=60)  # Kasir sends it right after the payment commits
    event = json.loads(body)
    # 1. The signature, computed from YOUR order's ids (not the ids the body claims), in constant time.
    expected = hashlib.sha256(
        (event["transaction_id"] + x_req_signature(order["external_id"], order["order_id"])).encode()
    ).hexdigest()
    in_query = parse_qs(urlsplit(path).query).get("svc-signature", [""])[0]
    in_header = headers.get("svc-signature", "")
    if not (hmac.compare_digest(in_header, expected) and hmac.compare_digest(in_query, expected)):
        raise SystemExit("forged callback: svc-signature does not match")
    if event["transaction_id"] != created["transaction_id"]:
        raise SystemExit("a callback for another transaction")
    # 2. The signature covers neither status nor amount: confirm both by inquiry before you ship anything.
    current = wallet("inquiry", reference)
    if current["transaction_status"] != "PAID" or current["amount"] != order["amount"]:
        raise SystemExit(f"not paid as ordered: {current['transaction_status']} {current['amount']}")
    rupiah = f"Rp{current['amount']:,}".replace(",", ".")
    print(
        f"verified callback {event['transaction_status']} for {order['order_id']}"
        f" (X-Kasir-Callback-Id {headers.get('x-kasir-callback-id')}, attempt {headers.get('x-kasir-attempt')});"
        f" inquiry confirms PAID, {rupiah}"
    )
    server.shutdown()


if __name__ == "__main__":
    main()
