"""Floods against a fresh `kasir serve` (hardening, findings 1, 2 and 8), with what an operator would watch.

    .venv/bin/python scripts/flood.py [--only huge-body,...] [--size-mib 300]

Each scenario runs against a new server (default settings) and reports the answers it got, the server's memory
(RSS at the start and its peak), how much it logged, and whether it stayed up.

Scenarios:
  huge-body        an unauthenticated 300 MiB JSON body to POST /admin/merchants (Content-Length given)
  huge-chunked     the same, chunked (no Content-Length), to the card charge with valid credentials
  huge-header      a 200 MiB header on GET /healthz
  connections      3,000 connections at once, each one request
  wrong-secrets    6,000 card charges with a wrong Basic secret, from one client
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from served import ADMIN_TOKEN, Server, mib, raise_own_file_limit, served

CHARGE = "/card-v2/v1/charge"


@dataclass
class Report:
    scenario: str
    answers: Counter[str] = field(default_factory=Counter)
    took_s: float = 0.0
    rss_start_mib: float = 0.0
    rss_peak_mib: float = 0.0
    log_bytes: int = 0
    server_alive: bool = True

    def line(self) -> str:
        answers = ", ".join(f"{status}: {count}" for status, count in sorted(self.answers.items()))
        return (
            f"{self.scenario:14} answers {{{answers}}} in {self.took_s:.1f} s  RSS {self.rss_start_mib:.0f} -> "
            f"{self.rss_peak_mib:.0f} MiB  log {mib(self.log_bytes)}  server {'up' if self.server_alive else 'DOWN'}"
        )


async def merchant_authorization(server: Server) -> str:
    """A merchant made through the admin API; its Basic credentials."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        created = await http.post(
            "/admin/merchants",
            json={"name": "flood", "public_key": public_pem.decode()},
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        )
        created.raise_for_status()
    merchant = created.json()
    return "Basic " + base64.b64encode(f"{merchant['merchant_id']}:{merchant['secret']}".encode()).decode()


async def json_stream(size: int) -> AsyncIterator[bytes]:
    """A valid JSON document of `size` bytes, made as it is sent (the client never holds it)."""
    yield b'{"name":"'
    piece = b"a" * (1024 * 1024)
    sent = 0
    while sent < size:
        yield piece
        sent += len(piece)
    yield b'"}'


def answer_of(exc: BaseException) -> str:
    return type(exc).__name__


async def huge_body(server: Server, report: Report, size: int) -> None:
    async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:
        try:
            answer = await http.post(
                "/admin/merchants",
                content=json_stream(size),
                headers={"Content-Type": "application/json", "Content-Length": str(size + 11)},
            )
            report.answers[str(answer.status_code)] += 1
        except httpx.HTTPError as exc:  # the server may close before the client is done sending
            report.answers[answer_of(exc)] += 1


async def huge_chunked(server: Server, report: Report, size: int) -> None:
    authorization = await merchant_authorization(server)
    async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:
        try:
            answer = await http.post(
                CHARGE,
                content=json_stream(size),
                headers={"Content-Type": "application/json", "Authorization": authorization},
            )
            report.answers[str(answer.status_code)] += 1
        except httpx.HTTPError as exc:
            report.answers[answer_of(exc)] += 1


async def huge_header(server: Server, report: Report, size: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Huge: ")
    piece = b"a" * (1024 * 1024)
    try:
        for _ in range(size // len(piece)):
            writer.write(piece)
            await writer.drain()
        writer.write(b"\r\n\r\n")
        await writer.drain()
    except ConnectionError:
        pass
    try:
        first = await asyncio.wait_for(reader.readline(), 30)
        report.answers[first.decode().strip() or "closed"] += 1
    except (ConnectionError, TimeoutError) as exc:
        report.answers[answer_of(exc)] += 1
    writer.close()


async def connections(server: Server, report: Report, count: int = 3000) -> None:
    async def one() -> None:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", server.port), 30)
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            first = await asyncio.wait_for(reader.readline(), 30)
            report.answers[first.decode().split(" ", 2)[1] if first else "closed"] += 1
            writer.close()
        except (OSError, TimeoutError, IndexError) as exc:
            report.answers[answer_of(exc)] += 1

    await asyncio.gather(*(one() for _ in range(count)))


async def wrong_secrets(server: Server, report: Report, count: int = 6000) -> None:
    authorization = await merchant_authorization(server)
    merchant_id = base64.b64decode(authorization.split()[1]).decode().split(":")[0]
    wrong = "Basic " + base64.b64encode(f"{merchant_id}:not-the-secret".encode()).decode()
    async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
        for _ in range(count // 50):
            answers = await asyncio.gather(
                *(http.post(CHARGE, json={}, headers={"Authorization": wrong}) for _ in range(50)),
                return_exceptions=True,
            )
            for answer in answers:
                key = str(answer.status_code) if isinstance(answer, httpx.Response) else answer_of(answer)
                report.answers[key] += 1


Scenario = Callable[[Server, Report, int], Coroutine[Any, Any, None]]
SCENARIOS: dict[str, Scenario] = {
    "huge-body": huge_body,
    "huge-chunked": huge_chunked,
    "huge-header": lambda server, report, size: huge_header(server, report, size * 2 // 3),
    "connections": lambda server, report, _size: connections(server, report),
    "wrong-secrets": lambda server, report, _size: wrong_secrets(server, report),
}


async def run(server: Server, name: str, size: int) -> Report:
    report = Report(name, rss_start_mib=server.rss_mib())
    log_before = server.log_bytes()
    started = time.monotonic()
    await SCENARIOS[name](server, report, size)
    report.took_s = time.monotonic() - started
    report.rss_peak_mib = server.peak_rss_mib()
    report.log_bytes = server.log_bytes() - log_before
    report.server_alive = server.alive() and server.probe() is not None
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=",".join(SCENARIOS))
    parser.add_argument("--size-mib", type=int, default=300, help="size of the huge bodies (headers: 2/3 of it)")
    parser.add_argument("--json", action="store_true", help="print the reports as JSON too")
    arguments = parser.parse_args()
    raise_own_file_limit()
    reports = []
    for name in arguments.only.split(","):
        with served() as server:
            reports.append(asyncio.run(run(server, name, arguments.size_mib * 1024 * 1024)))
        print(reports[-1].line(), flush=True)
    if arguments.json:
        print(json.dumps([{**r.__dict__, "answers": dict(r.answers)} for r in reports], indent=2))


if __name__ == "__main__":
    main()
