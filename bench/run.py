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

from bench.callbacks import callback_phases  # noqa: E402
from bench.scenarios import SCENARIOS, BenchContext, Scenario  # noqa: E402

BENCH_DB = os.environ.get("BENCH_DB", "sqlite")
# How each database makes a payment durable in the benchmark: every COMMIT waits for the disk.
DURABILITY = {"sqlite": "sqlite (WAL, synchronous=FULL)", "postgres": "postgres (fsync on, synchronous_commit on)"}
# PostgreSQL on the benchmark's machine is reached as the shipped deployment reaches a local one
# (deploy/kasir.env.example): over its Unix socket. BENCH_PG_TCP=1: over TCP on loopback instead, as a
# server on another machine would be (with the network's own latency on top).
BENCH_PG_TCP = os.environ.get("BENCH_PG_TCP", "") not in ("", "0")
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


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds (user + system) used so far by a process and every descendant, the exited ones included.

    Each live process counts its own time and its reaped children's (cutime/cstime of /proc/<pid>/stat): a
    PostgreSQL backend that disconnected, or a uvicorn worker that was replaced, is still counted once.
    """
    total = 0
    for pid in [root, *descendants(root)]:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        total += sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
    return total / CLOCK_TICKS


@dataclass
class CpuMeter:
    """The CPU of the server's process tree, and of PostgreSQL's when it runs, sampled around each run."""

    server: Server
    postgres_pid: int | None = None

    def sample(self) -> tuple[float, float | None]:
        assert self.server.process is not None
        postgres = None if self.postgres_pid is None else tree_cpu_seconds(self.postgres_pid)
        return tree_cpu_seconds(self.server.process.pid), postgres


def postmaster_pid(cluster: PostgresCluster) -> int:
    return int((cluster.data / "postmaster.pid").read_text().split()[0])


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
    server_cpu_us: float = 0.0  # CPU-microseconds per request of the server process(es)
    postgres_cpu_us: float | None = None  # and of PostgreSQL's processes (BENCH_DB=postgres)
    load_average: float = 0.0  # the machine's 1-minute load average at the end of the run
    ratio_to_ceiling: float | None = None


@dataclass
class Server:
    env: dict[str, str]
    port: int
    args: list[str] = field(default_factory=list)
    program: list[str] = field(default_factory=lambda: [str(BIN / "kasir")])  # what takes `serve` and its options
    process: subprocess.Popen[bytes] | None = None
    peaks: dict[int, int] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, log: Path) -> None:
        self.process = subprocess.Popen(
            [
                *self.program,
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


def run_wrk(ctx: BenchContext, server: Server, scenario: Scenario, concurrency: int, meter: CpuMeter) -> Run:
    threads = min(2, concurrency)
    requests_file = ctx.workdir / f"{scenario.name}-{concurrency}.requests"
    result_file = ctx.workdir / f"{scenario.name}-{concurrency}.json"
    scenario.write_requests(ctx, requests_file, concurrency, SECONDS)
    env = {**os.environ, "REQUESTS_FILE": str(requests_file), "RESULT_FILE": str(result_file), "THREADS": str(threads)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_before, postgres_before = meter.sample()
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
    server_after, postgres_after = meter.sample()
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
        server_cpu_us=_per_request(server_before, server_after, data["requests"]) or 0.0,
        postgres_cpu_us=_per_request(postgres_before, postgres_after, data["requests"]),
        load_average=round(os.getloadavg()[0], 2),
    )


def _per_request(before: float | None, after: float | None, requests: int) -> float | None:
    if before is None or after is None or not requests:
        return None
    return round((after - before) * 1e6 / requests, 1)


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
        "database": DURABILITY[BENCH_DB]
        + ("" if BENCH_DB != "postgres" else ", TCP on loopback" if BENCH_PG_TCP else ", Unix socket"),
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
            tcp_url = cluster.start()
            env["KASIR_DATABASE_URL"] = tcp_url if BENCH_PG_TCP else cluster.socket_url("kasir")
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
        meter = CpuMeter(server, None if cluster is None else postmaster_pid(cluster))
        ctx.state["postgres_pid"] = meter.postgres_pid
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
                    run = run_wrk(ctx, server, scenario, concurrency, meter)
                    runs.append(run)
                    print(
                        f"{run.scenario:>16} c={run.concurrency:<3} {run.rps:>8.1f} req/s  p50 {run.p50_ms:6.2f} ms"
                        f"  p99 {run.p99_ms:7.2f} ms  non-2xx {run.non_2xx}  gen-cpu {run.generator_cpu}"
                        f"  cpu/req {run.server_cpu_us:.0f}+{run.postgres_cpu_us or 0:.0f} us"
                        f"  load {run.load_average:.2f}",
                        flush=True,
                    )
            callbacks = {}
            phases = callback_phases(ONLY)
            if phases:
                callbacks = ctx.callback_benchmarks(server, receipts, log, phases)
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


ESTIMATE_CORES = 16
ESTIMATE_EFFICIENCY = 0.8


def sixteen_core_estimate(runs: list[dict[str, Any]]) -> list[str]:
    """Throughput on 16 cores from this run's CPU per request (at the highest concurrency measured)."""
    top = max((r["concurrency"] for r in runs), default=0)
    rows = [r for r in runs if r["concurrency"] == top and r["server_cpu_us"]]
    if not rows:
        return []
    lines = [
        f"## Estimate for {ESTIMATE_CORES} cores",
        "",
        f"From the CPU per request at c={top}: req/s ≈ {ESTIMATE_CORES} cores × 1,000,000 µs × "
        f"{ESTIMATE_EFFICIENCY} / (server µs + PostgreSQL µs). Assumes: the load generator on another "
        f"machine; enough server processes (`kasir serve --workers`, or several behind nginx) to keep every "
        f"core busy; PostgreSQL on the same {ESTIMATE_CORES} cores; {100 - ESTIMATE_EFFICIENCY * 100:.0f} % "
        "lost to the kernel's network stack, scheduling and the proxy; the disk keeps up with the commits "
        "(PostgreSQL's group commit; one SQLite file has one writer at a time, so the SQLite figure of a "
        "write is an upper bound); no row is contended (distinct payments). CPU per request measured on a "
        "loaded 2-core machine is higher than on an idle one, so the estimate leans low.",
        "",
        "| scenario | CPU µs/req | est. req/s |",
        "|---|---:|---:|",
    ]
    for r in rows:
        cpu = r["server_cpu_us"] + (r.get("postgres_cpu_us") or 0)
        estimate = ESTIMATE_CORES * 1e6 * ESTIMATE_EFFICIENCY / cpu
        lines.append(f"| {r['scenario']} | {cpu:.0f} | {estimate:,.0f} |")
    lines.append("")
    return lines


