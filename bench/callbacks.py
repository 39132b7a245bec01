"""Callback delivery: deliveries per second, and the latency from a payment's commit to its callback's receipt.

A payment here is a BNPL approval on the staging page: it changes the transaction to `00` and
records the notification in the same commit. Two phases per delivery mode:

- latency: BENCH_CALLBACKS_PACED approvals started at BENCH_CALLBACK_RATE per second (open loop:
  each at its time, answered or not; `paced_per_second` is the rate reached); latency = receipt at
  the receiver − the callback's `created_at` (written in the payment's transaction, just before its
  commit).
- throughput: the rest approved as fast as BENCH_CALLBACK_CONCURRENCY clients can; deliveries/s =
  callbacks / (last receipt − first record).

Modes: the worker embedded in `kasir serve`, then `kasir serve --no-worker` beside
BENCH_CALLBACK_WORKERS separate `kasir worker` processes. Last, the delivery capacity alone: a
backlog of BENCH_BACKLOG callbacks recorded while no worker runs, drained by the separate workers
(deliveries/s of the drain: callbacks / (last receipt − first receipt), so the workers' start-up is not
counted; `from_start_per_second` counts from the workers' start). BENCH_ONLY=backlog runs the drain alone.
In each mode, wallet payments arriving at BENCH_PAYMENT_RATE a second for BENCH_PAYMENT_SECONDS (dummy
payments sent once each by wrk at evenly spaced times, bench/lua/replay.lua's RATE): commit→receipt of their
callbacks at that rate, and the rate the payments were made at. BENCH_ONLY=payment-rate runs them alone;
BENCH_ONLY=backlog,payment-rate runs both (`callback_phases`).
"""

from __future__ import annotations

import asyncio
import html
import json
import os
import re
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

BIN = Path(sys.executable).parent
COUNT = int(os.environ.get("BENCH_CALLBACKS", "600"))
PACED = int(os.environ.get("BENCH_CALLBACKS_PACED", "200"))
RATE = float(os.environ.get("BENCH_CALLBACK_RATE", "40"))
CONCURRENCY = int(os.environ.get("BENCH_CALLBACK_CONCURRENCY", "32"))
WORKERS = int(os.environ.get("BENCH_CALLBACK_WORKERS", "2"))
BACKLOG = int(os.environ.get("BENCH_BACKLOG", "3000"))
# Wallet payments arriving at this rate for this many (whole) seconds: at most 1,000 in all, the admin
# API's one page of callbacks.
PAYMENT_RATE = float(os.environ.get("BENCH_PAYMENT_RATE", "500"))
PAYMENT_SECONDS = int(os.environ.get("BENCH_PAYMENT_SECONDS", "2"))
PAYMENT_CONNECTIONS = 25


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def read_receipts(path: Path) -> dict[int, float]:
    """callback id -> first receipt time (unix seconds)."""
    receipts: dict[int, float] = {}
    if not path.exists():
        return receipts
    for line in path.read_text().splitlines():
        stamp, _, callback_id = line.partition(" ")
        if callback_id.isdigit():
            receipts.setdefault(int(callback_id), float(stamp))
    return receipts


async def _checkouts(ctx: Any, count: int, tag: str) -> list[str]:
    from kasir_client import AsyncClient

    semaphore = asyncio.Semaphore(16)
    async with AsyncClient(ctx.base_url, ctx.credentials) as client:

        async def one(n: int) -> str:
            async with semaphore:
                tx = await client.bnpl_checkout(
                    {
                        "partnerReferenceNo": f"CB-{tag}-{n}",
                        "paymentDetails": {"amount": {"value": "150000.00", "currency": "IDR"}},
                        "itemDetails": [
                            {
                                "itemId": "SKU-1",
                                "name": "Headphones",
                                "amount": {"value": "75000.00", "currency": "IDR"},
                                "category": "ELEC",
                                "qty": 2,
                            }
                        ],
                        "customerDetails": {"firstName": "Budi", "email": "budi@example.com", "phone": "0812345678"},
                        "callbackUrl": ctx.callback_url,
                    }
                )
                return tx.reference_no

        return list(await asyncio.gather(*(one(n) for n in range(count))))


_HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)"')


