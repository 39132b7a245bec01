"""Slow and idle clients against a fresh `kasir serve` (hardening, finding 2), with what an operator would watch.

    .venv/bin/python scripts/slow_clients.py [--connections 1000] [--hold 45] [--only idle,...]

Each scenario opens its connections against a new server (default settings: 10 s for headers, 30 s for a
body, 1,000 connections), holds them for `--hold` seconds while a health probe runs every second on a fresh
connection, and reports: connections the server still held at the end, probes answered, the slowest probe, the
server's memory (RSS at the start and its peak) and how much it logged.

Scenarios:
  idle            connections that send nothing
  header-trickle  a request line, then one header byte every 10 s
  body-trickle    headers of a 100 kB POST, then one body byte every 10 s
  keep-alive      one request answered, then nothing on the open connection
  file-limit      the server under `ulimit -n 1024`, 1,100 idle connections (more than it can open)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from dataclasses import asdict, dataclass, field

import httpx
from served import Server, mib, raise_own_file_limit, served

TRICKLE_SECONDS = 10.0


@dataclass
class Report:
    scenario: str
    connections: int
    opened: int = 0
    held_at_end: int = 0
    closed_after_s: list[float] = field(default_factory=list)
    probes: int = 0
    probes_answered: int = 0
    probes_refused_503: int = 0
    slowest_probe_s: float = 0.0
    rss_start_mib: float = 0.0
    rss_peak_mib: float = 0.0
    log_bytes: int = 0
    server_alive: bool = True
    log_sample: str = ""

    def line(self) -> str:
        closed = sorted(self.closed_after_s)
        median = closed[len(closed) // 2] if closed else float("nan")
        return (
            f"{self.scenario:15} opened {self.opened:5}/{self.connections:<5} held at end {self.held_at_end:5}  "
            f"closed after (median) {median:5.1f} s  probes {self.probes_answered}/{self.probes} "
            f"(slowest {self.slowest_probe_s * 1000:.0f} ms, {self.probes_refused_503} refused 503)  "
            f"RSS {self.rss_start_mib:.0f} -> {self.rss_peak_mib:.0f} MiB  log {mib(self.log_bytes)}  "
            f"server {'up' if self.server_alive else 'DOWN'}"
        )


async def hold(scenario: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, until: float) -> bool:
    """Plays one slow client until `until`; True when the server closed the connection first."""
    if scenario == "header-trickle":
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    elif scenario == "body-trickle":
        writer.write(
            b"POST /admin/merchants HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100000\r\n\r\n{"
        )
    elif scenario == "keep-alive":
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    while (left := until - time.monotonic()) > 0:
        try:
            data = await asyncio.wait_for(reader.read(65536), min(left, TRICKLE_SECONDS))
        except TimeoutError:
            if scenario in ("header-trickle", "body-trickle"):
                writer.write(b"X")
            continue
        except ConnectionError:
            return True
        if not data:
            return True
    return False


async def run(server: Server, scenario: str, connections: int, hold_seconds: float) -> Report:
    report = Report(scenario, connections, rss_start_mib=server.rss_mib())
    log_before = server.log_bytes()
    started = time.monotonic()
    until = started + hold_seconds

    async def client() -> None:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", server.port), 5)
        except (OSError, TimeoutError):
            return
        report.opened += 1
        try:
            if await hold(scenario, reader, writer, until):
                report.closed_after_s.append(time.monotonic() - started)
            else:
                report.held_at_end += 1
        finally:
            writer.close()

    async def probes() -> None:
        async with httpx.AsyncClient(limits=httpx.Limits(max_keepalive_connections=0)) as http:
            while time.monotonic() < until - 1:
                report.probes += 1
                probe_started = time.monotonic()
                try:
                    answer = await http.get(f"{server.base_url}/healthz", timeout=3)
                    if answer.status_code == 200:
                        report.probes_answered += 1
                        report.slowest_probe_s = max(report.slowest_probe_s, time.monotonic() - probe_started)
                    report.probes_refused_503 += answer.status_code == 503
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(1)

    await asyncio.gather(probes(), *(client() for _ in range(connections)))
    report.rss_peak_mib = server.peak_rss_mib()
    report.log_bytes = server.log_bytes() - log_before
    report.log_sample = server.log_path.read_bytes()[log_before:][:300].decode(errors="replace")
    report.server_alive = server.alive()
    return report


SCENARIOS = ("idle", "header-trickle", "body-trickle", "keep-alive", "file-limit")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--hold", type=float, default=45.0, help="seconds each scenario holds its connections")
    parser.add_argument("--only", default=",".join(SCENARIOS))
    parser.add_argument("--json", action="store_true", help="print the reports as JSON too")
    arguments = parser.parse_args()
    raise_own_file_limit()
    reports = []
    for scenario in arguments.only.split(","):
        if scenario == "file-limit":
            with served(open_files=1024) as server:
                reports.append(asyncio.run(run(server, "idle", 1100, arguments.hold)))
                reports[-1].scenario = scenario
        else:
            with served() as server:
                reports.append(asyncio.run(run(server, scenario, arguments.connections, arguments.hold)))
        print(reports[-1].line(), flush=True)
        if reports[-1].log_sample:
            print(f"{'':15} the log's first lines: {reports[-1].log_sample!r}", flush=True)
    if arguments.json:
        print(json.dumps([{**asdict(r), "closed_after_s": None} for r in reports], indent=2))


if __name__ == "__main__":
    main()
