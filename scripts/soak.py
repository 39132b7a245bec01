"""`make soak`: the crash soak. Payments are made while processes are SIGKILLed and restarted.

The topology, all on 127.0.0.1 and one database (a SQLite file, or a PostgreSQL cluster this script starts
and removes): an API server (`kasir serve --no-worker`), a server with the embedded callback worker
(`kasir serve`) and SOAK_WORKERS `kasir worker` processes. SOAK_CLIENTS clients make keyed card charges
(X-Idempotency-Key, an approved staging card, a callbackUrl to this script's receiver), each of which
records one payment-page callback SUCCESS in its commit. A client whose request fails (connection
refused or reset, a 5xx, a 409 REQUEST_IN_PROGRESS, a 429) retries the same body with the same key, on
either server, until a final answer or SOAK_CLIENT_DEADLINE seconds. Meanwhile a loop SIGKILLs one
process at a time (servers while they have charges in flight), restarts it and waits until it is ready,
until SOAK_KILLS kills and SOAK_PAYMENTS payments are made. Then every process is up again and the
callbacks drain.

The receiver answers like a merchant: most callbacks 200 at once, SOAK_FLAKY of the attempts 500
(retried), SOAK_SLOW of them after a short delay (so kills meet deliveries in flight), and every
SOAK_REFUSE_EVERY-th payment names a URL that always answers 500, so those callbacks end given up
(`failed`) after their attempts.

Payouts (scripts/soak_payouts.py): meanwhile a merchant of its own sends SOAK_TRANSFERS keyed transfers from
SOAK_PAYOUT_CLIENTS clients through the reference connector's payout rail (a fake money mover that records every
transfer call, settles pending ones by signed notification and loses some answers on purpose); counted: transfers
lost, transfers sent twice, balance mismatches, notifications lost. SOAK_TRANSFERS=0 leaves payouts out.

Counted (bench/results/soak-<db>.json and .md, or SOAK_OUT): callbacks lost (a payment whose callback was
neither received with a 200 nor given up after its attempts, a callback marked delivered that the
receiver never accepted, or one still pending at the end), duplicates received (at-least-once), double
charges (more than one card order or card attempt for a key), requests without a final answer, answers
that are final but not the charge's 200, the longest wait for a final answer, the time to drain. The
exit status is 1 when any must-be-zero count is not, or fewer kills or payments were made than asked.

Settings (environment): SOAK_DB (sqlite | postgres), SOAK_PAYMENTS (5000), SOAK_KILLS (100), SOAK_WORKERS (2),
SOAK_CLIENTS (12), SOAK_RATE (payments started per second, 20), SOAK_KILL_PAUSE (seconds between a
restart and the next kill, 0.5; randomised), SOAK_MIN_UPTIME (seconds a process runs after it is ready before it may
be killed again, 3), SOAK_FLAKY (0.05), SOAK_SLOW (0.1), SOAK_REFUSE_EVERY (100),
SOAK_CLIENT_DEADLINE (120), SOAK_DRAIN_TIMEOUT (300), SOAK_TRANSFERS (1000), SOAK_PAYOUT_CLIENTS (4),
SOAK_SEED, SOAK_DATABASE_URL (an existing empty database instead of a new one), SOAK_OUT (the JSON's path; the
markdown goes beside it).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import platform
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.postgres import PostgresCluster, free_port  # noqa: E402
from tests.support.process import end_with_parent  # noqa: E402
from tests.support.wire import basic_auth, compact  # noqa: E402
from tests.support.wire.card import APPROVED, CHARGE, charge_body  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import soak_payouts  # noqa: E402

if TYPE_CHECKING:
    from kasir.db import Database

BIN = Path(sys.executable).parent
DATABASES = ("sqlite", "postgres")
# The delivery settings of the soak's processes: retries within seconds (not the production 10 s, 60 s, 5 min)
# and a short lease, so a killed worker's claims are taken over within the run.
PROCESS_SETTINGS = {
    "KASIR_CALLBACK_SCHEDULE": "1,2,3",
    "KASIR_CALLBACK_TIMEOUT_SECONDS": "3",
    "KASIR_CALLBACK_LEASE_SECONDS": "6",
    "KASIR_CALLBACK_POLL_SECONDS": "0.5",
}
SLOW_ANSWER_SECONDS = (0.2, 0.8)


def _env(name: str, default: str) -> str:
    return os.environ.get(name, "") or default


@dataclass(frozen=True)
class Config:
    db: str
    payments: int
    kills: int
    workers: int
    clients: int
    rate: float
    kill_pause: float
    min_uptime: float
    flaky: float
    slow: float
    refuse_every: int
    client_deadline: float
    drain_timeout: float
    seed: int
    database_url: str | None
    out: Path
    transfers: int = 0
    payout_clients: int = 0

    @classmethod
    def from_env(cls) -> Config:
        db = _env("SOAK_DB", "sqlite")
        if db not in DATABASES:
            raise SystemExit(f"SOAK_DB must be one of {', '.join(DATABASES)}, not {db!r}")
        out = Path(_env("SOAK_OUT", str(ROOT / "bench" / "results" / f"soak-{db}.json")))
        return cls(
            db=db,
            payments=int(_env("SOAK_PAYMENTS", "5000")),
            kills=int(_env("SOAK_KILLS", "100")),
            workers=int(_env("SOAK_WORKERS", "2")),
            clients=int(_env("SOAK_CLIENTS", "12")),
            rate=float(_env("SOAK_RATE", "20")),
            kill_pause=float(_env("SOAK_KILL_PAUSE", "0.5")),
            min_uptime=float(_env("SOAK_MIN_UPTIME", "3")),
            flaky=float(_env("SOAK_FLAKY", "0.05")),
            slow=float(_env("SOAK_SLOW", "0.1")),
            refuse_every=int(_env("SOAK_REFUSE_EVERY", "100")),
            client_deadline=float(_env("SOAK_CLIENT_DEADLINE", "120")),
            drain_timeout=float(_env("SOAK_DRAIN_TIMEOUT", "300")),
            seed=int(_env("SOAK_SEED", str(secrets.randbelow(10**6)))),
            database_url=os.environ.get("SOAK_DATABASE_URL") or None,
            out=out,
            transfers=int(_env("SOAK_TRANSFERS", "1000")),
            payout_clients=int(_env("SOAK_PAYOUT_CLIENTS", "4")),
        )


# --- the processes ------------------------------------------------------------------------------


class Process:
    """One `kasir` process that the soak kills and restarts; its log goes on across restarts."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], log_path: Path, port: int | None) -> None:
        self.name = name
        self.args = args
        self.env = env
        self.log_path = log_path
        self.port = port
        self.process: subprocess.Popen[bytes] | None = None
        self._log_offset = 0
        self.restarts: list[float] = []  # seconds from the start until ready, per (re)start
        self.ready_at = 0.0  # time.monotonic() when it was last ready

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Called from the main thread only: the child ends with the thread that started it (end_with_parent)."""
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(  # noqa: S603 (our own kasir binary)
                [str(BIN / "kasir"), *self.args],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=end_with_parent,
            )

    async def ready(self) -> None:
        """Until it answers /readyz (a server) or says its worker started (a worker), or exits: however long a
        start takes on a busy machine. A process that neither gets ready nor exits is a hung soak, which
        whoever runs the soak bounds as a whole (tests/test_crash_soak.py: its subprocess timeout)."""
        assert self.process is not None
        started = time.monotonic()
        async with httpx.AsyncClient(timeout=None, trust_env=False) as http:  # an answer, or the process's end
            while True:
                if self.process.poll() is not None:
                    raise RuntimeError(f"{self.name} exited with {self.process.returncode}; see {self.log_path}")
                if self.port is not None:
                    with contextlib.suppress(httpx.TransportError):
                        if (await http.get(f"{self.base_url}/readyz")).status_code == 200:
                            self.restarts.append(time.monotonic() - started)
                            self.ready_at = time.monotonic()
                            return
                elif b"callback worker started" in self._log_since_start():
                    self.restarts.append(time.monotonic() - started)
                    self.ready_at = time.monotonic()
                    return
                await asyncio.sleep(0.05)

    def _log_since_start(self) -> bytes:
        with self.log_path.open("rb") as log:
            log.seek(self._log_offset)
            return log.read()

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait()

    def stop(self) -> None:
        """SIGTERM (a worker finishes its attempts in flight), SIGKILL after 30 s."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# --- the merchant's callback receiver -----------------------------------------------------------


