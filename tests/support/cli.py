"""The `kasir` CLI run in-process, beside the session's running event loop."""

from __future__ import annotations

import asyncio

from click.testing import Result
from typer.testing import CliRunner

from kasir.cli import app as cli

runner = CliRunner()


def kasir(*args: str) -> Result:
    return runner.invoke(cli, list(args))


async def kasir_beside_app(*args: str) -> Result:
    """The CLI on a thread while the session's event loop keeps running.

    A sync test would freeze that loop, possibly with the app's worker inside a SQLite write
    transaction, and the CLI would wait for that lock until it gave up.
    """
    return await asyncio.to_thread(kasir, *args)
