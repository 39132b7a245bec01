"""The statements SQLite runs on Kasir's write connections, seen through sqlite3's own trace callback.

kasir.db.sqlite opens every connection through its public `connect()`; wrapping it gives the test
each write connection as it is opened, to watch (`set_trace_callback`) or to hold at its COMMIT.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

import kasir.db.sqlite


class WriteStatements:
    """Every statement run on the write connections opened from now on, in order."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.on_commit: Callable[[], None] | None = None  # called on the COMMIT's thread, before it runs

    def __call__(self, sql: str) -> None:
        self.seen.append(sql)
        if sql == "COMMIT" and self.on_commit is not None:
            self.on_commit()

    def commits(self) -> int:
        return self.seen.count("COMMIT")

    def begins(self) -> int:
        return sum(1 for sql in self.seen if sql.startswith("BEGIN"))


@contextmanager
def traced_writes(monkeypatch: pytest.MonkeyPatch) -> Iterator[WriteStatements]:
    statements = WriteStatements()
    real_connect = kasir.db.sqlite.connect

    def connect(path: str, *, reader: bool = False) -> sqlite3.Connection:
        connection = real_connect(path, reader=reader)
        if not reader:
            connection.set_trace_callback(statements)
        return connection

    with monkeypatch.context() as patched:
        patched.setattr(kasir.db.sqlite, "connect", connect)
        yield statements


class HeldCommit:
    """Holds the next COMMIT on its worker thread until `let_go()`; `started` is set (on the loop)
    when it is held. The statements before it have run; the disk has not been asked for anything."""

    def __init__(self, statements: WriteStatements) -> None:
        self.started = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._go = threading.Event()
        statements.on_commit = self._hold
        self._statements = statements

    def _hold(self) -> None:
        self._statements.on_commit = None  # the next COMMIT only
        self._loop.call_soon_threadsafe(self.started.set)
        self._go.wait(30)

    def let_go(self) -> None:
        self._go.set()