@dataclass
class Receipt:
    at: float
    callback_id: int
    attempt: int
    path: str
    transaction_id: str | None
    status: int


OK = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n{"message":"ok"}'
REFUSED = (
    b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: 19\r\n\r\n"
    b'{"message":"error"}'
)


class Receiver:
    """A merchant on 127.0.0.1: answers 200 `{"message":"ok"}`, or 500 on /refuse and to a seeded share of
    attempts, some after a delay; keeps every request it answered."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.port = free_port()
        self.receipts: list[Receipt] = []
        self.unreadable = 0
        self._server: asyncio.Server | None = None

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _draw(self, callback_id: int, attempt: int, purpose: str) -> float:
        digest = hashlib.sha256(f"{self.config.seed}:{purpose}:{callback_id}:{attempt}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1] if len(lines[0].split(" ")) > 1 else "?"
                headers = {}
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
                callback_id = int(headers.get("x-kasir-callback-id", "0") or 0)
                attempt = int(headers.get("x-kasir-attempt", "0") or 0)
                try:
                    transaction_id = json.loads(body).get("transaction_id")
                except (ValueError, AttributeError):
                    transaction_id = None
                    self.unreadable += 1
                refuse = path == "/refuse" or self._draw(callback_id, attempt, "flaky") < self.config.flaky
                if self._draw(callback_id, attempt, "slow") < self.config.slow:
                    await asyncio.sleep(random.uniform(*SLOW_ANSWER_SECONDS))  # noqa: S311
                status = 500 if refuse else 200
                # Kept once answered: a worker killed while it waited has still made the merchant act on it.
                self.receipts.append(Receipt(time.time(), callback_id, attempt, path, transaction_id, status))
                writer.write(REFUSED if refuse else OK)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            writer.close()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 5)


# --- the clients --------------------------------------------------------------------------------


@dataclass
class Key:
    key: str
    external_id: str
    refused_callback: bool
    first_sent: float
    sends: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    answered_after: float | None = None  # seconds from the first send to the final answer
    status: int | None = None
    transaction_id: str | None = None
    answer_excerpt: str = ""
    replayed: bool = False


class Load:
    def __init__(self, config: Config, servers: list[Process], receiver: Receiver, credentials: dict[str, str]):
        self.config = config
        self.servers = servers
        self.receiver = receiver
        self.authorization = basic_auth(credentials["merchant_id"], credentials["secret"])
        self.keys: list[Key] = []
        self.in_flight: Counter[str] = Counter()  # server name -> requests in flight
        self.kills_done = 0
        self.started = time.monotonic()
        self._next_slot = time.monotonic()
        self.rng = random.Random(config.seed)  # noqa: S311 (reproducible choices, no secret)
        self.payouts: soak_payouts.PayoutLoad | None = None

    def enough(self) -> bool:
        return (
            len(self.keys) >= self.config.payments
            and self.kills_done >= self.config.kills
            and (self.payouts is None or self.payouts.enough())
        )

    async def _pace(self) -> None:
        now = time.monotonic()
        slot = max(self._next_slot, now)
        self._next_slot = slot + 1 / self.config.rate
        await asyncio.sleep(slot - now)

    async def client(self, number: int) -> None:
        async with httpx.AsyncClient(timeout=10, trust_env=False) as http:
            while not self.enough():
                await self._pace()
                if self.enough():
                    return
                await self.charge(http, number)

    async def charge(self, http: httpx.AsyncClient, number: int) -> None:
        sequence = len(self.keys)
        refused = self.config.refuse_every > 0 and sequence % self.config.refuse_every == self.config.refuse_every - 1
        body = charge_body(
            mode="CLOSE", number=APPROVED, callback_url=self.receiver.url("/refuse" if refused else "/callback")
        )
        record = Key(f"soak-{number}-{secrets.token_hex(8)}", body["externalId"], refused, time.monotonic())
        self.keys.append(record)
        content = compact(body)
        headers = {
            "Content-Type": "application/json",
            "Authorization": self.authorization,
            "X-Idempotency-Key": record.key,
        }
        server = self.rng.choice(self.servers)
        backoff = 0.05
        while True:
            record.sends += 1
            self.in_flight[server.name] += 1
            try:
                answer: httpx.Response | None = await http.post(
                    server.base_url + CHARGE, content=content, headers=headers
                )
            except httpx.TransportError as error:
                answer = None
                record.errors[type(error).__name__] += 1
            finally:
                self.in_flight[server.name] -= 1
            if answer is not None:
                retry = (
                    answer.status_code >= 500
                    or answer.status_code == 429
                    or (answer.status_code == 409 and "REQUEST_IN_PROGRESS" in answer.text)
                )
                if not retry:
                    record.answered_after = time.monotonic() - record.first_sent
                    record.status = answer.status_code
                    record.replayed = answer.headers.get("idempotent-replayed") == "true"
                    if answer.status_code == 200:
                        record.transaction_id = answer.json()["data"]["transactionId"]
                    else:
                        record.answer_excerpt = answer.text[:300]
                    return
                record.errors[f"HTTP {answer.status_code}"] += 1
            if time.monotonic() - record.first_sent > self.config.client_deadline:
                return  # no final answer: counted
            await asyncio.sleep(backoff * (0.5 + self.rng.random()))
            backoff = min(backoff * 2, 1.0)
            server = self.servers[(self.servers.index(server) + 1) % len(self.servers)]


# --- the kill loop ------------------------------------------------------------------------------


@dataclass
class Kill:
    at: float  # seconds from the start of the load
    process: str
    charges_in_flight: int  # on that server when it died (servers only)
    claims_held: int  # callbacks it had claimed (delivering, its lease) when it died
    ready_after: float | None = None  # seconds from the restart until it answered (servers) or polled (workers)


async def claims_held(database: Database, process: Process) -> int:
    """Callbacks claimed by that process and not yet settled (its worker's name carries its pid)."""
    from sqlalchemy import func, select

    from kasir.callbacks.models import Callback, CallbackStatus
    from kasir.db import fetch_value

    assert process.process is not None
    async with database.unit_of_work(read_only=True) as session:
        count = await fetch_value(
            session,
            select(func.count())
            .select_from(Callback)
            .where(
                Callback.status == CallbackStatus.DELIVERING.value,
                Callback.lease_owner.like(f"%:{process.process.pid}:%"),
            ),
        )
    return int(count or 0)


async def killer(
    load: Load, processes: list[Process], kills: list[Kill], rng: random.Random, database: Database
) -> None:
    """One process at a time is killed, but restarts overlap: a victim is any process that has been up for
    SOAK_MIN_UPTIME, except that a server is killed only while the other one is up (so charges go on and
    the victim has some in flight); of those, one killed least often so far (ties drawn at random). A
    server is killed with charges in flight, a process that delivers callbacks while it holds claims,
    when that comes within a few seconds."""
    up = {process.name: True for process in processes}
    killed: Counter[str] = Counter()
    restarts: list[asyncio.Task[None]] = []

    async def restart(victim: Process, kill: Kill) -> None:
        victim.start()
        await victim.ready()
        kill.ready_after = round(victim.restarts[-1], 2)
        up[victim.name] = True

    def can_kill(process: Process) -> bool:
        if not up[process.name] or time.monotonic() - process.ready_at < load.config.min_uptime:
            return False
        return process.port is None or all(up[p.name] for p in load.servers)

    try:
        while not load.enough():
            await asyncio.sleep(load.config.kill_pause * rng.uniform(0.4, 1.6))
            for task in [t for t in restarts if t.done()]:
                task.result()  # a process that did not come back ends the soak
                restarts.remove(task)
            candidates = [p for p in processes if can_kill(p)]
            if not candidates:
                continue
            fewest = min(killed[p.name] for p in candidates)
            victim = rng.choice([p for p in candidates if killed[p.name] == fewest])
            killed[victim.name] += 1
            waited = time.monotonic()
            if victim.port is not None:  # a server: in the middle of charges
                while load.in_flight[victim.name] == 0 and time.monotonic() - waited < 2:
                    await asyncio.sleep(0.005)
            claims = 0
            if victim.name != "api server":  # it delivers callbacks: preferably while it holds some
                while True:
                    claims = await claims_held(database, victim)
                    if claims or time.monotonic() - waited > 3:
                        break
                    await asyncio.sleep(0.05)
            kill = Kill(
                round(time.monotonic() - load.started, 2),
                victim.name,
                load.in_flight[victim.name] if victim.port is not None else 0,
                claims,
            )
            up[victim.name] = False
            victim.kill()
            load.kills_done += 1
            kills.append(kill)
            restarts.append(asyncio.create_task(restart(victim, kill)))
        await asyncio.gather(*restarts)
    finally:
        for task in restarts:
            task.cancel()  # an interrupted soak starts nothing more


# --- the count ----------------------------------------------------------------------------------


async def prepare(database: Database) -> dict[str, str]:
    """The schema and the soak's merchant (its RSA key is not used: the card charge signs with Basic auth)."""
    from cryptography.hazmat.primitives.asymmetric import rsa
    from tests.support.builders import public_pem

    from kasir.db import upgrade_schema
    from kasir.merchants.service import merchant_service

    await upgrade_schema(database)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    async with database.unit_of_work() as session:
        _merchant, credentials = await merchant_service.create(
            session, name="Soak Merchant", public_key=public_pem(key)
        )
    return {"merchant_id": credentials.merchant_id, "secret": credentials.secret}


async def read_database(database: Database, merchant_id: str) -> dict[str, Any]:
    from sqlalchemy import func, select

    from kasir.callbacks.models import Callback
    from kasir.card.models import CardAttempt, CardOrder
    from kasir.db import fetch, fetch_value
    from kasir.processors.models import ProcessorCall

    async with database.unit_of_work(read_only=True) as session:
        orders = await fetch(
            session, select(CardOrder.id, CardOrder.external_id).where(CardOrder.merchant_id == merchant_id)
        )
        attempts = await fetch(
            session,
            select(CardAttempt.card_order_id, func.count())
            .join(CardOrder, CardOrder.id == CardAttempt.card_order_id)
            .where(CardOrder.merchant_id == merchant_id)
            .group_by(CardAttempt.card_order_id),
        )
        calls_in_flight = await fetch_value(session, select(func.count()).select_from(ProcessorCall))
        callbacks = await fetch(
            session,
            select(
                Callback.id,
                Callback.transaction_ref,
                Callback.status,
                Callback.attempts_made,
                Callback.max_attempts,
                Callback.url,
            ).where(Callback.merchant_id == merchant_id),
        )
    return {
        "orders": [(row.id, row.external_id) for row in orders],
        "attempts": {row[0]: row[1] for row in attempts},
        # Asked of the acquirer by a server that was killed before it recorded the answer: the worker
        # finishes these (kasir.processors.calls), their callbacks with them.
        "calls_in_flight": calls_in_flight,
        "callbacks": [
            {
                "id": row.id,
                "transaction": row.transaction_ref,
                "status": row.status,
                "attempts": row.attempts_made,
                "max_attempts": row.max_attempts,
                "refused": row.url.endswith("/refuse"),
            }
            for row in callbacks
        ],
    }


async def wait_for_drain(database: Database, merchant_id: str, timeout: float) -> tuple[float, bool]:
    started = time.monotonic()
    while True:
        state = await read_database(database, merchant_id)
        settled = all(c["status"] in ("delivered", "failed") for c in state["callbacks"])
        if settled and not state["calls_in_flight"]:
            return time.monotonic() - started, True
        if time.monotonic() - started > timeout:
            return time.monotonic() - started, False
        await asyncio.sleep(0.5)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def count(load: Load, receiver: Receiver, state: dict[str, Any]) -> dict[str, Any]:
    keys = load.keys
    answered = [k for k in keys if k.status is not None]
    unanswered = [k for k in keys if k.status is None]
    wrong = [k for k in answered if k.status != 200]
    by_external: dict[str, list[str]] = defaultdict(list)
    for order_id, external_id in state["orders"]:
        by_external[external_id].append(order_id)
    key_externals = {k.external_id for k in keys}
    orders_per_key = [len(by_external.get(k.external_id, [])) for k in keys]
    stray_orders = sum(len(ids) for external, ids in by_external.items() if external not in key_externals)
    extra_attempts = sum(max(0, n - 1) for n in state["attempts"].values())
    double_charges = sum(max(0, n - 1) for n in orders_per_key) + extra_attempts + stray_orders
    # A 200 whose transaction is not the key's one order: a replay that answered another charge, or none.
    mismatched = sum(
        1 for k in answered if k.status == 200 and by_external.get(k.external_id, [None])[0] != k.transaction_id
    )

    accepted: Counter[int] = Counter(r.callback_id for r in receiver.receipts if r.status == 200)
    accepted_transactions = {r.transaction_id for r in receiver.receipts if r.status == 200}
    callbacks_by_transaction: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for callback in state["callbacks"]:
        callbacks_by_transaction[callback["transaction"]].append(callback)
    lost: list[dict[str, Any]] = []
    given_up = 0
    for order_id, _external in state["orders"]:
        rows = callbacks_by_transaction.get(order_id, [])
        if not rows:
            lost.append({"transaction": order_id, "why": "no callback recorded"})
            continue
        for row in rows:
            if row["status"] == "delivered" and row["id"] in accepted and order_id in accepted_transactions:
                continue
            if row["status"] == "failed" and row["attempts"] >= row["max_attempts"]:
                given_up += 1
                continue
            why = "delivered but never accepted by the receiver" if row["status"] == "delivered" else row["status"]
            lost.append({"transaction": order_id, "callback": row["id"], "why": why})
    delivered = sum(1 for c in state["callbacks"] if c["status"] == "delivered")
    duplicates = sum(n - 1 for n in accepted.values() if n > 1)
    resent_attempts = Counter((r.callback_id, r.attempt) for r in receiver.receipts)
    waits = [k.answered_after for k in answered if k.answered_after is not None]
    retried = [k for k in keys if k.sends > 1]
    return {
        "payments": {
            "keys": len(keys),
            "answered_200": sum(1 for k in answered if k.status == 200),
            "answered_as_replay": sum(1 for k in answered if k.replayed),
            "unanswered": len(unanswered),
            "wrong_answers": len(wrong),
            "wrong_answer_examples": [{"status": k.status, "body": k.answer_excerpt} for k in wrong[:5]],
            "answers_not_matching_the_order": mismatched,
            "keys_retried": len(retried),
            "client_retries": sum(k.sends - 1 for k in keys),
            "retry_causes": dict(sum((k.errors for k in keys), Counter()).most_common()),
            "longest_wait_s": round(max(waits, default=0.0), 3),
            "p99_wait_s": round(percentile(waits, 99), 3),
            "longest_wait_retried_s": round(max((k.answered_after or 0.0 for k in retried), default=0.0), 3),
        },
        "orders": len(state["orders"]),
        "double_charges": double_charges,
        "callbacks": {
            "recorded": len(state["callbacks"]),
            "delivered": delivered,
            "given_up": given_up,
            "given_up_expected": sum(1 for k in keys if k.refused_callback and k.status == 200),
            "lost": len(lost),
            "lost_examples": lost[:10],
            "accepted_receipts": sum(accepted.values()),
            "duplicates": duplicates,
            "duplicate_rate": round(duplicates / delivered, 5) if delivered else 0.0,
            "callbacks_received_more_than_once": sum(1 for n in accepted.values() if n > 1),
            "same_attempt_received_twice": sum(1 for n in resent_attempts.values() if n > 1),
            "requests_received": len(receiver.receipts),
            "refused_by_receiver": sum(1 for r in receiver.receipts if r.status != 200),
            "unreadable_bodies": receiver.unreadable,
        },
    }


# --- the run ------------------------------------------------------------------------------------


async def soak(config: Config, workdir: Path, database_url: str) -> dict[str, Any]:
    data_dir = workdir / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        **PROCESS_SETTINGS,
        "KASIR_ENV": "staging",
        "KASIR_DATA_DIR": str(data_dir),
        "KASIR_DATABASE_URL": database_url,
        "KASIR_SECRET_KEY": secrets.token_urlsafe(32),
        "KASIR_ADMIN_TOKEN": secrets.token_urlsafe(24),
        "KASIR_LOG_LEVEL": "INFO",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }
    from kasir.config import Settings, configure
    from kasir.db import Database

    settings = Settings(
        env="staging",
        data_dir=data_dir,
        database_url=database_url,
        secret_key=env["KASIR_SECRET_KEY"],
        admin_token=env["KASIR_ADMIN_TOKEN"],
    )
    configure(settings)  # the merchant's secrets are sealed with the processes' KASIR_SECRET_KEY
    database = Database(settings)
    rail = soak_payouts.start_rail() if config.transfers else None
    try:
        credentials = await prepare(database)
        payouts = None
        if rail is not None:
            env.update(soak_payouts.rail_env(rail, workdir / "site"))
            payouts = await soak_payouts.prepare(database, config.transfers)
        return await _soak(config, env, database, credentials, workdir, rail, payouts)
    finally:
        if rail is not None:
            rail.stop()
        await database.dispose()


