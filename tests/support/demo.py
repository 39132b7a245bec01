"""The demo (examples/demo.py) run in the test's own event loop against a `kasir serve` on a database of its own.

Its steps are the demo's own; run here, the test sees every callback its receiver got and can keep the
merchant's client (and its cached access token) from one server to the next.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
from examples.demo import Demo, Received, Receiver, steps
from kasir_client import AsyncClient

from tests.support.postgres import PostgresCluster
from tests.support.process import end_with_parent

KASIR = Path(sys.executable).parent / "kasir"


def own_database(data_dir: Path, postgres: PostgresCluster | None, name: str) -> str:
    """The URL of a new, empty database: a SQLite file in `data_dir`, or a database on the session's server."""
    if postgres is not None:
        return postgres.create_database(f"kasir_{name}_{uuid.uuid4().hex[:8]}")
    return f"sqlite+aiosqlite:///{data_dir / 'kasir.db'}"


async def kasir(*args: str, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess[str]:
    """The `kasir` command in a subprocess with `env` over the test's environment."""
    completed = await asyncio.to_thread(
        subprocess.run,
        [str(KASIR), *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        preexec_fn=end_with_parent,
    )
    if check:
        assert completed.returncode == 0, completed.stdout + completed.stderr
    return completed


async def run_demo(client: AsyncClient) -> list[Received]:
    """Every step of the demo through `client` (each verifies its callbacks); the callbacks received."""
    receiver = Receiver()
    await receiver.start()
    try:
        async with httpx.AsyncClient(timeout=20) as browser:
            demo = Demo(client, client.credentials, receiver, browser)
            for step in steps(demo):
                assert await step.run(), step.name
    finally:
        await receiver.close()
    return list(receiver.received)
