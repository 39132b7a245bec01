"""How near the same-run ceiling a request can come on PostgreSQL when it does nothing but its
database round trips: an upper bound for issue 27's ratio targets, on the machine it runs on.

    .venv/bin/python bench/floor.py        (BENCH_SECONDS per run, BENCH_ROUNDS rounds, 3 by default)

Starts PostgreSQL as `make bench` does (fsync on, Unix socket), then `kasir serve` in bench mode
with three more routes. Each does the ceiling's work (parse the card charge's body, answer) plus
one unit of work on the idempotency-key table, through kasir.db as every room's statements run:

    /bench/floor/1   one INSERT, in a unit with atomic=False     1 round trip
    /bench/floor/3   one INSERT, in a unit                       3 (BEGIN, INSERT, COMMIT): wallet create's
    /bench/floor/5   two INSERTs and an UPDATE, in a unit        5: a keyed card charge's

wrk drives the ceiling and the floors in turn at c=64, BENCH_ROUNDS times, and each floor's ratio
is to the ceiling of its round. A real route of the same shape does more: it authenticates,
validates, decides and builds its answer, and its INSERT costs PostgreSQL more (a card order has
four unique indexes and a guard; this table has one). So a route can only come below its floor.
Writes bench/results/<date>-floor.md and .json.
"""

from __future__ import annotations

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

from bench.run import BIN, CpuMeter, Run, Server, free_port, machine, postmaster_pid, run_wrk  # noqa: E402
from bench.scenarios import CARD_BODY, BenchContext, Ceiling, Scenario  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
CONCURRENCY = 64
MERCHANT_VARIABLE = "BENCH_FLOOR_MERCHANT_ID"  # the floor routes' keys belong to the bench merchant
FLOORS = [int(n) for n in os.environ.get("BENCH_FLOORS", "1,3,5").split(",")]


class Floor(Scenario):
    def __init__(self, round_trips: int) -> None:
        self.round_trips = round_trips
        self.name = f"floor-{round_trips}"

    def build(self, ctx: BenchContext, count: int) -> list[bytes]:
        body = json.dumps(CARD_BODY, separators=(",", ":")).encode()
        path = f"/bench/floor/{self.round_trips}"
        return [ctx.raw("POST", path, {"Content-Type": "application/json"}, body)] * count


def main() -> int:
    workdir = Path(tempfile.mkdtemp(prefix="kasir-floor-"))
    cluster = PostgresCluster(durable=True)
    try:
        cluster.start()
        env = {
            **os.environ,
            "KASIR_ENV": "staging",
            "KASIR_DATA_DIR": str(workdir / "data"),
            "KASIR_BENCH_MODE": "true",
            "KASIR_LOG_LEVEL": "INFO",
            "KASIR_ADMIN_TOKEN": secrets.token_urlsafe(24),
            "KASIR_DATABASE_URL": cluster.socket_url("kasir"),
            "KASIR_DB_POOL_SIZE": "20",
        }
        subprocess.run([str(BIN / "kasir"), "db", "upgrade"], env=env, check=True, capture_output=True)
        port = free_port()
        ctx = BenchContext.create(workdir, env, "http://127.0.0.1:9/cb", server_port=port)
        env[MERCHANT_VARIABLE] = ctx.credentials.merchant_id
        server = Server(env, port, program=[sys.executable, str(Path(__file__).resolve())])
        server.start(workdir / "server.log")
        ctx.base_url = server.url
        meter = CpuMeter(server, postmaster_pid(cluster))
        runs: list[Run] = []
        try:
            for _ in range(ROUNDS):
                ceiling = run_wrk(ctx, server, Ceiling(), CONCURRENCY, meter)
                runs.append(ceiling)
                _print(ceiling)
                for round_trips in FLOORS:
                    run = run_wrk(ctx, server, Floor(round_trips), CONCURRENCY, meter)
                    run.ratio_to_ceiling = round(run.rps / ceiling.rps, 3)
                    runs.append(run)
                    _print(run)
        finally:
            server.stop()
        write_report({"date": datetime.now(UTC).isoformat(timespec="seconds"), "machine": machine(), "runs": runs})
        return 1 if any(r.non_2xx or r.socket_errors for r in runs) else 0
    finally:
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


def write_report(report: dict[str, Any]) -> None:
    out = ROOT / "bench" / "results"
    stem = datetime.now(UTC).strftime("%Y-%m-%d") + "-floor"
    runs: list[Run] = report["runs"]
    (out / f"{stem}.json").write_text(json.dumps({**report, "runs": [r.__dict__ for r in runs]}, indent=2) + "\n")
    m = report["machine"]
    lines = [
        f"# Kasir floor benchmark {report['date']}",
        "",
        f"{m['cpu']}, {m['cores']} cores; Python {m['python']}, uvicorn {m['uvicorn']}, {m['wrk']}; "
        f"PostgreSQL (fsync on, synchronous_commit on) over its Unix socket; 1 server process, "
        f"c={CONCURRENCY}, {m['seconds_per_run']:g} s per run. bench/floor.py says what each route does.",
        "",
        "| round | route | round trips | req/s | × ceiling | p50 ms | errors | server CPU µs/req "
        "| PostgreSQL CPU µs/req | load |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    per_round = 1 + len(FLOORS)
    for index, run in enumerate(runs):
        round_trips = run.scenario.removeprefix("floor-") if run.scenario != "ceiling" else "0"
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

    for round_trips, route in ((1, floor_1), (3, floor_3), (5, floor_5)):
        app.add_api_route(f"/bench/floor/{round_trips}", route, methods=["POST"], include_in_schema=False)
    # Found by path at once, as the ceiling is, not after a scan of every route.
    routes = app.router.routes
    assert isinstance(routes[0], StaticPathIndex)
    routes[0] = StaticPathIndex(routes[1:])


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve()
    else:
        sys.exit(main())
