"""How near the same-run ceiling a request can come when it does nothing but its database work:
an upper bound for issue 27's ratio targets, on the machine it runs on.

    .venv/bin/python bench/floor.py        (BENCH_SECONDS per run, BENCH_ROUNDS rounds, 3 by default;
                                            BENCH_DB=postgres, the default here, or sqlite)

Starts PostgreSQL as `make bench` does (fsync on, Unix socket), then `kasir serve` in bench mode
with more routes. Each does the ceiling's work (parse the card charge's body, answer) plus one
unit of work on the idempotency-key table, through kasir.db as every room's statements run:

    /bench/floor/1   one INSERT, in a unit with atomic=False     1 round trip
    /bench/floor/3   one INSERT, in a unit                       3 (BEGIN, INSERT, COMMIT): wallet create's
    /bench/floor/5   two INSERTs and an UPDATE, in a unit        5: a keyed card charge's
    /bench/floor/raw-1, raw-3, raw-5: the same statements on asyncpg alone (a queue of connections,
                     prepared statements, BEGIN and COMMIT as asyncpg sends them): what the
                     driver costs without kasir.db, the stack's own floor
    /bench/floor/read  a read unit with wallet inquiry's one SELECT (kasir.wallet's repository), of
                     an existing transaction: an inquiry without its authentication, validation
                     and answer. With it each round also runs the real wallet inquiry. The only
                     floor with BENCH_DB=sqlite (no PostgreSQL is started then).

wrk drives the ceiling and the floors in turn at c=64, BENCH_ROUNDS times, and each floor's ratio
is to the ceiling of its round. A real route of the same shape does more: it authenticates,
validates, decides and builds its answer, and its INSERT costs PostgreSQL more (a card order has
four unique indexes and a guard; this table has one). So a route can only come below its floor.
Writes bench/results/<date>-floor.md and .json.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import Request  # a module global: FastAPI reads the routes' annotations from here
from fastapi.responses import JSONResponse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.postgres import PostgresCluster  # noqa: E402

os.environ.setdefault("BENCH_DB", "postgres")  # bench.run describes the database from it

from bench.run import BIN, CpuMeter, Run, Server, free_port, machine, postmaster_pid, run_wrk  # noqa: E402
from bench.scenarios import CARD_BODY, BenchContext, Ceiling, Scenario, WalletInquiry  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
CONCURRENCY = 64
MERCHANT_VARIABLE = "BENCH_FLOOR_MERCHANT_ID"  # the floor routes' keys belong to the bench merchant
BENCH_DB = os.environ["BENCH_DB"]
FLOORS = os.environ.get("BENCH_FLOORS", "1,3,5,raw-1,raw-3,raw-5,read" if BENCH_DB == "postgres" else "read").split(",")


class Floor(Scenario):
    def __init__(self, round_trips: str) -> None:
        self.round_trips = round_trips
        self.name = f"floor-{round_trips}"

    def build(self, ctx: BenchContext, count: int) -> list[bytes]:
        fields = dict(CARD_BODY)
        if self.round_trips == "read":
            fields["transaction_id"] = ctx.state["wallet-references"][0]["transaction_id"]
        body = json.dumps(fields, separators=(",", ":")).encode()
        path = f"/bench/floor/{self.round_trips}"
        return [ctx.raw("POST", path, {"Content-Type": "application/json"}, body)] * count


def main() -> int:
    if BENCH_DB not in ("postgres", "sqlite"):
        print(f"BENCH_DB must be postgres or sqlite, not {BENCH_DB!r}", file=sys.stderr)
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="kasir-floor-"))
    cluster = PostgresCluster(durable=True) if BENCH_DB == "postgres" else None
    try:
        env = {
            **os.environ,
            "KASIR_ENV": "staging",
            "KASIR_DATA_DIR": str(workdir / "data"),
            "KASIR_BENCH_MODE": "true",
            "KASIR_LOG_LEVEL": "INFO",
            "KASIR_ADMIN_TOKEN": secrets.token_urlsafe(24),
        }
        if cluster is not None:
            cluster.start()
            env["KASIR_DATABASE_URL"] = cluster.socket_url("kasir")
            env["KASIR_DB_POOL_SIZE"] = "20"
        subprocess.run([str(BIN / "kasir"), "db", "upgrade"], env=env, check=True, capture_output=True)
        port = free_port()
        ctx = BenchContext.create(workdir, env, "http://127.0.0.1:9/cb", server_port=port)
        env[MERCHANT_VARIABLE] = ctx.credentials.merchant_id
        server = Server(env, port, program=[sys.executable, str(Path(__file__).resolve())])
        server.start(workdir / "server.log")
        ctx.base_url = server.url
        meter = CpuMeter(server, None if cluster is None else postmaster_pid(cluster))
        scenarios: list[Scenario] = [Floor(round_trips) for round_trips in FLOORS]
        if "read" in FLOORS:
            inquiry = WalletInquiry()
            inquiry.prepare(ctx)
            scenarios.append(inquiry)
        runs: list[Run] = []
        try:
            for _ in range(ROUNDS):
                ceiling = run_wrk(ctx, server, Ceiling(), CONCURRENCY, meter)
                runs.append(ceiling)
                _print(ceiling)
                for scenario in scenarios:
                    run = run_wrk(ctx, server, scenario, CONCURRENCY, meter)
                    run.ratio_to_ceiling = round(run.rps / ceiling.rps, 3)
                    runs.append(run)
                    _print(run)
        finally:
            server.stop()
        write_report({"date": datetime.now(UTC).isoformat(timespec="seconds"), "machine": machine(), "runs": runs})
        return 1 if any(r.non_2xx or r.socket_errors for r in runs) else 0
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _print(run: Run) -> None:
    ratio = "" if run.ratio_to_ceiling is None else f"  {run.ratio_to_ceiling:.2f}x"
    print(
        f"{run.scenario:>8} {run.rps:8.0f} req/s{ratio}"
        f"  cpu/req {run.server_cpu_us:.0f}+{run.postgres_cpu_us or 0:.0f} us"
        f"  errors {run.non_2xx + run.socket_errors}  load {run.load_average:.2f}",
        flush=True,
    )


def _round_trips(scenario: str) -> str:
    """A route's round trips to the database: none in SQLite's case, whose statements run in the process."""
    if scenario == "ceiling":
        return "0"
    if BENCH_DB == "sqlite":
        return "-"
    if scenario in ("floor-read", "wallet-inquiry"):
        return "1"
    return scenario.removeprefix("floor-").removeprefix("raw-")


def write_report(report: dict[str, Any]) -> None:
    out = ROOT / "bench" / "results"
    stem = datetime.now(UTC).strftime("%Y-%m-%d") + "-floor" + ("" if BENCH_DB == "postgres" else f"-{BENCH_DB}")
    runs: list[Run] = report["runs"]
    (out / f"{stem}.json").write_text(json.dumps({**report, "runs": [r.__dict__ for r in runs]}, indent=2) + "\n")
    m = report["machine"]
    lines = [
        f"# Kasir floor benchmark {report['date']}",
        "",
        f"{m['cpu']}, {m['cores']} cores; Python {m['python']}, uvicorn {m['uvicorn']}, {m['wrk']}; "
        f"{m['database']}; 1 server process, "
        f"c={CONCURRENCY}, {m['seconds_per_run']:g} s per run. bench/floor.py says what each route does.",
        "",
        "| round | route | round trips | req/s | × ceiling | p50 ms | errors | server CPU µs/req "
        "| PostgreSQL CPU µs/req | load |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    per_round = len(runs) // ROUNDS
    for index, run in enumerate(runs):
        round_trips = _round_trips(run.scenario)
        ratio = "1.00" if run.ratio_to_ceiling is None else f"{run.ratio_to_ceiling:.2f}"
        lines.append(
            f"| {index // per_round + 1} | {run.scenario} | {round_trips} | {run.rps:.0f} | {ratio} "
            f"| {run.p50_ms:.2f} | {run.non_2xx + run.socket_errors} | {run.server_cpu_us:.0f} "
            f"| {run.postgres_cpu_us or 0:.0f} | {run.load_average:.2f} |"
        )
    lines.append("")
    (out / f"{stem}.md").write_text("\n".join(lines))
    print("\n".join(lines))


# --- the server: `kasir serve` with the floor routes -------------------------------------------


def serve() -> None:
    """`kasir serve` as `make bench` starts it, on an app with the floor routes added."""
    import kasir.app
    from kasir.cli import app as cli

    make_app = kasir.app.create_app

    def create_app() -> Any:
        app = make_app()
        add_floor_routes(app, os.environ[MERCHANT_VARIABLE])
        return app

    # uvicorn imports "kasir.app:create_app" by name, in this process (one server process).
    kasir.app.create_app = create_app  # type: ignore[assignment]
    cli(["serve", *sys.argv[2:]])


def add_floor_routes(app: Any, merchant_id: str) -> None:
    from kasir.idempotency.repository import NewKey, idempotency_repository
    from kasir.kit.clock import clock
    from kasir.kit.routing import StaticPathIndex

    repository = idempotency_repository
    prefix = secrets.token_hex(4)  # a server started again writes keys of its own
    numbers = itertools.count()

    def new_key() -> NewKey:
        now = clock.now()
        return NewKey(merchant_id, "POST /bench/floor", f"{prefix}-{next(numbers)}", "0" * 64, now, now)

    def answer(body: dict[str, Any]) -> JSONResponse:
        return JSONResponse({"statusCode": "00", "statusMessage": "SUCCESS", "fields": len(body)})

    async def floor_1(request: Request) -> JSONResponse:
        body = json.loads(await request.body())
        async with request.app.state.database.unit_of_work(atomic=False) as session:
            await repository.claim(session, new_key(), wait_seconds=1)
        return answer(body)

    async def floor_3(request: Request) -> JSONResponse:
        body = json.loads(await request.body())
        async with request.app.state.database.unit_of_work() as session:
            await repository.claim(session, new_key(), wait_seconds=1)
        return answer(body)

    async def floor_5(request: Request) -> JSONResponse:
        body = json.loads(await request.body())
        async with request.app.state.database.unit_of_work() as session:
            key = new_key()
            await repository.claim(session, key, wait_seconds=1)
            await repository.claim(session, new_key(), wait_seconds=1)
            await repository.answer(session, merchant_id, key.scope, key.key, 200, "{}", "{}")
        return answer(body)

    from kasir.wallet.repository import wallet_repository

    async def read(request: Request) -> JSONResponse:
        body = json.loads(await request.body())
        async with request.app.state.database.unit_of_work(read_only=True) as session:
            found = await wallet_repository.row(session, body["transaction_id"])
        assert found is not None, "the floor reads a transaction that exists"
        return answer(body)

    floors: dict[str, Any] = {"1": floor_1, "3": floor_3, "5": floor_5, "read": read}
    if "KASIR_DATABASE_URL" in os.environ:
        floors.update(raw_floors(os.environ["KASIR_DATABASE_URL"], merchant_id, new_key, answer))
    for round_trips, route in floors.items():
        app.add_api_route(f"/bench/floor/{round_trips}", route, methods=["POST"], include_in_schema=False)
    # Found by path at once, as the ceiling is, not after a scan of every route.
    routes = app.router.routes
    assert isinstance(routes[0], StaticPathIndex)
    routes[0] = StaticPathIndex(routes[1:])


def raw_floors(url: str, merchant_id: str, new_key: Any, answer: Any) -> dict[str, Any]:
    """The round-trip floors on asyncpg alone: the same SQL as the kasir.db floors' (compiled as kasir.db
    compiles it), the same values, on a connection taken from a queue."""
    from sqlalchemy.dialects.postgresql.asyncpg import dialect

    from kasir.idempotency import repository

    raw = _RawConnections(url)
    postgres = dialect()

    def claim(key: Any) -> tuple[str, Any]:
        compiled = repository._CLAIM.statement("postgresql").compiled(postgres)
        return compiled.sql, compiled.values({**key.values(), "lock_wait": "1000"})

    def answered(key: Any) -> tuple[str, Any]:
        params = {"merchant_id": merchant_id, "scope": key.scope, "key": key.key}
        params |= {"response_status": 200, "response_headers": "{}", "response_body": "{}"}
        compiled = repository._ANSWER.compiled(postgres)
        return compiled.sql, compiled.values(params)

    async def raw_1(request: Request) -> JSONResponse:
        body = json.loads(await request.body())
        async with raw.connection() as connection:
            sql, values = claim(new_key())
            await connection.execute(sql, *values)
        return answer(body)

    async def raw_3(request: Request) -> JSONResponse:
        body = json.loads(await request.body())
        async with raw.connection() as connection, connection.transaction():
            sql, values = claim(new_key())
            await connection.execute(sql, *values)
        return answer(body)

    async def raw_5(request: Request) -> JSONResponse:
        body = json.loads(await request.body())
        async with raw.connection() as connection, connection.transaction():
            key = new_key()
            for sql, values in (claim(key), claim(new_key()), answered(key)):
                await connection.execute(sql, *values)
        return answer(body)

    return {"raw-1": raw_1, "raw-3": raw_3, "raw-5": raw_5}


class _RawConnections:
    """asyncpg connections handed out in turn, as many as the server's pool: the stack with nothing between."""

    def __init__(self, url: str) -> None:
        from sqlalchemy.engine import make_url

        self.dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        self.size = int(os.environ.get("KASIR_DB_POOL_SIZE", "20"))
        self.free: Any = None

    @contextlib.asynccontextmanager
    async def connection(self) -> Any:
        import asyncio

        import asyncpg

        if self.free is None:
            self.free = asyncio.Queue()
            for _ in range(self.size):
                self.free.put_nowait(await asyncpg.connect(self.dsn))
        connection = await self.free.get()
        try:
            yield connection
        finally:
            self.free.put_nowait(connection)


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve()
    else:
        sys.exit(main())