def write_report(report: dict[str, Any]) -> None:
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    stem = datetime.now(UTC).strftime("%Y-%m-%d")
    suffix = "" if BENCH_DB == "sqlite" and BENCH_WORKERS == 1 else f"-{BENCH_DB}-w{BENCH_WORKERS}"
    suffix += "" if BENCH_LOOP == "asyncio" else f"-{BENCH_LOOP}"
    suffix += "-tcp" if BENCH_DB == "postgres" and BENCH_PG_TCP else ""
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
        "CPU µs/req: CPU-microseconds per request of the server process(es) and of PostgreSQL's processes "
        "(/proc/<pid>/stat of each process tree, before and after the run); load: the 1-minute load average "
        "at the end of the run.",
        "",
        "| scenario | conc. | req/s | × ceiling | p50 ms | p99 ms | p99.9 ms | errors | wrk CPU "
        "| server CPU µs/req | PostgreSQL CPU µs/req | load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["runs"]:
        ratio = f"{r['ratio_to_ceiling']:.2f}" if r["ratio_to_ceiling"] is not None else "-"
        postgres = "-" if r.get("postgres_cpu_us") is None else f"{r['postgres_cpu_us']:.0f}"
        lines.append(
            f"| {r['scenario']} | {r['concurrency']} | {r['rps']:.0f} | {ratio} | {r['p50_ms']:.2f} "
            f"| {r['p99_ms']:.2f} | {r['p999_ms']:.2f} | {r['non_2xx'] + r['socket_errors']} "
            f"| {r['generator_cpu']:.2f} | {r['server_cpu_us']:.0f} | {postgres} | {r['load_average']:.2f} |"
        )
    lines += [
        "",
        "Peak RSS per server process (MiB): " + ", ".join(f"{v}" for v in report["peak_rss_mib"].values()),
        "",
        *sixteen_core_estimate(report["runs"]),
    ]
    if report["callbacks"]:
        lines += [
            "## Callbacks",
            "",
            "| mode | callbacks | deliveries/s | paced payments/s | commit→receipt p50 ms | p99 ms "
            "| worker CPU µs/delivery | PostgreSQL CPU µs/delivery | load |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for mode, c in report["callbacks"].items():
            p50 = "-" if c["p50_ms"] is None else f"{c['p50_ms']:.1f}"
            p99 = "-" if c["p99_ms"] is None else f"{c['p99_ms']:.1f}"
            worker = "-" if c.get("worker_cpu_us") is None else f"{c['worker_cpu_us']:.0f}"
            postgres = "-" if c.get("postgres_cpu_us") is None else f"{c['postgres_cpu_us']:.0f}"
            load = "-" if c.get("load_average") is None else f"{c['load_average']:.2f}"
            paced = "-" if c.get("paced_per_second") is None else f"{c['paced_per_second']:.0f}"
            lines.append(
                f"| {mode} | {c['count']} | {c['per_second']:.0f} | {paced} | {p50} | {p99} | {worker} "
                f"| {postgres} | {load} |"
            )
        lines.append("")
    (out / f"{stem}{suffix}.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