async def _approve(http: httpx.AsyncClient, reference_no: str) -> None:
    """As the customer's browser: open the page, send its approval form (its CSRF token) with a tenure.

    A connection the server closed as the request left (keep-alive) is tried again; a page without the
    form is a transaction approved already (by the try whose answer was lost).
    """
    for attempt in range(3):
        try:
            page = await http.get(f"/bnpl/pages/{reference_no}")
            if 'id="approve-form"' not in page.text:
                return
            form = page.text[page.text.index('id="approve-form"') :]
            fields = {name: html.unescape(value) for name, value in _HIDDEN.findall(form[: form.index("</form>")])}
            response = await http.post(f"/bnpl/pages/{reference_no}/approve", data={**fields, "tenure": "3"})
        except httpx.TransportError:
            if attempt == 2:
                raise
            continue
        if response.status_code != 303:
            raise RuntimeError(f"approval of {reference_no} answered {response.status_code}: {response.text[:200]}")
        return


async def _drive(ctx: Any, references: list[str]) -> float:
    """The paced approvals, then the burst; the approvals per second the paced phase reached."""
    paced, rest = references[:PACED], references[PACED:]
    limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    async with httpx.AsyncClient(base_url=ctx.base_url, timeout=30, trust_env=False, limits=limits) as http:
        # Open loop: approval n starts at n / RATE whether or not the ones before have answered, as
        # customers arrive (a closed loop would slow its arrivals down to the server's pace).
        started = time.monotonic()

        async def at_its_time(n: int, reference_no: str) -> None:
            await asyncio.sleep(max(0.0, started + n / RATE - time.monotonic()))
            await _approve(http, reference_no)

        await asyncio.gather(*(at_its_time(n, reference_no) for n, reference_no in enumerate(paced)))
        reached = len(paced) / (time.monotonic() - started) if paced else 0.0
    await _drive_burst(ctx, rest)
    return reached


def _recorded(ctx: Any, references: set[str]) -> dict[int, tuple[str, float]]:
    """callback id -> (transaction, created_at unix) for the given transactions, from the admin API."""
    admin_token = ctx.env["KASIR_ADMIN_TOKEN"]
    found: dict[int, tuple[str, float]] = {}
    headers = {"Authorization": f"Bearer {admin_token}"}
    with httpx.Client(base_url=ctx.base_url, headers=headers, timeout=30, trust_env=False) as http:
        for status in ("delivered", "pending", "delivering", "failed"):
            rows = http.get("/admin/callbacks", params={"status": status, "limit": 1000}).json()["callbacks"]
            for row in rows:
                if row["transaction_ref"] in references:
                    found[row["id"]] = (row["transaction_ref"], datetime.fromisoformat(row["created_at"]).timestamp())
    return found


def measure(ctx: Any, receipts_path: Path, tag: str) -> dict[str, Any]:
    references = asyncio.run(_checkouts(ctx, COUNT, tag))
    arrivals = asyncio.run(_drive(ctx, references))
    wanted = set(references)
    deadline = time.monotonic() + 120
    while True:
        recorded = _recorded(ctx, wanted)
        receipts = read_receipts(receipts_path)
        if len(recorded) >= len(wanted) and all(cid in receipts for cid in recorded):
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"{tag}: {len(recorded)} callbacks recorded, not all received within 120 s")
        time.sleep(0.5)
    order = {reference: n for n, reference in enumerate(references)}
    paced = [(receipts[cid] - created) * 1000 for cid, (ref, created) in recorded.items() if order[ref] < PACED]
    burst = [(cid, created) for cid, (ref, created) in recorded.items() if order[ref] >= PACED]
    span = max(receipts[cid] for cid, _ in burst) - min(created for _, created in burst)
    return {
        "count": len(recorded),
        "per_second": round(len(burst) / span, 1) if span > 0 else 0.0,
        "paced_per_second": round(arrivals, 1),
        "p50_ms": round(statistics.median(paced), 1),
        "p99_ms": round(percentile(paced, 99), 1),
        "burst_p50_ms": round(statistics.median((receipts[c] - t) * 1000 for c, t in burst), 1),
    }


def _start_workers(ctx: Any, log: Path) -> list[subprocess.Popen[bytes]]:
    return [
        subprocess.Popen([str(BIN / "kasir"), "worker"], env=ctx.env, stdout=log.open("ab"), stderr=subprocess.STDOUT)
        for _ in range(WORKERS)
    ]


def _stop_workers(workers: list[subprocess.Popen[bytes]]) -> None:
    for worker in workers:
        worker.terminate()
    for worker in workers:
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()