async def _soak(
    config: Config,
    env: dict[str, str],
    database: Database,
    credentials: dict[str, str],
    workdir: Path,
    rail: Any = None,
    payout_merchant: soak_payouts.PayoutMerchant | None = None,
) -> dict[str, Any]:
    receiver = Receiver(config)
    await receiver.start()
    logs = workdir / "logs"
    logs.mkdir()
    api_port, embedded_port = free_port(), free_port()
    api = Process("api server", ["serve", "--port", str(api_port), "--no-worker"], env, logs / "api.log", api_port)
    api.env = {**env, "KASIR_PUBLIC_URL": api.base_url}
    embedded = Process(
        "embedded-worker server", ["serve", "--port", str(embedded_port)], env, logs / "embedded.log", embedded_port
    )
    embedded.env = {**env, "KASIR_PUBLIC_URL": embedded.base_url}
    workers = [
        Process(f"worker {n + 1}", ["worker"], env, logs / f"worker-{n + 1}.log", None) for n in range(config.workers)
    ]
    processes = [api, embedded, *workers]
    kills: list[Kill] = []
    tasks: list[asyncio.Task[None]] = []
    try:
        for process in processes:
            process.start()
        for process in processes:
            await process.ready()
        print(f"soak on {config.db}: {len(processes)} processes up; logs in {logs}", flush=True)

        load = Load(config, [api, embedded], receiver, credentials)
        if payout_merchant is not None:
            load.payouts = soak_payouts.PayoutLoad(
                load, payout_merchant, config.transfers, receiver.url("/payout"), config.seed + 2
            )
        rng = random.Random(config.seed + 1)  # noqa: S311
        tasks.append(asyncio.create_task(report_progress(load, kills)))
        settled = asyncio.Event()
        if rail is not None:
            tasks.append(asyncio.create_task(soak_payouts.settle(rail, [api, embedded], settled)))
        async with asyncio.TaskGroup() as group:  # a failure in one (a process that does not come back) ends all
            group.create_task(killer(load, processes, kills, rng, database))
            for n in range(config.clients):
                group.create_task(load.client(n))
            if load.payouts is not None:
                for n in range(config.payout_clients):
                    group.create_task(load.payouts.client(n))
        tasks[0].cancel()
        load_seconds = time.monotonic() - load.started
        drain_seconds, drained = await wait_for_drain(database, credentials["merchant_id"], config.drain_timeout)
        state = await read_database(database, credentials["merchant_id"])
        payout_state = None
        if payout_merchant is not None and rail is not None:
            settled.set()
            await asyncio.wait_for(tasks[1], config.drain_timeout)  # every pending transfer settled at the rail
            payout_drain, payout_drained = await soak_payouts.wait_for_drain(
                database, payout_merchant.merchant_id, config.drain_timeout
            )
            drain_seconds, drained = max(drain_seconds, payout_drain), drained and payout_drained
            payout_state = await soak_payouts.read(database, payout_merchant.merchant_id)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for process in processes:
            process.stop()
        await receiver.stop()

    counts = count(load, receiver, state)
    if load.payouts is not None and payout_state is not None and payout_merchant is not None:
        counts["payouts"] = soak_payouts.count(load.payouts, rail, payout_state, receiver.receipts,
                                               payout_merchant.top_up)  # fmt: skip
    kill_counts = Counter(k.process for k in kills)
    server_kills = [k for k in kills if k.process.endswith("server")]
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "database": config.db,
        "machine": machine(),
        "settings": {
            "payments": config.payments,
            "kills": config.kills,
            "workers": config.workers,
            "clients": config.clients,
            "rate_per_second": config.rate,
            "kill_pause_s": config.kill_pause,
            "min_uptime_s": config.min_uptime,
            "receiver_flaky": config.flaky,
            "receiver_slow": config.slow,
            "refuse_every": config.refuse_every,
            "client_deadline_s": config.client_deadline,
            "seed": config.seed,
            "transfers": config.transfers,
            "payout_clients": config.payout_clients,
            "process_settings": PROCESS_SETTINGS,
        },
        "topology": [
            "kasir serve --no-worker (API server)",
            "kasir serve (embedded callback worker)",
            f"{config.workers} x kasir worker",
        ],
        "kills": {
            "total": len(kills),
            "by_process": dict(sorted(kill_counts.items())),
            "servers_killed_with_charges_in_flight": sum(1 for k in server_kills if k.charges_in_flight > 0),
            "charges_in_flight_at_server_kills": sum(k.charges_in_flight for k in server_kills),
            "kills_holding_callback_claims": sum(1 for k in kills if k.claims_held > 0),
            "callback_claims_held_at_kills": sum(k.claims_held for k in kills),
            "longest_restart_s": max((k.ready_after or 0.0 for k in kills), default=0.0),
        },
        **counts,
        "drained": drained,
        "drain_seconds": round(drain_seconds, 2),
        "load_seconds": round(load_seconds, 1),
        "kill_log": [k.__dict__ for k in kills],
    }
    result["passed"] = passed(config, result)
    return result


