"""A fake acquirer, wallet issuer and lender speaking examples/processor-http/PROTOCOL.md on 127.0.0.1.

Written from the protocol's text, not from the connector's code: its own signing, its own
checks. It records every signed call it received, refuses unsigned or forged ones (401), and
plays the customer's side through pages a test posts to (the challenge, the wallet checkout,
the BNPL approval), each of which sends the protocol's signed notification to Kasir.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from tests.support.postgres import free_port
from tests.support.process import HANG_GUARD_SECONDS

APPROVED = "4242424242424242"
DECLINED = "4000056655665556"
CHALLENGED = "4000002760003184"
# Payout accounts, by their last four digits (the fake's own table, not the simulator's names).
PAYOUT_HOLDER = "DEWI LESTARI"
PAYOUT_STATUS = {"0004": "invalid", "0005": "inactive"}
PAYOUT_LATER = ("0002", "0003")  # pending: a test settles them (settle_payout), which notifies Kasir
PAYOUT_LOST = "0009"  # the transfer is made, but its answer is lost (503): Kasir must ask status, not send again


def sign(secret: str, timestamp: str, method: str, path: str, body: bytes) -> str:
    message = timestamp.encode() + b"\n" + method.encode() + b"\n" + path.encode() + b"\n" + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signed_headers(secret: str, path: str, body: bytes, *, timestamp: str | None = None) -> dict[str, str]:
    stamp = timestamp or str(int(time.time()))
    return {
        "Content-Type": "application/json",
        "X-Kasir-Timestamp": stamp,
        "X-Kasir-Signature": sign(secret, stamp, "POST", path, body),
    }


@dataclass
class Call:
    path: str
    body: dict[str, Any]


@dataclass
class FakeMoneyMover:
    secret: str
    kasir_url: str = ""  # where notifications go (set once Kasir serves)
    port: int = field(default_factory=free_port)
    calls: list[Call] = field(default_factory=list)
    refused: int = 0
    decisions: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    return_urls: dict[tuple[str, int], str] = field(default_factory=dict)
    payments: dict[str, dict[str, Any]] = field(default_factory=dict)
    refunds: dict[str, int] = field(default_factory=dict)
    applications: dict[str, dict[str, Any]] = field(default_factory=dict)
    accounts: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    cancelled_accounts: list[str] = field(default_factory=list)
    notified: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    payouts: dict[str, dict[str, Any]] = field(default_factory=dict)  # by Kasir's reference: made once
    payout_calls: list[str] = field(default_factory=list)  # every /v1/payout/transfers reference, repeats included

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # --- the protocol's calls (Kasir -> here) ------------------------------------------------

    async def _verified(self, request: Request) -> dict[str, Any] | None:
        body = await request.body()
        stamp = request.headers.get("x-kasir-timestamp", "")
        given = request.headers.get("x-kasir-signature", "")
        expected = sign(self.secret, stamp, "POST", request.url.path, body)
        if not stamp.isdigit() or abs(time.time() - int(stamp)) > 300 or not hmac.compare_digest(expected, given):
            self.refused += 1
            return None
        data: dict[str, Any] = json.loads(body)
        self.calls.append(Call(request.url.path, data))
        return data

    async def api(self, request: Request) -> Response:
        data = await self._verified(request)
        if data is None:
            return JSONResponse({"message": "bad signature"}, status_code=401)
        path = request.url.path
        if path == "/v1/card/charges":
            key = (data["reference"], data["attempt"])
            if key not in self.decisions:  # idempotent by reference and attempt
                self.return_urls[key] = data["return_url"]
                number = data["card"]["number"]
                if number == APPROVED:
                    self.decisions[key] = {"result": "approved", "message": "Approved by the fake acquirer"}
                elif number == CHALLENGED:
                    url = f"{self.base_url}/challenge/{key[0]}/{key[1]}"
                    self.decisions[key] = {"result": "challenge", "message": "3-D Secure", "redirect_url": url}
                else:
                    self.decisions[key] = {
                        "result": "declined",
                        "message": "Do not honour (fake acquirer)",
                        "reason": "do_not_honour",
                    }
            return JSONResponse(self.decisions[key])
        if path in ("/v1/card/challenges", "/v1/card/status"):
            return JSONResponse(self.decisions[(data["reference"], data["attempt"])])
        if path == "/v1/wallet/payments":
            self.payments.setdefault(data["reference"], {**data, "status": "PENDING"})
            return JSONResponse({"checkout_url": f"{self.base_url}/checkout/{data['reference']}"})
        if path == "/v1/wallet/refunds":
            payment = self.payments[data["reference"]]
            refunded = sum(v for k, v in self.refunds.items() if k.startswith(data["reference"] + "-"))
            if data["refund_reference"] not in self.refunds:
                if refunded + data["amount"] > payment["amount"]:
                    return JSONResponse({"message": "refund exceeds the payment"}, status_code=409)
                self.refunds[data["refund_reference"]] = data["amount"]
            return JSONResponse({"status": "refunded"})
        if path == "/v1/wallet/voids":
            return JSONResponse({"status": "voided"})
        if path == "/v1/va/accounts":
            # The bank numbers the VA: 8 then the reference's digits, the merchant's digits when chosen.
            chosen = data["chosen_digits"]
            digits = (
                chosen.rjust(10, "0")
                if chosen
                else str(abs(hash((data["reference"], data["draw"]))))[:10].rjust(10, "0")
            )
            self.accounts.setdefault((data["reference"], data["draw"]), {**data, "number": "8808" + digits})
            return JSONResponse({"number": self.accounts[(data["reference"], data["draw"])]["number"]})
        if path == "/v1/va/cancellations":
            self.cancelled_accounts.append(data["reference"])
            return JSONResponse({"status": "cancelled"})
        if path in ("/v1/wallet/status", "/v1/bnpl/status", "/v1/va/status"):
            return JSONResponse({"notification": None})
        if path == "/v1/payout/accounts":
            ending = data["account_no"][-4:]
            status = PAYOUT_STATUS.get(ending, "active")
            return JSONResponse({"status": status, "name": PAYOUT_HOLDER if status == "active" else None})
        if path == "/v1/payout/transfers":
            self.payout_calls.append(data["reference"])
            ending = data["account_no"][-4:]
            if data["reference"] not in self.payouts:  # idempotent by reference: one transfer, ever
                state = "pending" if ending in PAYOUT_LATER else "sent"
                self.payouts[data["reference"]] = {
                    **data,
                    "state": state,
                    "rail_reference": f"RAIL-{data['reference']}",
                }
            payout = self.payouts[data["reference"]]
            if ending == PAYOUT_LOST and self.payout_calls.count(data["reference"]) == 1:
                return JSONResponse({"message": "gateway timeout"}, status_code=503)
            return JSONResponse(self._payout_answer(payout))
        if path == "/v1/payout/status":
            known = self.payouts.get(data["reference"])
            return JSONResponse(self._payout_answer(known) if known else {"state": "unknown"})
        if path == "/v1/bnpl/applications":
            self.applications.setdefault(data["reference"], data)
            return JSONResponse({"approval_url": f"{self.base_url}/approve/{data['reference']}"})
        return JSONResponse({"message": "unknown call"}, status_code=404)

    @staticmethod
    def _payout_answer(payout: dict[str, Any]) -> dict[str, Any]:
        return {key: payout[key] for key in ("state", "rail_reference", "reason") if payout.get(key) is not None}

    async def settle_payout(self, reference: str, event: str, reason: str | None = None) -> int:
        """The beneficiary bank's answer to a pending transfer (`sent`, `failed`, `returned`), notified to Kasir."""
        payout = self.payouts[reference]
        payout["state"], payout["reason"] = event, reason
        notification = {"product": "payout", "reference": reference, "event": event,
                        "bank_reference": payout["rail_reference"]}  # fmt: skip
        if reason is not None:
            notification["message"] = reason
        return await self.notify(notification)

    # --- the customer's side (a test posts here) and the notifications ------------------------

    async def notify(self, *notifications: dict[str, Any]) -> int:
        body = json.dumps({"notifications": list(notifications)}).encode()
        path = "/processors/http/notify"
        async with httpx.AsyncClient(trust_env=False) as http:
            headers = signed_headers(self.secret, path, body)
            answer = await http.post(self.kasir_url + path, content=body, headers=headers)
        for notification in notifications:
            self.notified.append((answer.status_code, notification))
        return answer.status_code

    async def challenge(self, request: Request) -> Response:
        reference, attempt = request.path_params["reference"], int(request.path_params["attempt"])
        if request.method == "GET":
            form = '<form method="post" id="challenge"><input name="answer" value="pass"></form>'
            return HTMLResponse(form + reference)
        passed = (await request.form()).get("answer") == "pass"
        decision = {"result": "approved", "message": "Approved after 3-D Secure"} if passed else {
            "result": "declined", "message": "3-D Secure failed (fake acquirer)"}  # fmt: skip
        self.decisions[(reference, attempt)] = decision
        event = {"product": "card", "reference": reference, "attempt": attempt,
                 "event": "paid" if passed else "failed", "message": decision["message"]}  # fmt: skip
        await self.notify(event)
        return RedirectResponse(self.return_urls[(reference, attempt)], status_code=303)

    async def checkout(self, request: Request) -> Response:
        reference = request.path_params["reference"]
        payment = self.payments[reference]
        if request.method == "GET":
            return HTMLResponse(f"<p>Pay {payment['amount']} with {payment['channel']}</p>")
        payment["status"] = "PAID"
        await self.notify({"product": "wallet", "reference": reference, "event": "paid", "issuer": payment["channel"]})
        return RedirectResponse(payment.get("return_url") or f"{self.base_url}/done", status_code=303)

    async def approve(self, request: Request) -> Response:
        reference = request.path_params["reference"]
        application = self.applications[reference]
        if request.method == "GET":
            tenures = [plan["tenure"] for plan in application["plans"]]
            return HTMLResponse(f"<p>Approve {application['amount']}: tenures {tenures}</p>")
        tenure = int(str((await request.form()).get("tenure", "0")))
        await self.notify({"product": "bnpl", "reference": reference, "event": "approved", "tenure": tenure})
        return HTMLResponse("approved")

    # --- serving ------------------------------------------------------------------------------

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/{rest:path}", self.api, methods=["POST"]),
                Route("/challenge/{reference}/{attempt}", self.challenge, methods=["GET", "POST"]),
                Route("/checkout/{reference}", self.checkout, methods=["GET", "POST"]),
                Route("/approve/{reference}", self.approve, methods=["GET", "POST"]),
            ]
        )

    def start(self) -> None:
        """Serve in a thread of its own (its own event loop), as an outside service would."""
        config = uvicorn.Config(self.app(), host="127.0.0.1", port=self.port, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=asyncio.run, args=(self._server.serve(),), daemon=True)
        self._thread.start()
        deadline = time.monotonic() + HANG_GUARD_SECONDS  # until it serves, or its thread has ended
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the fake money mover did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