def drain(ctx: Any, receipts_path: Path, log: Path) -> dict[str, Any]:
    """A backlog of BACKLOG callbacks recorded with no worker running, then drained by WORKERS processes."""
    tag = f"backlog-{int(time.time())}"
    references = asyncio.run(_checkouts(ctx, BACKLOG, tag))
    asyncio.run(_drive_burst(ctx, references))
    earlier = set(read_receipts(receipts_path))  # callbacks of the phases before (none arrive meanwhile)
    started = time.time()
    workers = _start_workers(ctx, log)
    postgres_pid = ctx.state.get("postgres_pid")
    # CPU from the first receipt on (the workers' start-up, mostly imports, is not delivery work).
    first: tuple[int, float, float] | None = None
    try:
        deadline = time.monotonic() + 300
        while True:
            receipts = {cid: at for cid, at in read_receipts(receipts_path).items() if cid not in earlier}
            if receipts and first is None:
                first = (len(receipts), _cpu([w.pid for w in workers]), _cpu([postgres_pid] if postgres_pid else []))
            if len(receipts) >= len(references):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"backlog not drained within 300 s ({len(receipts)} of {len(references)})")
            time.sleep(0.1)
        assert first is not None
        delivered = len(receipts) - first[0]
        worker_cpu = (_cpu([w.pid for w in workers]) - first[1]) / max(1, delivered)
        postgres_cpu = (_cpu([postgres_pid]) - first[2]) / max(1, delivered) if postgres_pid else None
    finally:
        _stop_workers(workers)
    times = sorted(receipts.values())
    return {
        "count": len(receipts),
        "per_second": round((len(times) - 1) / (times[-1] - times[0]), 1),
        "from_start_per_second": round(len(times) / (times[-1] - started), 1),
        "worker_cpu_us": round(worker_cpu * 1e6, 1),
        "postgres_cpu_us": None if postgres_cpu is None else round(postgres_cpu * 1e6, 1),
        "load_average": round(os.getloadavg()[0], 2),
    }


async def _wallet_transactions(ctx: Any, count: int, tag: str) -> list[dict[str, str]]:
    from kasir_client import AsyncClient

    from bench.scenarios import wallet_body

    semaphore = asyncio.Semaphore(16)
    async with AsyncClient(ctx.base_url, ctx.credentials) as client:

        async def one(n: int) -> dict[str, str]:
            external_id, order_id = f"RATE-{tag}-{n}", f"RATE-ORDER-{tag}-{n}"
            async with semaphore:
                created = await client.wallet_create_payment(wallet_body(external_id, order_id, ctx.callback_url))
            return {"transaction_id": created.transaction_id, "external_id": external_id, "order_id": order_id}

        return list(await asyncio.gather(*(one(n) for n in range(count))))