def passed(config: Config, result: dict[str, Any]) -> bool:
    if config.transfers and ("payouts" not in result or not soak_payouts.passed(result["payouts"], config.transfers)):
        return False
    return (
        result["callbacks"]["lost"] == 0
        and result["double_charges"] == 0
        and result["payments"]["unanswered"] == 0
        and result["payments"]["wrong_answers"] == 0
        and result["payments"]["answers_not_matching_the_order"] == 0
        and result["drained"]
        and result["kills"]["total"] >= config.kills
        and result["callbacks"]["recorded"] >= config.payments
    )


async def report_progress(load: Load, kills: list[Kill]) -> None:
    while True:
        await asyncio.sleep(15)
        answered = sum(1 for k in load.keys if k.status is not None)
        elapsed = time.monotonic() - load.started
        transfers = f", {len(load.payouts.keys)} transfers" if load.payouts is not None else ""
        print(
            f"  {elapsed:6.0f} s: {len(load.keys)} keys, {answered} answered{transfers}, {len(kills)} kills",
            flush=True,
        )


def machine() -> dict[str, Any]:
    cpu = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
    }


def write_markdown(path: Path, result: dict[str, Any]) -> None:
    p, c, k = result["payments"], result["callbacks"], result["kills"]
    s = result["settings"]
    by_process = ", ".join(f"{name} {n}" for name, n in k["by_process"].items())
    verdict = "passed" if result["passed"] else "FAILED"
    lines = [
        f"# Crash soak on {result['database']} ({result['date']})",
        "",
        f"{result['machine']['cpu']}, {result['machine']['cores']} cores (shared; load average at the end "
        f"{result['machine']['load_average_at_end'][0]}). Topology: {'; '.join(result['topology'])}. "
        f"{s['clients']} clients, keyed card charges paced at {s['rate_per_second']:g}/s, receiver answering 500 to "
        f"{s['receiver_flaky']:.0%} of attempts and late to {s['receiver_slow']:.0%}, every {s['refuse_every']}th "
        f"payment's URL always refused. Seed {s['seed']}. Made by `make soak` (scripts/soak.py).",
        "",
        "| what | count |",
        "|---|---:|",
        f"| SIGKILLs (each followed by a restart) | {k['total']} ({by_process}) |",
        f"| servers killed with charges in flight | {k['servers_killed_with_charges_in_flight']} "
        f"({k['charges_in_flight_at_server_kills']} charges cut) |",
        f"| processes killed while holding callback claims | {k['kills_holding_callback_claims']} "
        f"({k['callback_claims_held_at_kills']} claims) |",
        f"| keyed charges (payments) | {p['keys']} |",
        f"| answered 200 (of which replays) | {p['answered_200']} ({p['answered_as_replay']}) |",
        f"| **requests without a final answer** | **{p['unanswered']}** |",
        f"| final answers other than 200 | {p['wrong_answers']} |",
        f"| keys retried by their client / retries | {p['keys_retried']} / {p['client_retries']} |",
        f"| longest wait for a final answer | {p['longest_wait_s']:.2f} s (p99 {p['p99_wait_s']:.2f} s) |",
        f"| **double charges** | **{result['double_charges']}** |",
        f"| callbacks recorded | {c['recorded']} |",
        f"| delivered / given up after their attempts (expected) | {c['delivered']} / {c['given_up']} "
        f"({c['given_up_expected']}) |",
        f"| **callbacks lost** | **{c['lost']}** |",
        f"| duplicates received (rate per delivered callback) | {c['duplicates']} ({c['duplicate_rate']:.3%}) |",
        f"| the same attempt received twice | {c['same_attempt_received_twice']} |",
        f"| time to drain after the last answer | {result['drain_seconds']:.1f} s |",
        f"| load phase | {result['load_seconds']:.0f} s |",
        *(soak_payouts.markdown_rows(result["payouts"]) if "payouts" in result else []),
        "",
        f"Result: {verdict}. Counts and the kill log: [{path.stem}.json]({path.stem}.json).",
        "",
    ]
    path.with_suffix(".md").write_text("\n".join(lines))


