"""The payouts of `make soak` (scripts/soak.py): keyed transfers while the same processes are SIGKILLed.

A merchant of its own, topped up once, sends SOAK_TRANSFERS transfers (SNAP, the disbursement token, the symmetric
signature, an X-Idempotency-Key each, a callbackUrl to the soak's receiver) from SOAK_PAYOUT_CLIENTS clients, on
either server, retrying the same key and body (a fresh X-EXTERNAL-ID per try) after a dropped connection, a 5xx, a
429 or a 409 with Retry-After. The payout rail is the reference connector (examples/processor-http, processor
`http`) talking to the fake money mover of tests/processors (PROTOCOL.md), which records every transfer call: by the
beneficiary account's last four digits a transfer is sent at once, pending and settled later by the rail's signed
notification (`0002` sent, `0003` failed), or made with its answer lost (`0009`: a 503, so Kasir must learn it by
`status`, never by sending it again).

Counted after the drain: transfers lost (an accepted answer with no transfer recorded, money the rail moved for a
reference Kasir has no transfer of, a transfer not final, a final state that is not the rail's), transfers sent twice
(a transfer call for a reference the rail already had: Kasir asks `status` first, and sends again only what the rail
answers `unknown` to), the balance against the transfers (ledger = top-up − the amounts sent; hold = what is still
held, 0 at the end; never negative), and notifications lost (a final transfer whose notification was neither
accepted by the receiver nor given up after its attempts).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import secrets
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

import httpx
from tests.processors.fake_money_mover import FakeMoneyMover
from tests.support.wire import compact
from tests.support.wire.snap import snap_symmetric, token_signature

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import rsa

    from kasir.db import Database

TOKEN_PATH = "/api/v1.0/access-token/b2b"
TRANSFER_PATH = "/api/v1.2/transfer-interbank"
RAIL_SECRET = secrets.token_urlsafe(24)
# The fake rail's outcomes by the account's last four digits (tests/processors/fake_money_mover.py), and their share.
ENDINGS = (("0001", 0.55), ("0002", 0.2), ("0003", 0.15), ("0009", 0.1))
SETTLE_AFTER = (0.5, 3.0)  # seconds a pending transfer waits before the rail settles it
AMOUNTS = (10_000, 500_000)
JAKARTA = timezone(timedelta(hours=7))


@dataclass
class PayoutMerchant:
    merchant_id: str
    client_id: str
    client_secret: str
    private_key: rsa.RSAPrivateKey
    top_up: int


@dataclass
class TransferKey:
    key: str
    partner_reference_no: str
    amount: int
    account_no: str
    first_sent: float
    sends: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    status: int | None = None
    code: str | None = None
    reference_no: str | None = None
    state_answered: str | None = None
    answered_after: float | None = None
    replayed: bool = False
    excerpt: str = ""


async def prepare(database: Database, transfers: int) -> PayoutMerchant:
    """The payouts' merchant, topped up for every transfer the soak may make (none is refused for funds)."""
    from cryptography.hazmat.primitives.asymmetric import rsa
    from tests.support.builders import public_pem

    from kasir.audit.service import Actor
    from kasir.merchants.service import merchant_service
    from kasir.payouts.service import payout_service

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    top_up = transfers * AMOUNTS[1] + 1_000_000
    async with database.unit_of_work() as session:
        _merchant, credentials = await merchant_service.create(session, name="Soak Payouts", public_key=public_pem(key))
    async with database.unit_of_work() as session:
        await payout_service.top_up(session, credentials.merchant_id, top_up, "soak", Actor.cli())
    return PayoutMerchant(credentials.merchant_id, credentials.client_id, credentials.client_secret, key, top_up)


def rail_env(fake: FakeMoneyMover, site: Any) -> dict[str, str]:
    """The processes' settings for the reference connector as the payout rail."""
    import os

    from tests.processors.connector import install_connector

    return {
        # Naming one product's processor names them all: the others stay the staging simulator's.
        "KASIR_PROCESSORS": "card=simulator,wallet=simulator,bnpl=simulator,va=simulator,payout=http",
        "KASIR_PROCESSOR_HTTP_URL": fake.base_url,
        "KASIR_PROCESSOR_HTTP_SECRET": RAIL_SECRET,
        "KASIR_PROCESSOR_HTTP_TIMEOUT_SECONDS": "2",
        "PYTHONPATH": install_connector(site) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }


def start_rail() -> FakeMoneyMover:
    fake = FakeMoneyMover(RAIL_SECRET)
    fake.start()
    return fake


class PayoutLoad:
    def __init__(self, load: Any, merchant: PayoutMerchant, target: int, receiver_url: str, seed: int) -> None:
        self.load = load  # the charges' Load: its servers, its in-flight count, its kill count
        self.merchant = merchant
        self.target = target
        self.receiver_url = receiver_url
        self.keys: list[TransferKey] = []
        self.rng = random.Random(seed)  # noqa: S311 (reproducible choices, no secret)

    def enough(self) -> bool:
        return len(self.keys) >= self.target

    def _timestamp(self) -> str:
        return datetime.now(UTC).astimezone(JAKARTA).isoformat(timespec="seconds")

    async def _token(self, http: httpx.AsyncClient, server: Any) -> str | None:
        ts = self._timestamp()
        headers = {
            "Content-Type": "application/json",
            "X-TIMESTAMP": ts,
            "X-CLIENT-KEY": self.merchant.client_id,
            "X-SIGNATURE": token_signature(self.merchant.private_key, self.merchant.client_id, ts),
        }
        with contextlib.suppress(httpx.TransportError, ValueError, KeyError):
            answer = await http.post(
                server.base_url + TOKEN_PATH, content=compact({"grantType": "client_credentials"}), headers=headers
            )
            if answer.status_code == 200:
                return str(answer.json()["accessToken"])
        return None

    async def client(self, number: int) -> None:
        token: str | None = None
        async with httpx.AsyncClient(timeout=10, trust_env=False) as http:
            while not (self.enough() and self.load.enough()):
                if self.enough():
                    await asyncio.sleep(0.2)  # the charges go on until their kills are made
                    continue
                await self.load._pace()
                token = await self.transfer(http, number, token)

    async def transfer(self, http: httpx.AsyncClient, number: int, token: str | None) -> str | None:
        sequence = len(self.keys)
        ending = self.rng.choices([e for e, _ in ENDINGS], [w for _, w in ENDINGS])[0]
        account_no = f"{self.rng.randrange(10**6, 10**7)}{ending}"
        amount = self.rng.randrange(AMOUNTS[0] // 1000, AMOUNTS[1] // 1000 + 1) * 1000
        record = TransferKey(
            f"soak-payout-{number}-{secrets.token_hex(8)}", f"SOAK-{sequence}-{secrets.token_hex(4)}", amount,
            account_no, time.monotonic(),
        )  # fmt: skip
        self.keys.append(record)
        body = compact(
            {
                "partnerReferenceNo": record.partner_reference_no,
                "amount": {"value": f"{amount}.00", "currency": "IDR"},
                "beneficiaryAccountName": "SOAK BENEFICIARY",
                "beneficiaryAccountNo": account_no,
                "beneficiaryBankCode": "014",
                "originatorInfos": [
                    {"originatorCustomerNo": "1", "originatorCustomerName": "Soak", "originatorBankCode": "014"}
                ],
                "additionalInfo": {"callbackUrl": self.receiver_url, "remark": f"soak {sequence}"},
            }
        )
        server = self.rng.choice(self.load.servers)
        backoff = 0.05
        while True:
            if token is None:
                token = await self._token(http, server)
            answer: httpx.Response | None = None
            if token is not None:
                ts = self._timestamp()
                headers = {
                    "Content-Type": "application/json",
                    "Authorization": f"Bearer {token}",
                    "X-TIMESTAMP": ts,
                    "X-SIGNATURE": snap_symmetric(self.merchant.client_secret, "POST", TRANSFER_PATH, token, body, ts),
                    "X-PARTNER-ID": self.merchant.merchant_id,
                    # Fresh per try: one that reached a unit rolled back may be kept for the day (409xx00).
                    "X-EXTERNAL-ID": str(secrets.randbelow(10**30)).zfill(30),
                    "CHANNEL-ID": "api",
                    "X-Idempotency-Key": record.key,
                }
                record.sends += 1
                self.load.in_flight[server.name] += 1
                try:
                    answer = await http.post(server.base_url + TRANSFER_PATH, content=body.encode(), headers=headers)
                except httpx.TransportError as error:
                    record.errors[type(error).__name__] += 1
                finally:
                    self.load.in_flight[server.name] -= 1
            if answer is not None:
                code = _code(answer)
                retry = (
                    answer.status_code >= 500
                    or answer.status_code == 429
                    or (answer.status_code == 409 and answer.headers.get("retry-after") is not None)
                )
                if answer.status_code == 401 and code.endswith("01"):
                    token, retry = None, True  # the token: fetch another
                if not retry:
                    record.status, record.code = answer.status_code, code
                    record.answered_after = time.monotonic() - record.first_sent
                    record.replayed = answer.headers.get("idempotent-replayed") == "true"
                    data = _json(answer)
                    if answer.status_code == 200:
                        record.reference_no = data.get("referenceNo")
                        record.state_answered = (data.get("additionalInfo") or {}).get("latestTransactionStatus")
                    else:
                        record.excerpt = answer.text[:300]
                    return token
                record.errors[f"HTTP {answer.status_code} {code}"] += 1
            if time.monotonic() - record.first_sent > self.load.config.client_deadline:
                return token  # no final answer: counted
            await asyncio.sleep(backoff * (0.5 + self.rng.random()))
            backoff = min(backoff * 2, 1.0)
            server = self.load.servers[(self.load.servers.index(server) + 1) % len(self.load.servers)]


def _json(answer: httpx.Response) -> dict[str, Any]:
    try:
        data = answer.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _code(answer: httpx.Response) -> str:
    return str(_json(answer).get("responseCode", ""))


async def settle(fake: FakeMoneyMover, servers: list[Any], stop: asyncio.Event) -> None:
    """The beneficiary banks: each pending transfer is settled a little later (`0002` sent, `0003` failed) and
    notified to Kasir through one server, tried again (on the other) until it answers 200."""
    rng = random.Random(7)  # noqa: S311
    due: dict[str, float] = {}
    while not stop.is_set() or any(p["state"] == "pending" for p in fake.payouts.values()):
        for reference, payout in list(fake.payouts.items()):
            if payout["state"] == "pending" and reference not in due:
                due[reference] = time.monotonic() + rng.uniform(*SETTLE_AFTER)
        for reference, at in list(due.items()):
            if at > time.monotonic():
                continue
            payout = fake.payouts[reference]
            failed = payout["account_no"].endswith("0003")
            fake.kasir_url = rng.choice(servers).base_url
            status = 0
            with contextlib.suppress(httpx.HTTPError):
                if failed:
                    status = await fake.settle_payout(reference, "failed", "Rejected by the beneficiary bank")
                else:
                    status = await fake.settle_payout(reference, "sent")
            if status == 200:
                del due[reference]
            else:
                payout["state"] = "pending"  # not told yet: told again on the next pass
                due[reference] = time.monotonic() + 0.5
        await asyncio.sleep(0.1)


async def read(database: Database, merchant_id: str) -> dict[str, Any]:
    from sqlalchemy import select

    from kasir.callbacks.models import Callback
    from kasir.db import fetch
    from kasir.payouts.models import DisbursementBalance, PayoutTransfer

    async with database.unit_of_work(read_only=True) as session:
        transfers = await fetch(
            session,
            select(
                PayoutTransfer.id,
                PayoutTransfer.partner_reference_no,
                PayoutTransfer.amount,
                PayoutTransfer.held,
                PayoutTransfer.status,
            ).where(PayoutTransfer.merchant_id == merchant_id),
        )
        balance = await fetch(
            session,
            select(DisbursementBalance.ledger, DisbursementBalance.hold).where(
                DisbursementBalance.merchant_id == merchant_id
            ),
        )
        callbacks = await fetch(
            session,
            select(
                Callback.id, Callback.transaction_ref, Callback.status, Callback.attempts_made, Callback.max_attempts
            ).where(Callback.merchant_id == merchant_id),
        )
    transfer_fields = ("id", "partner_reference_no", "amount", "held", "status")
    callback_fields = ("id", "transaction_ref", "status", "attempts_made", "max_attempts")
    return {
        "transfers": [{name: getattr(row, name) for name in transfer_fields} for row in transfers],
        "balance": (int(balance[0].ledger), int(balance[0].hold)) if balance else (0, 0),
        "callbacks": [{name: getattr(row, name) for name in callback_fields} for row in callbacks],
    }


async def wait_for_drain(database: Database, merchant_id: str, timeout: float) -> tuple[float, bool]:
    started = time.monotonic()
    while True:
        state = await read(database, merchant_id)
        final = all(t["status"] not in ("01", "03") for t in state["transfers"])
        settled = all(c["status"] in ("delivered", "failed") for c in state["callbacks"])
        if final and settled:
            return time.monotonic() - started, True
        if time.monotonic() - started > timeout:
            return time.monotonic() - started, False
        await asyncio.sleep(0.5)


RAIL_STATE = {"sent": "00", "failed": "06", "returned": "04", "canceled": "05", "pending": "03"}


def count(
    payouts: PayoutLoad, fake: FakeMoneyMover, state: dict[str, Any], receipts: list[Any], top_up: int
) -> dict[str, Any]:
    keys = payouts.keys
    transfers = {t["id"]: t for t in state["transfers"]}
    by_partner = {t["partner_reference_no"]: t for t in state["transfers"]}
    answered = [k for k in keys if k.status is not None]
    accepted = [k for k in answered if k.status == 200]
    lost: list[dict[str, Any]] = []
    for k in accepted:
        if k.reference_no not in transfers:
            lost.append({"key": k.key, "why": "accepted, no transfer recorded"})
        elif transfers[k.reference_no]["partner_reference_no"] != k.partner_reference_no:
            lost.append({"key": k.key, "why": "accepted as another transfer"})
    for reference in fake.payouts:
        if reference not in transfers:
            lost.append({"reference": reference, "why": "the rail moved money for a transfer Kasir has not"})
    not_final = [t["id"] for t in state["transfers"] if t["status"] in ("01", "03")]
    state_mismatches = []
    for reference, transfer in transfers.items():
        rail = fake.payouts.get(reference)
        rail_state = RAIL_STATE.get(rail["state"]) if rail else None
        if transfer["status"] in ("00", "06", "04", "05") and rail_state != transfer["status"]:
            state_mismatches.append({"reference": reference, "kasir": transfer["status"], "rail": rail_state})
    calls = Counter(fake.payout_calls)
    sent_twice = sum(n - 1 for n in calls.values() if n > 1)
    # The balance against the transfers: what was sent left the ledger, what is not final is held.
    ledger, hold = state["balance"]
    sent_amount = sum(t["amount"] for t in state["transfers"] if t["status"] == "00")
    held_amount = sum(t["amount"] for t in state["transfers"] if t["status"] in ("01", "03"))
    held_rows = sum(t["held"] for t in state["transfers"])
    mismatches = []
    if ledger != top_up - sent_amount:
        mismatches.append({"what": "ledger", "is": ledger, "expected": top_up - sent_amount})
    if hold != held_amount or hold != held_rows:
        mismatches.append({"what": "hold", "is": hold, "expected": held_amount, "transfers_hold": held_rows})
    if ledger - hold < 0:
        mismatches.append({"what": "available below 0", "is": ledger - hold})
    # Notifications: each transfer that ended 00 or 06 asked for one.
    accepted_callbacks = {r.callback_id for r in receipts if r.status == 200 and r.path == "/payout"}
    callbacks_of: dict[str, list[dict[str, Any]]] = {}
    for callback in state["callbacks"]:
        callbacks_of.setdefault(callback["transaction_ref"], []).append(callback)
    notifications_lost = []
    for reference, transfer in transfers.items():
        if transfer["status"] not in ("00", "06"):
            continue
        rows = callbacks_of.get(reference, [])
        if not rows:
            notifications_lost.append({"reference": reference, "why": "no notification recorded"})
        for row in rows:
            if row["status"] == "delivered" and row["id"] in accepted_callbacks:
                continue
            if row["status"] == "failed" and row["attempts_made"] >= row["max_attempts"]:
                continue
            notifications_lost.append({"reference": reference, "callback": row["id"], "why": row["status"]})
    waits = [k.answered_after for k in answered if k.answered_after is not None]
    return {
        "transfers": {
            "keys": len(keys),
            "accepted": len(accepted),
            "answered_as_replay": sum(1 for k in answered if k.replayed),
            "unanswered": sum(1 for k in keys if k.status is None),
            "refused": len(answered) - len(accepted),
            "refused_examples": [{"status": k.status, "body": k.excerpt} for k in answered if k.status != 200][:5],
            "keys_retried": sum(1 for k in keys if k.sends > 1),
            "client_retries": sum(k.sends - 1 for k in keys),
            "retry_causes": dict(sum((k.errors for k in keys), Counter()).most_common(8)),
            "answered_state": dict(Counter(k.state_answered for k in accepted)),
            "recorded": len(transfers),
            "final_states": dict(Counter(t["status"] for t in state["transfers"])),
            "rail_transfers": len(fake.payouts),
            "rail_transfer_calls": len(fake.payout_calls),
            "answers_lost_by_the_rail": sum(1 for r in fake.payouts.values() if r["account_no"].endswith("0009")),
            "longest_wait_s": round(max(waits, default=0.0), 3),
        },
        "transfers_lost": len(lost) + len(not_final),
        "transfers_lost_examples": (lost + [{"reference": r, "why": "not final"} for r in not_final])[:10],
        "transfers_sent_twice": sent_twice,
        "state_mismatches": len(state_mismatches),
        "state_mismatch_examples": state_mismatches[:5],
        "balance": {"top_up": top_up, "ledger": ledger, "hold": hold, "sent": sent_amount},
        "balance_mismatches": len(mismatches),
        "balance_mismatch_examples": mismatches,
        "notifications": {
            "recorded": len(state["callbacks"]),
            "delivered": sum(1 for c in state["callbacks"] if c["status"] == "delivered"),
            "lost": len(notifications_lost),
            "lost_examples": notifications_lost[:10],
        },
        "by_partner_reference": len(by_partner),
    }


def passed(result: dict[str, Any], target: int) -> bool:
    return (
        result["transfers_lost"] == 0
        and result["transfers_sent_twice"] == 0
        and result["state_mismatches"] == 0
        and result["balance_mismatches"] == 0
        and result["notifications"]["lost"] == 0
        and result["transfers"]["unanswered"] == 0
        and result["transfers"]["refused"] == 0
        and result["transfers"]["keys"] >= target
    )


def markdown_rows(result: dict[str, Any]) -> list[str]:
    t, n, b = result["transfers"], result["notifications"], result["balance"]
    states = ", ".join(f"{s} {c}" for s, c in sorted(t["final_states"].items()))
    return [
        f"| keyed transfers (accepted; of which replays) | {t['keys']} ({t['accepted']}; {t['answered_as_replay']}) |",
        f"| transfers without a final answer / refused | {t['unanswered']} / {t['refused']} |",
        f"| keys retried by their client / retries | {t['keys_retried']} / {t['client_retries']} |",
        f"| transfers recorded (final states) | {t['recorded']} ({states}) |",
        f"| rail: transfers made / transfer calls / answers lost on purpose | {t['rail_transfers']} / "
        f"{t['rail_transfer_calls']} / {t['answers_lost_by_the_rail']} |",
        f"| **transfers lost** | **{result['transfers_lost']}** |",
        f"| **transfers sent twice** | **{result['transfers_sent_twice']}** |",
        f"| final states other than the rail's | {result['state_mismatches']} |",
        f"| **balance mismatches** | **{result['balance_mismatches']}** (ledger {b['ledger']:,} = top-up "
        f"{b['top_up']:,} − sent {b['sent']:,}; hold {b['hold']}) |",
        f"| notifications recorded / delivered / **lost** | {n['recorded']} / {n['delivered']} / **{n['lost']}** |",
    ]


def dump(result: dict[str, Any]) -> str:
    return json.dumps(result, indent=2)
