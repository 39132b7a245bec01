"""Fixed-window counters, in process memory or shared through the database.

    Counters                     in this process only (SQLite: one writer; limits hold per process)
    └── SharedCounters           also in the database's rows (PostgreSQL: every process adds to them)

A counter is a key and a window length; its count is that of the current window, which starts
at a multiple of the length (Unix seconds) and is forgotten when it ends.

`SharedCounters` keeps each counter's last known total and the hits not yet written, and meets
the database at most once per SYNC_SECONDS per counter (one upsert: add what is pending, read
the total of every process), unless asked to write through (failed authentications: another
process must see them). A process therefore sees the others' hits at most SYNC_SECONDS late: a
limit can be passed by what the other processes counted in that time, never more.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime

from kasir.db import Database
from kasir.ratelimit.repository import rate_limit_repository

log = logging.getLogger("kasir.ratelimit")

SYNC_SECONDS = 1.0
# Past this many counters in memory the ended windows are dropped; past it still, the oldest
# counters (a flood of distinct addresses must not grow a process without bound).
MAX_COUNTERS = 100_000

Counter = tuple[str, int]  # (key, window length in seconds)


class _Window:
    __slots__ = ("count", "end", "pending", "start", "synced_at", "syncing")

    def __init__(self, start: int, length: int) -> None:
        self.start = start
        self.end = start + length
        self.count = 0  # SharedCounters: every process's total when last synced
        self.pending = 0  # SharedCounters: this process's hits not yet written
        self.synced_at = float("-inf")
        self.syncing = False


class Counters:
    """Counters of this process only."""

    def __init__(self) -> None:
        self._windows: dict[str, _Window] = {}

    def _window(self, key: str, length: int, now: float) -> _Window:
        start = int(now // length) * length
        window = self._windows.get(key)
        if window is None or window.start != start:
            if window is None and len(self._windows) >= MAX_COUNTERS:
                self._prune(now)
            window = self._windows[key] = _Window(start, length)
        return window

    def _prune(self, now: float) -> None:
        """Drop the ended windows; if that is not enough, the counters hit once (a flood of new
        addresses), then the oldest: a counter that locks something is the last to go."""
        windows = {key: w for key, w in self._windows.items() if w.end > now}
        if len(windows) >= MAX_COUNTERS:
            windows = {key: w for key, w in windows.items() if w.count + w.pending > 1}
        if len(windows) >= MAX_COUNTERS:
            windows = dict(list(windows.items())[len(windows) // 10 :])
        self._windows = windows

    async def hit(self, counters: Sequence[Counter], now: float, *, write_through: bool = False) -> list[int]:
        """Count one hit on each counter; the counts after it."""
        counts = []
        for key, length in counters:
            window = self._window(key, length, now)
            window.count += 1
            counts.append(window.count)
        return counts

    async def read(self, counters: Sequence[Counter], now: float) -> list[int]:
        counts = []
        for key, length in counters:
            window = self._windows.get(key)
            counts.append(window.count if window is not None and window.start == int(now // length) * length else 0)
        return counts


class SharedCounters(Counters):
    """Counters every process sharing the database adds to."""

    def __init__(self, database: Database) -> None:
        super().__init__()
        self.database = database

    async def hit(self, counters: Sequence[Counter], now: float, *, write_through: bool = False) -> list[int]:
        windows = [self._window(key, length, now) for key, length in counters]
        for window in windows:
            window.pending += 1
        await self._sync(counters, windows, now, force=write_through)
        return [window.count + window.pending for window in windows]

    async def read(self, counters: Sequence[Counter], now: float) -> list[int]:
        windows = [self._window(key, length, now) for key, length in counters]
        await self._sync(counters, windows, now, force=False)
        return [window.count + window.pending for window in windows]

    async def _sync(self, counters: Sequence[Counter], windows: list[_Window], now: float, *, force: bool) -> None:
        due = [
            (key, length, window)
            for (key, length), window in zip(counters, windows, strict=True)
            if not window.syncing and (force or now - window.synced_at >= SYNC_SECONDS)
        ]
        if not due:
            return
        for _, _, window in due:
            window.syncing = True
        try:
            synced = []
            # Nothing to add (a read of what other processes counted): a read unit, no write transaction.
            reading_only = not any(window.pending for _, _, window in due)
            async with self.database.unit_of_work(read_only=reading_only) as session:
                for key, length, window in due:
                    sent = window.pending
                    if sent:
                        expires_at = datetime.fromtimestamp(window.start + length, UTC)
                        total = await rate_limit_repository.add(session, key, window.start, sent, expires_at)
                    else:
                        total = await rate_limit_repository.get(session, key, window.start)
                    synced.append((window, sent, total))
            for window, sent, total in synced:  # committed: what was sent is in the total now
                window.count, window.pending = total, window.pending - sent
        except Exception:
            # Fail open: a database that cannot be reached must not turn every request into a
            # refusal; this process goes on with what it counted (and sends it again later).
            log.warning("rate-limit counters not synced with the database", exc_info=True)
        finally:
            for _, _, window in due:
                window.syncing = False
                window.synced_at = now
