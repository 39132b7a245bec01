"""The processors' scheduled work, run by the worker (listed in kasir.jobs)."""

from __future__ import annotations

from kasir.processors.calls import finish_stalled_calls

JOBS = (finish_stalled_calls,)
