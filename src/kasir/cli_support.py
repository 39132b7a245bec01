"""What every `kasir` subcommand shares: running async work in a unit of work, one-line errors."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import NoReturn, TypeVar

import typer
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from kasir.config import get_settings
from kasir.db import Database, SchemaBehind, Session, check_schema
from kasir.errors import KasirError

T = TypeVar("T")
console = Console()
err_console = Console(stderr=True)


def fail(message: str, code: int = 2) -> NoReturn:
    """One line on stderr, exit code 2 (bad input)."""
    err_console.print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def run_in_session(work: Callable[[Session], Awaitable[T]], *, read_only: bool = False) -> T:
    async def main() -> T:
        database = Database(get_settings())
        try:
            await check_schema(database)
            async with database.unit_of_work(read_only=read_only) as session:
                return await work(session)
        finally:
            await database.dispose()

    try:
        return asyncio.run(main())
    except SchemaBehind as exc:
        fail(str(exc))
    except KasirError as exc:
        fail(exc.message)


def print_table(table: Table) -> None:
    """`table` whole: as wide as its longest cells, even past the terminal's or a pipe's 80 columns
    (rich would otherwise shorten ids to `merch_01HZ…`, which `show` cannot take)."""
    needed = Measurement.get(console, console.options.update_width(10_000), table).maximum
    if needed <= console.width:
        console.print(table)
    else:
        Console(width=needed).print(table)


def stdout_is_terminal() -> bool:
    return sys.stdout.isatty()
