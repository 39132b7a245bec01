"""`make bench` (console part): the Payments page, its search and the Overview with 100,000 payments, and the
CSV export's memory.

Fills a fresh SQLite database (BENCH_CONSOLE_ROWS payments: 60 % wallet, 20 % card, 20 % BNPL,
over 30 days), starts `kasir serve --no-worker` as an operator would, signs in through the
form, then times sequential requests of the Payments page (first page, filtered, searched by
an order id, an older keyset page), the Overview (today, and 30 days with its 30-day trend) and
the Callbacks page, and streams the CSV export of every row while sampling the
server's resident memory. Targets (issue 23): p95 < 150 ms; RSS growth < 50 MB. Writes
bench/results/<date>-console.md and exits non-zero when a target is missed.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.run import free_port  # noqa: E402

ROWS = int(os.environ.get("BENCH_CONSOLE_ROWS", "100000"))
REQUESTS = int(os.environ.get("BENCH_CONSOLE_REQUESTS", "200"))
BIN = Path(sys.executable).parent
PASSWORD = "bench console password"


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def fill(env: dict[str, str], merchant_id: str) -> list[str]:
    """ROWS payments written with SQLAlchemy Core in batches; the order ids of a sample to search for."""
    os.environ.update(env)
    from sqlalchemy import insert

    import kasir.models  # noqa: F401  (every table known to the metadata, as under Alembic)
    from kasir.bnpl.models import BnplTransaction
    from kasir.card.models import CardOrder
    from kasir.config import Settings
    from kasir.db import Database, run
    from kasir.wallet.models import WalletTransaction

    database = Database(Settings())
    now = datetime.now(UTC)
    rng = random.Random(23)
    wallet, card, bnpl = [], [], []
    for n in range(ROWS):
        created = now - timedelta(seconds=rng.uniform(0, 30 * 86400))
        kind = n % 10
        if kind < 6:
            status = rng.choice(["PAID", "PAID", "PAID", "PENDING", "EXPIRED", "REFUNDED"])
            wallet.append(
                dict(
                    id=f"WLT{n:021d}",
                    merchant_id=merchant_id,
                    external_id=f"EXT-{n}",
                    order_id=f"ORDER-{n}",
                    reference_id=f"REF{n:021d}",
                    payment_channel=rng.choice(["DANA", "OVO", "QRIS", "SHOPEEPAY"]),
                    currency="IDR",
                    amount=rng.randrange(10_000, 2_000_000),
                    refunded_amount=0,
                    status=status,
                    description="Bench order",
                    callback_url="http://127.0.0.1:9/cb",
                    return_url=None,
                    details="{}",
                    created_at=created,
                    expires_at=created + timedelta(minutes=15),
                    updated_at=created,
                    paid_at=created + timedelta(seconds=30) if status in ("PAID", "REFUNDED") else None,
                )
            )
        elif kind < 8:
            status = rng.choice(["SUCCESS", "SUCCESS", "PENDING", "EXPIRED"])
            card.append(
                dict(
                    id=f"CARD{n:020d}",
                    merchant_id=merchant_id,
                    external_id=f"EXT-{n}",
                    order_id=f"ORDER-{n}",
                    currency="IDR",
                    amount=rng.randrange(10_000, 5_000_000),
                    payment_method="card",
                    payment_channel="CARD",
                    payment_mode="CLOSE",
                    status=status,
                    tenor="0",
                    attempts_made=1,
                    attempts_failed=0,
                    details="{}",
                    return_url="https://shop.example/return",
                    callback_url="http://127.0.0.1:9/cb",
                    acq="BCA",
                    response_message="Approved",
                    save_card=False,
                    card_token=None,
                    created_at=created,
                    expires_at=created + timedelta(days=1),
                    updated_at=created,
                    paid_at=created if status == "SUCCESS" else None,
                )
            )
        else:
            status = rng.choice(["00", "00", "01", "05", "06"])
            bnpl.append(
                dict(
                    id=f"BNPL{n:020d}",
                    merchant_id=merchant_id,
                    partner_reference_no=f"PRN-{n}",
                    amount_cents=rng.randrange(10_000, 5_000_000) * 100,
                    currency="IDR",
                    status=status,
                    status_desc="Bench",
                    callback_url="http://127.0.0.1:9/cb",
                    channel_id="95221",
                    details="{}",
                    tenure=3 if status == "00" else None,
                    created_at=created,
                    expires_at=created + timedelta(days=1),
                    updated_at=created,
                    paid_at=created if status == "00" else None,
                )
            )
    try:
        for model, rows in ((WalletTransaction, wallet), (CardOrder, card), (BnplTransaction, bnpl)):
            for start in range(0, len(rows), 1000):  # a multi-row INSERT's values stay under both databases' limits
                async with database.unit_of_work() as session:
                    await run(session, insert(model.__table__).values(rows[start : start + 1000]))
    finally:
        await database.dispose()
    return [row["order_id"] for row in rng.sample(wallet + card, 50)]


def timed(client: httpx.Client, paths: list[str]) -> list[float]:
    spent = []
    for path in paths:
        started = time.perf_counter()
        response = client.get(path, follow_redirects=False)
        spent.append((time.perf_counter() - started) * 1000)
        assert response.status_code in (200, 303), (path, response.status_code)
    return spent


def p(values: list[float], share: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(share * 100) - 1]


def _load() -> str:
    """The machine's 1, 5 and 15 minute load averages (a shared machine's numbers need them beside)."""
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> int:
    load_before = _load()
    directory = Path(tempfile.mkdtemp(prefix="kasir-bench-console-"))
    env = {
        **os.environ,
        "KASIR_ENV": "staging",
        "KASIR_DATA_DIR": str(directory),
        "KASIR_DATABASE_URL": f"sqlite+aiosqlite:///{directory / 'kasir.db'}",
        "KASIR_SECRET_KEY": "bench-console-secret",
        "KASIR_ADMIN_TOKEN": "bench-console-admin",
        "KASIR_LOG_LEVEL": "WARNING",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    kasir = str(BIN / "kasir")
    subprocess.run([kasir, "db", "upgrade"], env=env, check=True, capture_output=True)
    created = subprocess.run(
        [kasir, "merchant", "create", "--name", "Bench", "--generate-key", str(directory / "keys"), "--json"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    merchant_id = re.search(r'"merchant_id": "([^"]+)"', created.stdout).group(1)  # type: ignore[union-attr]
    subprocess.run(
        [kasir, "user", "create", "--email", "bench@kasir.test", "--role", "operator", "--password-stdin"],
        env=env,
        input=PASSWORD + "\n",
        check=True,
        capture_output=True,
        text=True,
    )
    started = time.perf_counter()
    samples = asyncio.run(fill(env, merchant_id))
    print(f"filled {ROWS:,} payments in {time.perf_counter() - started:.1f} s", flush=True)

    port = free_port()
    server = subprocess.Popen(
        [kasir, "serve", "--port", str(port), "--no-worker"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        with httpx.Client(base_url=base, timeout=60) as client:
            page = client.get("/console/sign-in")
            token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
            signed = client.post(
                "/console/sign-in", data={"email": "bench@kasir.test", "password": PASSWORD, "csrf_token": token}
            )
            assert signed.status_code == 303, signed.text
            first = client.get("/console/payments")
            cursor = re.search(r"cursor=([A-Za-z0-9_-]+)", first.text).group(1)  # type: ignore[union-attr]
            cases = {
                "Payments, first page": ["/console/payments"] * REQUESTS,
                "Payments, wallet + paid": ["/console/payments?product=wallet&status=paid"] * REQUESTS,
                "Payments, older page (cursor)": [f"/console/payments?cursor={cursor}"] * REQUESTS,
                "Search by order id": [f"/console/payments?q={samples[i % len(samples)]}" for i in range(REQUESTS)],
                "Search, no match": [f"/console/payments?q=NOPE-{i}" for i in range(REQUESTS)],
                # The overview counts every payment of its period and the trend's days (issue 41).
                "Overview, today (7-day trend)": ["/console/overview"] * REQUESTS,
                "Overview, 30 days (30-day trend)": ["/console/overview?period=30d&days=30"] * REQUESTS,
                "Callbacks, given up": ["/console/callbacks"] * REQUESTS,
            }
            timed(client, ["/console/payments"] * 20)  # warm up
            results = {name: timed(client, paths) for name, paths in cases.items()}

            before = rss_kib(server.pid)
            peak = before
            done = threading.Event()

            def sample() -> None:
                nonlocal peak
                while not done.is_set():
                    peak = max(peak, rss_kib(server.pid))
                    time.sleep(0.02)

            sampler = threading.Thread(target=sample)
            sampler.start()
            started = time.perf_counter()
            lines = 0
            with client.stream("GET", "/console/payments.csv") as response:
                for chunk in response.iter_bytes():
                    lines += chunk.count(b"\n")
            export_seconds = time.perf_counter() - started
            done.set()
            sampler.join()
    finally:
        server.terminate()
        server.wait(timeout=20)

    growth_mb = (peak - before) / 1024
    report = [
        f"# Console benchmark {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "",
        f"Load average before the run: {load_before}; after it: {_load()}.",
        "",
        f"SQLite, 1 server process, {ROWS:,} payments (60 % wallet, 20 % card, 20 % BNPL), "
        f"{REQUESTS} sequential requests per case, signed in as an operator.",
        "",
        "| case | p50 ms | p95 ms | max ms | target p95 < 150 ms |",
        "|---|---|---|---|---|",
    ]
    ok = True
    for name, values in results.items():
        p95 = p(values, 0.95)
        ok = ok and p95 < 150
        report.append(
            f"| {name} | {p(values, 0.5):.1f} | {p95:.1f} | {max(values):.1f} | {'yes' if p95 < 150 else 'NO'} |"
        )
    ok = ok and growth_mb < 50 and lines == ROWS + 1
    report += [
        "",
        f"CSV export of {lines - 1:,} rows in {export_seconds:.1f} s: server RSS {before / 1024:.1f} MB before, "
        f"{peak / 1024:.1f} MB at most during it, growth {growth_mb:.1f} MB (target < 50 MB: "
        f"{'yes' if growth_mb < 50 else 'NO'}).",
    ]
    text = "\n".join(report) + "\n"
    print(text)
    out = ROOT / "bench" / "results" / f"{datetime.now(UTC):%Y-%m-%d}-console.md"
    out.write_text(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