def at_a_rate(ctx: Any, receipts_path: Path, tag: str) -> dict[str, Any]:
    """Wallet dummy payments sent by wrk at PAYMENT_RATE a second, evenly spaced (an open loop while one
    of its connections is free): commit→receipt of their callbacks."""
    from bench.scenarios import write_requests_file

    count = min(1000, int(PAYMENT_RATE * PAYMENT_SECONDS))
    transactions = asyncio.run(_wallet_transactions(ctx, count, tag))
    signer, requests = ctx.signer, []
    for reference in transactions:
        payload = {**reference, "payment_method": "wallet", "payment_channel": "DANA"}
        request = signer._wallet_request("/ewallet/v2/dummy-payment", payload)
        requests.append(ctx.raw(request.method, request.path, request.headers, request.body))
    requests_file, result_file = ctx.workdir / f"rate-{tag}.requests", ctx.workdir / f"rate-{tag}.json"
    write_requests_file(requests_file, requests)
    threads = 2
    env = {
        **os.environ,
        "REQUESTS_FILE": str(requests_file),
        "RESULT_FILE": str(result_file),
        "THREADS": str(threads),
        "RATE": str(PAYMENT_RATE),
    }
    script = Path(__file__).parent / "lua" / "replay.lua"
    wrk = subprocess.run(
        # Each thread stops once its last payment is answered; the run's length only bounds that.
        ["wrk", "-t", str(threads), "-c", str(PAYMENT_CONNECTIONS), "-d", f"{PAYMENT_SECONDS + 5}s", "-s", str(script)]
        + [ctx.base_url],
        env=env,
        capture_output=True,
        text=True,
    )
    if wrk.returncode != 0 or not result_file.exists():
        raise RuntimeError(f"wrk failed for the paced payments: {wrk.stdout[-500:]} {wrk.stderr[-500:]}")
    sent = json.loads(result_file.read_text())
    if sent["non_2xx"]:
        raise RuntimeError(f"{sent['non_2xx']} of the paced payments were not answered 2xx")
    paid = count  # each payment once (a thread past its last one sends liveness checks until it stops)
    wanted = {t["transaction_id"] for t in transactions}
    deadline, settled = time.monotonic() + 120, -1
    while True:
        recorded = _recorded(ctx, wanted)
        receipts = read_receipts(receipts_path)
        if len(recorded) >= paid and len(recorded) == settled and all(cid in receipts for cid in recorded):
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"paced payments: {len(recorded)} callbacks recorded, not all received in 120 s")
        settled = len(recorded)
        time.sleep(0.5)
    latencies = [(receipts[cid] - created) * 1000 for cid, (_ref, created) in recorded.items()]
    commits = [created for _ref, created in recorded.values()]
    rate = round((len(commits) - 1) / (max(commits) - min(commits)), 1)  # the rate the payments were made at
    return {
        "count": len(recorded),
        "per_second": rate,  # each payment one callback
        "paced_per_second": rate,
        "answer_p50_ms": round(sent["p50_us"] / 1000, 1),
        "p50_ms": round(statistics.median(latencies), 1),
        "p99_ms": round(percentile(latencies, 99), 1),
        "load_average": round(os.getloadavg()[0], 2),
    }


def _cpu(pids: list[int]) -> float:
    from bench.run import tree_cpu_seconds

    return sum(tree_cpu_seconds(pid) for pid in pids)


async def _drive_burst(ctx: Any, references: list[str]) -> None:
    async with httpx.AsyncClient(base_url=ctx.base_url, timeout=30, trust_env=False) as http:
        semaphore = asyncio.Semaphore(CONCURRENCY)

        async def one(reference_no: str) -> None:
            async with semaphore:
                await _approve(http, reference_no)

        await asyncio.gather(*(one(r) for r in references))


def _without_embedded_worker(server: Any, log: Path) -> None:
    """Restart the server with `--no-worker`: only separate `kasir worker` processes deliver."""
    server.stop()
    server.args = [*server.args, "--no-worker"]
    server.start(log)


CALLBACK_PHASES = ("steady", "payment-rate", "backlog")


def callback_phases(only: list[str]) -> set[str]:
    """The callback phases BENCH_ONLY asks for: all of them for `callbacks` (or no BENCH_ONLY), else each
    of `payment-rate` and `backlog` named."""
    if not only or "callbacks" in only:
        return set(CALLBACK_PHASES)
    return {phase for phase in CALLBACK_PHASES if phase in only}


def run_callback_benchmarks(ctx: Any, server: Any, receipts: Path, log: Path, phases: set[str]) -> dict[str, Any]:
    """`phases`: "steady" (payments one at a time), "payment-rate" (paced), "backlog" (the drain);
    each first with the server's embedded worker where it has one, then with separate workers."""
    results: dict[str, Any] = {}
    mode = f"{WORKERS} worker processes"
    paced = f"wallet payments at {PAYMENT_RATE:.0f}/s"
    steady, rate = "steady" in phases, "payment-rate" in phases
    if steady:
        results["embedded worker"] = measure(ctx, receipts, "embedded")
        print(f"callbacks (embedded worker): {results['embedded worker']}", flush=True)
    if rate:
        results[f"embedded worker, {paced}"] = at_a_rate(ctx, receipts, "embedded")
    _without_embedded_worker(server, log)
    if steady or rate:
        workers = _start_workers(ctx, log)
        try:
            if steady:
                results[mode] = measure(ctx, receipts, "separate")
            if rate:
                results[f"{mode}, {paced}"] = at_a_rate(ctx, receipts, "separate")
        finally:
            _stop_workers(workers)
        print(f"callbacks: {results}", flush=True)
    if "backlog" in phases:
        results[f"backlog drained by {mode}"] = backlog = drain(ctx, receipts, log)
        backlog.update(p50_ms=None, p99_ms=None)
        print(f"callbacks (backlog): {backlog}", flush=True)
    return results
