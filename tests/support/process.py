"""Subprocesses of the tests end with the test run, even when it is killed (no stray servers burning CPU)."""

from __future__ import annotations

import ctypes
import signal

_PR_SET_PDEATHSIG = 1


def end_with_parent() -> None:
    """A `preexec_fn`: the child gets SIGTERM when the process that started it dies (Linux).

    Strictly, when the starting *thread* ends: start children from the test's own thread only.
    """
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


# How long a test waits for an event that a working system always brings before it says it never came:
# a guard against hanging for ever, not a bound on speed (what must happen within a time, a test derives
# from the setting that says so).
HANG_GUARD_SECONDS = 120.0
