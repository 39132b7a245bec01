"""`make soak-tenants`: one hostile merchant beside a good one; the good one's callbacks must not notice (issue 43).

The topology, all on 127.0.0.1 and one database (a SQLite file, or a PostgreSQL cluster this script starts and
removes): `kasir serve --no-worker` and one `kasir worker`, in staging (the simulator approves the charges), each
in a private mount namespace whose /etc/resolv.conf names only a name server that reads every query and answers
none (tests/support/blackhole_dns.py; root only), and whose /etc/hosts names the good merchant's callback host.

Two runs, each on newly started processes:

- **A (baseline):** the good merchant makes TENANTS_GOOD keyed card charges (TENANTS_RATE a second), each with a
  callbackUrl on a receiver that answers 200 at once (its host a name, `hooks.good.test`, as a merchant's is: the
  worker looks it up, through the same getaddrinfo). A callback's latency is its receipt time minus the time the
  charge's answer came back.
- **B:** the same good load, while a hostile merchant's callbacks are being delivered: its TENANTS_HOSTILE charges
  (a third each) name an endpoint answering 300 MB (chunked, as fast as it is read), one answering after 9.5 s,
  and a name under the black-hole name server (`hooks.blackhole.test`). They are made first; the good load
  starts once each hostile endpoint has had a request and the name server a query.

Reported (bench/results/2026-11-28-tenants-<db>.json and .md, or TENANTS_OUT): the good callbacks' latency p50,
p95 and max in A and B, the ratio of B's p95 to A's, the worker's RSS when it is ready in B and its peak (VmHWM)
at B's end, the hostile attempts made (by outcome), the queries the name server read, and errors (a charge not
answered 200, a good callback never received). The exit status is 1 when B's p95 is more than 2x A's (or more than
TENANTS_P95_FLOOR_MS above it: A's p95 is a few milliseconds, and on a shared machine a few milliseconds are
noise; a claim that cost every callback 20 ms more is not), the worker's peak is more than
50 MiB above its start, or there is an error.

Settings (environment): TENANTS_DB (sqlite | postgres), TENANTS_GOOD (50), TENANTS_HOSTILE (150), TENANTS_RATE
(good charges a second, 5), TENANTS_P95_FLOOR_MS (10), TENANTS_OUT, TENANTS_KEEP (keep the processes' logs even
when the run passed).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts.soak import machine, percentile  # noqa: E402
from tests.support.blackhole_dns import BLACK_HOLE_NAME, BlackHoleDns, hosts_file, in_resolver_namespace  # noqa: E402
from tests.support.postgres import PostgresCluster, free_port  # noqa: E402
from tests.support.process import end_with_parent  # noqa: E402
from tests.support.wire import basic_auth, compact  # noqa: E402
from tests.support.wire.card import APPROVED, CHARGE, charge_body  # noqa: E402

if TYPE_CHECKING:
    from kasir.db import Database

BIN = Path(sys.executable).parent
DATABASES = ("sqlite", "postgres")
HUGE_BYTES = 300 * 1024 * 1024
SLOW_SECONDS = 9.5
RATIO_BOUND = 2.0
RSS_BOUND_MIB = 50.0
# Production's attempt timeout (10 s, so the 9.5 s answers are accepted) and lease; retries within the run.
PROCESS_SETTINGS = {
    "KASIR_CALLBACK_SCHEDULE": "2,4",
    "KASIR_CALLBACK_TIMEOUT_SECONDS": "10",
    "KASIR_CALLBACK_POLL_SECONDS": "0.5",
}
HOSTILE_KINDS = ("huge", "slow", "black hole")
# The good merchant's callback host: a name, as a merchant's is, that the processes' /etc/hosts answers at once.
GOOD_NAME = "hooks.good.test"


def _env(name: str, default: str) -> str:
    return os.environ.get(name, "") or default


@dataclass(frozen=True)
class Config:
    db: str
    good: int
    hostile: int
    rate: float
    p95_floor_ms: float
    out: Path

    @classmethod
    def from_env(cls) -> Config:
        db = _env("TENANTS_DB", "sqlite")
        if db not in DATABASES:
            raise SystemExit(f"TENANTS_DB must be one of {', '.join(DATABASES)}, not {db!r}")
        default_out = ROOT / "bench" / "results" / f"{datetime.now(UTC).date()}-tenants-{db}.json"
        return cls(
            db=db,
            good=int(_env("TENANTS_GOOD", "50")),
            hostile=int(_env("TENANTS_HOSTILE", "150")),
            rate=float(_env("TENANTS_RATE", "5")),
            p95_floor_ms=float(_env("TENANTS_P95_FLOOR_MS", "10")),
            out=Path(_env("TENANTS_OUT", str(default_out))),
        )


# --- the processes ------------------------------------------------------------------------------


class Process:
    """One `kasir` process in the black-hole namespace; its pid is the kasir process's (unshare and sh exec it)."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], log: Path, wrap: Callable[..., list[str]]):
        self.name, self.args, self.env, self.log_path, self.wrap = name, args, env, log, wrap
        self.port = int(args[args.index("--port") + 1]) if "--port" in args else None
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(  # noqa: S603 (our own kasir binary)
                self.wrap([str(BIN / "kasir"), *self.args]),
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=end_with_parent,
            )

    async def ready(self) -> None:
        assert self.process is not None
        async with httpx.AsyncClient(timeout=None, trust_env=False) as http:
            while True:
                if self.process.poll() is not None:
                    raise RuntimeError(f"{self.name} exited with {self.process.returncode}; see {self.log_path}")
                if self.port is not None:
                    with contextlib.suppress(httpx.TransportError):
                        if (await http.get(f"http://127.0.0.1:{self.port}/readyz")).status_code == 200:
                            return
                elif b"callback worker started" in self.log_path.read_bytes():
                    return
                await asyncio.sleep(0.05)

    def memory_kib(self) -> dict[str, int]:
        """VmRSS and VmHWM (the peak) of the process, in KiB."""
        assert self.process is not None
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        return {
            line.split(":")[0]: int(line.split()[1])
            for line in status.splitlines()
            if line.startswith(("VmRSS", "VmHWM"))
        }

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# --- the merchants' endpoints -------------------------------------------------------------------


