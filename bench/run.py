"""`make bench`: throughput, latency and memory of Kasir's endpoints, and callback delivery.

Starts Kasir as an operator would (uvicorn, staging, SQLite unless BENCH_DB=postgres,
BENCH_WORKERS server processes, BENCH_LOOP event loop), creates its merchant, and drives load with wrk from a
separate process on 127.0.0.1 at concurrency 1, 16 and 64 for BENCH_SECONDS each. Requests
that must be unique or signed are built beforehand (bench/scenarios.py) so the generator
only replays bytes. Every endpoint is also reported as a ratio to /bench/ceiling measured
in the same run. Writes bench/results/<date>.md and .json (a suffix names what differs from
the default run: database, processes, loop, or `-partial` when BENCH_ONLY picks scenarios).
"""

from __future__ import annotations

import json
import os
import platform
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.postgres import PostgresCluster  # noqa: E402

from bench.scenarios import SCENARIOS, BenchContext, Scenario  # noqa: E402

BENCH_DB = os.environ.get("BENCH_DB", "sqlite")
# How each database makes a payment durable in the benchmark: every COMMIT waits for the disk.
DURABILITY = {"sqlite": "sqlite (WAL, synchronous=FULL)", "postgres": "postgres (fsync on, synchronous_commit on)"}
BENCH_WORKERS = int(os.environ.get("BENCH_WORKERS", "1"))
BENCH_LOOP = os.environ.get("BENCH_LOOP", "asyncio")
SECONDS = int(os.environ.get("BENCH_SECONDS", "8"))
CONCURRENCY = [int(c) for c in os.environ.get("BENCH_CONCURRENCY", "1,16,64").split(",")]
ONLY = [s for s in os.environ.get("BENCH_ONLY", "").split(",") if s]
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def peak_rss_kib(pid: int) -> int:
    """VmHWM: the peak resident set of a process, in KiB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return 0
    return 0


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        for child in children.get(current, []):
            found.append(child)
            queue.append(child)
    return found


@dataclass
class Run:
    scenario: str
    concurrency: int
    requests: int
    seconds: float
    rps: float
    non_2xx: int
    socket_errors: int
    p50_ms: float
    p99_ms: float
    p999_ms: float
    generator_cpu: float  # fraction of one core used by wrk
    ratio_to_ceiling: float | None = None


@dataclass
class Server:
    env: dict[str, str]
    port: int
    args: list[str] = field(default_factory=list)
    process: subprocess.Popen[bytes] | None = None
    peaks: dict[int, int] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, log: Path) -> None:
        self.process = subprocess.Popen(
            [
                str(BIN / "kasir"),
                "serve",
                "--port",
                str(self.port),
                "--workers",
                str(BENCH_WORKERS),
                "--loop",
                BENCH_LOOP,
                *self.args,
            ],
            env=self.env,
            stdout=log.open("ab"),
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"server did not start; see {log}")

    def sample_rss(self) -> None:
        assert self.process is not None
        for pid in [self.process.pid, *descendants(self.process.pid)]:
            self.peaks[pid] = max(self.peaks.get(pid, 0), peak_rss_kib(pid))

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.sample_rss()
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()


def run_wrk(ctx: BenchContext, server: Server, scenario: Scenario, concurrency: int) -> Run:
    threads = min(2, concurrency)
    requests_file = ctx.workdir / f"{scenario.name}-{concurrency}.requests"
    result_file = ctx.workdir / f"{scenario.name}-{concurrency}.json"
    scenario.write_requests(ctx, requests_file, concurrency, SECONDS)
    env = {**os.environ, "REQUESTS_FILE": str(requests_file), "RESULT_FILE": str(result_file), "THREADS": str(threads)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    wrk = subprocess.run(
        [
            "wrk",
            "-t",
            str(threads),
            "-c",
            str(concurrency),
            "-d",
            f"{int(SECONDS)}s",
            "--timeout",
            "10s",
            "-s",
            str(ROOT / "bench" / "lua" / "replay.lua"),
            server.url,
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    if wrk.returncode != 0 or not result_file.exists():
        raise RuntimeError(f"wrk failed for {scenario.name}: {wrk.stdout[-500:]} {wrk.stderr[-500:]}")
    elapsed = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    server.sample_rss()
    data = json.loads(result_file.read_text())
    seconds = data["duration_us"] / 1e6
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Run(
        scenario=scenario.name,
        concurrency=concurrency,
        requests=data["requests"],
        seconds=round(seconds, 2),
        rps=round(data["requests"] / seconds, 1),
        non_2xx=data["non_2xx"],
        socket_errors=data["connect_errors"] + data["read_errors"] + data["write_errors"] + data["timeouts"],
        p50_ms=data["p50_us"] / 1000,
        p99_ms=data["p99_us"] / 1000,
        p999_ms=data["p999_us"] / 1000,
        generator_cpu=round(cpu / elapsed, 2),
    )


def machine() -> dict[str, Any]:
    cpu = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    import fastapi
    import sqlalchemy
    import uvicorn

    wrk = subprocess.run(["wrk", "--version"], capture_output=True, text=True).stdout.split("[")[0].strip()
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "fastapi": fastapi.__version__,
        "sqlalchemy": sqlalchemy.__version__,
        "uvicorn": uvicorn.__version__,
        "wrk": wrk,
        "database": DURABILITY[BENCH_DB],
        "server_processes": BENCH_WORKERS,
        "event_loop": BENCH_LOOP,
        "seconds_per_run": SECONDS,
    }


def main() -> int:
    if BENCH_DB not in DURABILITY:
        print(f"BENCH_DB must be one of {', '.join(DURABILITY)}, not {BENCH_DB!r}", file=sys.stderr)
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="kasir-bench-"))
    cluster: PostgresCluster | None = None
    try:
        env = {
            **os.environ,
            "KASIR_ENV": "staging",
            "KASIR_DATA_DIR": str(workdir / "data"),
            "KASIR_BENCH_MODE": "true",
            "KASIR_LOG_LEVEL": "INFO",
            "KASIR_ADMIN_TOKEN": secrets.token_urlsafe(24),  # the callback benchmark reads the admin API
            # One client from one address, thousands of tokens a second: the limits still count every
            # request (their cost is measured) but are set out of reach.
            "KASIR_RATE_LIMIT_TOKEN_REQUESTS_PER_IP": "1000000000",
            "KASIR_RATE_LIMIT_TOKENS_PER_CLIENT": "1000000000",
        }
        if BENCH_DB == "postgres":
            cluster = PostgresCluster(durable=True)  # fsync on: payments per second, every one durable
            env["KASIR_DATABASE_URL"] = cluster.start()
            env["KASIR_DB_POOL_SIZE"] = "20"
        subprocess.run([str(BIN / "kasir"), "db", "upgrade"], env=env, check=True, capture_output=True)
        receiver_port = free_port()
        receipts = workdir / "receipts.log"
        receiver = subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / "receiver.py"), str(receiver_port), str(receipts)]
        )
        server = Server(env, free_port())
        ctx = BenchContext.create(workdir, env, f"http://127.0.0.1:{receiver_port}/cb", server_port=server.port)
        log = workdir / "server.log"
        server.start(log)
        ctx.base_url = server.url
        runs: list[Run] = []
        try:
            for scenario in SCENARIOS:
                if ONLY and scenario.name not in ONLY:
                    continue
                if not scenario.available(ctx):
                    print(f"skip {scenario.name}: {scenario.unavailable_reason}", flush=True)
                    continue
                scenario.prepare(ctx)
                for concurrency in CONCURRENCY:
                    run = run_wrk(ctx, server, scenario, concurrency)
                    runs.append(run)
                    print(
                        f"{run.scenario:>16} c={run.concurrency:<3} {run.rps:>8.1f} req/s  p50 {run.p50_ms:6.2f} ms"
                        f"  p99 {run.p99_ms:7.2f} ms  non-2xx {run.non_2xx}  gen-cpu {run.generator_cpu}",
                        flush=True,
                    )
            callbacks = ctx.callback_benchmarks(server, receipts, log) if not ONLY or "callbacks" in ONLY else {}
        finally:
            server.stop()
            receiver.terminate()
        ceiling = {r.concurrency: r.rps for r in runs if r.scenario == "ceiling"}
        for run in runs:
            if run.concurrency in ceiling and ceiling[run.concurrency]:
                run.ratio_to_ceiling = round(run.rps / ceiling[run.concurrency], 3)
        report = {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": machine(),
            "runs": [run.__dict__ for run in runs],
            "peak_rss_mib": {str(pid): round(kib / 1024, 1) for pid, kib in server.peaks.items()},
            "callbacks": callbacks,
        }
        write_report(report)
        errors = sum(r.non_2xx + r.socket_errors for r in runs)
        return 1 if errors else 0
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def write_report(report: dict[str, Any]) -> None:
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    stem = datetime.now(UTC).strftime("%Y-%m-%d")
    suffix = "" if BENCH_DB == "sqlite" and BENCH_WORKERS == 1 else f"-{BENCH_DB}-w{BENCH_WORKERS}"
    suffix += "" if BENCH_LOOP == "asyncio" else f"-{BENCH_LOOP}"
    suffix += "-partial" if ONLY else ""  # never over the full report of the day
    (out / f"{stem}{suffix}.json").write_text(json.dumps(report, indent=2) + "\n")
    m = report["machine"]
    lines = [
        f"# Kasir benchmark {report['date']}",
        "",
        f"{m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB; Python {m['python']}, FastAPI {m['fastapi']}, "
        f"SQLAlchemy {m['sqlalchemy']}, uvicorn {m['uvicorn']}, {m['wrk']}; database {m['database']}, "
        f"{m['server_processes']} server process(es), {m['event_loop']} event loop, "
        f"{m['seconds_per_run']:g} s per run.",
        "",
        "| scenario | conc. | req/s | × ceiling | p50 ms | p99 ms | p99.9 ms | errors | wrk CPU |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["runs"]:
        ratio = f"{r['ratio_to_ceiling']:.2f}" if r["ratio_to_ceiling"] is not None else "-"
        lines.append(
            f"| {r['scenario']} | {r['concurrency']} | {r['rps']:.0f} | {ratio} | {r['p50_ms']:.2f} "
            f"| {r['p99_ms']:.2f} | {r['p999_ms']:.2f} | {r['non_2xx'] + r['socket_errors']} "
            f"| {r['generator_cpu']:.2f} |"
        )
    lines += [
        "",
        "Peak RSS per server process (MiB): " + ", ".join(f"{v}" for v in report["peak_rss_mib"].values()),
        "",
    ]
    if report["callbacks"]:
        lines += [
            "## Callbacks",
            "",
            "| mode | callbacks | deliveries/s | commit→receipt p50 ms | p99 ms |",
            "|---|---:|---:|---:|---:|",
        ]
        for mode, c in report["callbacks"].items():
            p50 = "-" if c["p50_ms"] is None else f"{c['p50_ms']:.1f}"
            p99 = "-" if c["p99_ms"] is None else f"{c['p99_ms']:.1f}"
            lines.append(f"| {mode} | {c['count']} | {c['per_second']:.0f} | {p50} | {p99} |")
        lines.append("")
    (out / f"{stem}{suffix}.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