def main() -> int:
    config = Config.from_env()
    workdir = Path(tempfile.mkdtemp(prefix=f"kasir-soak-{config.db}-"))
    cluster: PostgresCluster | None = None
    keep = False
    try:
        if config.database_url:
            database_url = config.database_url
        elif config.db == "postgres":
            cluster = PostgresCluster(durable=True)
            database_url = cluster.start()
        else:
            database_url = f"sqlite+aiosqlite:///{workdir / 'data' / 'kasir.db'}"
        result = asyncio.run(_run_until_signalled(config, workdir, database_url))
        config.out.parent.mkdir(parents=True, exist_ok=True)
        config.out.write_text(json.dumps(result, indent=2) + "\n")
        write_markdown(config.out, result)
        print(config.out.with_suffix(".md").read_text())
        keep = not result["passed"]
        return 0 if result["passed"] else 1
    except KeyboardInterrupt:
        print("soak interrupted", file=sys.stderr)
        return 130
    except BaseException:
        keep = True  # the processes' logs say why
        raise
    finally:
        if cluster is not None:
            cluster.stop()
        if keep:
            print(f"logs kept in {workdir / 'logs'}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


async def _run_until_signalled(config: Config, workdir: Path, database_url: str) -> dict[str, Any]:
    """Ctrl-C or SIGTERM (even where the shell started it with SIGINT ignored): the run is cancelled and its
    `finally` stops every process it started."""
    task = asyncio.current_task()
    assert task is not None
    for signum in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(signum, task.cancel)
    try:
        return await soak(config, workdir, database_url)
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None


if __name__ == "__main__":
    sys.exit(main())