OK = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n{"message":"ok"}'


async def read_request(reader: asyncio.StreamReader) -> tuple[dict[str, str], bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    headers = {}
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return headers, await reader.readexactly(int(headers.get("content-length", "0") or 0))


class GoodReceiver:
    """The good merchant: answers 200 at once; the time each transaction's first callback arrived."""

    def __init__(self) -> None:
        self.port = free_port()
        self.received: dict[str, float] = {}
        self.requests = 0
        self._server: asyncio.Server | None = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                _headers, body = await read_request(reader)
                at = time.monotonic()
                self.requests += 1
                with contextlib.suppress(ValueError, AttributeError):
                    self.received.setdefault(json.loads(body)["transaction_id"], at)
                writer.write(OK)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()


class HostileEndpoints:
    """The hostile merchant's endpoints, on an event loop of their own in a thread: writing 300 MB answers
    costs the good receiver's loop nothing, so its receipt times are the worker's doing alone."""

    def __init__(self) -> None:
        self.huge_port, self.slow_port = free_port(), free_port()
        self.counts: Counter[str] = Counter()  # requests received, by endpoint
        self.huge_bytes_sent = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="hostile", daemon=True)
        self._servers: list[asyncio.Server] = []

    def urls(self) -> dict[str, str]:
        return {
            "huge": f"http://127.0.0.1:{self.huge_port}/huge",
            "slow": f"http://127.0.0.1:{self.slow_port}/slow",
            "black hole": f"http://{BLACK_HOLE_NAME}:{self.slow_port}/black-hole",
        }

    async def _huge(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        chunk = b"x" * (1024 * 1024)
        framed = b"%x\r\n" % len(chunk) + chunk + b"\r\n"
        try:
            await read_request(reader)
            self.counts["huge"] += 1
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
            sent = 0
            while sent < HUGE_BYTES:
                writer.write(framed)
                await writer.drain()
                sent += len(chunk)
                self.huge_bytes_sent += len(chunk)
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass  # the worker read what it keeps and closed
        finally:
            writer.close()

    async def _slow(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                await read_request(reader)
                self.counts["slow"] += 1
                await asyncio.sleep(SLOW_SECONDS)
                writer.write(OK)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    def start(self) -> None:
        self._thread.start()

        async def listen() -> None:
            self._servers.append(await asyncio.start_server(self._huge, "127.0.0.1", self.huge_port))
            self._servers.append(await asyncio.start_server(self._slow, "127.0.0.1", self.slow_port))

        asyncio.run_coroutine_threadsafe(listen(), self._loop).result(10)

    def stop(self) -> None:
        async def close() -> None:
            for server in self._servers:
                server.close()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


# --- the load -----------------------------------------------------------------------------------


@dataclass
class Charge:
    merchant: str
    url: str
    sent_at: float = 0.0
    answered_at: float | None = None
    status: int | None = None
    transaction_id: str | None = None
    error: str | None = None


@dataclass
class Run:
    name: str
    good: list[Charge] = field(default_factory=list)
    hostile: list[Charge] = field(default_factory=list)


async def charge(http: httpx.AsyncClient, base_url: str, authorization: str, record: Charge) -> None:
    body = charge_body(mode="CLOSE", number=APPROVED, callback_url=record.url)
    headers = {
        "Content-Type": "application/json",
        "Authorization": authorization,
        "X-Idempotency-Key": secrets.token_hex(12),
    }
    record.sent_at = time.monotonic()
    try:
        answer = await http.post(base_url + CHARGE, content=compact(body), headers=headers)
    except httpx.HTTPError as error:
        record.error = f"{type(error).__name__}: {error}"
        return
    record.answered_at = time.monotonic()
    record.status = answer.status_code
    if answer.status_code == 200:
        record.transaction_id = answer.json()["data"]["transactionId"]
    else:
        record.error = answer.text[:300]


async def paced(count: int, rate: float, make: Callable[[int], Any]) -> None:
    """`count` calls of `make(n)`, started `rate` a second, each awaited in its own task."""
    started = time.monotonic()
    tasks = []
    for n in range(count):
        delay = started + n / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(make(n)))
    await asyncio.gather(*tasks)


# --- one run ------------------------------------------------------------------------------------


async def one_run(
    name: str,
    config: Config,
    env: dict[str, str],
    workdir: Path,
    wrap: Callable[..., list[str]],
    merchants: dict[str, dict[str, str]],
    good_receiver: GoodReceiver,
    hostile: HostileEndpoints | None,
    black_hole_queries: Callable[[], int] = lambda: 0,
) -> dict[str, Any]:
    logs = workdir / "logs"
    logs.mkdir(exist_ok=True)
    port = free_port()
    server = Process(
        "server",
        ["serve", "--port", str(port), "--no-worker"],
        {**env, "KASIR_PUBLIC_URL": f"http://127.0.0.1:{port}"},
        logs / f"{name}-server.log",
        wrap,
    )
    worker = Process("worker", ["worker"], env, logs / f"{name}-worker.log", wrap)
    run = Run(name)
    try:
        for process in (server, worker):
            process.start()
        for process in (server, worker):
            await process.ready()
        rss_start = worker.memory_kib()
        base_url = f"http://127.0.0.1:{port}"
        good_auth = basic_auth(merchants["good"]["merchant_id"], merchants["good"]["secret"])
        hostile_auth = basic_auth(merchants["hostile"]["merchant_id"], merchants["hostile"]["secret"])
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
        async with httpx.AsyncClient(timeout=60, trust_env=False, limits=limits) as http:

            async def good_charge(n: int) -> None:
                record = Charge("good", f"http://{GOOD_NAME}:{good_receiver.port}/good")
                run.good.append(record)
                await charge(http, base_url, good_auth, record)

            load_started = time.monotonic()
            if hostile is not None:
                urls = hostile.urls()

                async def hostile_charge(n: int) -> None:
                    record = Charge("hostile", urls[HOSTILE_KINDS[n % len(HOSTILE_KINDS)]])
                    run.hostile.append(record)
                    await charge(http, base_url, hostile_auth, record)

                # The hostile charges first, then the good load while their callbacks are in flight (at most
                # KASIR_CALLBACK_CONCURRENCY_PER_MERCHANT at once, each up to the 10 s timeout, retried): once each
                # hostile endpoint has had a request and the black hole a query.
                await paced(config.hostile, 50.0, hostile_charge)
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and not (
                    hostile.counts["huge"] and hostile.counts["slow"] and black_hole_queries()
                ):
                    await asyncio.sleep(0.05)
            await paced(config.good, config.rate, good_charge)
            load_seconds = time.monotonic() - load_started
        # Every good callback, or 60 s more: one missing is an error.
        expected = {c.transaction_id for c in run.good if c.transaction_id}
        deadline = time.monotonic() + 60
        while not expected <= good_receiver.received.keys() and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        memory_end = worker.memory_kib()
    finally:
        for process in (server, worker):
            process.stop()

    latencies = [
        (good_receiver.received[c.transaction_id] - c.answered_at) * 1000
        for c in run.good
        if c.transaction_id in good_receiver.received and c.answered_at is not None
    ]
    charges = run.good + run.hostile

    def answer_ms(records: list[Charge]) -> dict[str, float]:
        return spread([(c.answered_at - c.sent_at) * 1000 for c in records if c.answered_at is not None])

    return {
        "good_charges": len(run.good),
        "hostile_charges": len(run.hostile),
        "load_seconds": round(load_seconds, 1),
        "good_callback_latency_ms": {**spread(latencies), "received": len(latencies)},
        "good_callback_latencies_ms_in_order": [round(ms, 1) for ms in latencies],
        "charge_answer_ms": {"good": answer_ms(run.good), "hostile": answer_ms(run.hostile)},
        "slowest_charges": [
            {
                "merchant": c.merchant,
                "sent_s": round(c.sent_at - load_started, 2),
                "answer_ms": round((c.answered_at - c.sent_at) * 1000),
            }
            for c in sorted(charges, key=lambda c: (c.answered_at or 0) - c.sent_at, reverse=True)[:12]
            if c.answered_at is not None
        ],
        "worker_rss_kib": {"start": rss_start["VmRSS"], "end": memory_end["VmRSS"], "peak": memory_end["VmHWM"]},
        "errors": {
            "charges_not_200": sum(1 for c in charges if c.status != 200),
            "charge_error_examples": [c.error for c in charges if c.error][:5],
            "good_callbacks_missing": len(expected - good_receiver.received.keys()),
        },
    }


def spread(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(percentile(values, 50), 1),
        "p95": round(percentile(values, 95), 1),
        "max": round(max(values, default=0.0), 1),
    }


async def hostile_attempts(database: Database, merchant_id: str) -> dict[str, Any]:
    from sqlalchemy import func, select

    from kasir.callbacks.models import Callback, CallbackAttempt
    from kasir.db import fetch

    async with database.unit_of_work(read_only=True) as session:
        rows = await fetch(
            session,
            select(Callback.url, CallbackAttempt.error, CallbackAttempt.http_status, func.count())
            .join(Callback, Callback.id == CallbackAttempt.callback_id)
            .where(Callback.merchant_id == merchant_id)
            .group_by(Callback.url, CallbackAttempt.error, CallbackAttempt.http_status),
        )
        callbacks = await fetch(
            session,
            select(Callback.status, func.count()).where(Callback.merchant_id == merchant_id).group_by(Callback.status),
        )
    by_endpoint: dict[str, Counter[str]] = {}
    for url, error, status, n in rows:
        endpoint = url.rsplit("/", 1)[-1]
        outcome = error or f"HTTP {status}"
        outcome = outcome if len(outcome) < 120 else outcome[:117] + "..."
        by_endpoint.setdefault(endpoint, Counter())[outcome] += n
    return {
        "attempts": sum(n for *_rest, n in rows),
        "by_endpoint": {endpoint: dict(outcomes.most_common()) for endpoint, outcomes in sorted(by_endpoint.items())},
        "callbacks_by_status": {status: n for status, n in callbacks},
    }


async def prepare(database: Database) -> dict[str, dict[str, str]]:
    from cryptography.hazmat.primitives.asymmetric import rsa
    from tests.support.builders import public_pem

    from kasir.db import upgrade_schema
    from kasir.merchants.service import merchant_service

    await upgrade_schema(database)
    merchants = {}
    for role in ("good", "hostile"):
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        async with database.unit_of_work() as session:
            _merchant, credentials = await merchant_service.create(
                session, name=f"Tenants {role} merchant", public_key=public_pem(key)
            )
        merchants[role] = {"merchant_id": credentials.merchant_id, "secret": credentials.secret}
    return merchants


async def soak(config: Config, workdir: Path, database_url: str) -> dict[str, Any]:
    from kasir.config import Settings, configure
    from kasir.db import Database

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
    settings = Settings(
        env="staging",
        data_dir=data_dir,
        database_url=database_url,
        secret_key=env["KASIR_SECRET_KEY"],
        admin_token=env["KASIR_ADMIN_TOKEN"],
    )
    configure(settings)  # the merchants' secrets are sealed with the processes' KASIR_SECRET_KEY
    database = Database(settings)
    black_hole = BlackHoleDns().start()
    resolv_conf, hosts = black_hole.resolv_conf(workdir), hosts_file(workdir, {GOOD_NAME: "127.0.0.1"})

    def wrap(command: list[str]) -> list[str]:
        return in_resolver_namespace(command, resolv_conf, hosts)

    hostile = HostileEndpoints()
    hostile.start()
    good_receiver = GoodReceiver()
    await good_receiver.start()
    try:
        merchants = await prepare(database)
        print(f"tenants soak on {config.db}: run A (the good merchant alone)", flush=True)
        run_a = await one_run("a", config, env, workdir, wrap, merchants, good_receiver, None)
        print(f"tenants soak on {config.db}: run B (beside the hostile merchant)", flush=True)
        run_b = await one_run("b", config, env, workdir, wrap, merchants, good_receiver, hostile, black_hole.count)
        attempts = await hostile_attempts(database, merchants["hostile"]["merchant_id"])
    finally:
        await good_receiver.stop()
        hostile.stop()
        black_hole.stop()
        await database.dispose()

    p95_a, p95_b = run_a["good_callback_latency_ms"]["p95"], run_b["good_callback_latency_ms"]["p95"]
    rss = run_b["worker_rss_kib"]
    growth_mib = (rss["peak"] - rss["start"]) / 1024
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "database": config.db,
        "machine": machine(),
        "settings": {
            "good_charges": config.good,
            "hostile_charges": config.hostile,
            "good_rate_per_second": config.rate,
            "p95_floor_ms": config.p95_floor_ms,
            "process_settings": PROCESS_SETTINGS,
            "hostile_endpoints": {
                "huge": f"{HUGE_BYTES // 2**20} MB answer, chunked, written as fast as it is read",
                "slow": f"200 after {SLOW_SECONDS} s",
                "black hole": f"{BLACK_HOLE_NAME}: a name server that reads every query and answers none",
            },
        },
        "topology": [
            "kasir serve --no-worker",
            "1 x kasir worker",
            f"both in a mount namespace whose /etc/resolv.conf names only {black_hole.host} (the black hole)",
        ],
        "run_a": run_a,
        "run_b": run_b,
        "p95_ratio_b_over_a": round(p95_b / p95_a, 2) if p95_a else None,
        "worker_peak_growth_mib": round(growth_mib, 1),
        "hostile_attempts": attempts,
        "hostile_requests_received": dict(hostile.counts),
        "huge_bytes_sent": hostile.huge_bytes_sent,
        "black_hole_queries": black_hole.count(),
    }
    failures = []
    if p95_b > RATIO_BOUND * p95_a and p95_b - p95_a > config.p95_floor_ms:
        failures.append(f"good callbacks' p95 {p95_b:.0f} ms in B, more than {RATIO_BOUND:g}x A's {p95_a:.0f} ms")
    if growth_mib > RSS_BOUND_MIB:
        failures.append(f"worker peak {growth_mib:.1f} MiB above its start (bound {RSS_BOUND_MIB:g})")
    for run in (run_a, run_b):
        if run["errors"]["charges_not_200"] or run["errors"]["good_callbacks_missing"]:
            failures.append(f"errors in run {'A' if run is run_a else 'B'}: {run['errors']}")
    if not black_hole.count():
        failures.append("the black-hole name server read no query: the hostile name was never looked up there")
    result["failures"] = failures
    result["passed"] = not failures
    return result


