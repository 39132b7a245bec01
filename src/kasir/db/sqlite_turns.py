"""Turns at SQLite's write lock for the processes that share one database file.

SQLite has no queue for its write lock: a process that finds it taken (SQLITE_BUSY) can only
sleep and try again (kasir.db.sqlite backs off 1 ms, 2 ms, ... 50 ms). The process
that holds it begins its next write transaction microseconds after committing, so under load a
second server process rarely finds the lock free when it wakes: with `kasir serve --workers 2`
a card charge could wait hundreds of milliseconds for its turn.

Here the processes take turns on an exclusive `flock` of a file beside the database before
they begin a write transaction, and give it back after the COMMIT. A process that finds the
lock taken waits for it in the kernel (on a worker thread: the event loop goes on), and the
kernel hands the lock over as soon as the holder lets go, before the holder's next batch is
ready to ask for it again. SQLite's own lock still guards the data: writers that do not take
turns (the thread driver, another program) are met with SQLITE_BUSY and retried as before.

`flock` belongs to the open file, not to the process: two `WriterTurns` of one process (two
engines on one file, in tests) take turns with each other too; the kernel releases the lock
of a process that dies.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import fcntl
import os
import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any


class WriterTurns:
    """An exclusive `flock` on `<database>-writer.lock`, taken without blocking the event loop."""

    def __init__(self, database_path: str) -> None:
        self.path = Path(f"{database_path}-writer.lock")
        self._fd: int | None = None
        self._held = False
        # A wait on a worker thread, and how many take() calls wait for it: one whose taker was
        # cancelled is taken over by the next take(), or gives the lock back when it comes.
        self._pending: asyncio.Future[None] | None = None
        self._waiters = 0
        self._waiter = _DaemonCalls("kasir-writer-turn")

    def _file(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        return self._fd

    async def take(self, timeout: float) -> None:
        """Wait for this process's turn (at once when no other process is writing).

        TimeoutError after `timeout` seconds, as SQLite's busy timeout would end a wait for its lock.
        """
        if self._held:
            return  # another event loop of this process has it (tests): SQLite's lock decides between the two
        if self._pending is None:
            fd = self._file()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pass
            else:
                self._held = True
                return
            self._pending = self._waiter.submit(fcntl.flock, fd, fcntl.LOCK_EX)
            self._pending.add_done_callback(self._unclaimed)
        waiting = self._pending
        self._waiters += 1
        try:
            await asyncio.wait_for(asyncio.shield(waiting), timeout)
        finally:
            self._waiters -= 1
            if waiting.done() and self._pending is waiting:
                self._pending = None
        self._held = True

    def give_back(self) -> None:
        """Let the next process write (after this one's COMMIT or ROLLBACK)."""
        if self._held and self._fd is not None:
            self._held = False
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _unclaimed(self, waiting: asyncio.Future[None]) -> None:
        # Runs before the waiting take() resumes; with none left waiting, the lock is nobody's.
        if self._waiters == 0 and self._pending is waiting:
            self._pending = None
            if not waiting.cancelled() and waiting.exception() is None and self._fd is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        self.give_back()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class _DaemonCalls:
    """Blocking calls, one after another, on a daemon thread of their own.

    The wait for the turn blocks in `flock` until the other process lets go. On the loop's
    default executor that thread is joined when `asyncio.run` ends, so a command that gave up
    waiting (TimeoutError after the busy limit) could not exit until the other process let go:
    `kasir demo-merchant` once hung ~10 minutes that way. A daemon thread does not hold up the
    exit, and the kernel drops a lock with its process.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._calls: queue.SimpleQueue[tuple[concurrent.futures.Future[Any], Callable[..., Any], tuple[Any, ...]]] = (
            queue.SimpleQueue()
        )
        self._thread: threading.Thread | None = None

    def submit(self, function: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        done: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._calls.put((done, function, args))
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()
        return asyncio.wrap_future(done)

    def _run(self) -> None:
        while True:
            done, function, args = self._calls.get()
            if not done.set_running_or_notify_cancel():
                continue
            try:
                done.set_result(function(*args))
            except BaseException as exc:  # handed to the waiting coroutine
                done.set_exception(exc)
