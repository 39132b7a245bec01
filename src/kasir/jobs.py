"""Every room's scheduled work, the one list the worker runs (each pass, in this order).

A room declares its jobs next to its service, in its jobs.py (`JOBS`: functions of the
Database returning how many rows they dealt with); each job opens its own units of work.
A new room with scheduled work adds its line here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from kasir.bnpl import jobs as bnpl_jobs
from kasir.card import jobs as card_jobs
from kasir.db import Database
from kasir.idempotency import jobs as idempotency_jobs
from kasir.payouts import jobs as payouts_jobs
from kasir.processors import jobs as processors_jobs
from kasir.ratelimit import jobs as ratelimit_jobs
from kasir.snap import jobs as snap_jobs
from kasir.va import jobs as va_jobs
from kasir.wallet import jobs as wallet_jobs

Job = Callable[[Database], Awaitable[int]]

JOBS: tuple[Job, ...] = (
    *wallet_jobs.JOBS,
    *va_jobs.JOBS,
    *bnpl_jobs.JOBS,
    *payouts_jobs.JOBS,
    *snap_jobs.JOBS,
    *card_jobs.JOBS,
    *idempotency_jobs.JOBS,
    *ratelimit_jobs.JOBS,
    *processors_jobs.JOBS,
)
