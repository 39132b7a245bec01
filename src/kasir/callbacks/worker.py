"""The delivery worker: embedded in `kasir serve`, or alone as `kasir worker` (many may run).

It claims due callbacks, sends them concurrently, and records each attempt. It wakes at
once when any process commits a callback (kasir.db: Database.listen), and otherwise polls
every KASIR_CALLBACK_POLL_SECONDS. Work goes to the database in batches: the attempts that
finish while a recording transaction commits are recorded together in the next one (one
commit for all, not one each), and with a backlog a claim waits until a quarter of the
slots are free, so one claim takes many callbacks rather than each finished attempt
starting a claim of its own. An attempt is still recorded before its slot is given back. The
same loop runs the rooms' scheduled jobs (kasir.jobs: expiries, purges, stalled processor
calls), so pending payments expire without any request. `stop()` (SIGTERM) finishes
in-flight attempts, then returns.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import os
import secrets
import socket

from kasir.callbacks.dispatcher import (
    AttemptResult,
    ClaimedCallback,
    claim_due,
    give_back,
    record_attempts,
    send_attempt,
)
from kasir.callbacks.service import CALLBACKS_CHANNEL
from kasir.callbacks.ssrf import delivery_lookup
from kasir.clock_agreement import ClockAgreement
from kasir.config import Settings
from kasir.db import Database
from kasir.jobs import JOBS
from kasir.kit.http_client import KeepAliveTransport

log = logging.getLogger("kasir.worker")

EXPIRY_INTERVAL_SECONDS = 1.0


class DeliveryWorker:
    def __init__(self, database: Database, settings: Settings, *, name: str | None = None) -> None:
        self.database = database
        self.settings = settings
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self.concurrency = settings.callback_concurrency
        # One merchant's attempts in flight at most: a slow or dead endpoint holds its share of the slots,
        # and the other merchants' callbacks go out beside it.
        self.per_merchant = min(settings.callback_concurrency_per_merchant, self.concurrency)
        self._inflight_of: collections.Counter[str] = collections.Counter()
        # With a backlog, claim again once this many slots are free (one claim for many callbacks).
        self.claim_at_least = max(1, self.concurrency // 4)
        self._wake = asyncio.Event()
        # Expiries, purges and claims wait while this machine's clock and the database's disagree.
        self.clock = ClockAgreement(
            settings.max_database_clock_skew_seconds, stops="no expiry, purge or callback claim"
        )
        self._outcomes: list[tuple[ClaimedCallback, AttemptResult, asyncio.Future[None]]] = []
        self._outcome_ready = asyncio.Event()
        self._recorder_done = False
        self._stopped = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False
        self._inflight: set[asyncio.Task[None]] = set()
        # idle(): the passes begun, the last one that found the worker with nothing to do, and the event
        # that such a pass sets (a new one each time, so every waiter sees the pass after it began waiting).
        self._passes_begun = 0
        self._idle_pass = 0
        self._went_idle = asyncio.Event()
        # next_expiry_pass(): the same for the passes of the expiry scheduler.
        self._expiry_passes_begun = 0
        self._expiry_passes_ended = 0
        self._expiry_pass_ended = asyncio.Event()
        # Attempts go straight through the transport (kasir.kit.http_client.post): no redirect is followed
        # (docs/decisions.md §8), no proxy from the environment is used (it would bypass the SSRF check of the
        # resolved address), no cookie is kept. Idle connections are kept per merchant origin; not httpx's
        # default pool, whose CPU per attempt grows with the attempts in flight (kasir.kit.http_client). A name
        # is looked up on delivery's own pool (staging's URLs; production's are checked and resolved first).
        self._http = KeepAliveTransport(max_idle_per_origin=self.concurrency, resolve=delivery_lookup)

    def wake(self) -> None:
        """Safe from any thread (a commit elsewhere in the process may call it)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            same_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            same_loop = False
        if same_loop:
            self._wake.set()
        else:
            loop.call_soon_threadsafe(self._wake.set)

    async def idle(self) -> None:
        """Return once a claim begun after this call found nothing due and no attempt was in flight.

        Whatever was due when it was called has then been sent and its attempt recorded, and nothing
        else was due: a caller can tell "not sent" from "not sent yet" without waiting on a clock (the
        tests do, after a callback that must not go out, or must go out once). It wakes the worker, so
        it costs one claim when there is nothing to do; it does not return while the worker is stopped.
        """
        began_before = self._passes_begun
        self.wake()
        while self._idle_pass <= began_before:
            await self._went_idle.wait()

    async def next_expiry_pass(self) -> None:
        """Return once a pass of the expiry jobs begun after this call has ended.

        What was due when it was called (a payment past its expiry, an idempotency key past its 24 hours)
        has then been dealt with, or was not due by the jobs' own rules: a caller can tell which without
        waiting on a clock (the tests do). It does not return while the worker is stopped.
        """
        began_before = self._expiry_passes_begun
        while self._expiry_passes_ended <= began_before:
            await self._expiry_pass_ended.wait()

    def stop(self) -> None:
        self._stopping = True
        self._stopped.set()
        self.wake()

    async def run(self) -> None:
        self._loop = asyncio.get_running_loop()
        stop_listening = await self.database.listen(CALLBACKS_CHANNEL, self.wake)
        await self._check_clock()
        background = [asyncio.create_task(self._expiry_scheduler())]
        recorder = asyncio.create_task(self._recorder())
        log.info("callback worker started", extra={"worker": self.name})
        try:
            while not self._stopping:
                self._wake.clear()
                free = self.concurrency - len(self._inflight)
                claimed: list[ClaimedCallback] = []
                self._passes_begun += 1
                this_pass, looked = self._passes_begun, False
                if free > 0 and self.clock.agrees:
                    full = [merchant for merchant, count in self._inflight_of.items() if count >= self.per_merchant]
                    try:
                        claimed = await claim_due(
                            self.database, self.name, free, self.settings.callback_lease_seconds, full
                        )
                        looked = True
                    except Exception:
                        log.exception("claiming callbacks failed; retrying shortly")
                if looked and not claimed and not self._inflight:
                    self._idle_pass = this_pass
                    went_idle, self._went_idle = self._went_idle, asyncio.Event()
                    went_idle.set()
                over_share = self._start(claimed)
                if over_share:
                    try:
                        await give_back(self.database, over_share)
                    except Exception:  # their lease runs out, and a claim takes them again
                        log.exception("handing back callbacks over a merchant's share failed")
                if claimed and len(claimed) == free:
                    continue  # more may be due
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.settings.callback_poll_seconds)
        finally:
            stop_listening()
            # The expiry scheduler ends its current pass by itself (`_stopping`): cancelling it inside a
            # database transaction could strand the write lock that in-flight attempts still need.
            await asyncio.gather(*background, return_exceptions=True)
            if self._inflight:  # finish what was started: an attempt sent is an attempt recorded
                await asyncio.gather(*self._inflight, return_exceptions=True)
            self._recorder_done = True
            self._outcome_ready.set()
            await asyncio.gather(recorder, return_exceptions=True)
            await self._http.aclose()
            log.info("callback worker stopped", extra={"worker": self.name})

    def _start(self, claimed: list[ClaimedCallback]) -> list[ClaimedCallback]:
        """Send each claimed callback within its merchant's share; those over it, to be handed back."""
        over_share: list[ClaimedCallback] = []
        for callback in claimed:
            if self._inflight_of[callback.merchant_id] >= self.per_merchant:
                over_share.append(callback)
                continue
            self._inflight_of[callback.merchant_id] += 1
            task = asyncio.create_task(self._deliver(callback))
            self._inflight.add(task)
            task.add_done_callback(functools.partial(self._slot_free, callback.merchant_id))
        return over_share

    async def _deliver(self, callback: ClaimedCallback) -> None:
        try:
            result = await send_attempt(self._http, callback, self.settings)
            recorded = asyncio.get_running_loop().create_future()
            self._outcomes.append((callback, result, recorded))
            self._outcome_ready.set()
            await recorded
        except Exception:
            # The lease runs out and another claim retries it: nothing is lost.
            log.exception("callback delivery failed", extra={"callback_id": callback.id})

    def _slot_free(self, merchant_id: str, task: asyncio.Task[None]) -> None:
        self._inflight.discard(task)
        self._inflight_of[merchant_id] -= 1
        if not self._inflight_of[merchant_id]:
            del self._inflight_of[merchant_id]
        # A later callback of the same transaction may be due now, and a backlog may wait: claim again
        # once enough slots are free for the claim to be worth its transaction (or when all are).
        if self.concurrency - len(self._inflight) >= self.claim_at_least or not self._inflight:
            self._wake.set()

    async def _recorder(self) -> None:
        """Record finished attempts: everything that finished while the last batch committed, in one unit."""
        while True:
            await self._outcome_ready.wait()
            self._outcome_ready.clear()
            batch, self._outcomes = self._outcomes, []
            if not batch:
                if self._recorder_done:
                    return
                continue
            try:
                await record_attempts(
                    self.database, [(callback, result) for callback, result, _ in batch], self.name, self.settings
                )
            except Exception as error:
                # Nothing of the batch was written: each lease runs out and another claim sends it again.
                for _, _, recorded in batch:
                    if not recorded.done():
                        recorded.set_exception(error)
                continue
            for _, _, recorded in batch:
                if not recorded.done():
                    recorded.set_result(None)

    async def _expiry_scheduler(self) -> None:
        while not self._stopping:
            self._expiry_passes_begun += 1
            this_pass = self._expiry_passes_begun
            for job in JOBS if await self._check_clock() else ():
                try:
                    await job(self.database)
                except Exception:
                    log.exception("expiry job failed", extra={"job": job.__qualname__})
            self._expiry_passes_ended = this_pass
            ended, self._expiry_pass_ended = self._expiry_pass_ended, asyncio.Event()
            ended.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopped.wait(), EXPIRY_INTERVAL_SECONDS)

    async def _check_clock(self) -> bool:
        """Whether the worker may act on time now: the clocks agree (kasir.clock_agreement); not when unknown."""
        return await self.clock.check(self.database) is True


async def run_worker_until_signalled(database: Database, settings: Settings) -> None:
    """`kasir worker`: run until SIGTERM or SIGINT, then finish in-flight attempts."""
    import signal

    worker = DeliveryWorker(database, settings)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, worker.stop)
    await worker.run()