def write_markdown(path: Path, result: dict[str, Any]) -> None:
    a, b = result["run_a"], result["run_b"]
    la, lb = a["good_callback_latency_ms"], b["good_callback_latency_ms"]
    rss = b["worker_rss_kib"]
    s = result["settings"]
    attempts = result["hostile_attempts"]

    def errors(name: str) -> int:
        return int(a["errors"][name] + b["errors"][name])

    lines = [
        f"# One hostile merchant beside a good one, on {result['database']} ({result['date']})",
        "",
        f"{result['machine']['cpu']}, {result['machine']['cores']} cores (shared; load average at the end "
        f"{result['machine']['load_average_at_end'][0]}). Topology: {'; '.join(result['topology'])}. Staging, "
        f"keyed card charges; the good merchant's {s['good_charges']} at {s['good_rate_per_second']:g}/s, callbacks "
        f"to a receiver answering 200 at once. Run B adds the hostile merchant's {s['hostile_charges']} charges, a "
        f"third each to {s['hostile_endpoints']['huge']}, {s['hostile_endpoints']['slow']}, and "
        f"{s['hostile_endpoints']['black hole']}. Each run on newly started processes. Made by `make soak-tenants` "
        "(scripts/soak_tenants.py).",
        "",
        "| good merchant's callback latency (answer -> callback received) | A: alone | B: beside the hostile one |",
        "|---|---:|---:|",
        f"| p50 | {la['p50']:.0f} ms | {lb['p50']:.0f} ms |",
        f"| p95 | {la['p95']:.0f} ms | {lb['p95']:.0f} ms |",
        f"| max | {la['max']:.0f} ms | {lb['max']:.0f} ms |",
        f"| callbacks received | {la['received']} of {a['good_charges']} | {lb['received']} of {b['good_charges']} |",
        "",
        "A latency below 0 is a callback that arrived before the charge's answer reached the client.",
        "",
        "| what | B |",
        "|---|---:|",
        f"| **p95 ratio B / A** (bound 2, or B within {s['p95_floor_ms']:g} ms of A) | "
        f"**{result['p95_ratio_b_over_a']}** |",
        f"| worker RSS when ready | {rss['start'] / 1024:.1f} MiB |",
        f"| worker peak RSS (VmHWM) | {rss['peak'] / 1024:.1f} MiB |",
        f"| **worker peak - start** (bound 50 MiB) | **{result['worker_peak_growth_mib']:.1f} MiB** |",
        f"| hostile callbacks recorded (by status at the end) | {sum(attempts['callbacks_by_status'].values())} "
        f"({', '.join(f'{status} {n}' for status, n in sorted(attempts['callbacks_by_status'].items()))}) |",
        f"| hostile callback attempts made (at most 8 at once: the merchant's share) | {attempts['attempts']} |",
        f"| hostile requests received (huge, slow) | {result['hostile_requests_received'].get('huge', 0)}, "
        f"{result['hostile_requests_received'].get('slow', 0)} |",
        f"| bytes the huge endpoint got out | {result['huge_bytes_sent'] / 2**20:.0f} MiB |",
        f"| queries the black-hole name server read | {result['black_hole_queries']} |",
        f"| errors (charges not 200, good callbacks missing) | {errors('charges_not_200')}, "
        f"{errors('good_callbacks_missing')} |",
        "",
        "Hostile attempts by endpoint and outcome:",
        "",
        *(
            f"- {endpoint}: " + ", ".join(f"{outcome} x{n}" for outcome, n in outcomes.items())
            for endpoint, outcomes in attempts["by_endpoint"].items()
        ),
        "",
        f"Result: {'passed' if result['passed'] else 'FAILED: ' + '; '.join(result['failures'])}. "
        f"Everything measured: [{path.stem}.json]({path.stem}.json).",
        "",
    ]
    path.with_suffix(".md").write_text("\n".join(lines))


def main() -> int:
    config = Config.from_env()
    workdir = Path(tempfile.mkdtemp(prefix=f"kasir-tenants-{config.db}-"))
    cluster: PostgresCluster | None = None
    keep = False
    try:
        if config.db == "postgres":
            cluster = PostgresCluster(durable=True)
            database_url = cluster.start()
        else:
            database_url = f"sqlite+aiosqlite:///{workdir / 'data' / 'kasir.db'}"
        result = asyncio.run(soak(config, workdir, database_url))
        config.out.parent.mkdir(parents=True, exist_ok=True)
        config.out.write_text(json.dumps(result, indent=2) + "\n")
        write_markdown(config.out, result)
        print(config.out.with_suffix(".md").read_text())
        keep = not result["passed"]
        return 0 if result["passed"] else 1
    except BaseException:
        keep = True
        raise
    finally:
        if cluster is not None:
            cluster.stop()
        if keep:
            print(f"logs kept in {workdir / 'logs'}", file=sys.stderr)
        elif not os.environ.get("TENANTS_KEEP"):
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
