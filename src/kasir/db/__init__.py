"""The database, behind one interface.

    Database(settings)                 the engine and its strategy (SQLite or PostgreSQL)
      .unit_of_work(read_only=False)   a session committed at the end, rolled back on exception
      .unit_of_work(atomic=False)      each statement commits by itself (one UPDATE): fewer round trips
      .listen(channel, on_wake)        wake-ups from commits that notified the channel
      .keeps_counters                  rate-limit counters in the database (PostgreSQL) or in memory
    on_commit(session, action)         run an action after the unit commits
    held_rows(session)                 the rows the unit has read locked (read again without a statement)
    notify_after_commit(session, ch)   wake the channel's listeners after the unit commits
    lock_wait_at_most(session, s)      wait at most s for a row another unit holds (LockTimeout)
    InsertUnlessTaken(table, ...)      INSERT ... ON CONFLICT DO NOTHING waiting at most s, in one statement
    Statement(core statement)          a Core statement compiled once, run on the unit's connection
    Base, UTCDateTime                  the models' declarative base and aware UTC datetimes
    UNAVAILABLE                        what an unreachable or overloaded database raises (503)

The strategies (`sqlite.py`, `postgres.py`) are the only modules that know a dialect; the
rooms' repositories write SQLAlchemy statements and run them through this interface.
"""

from sqlalchemy.ext.asyncio import AsyncSession

from kasir.db.database import (
    UNAVAILABLE,
    Database,
    InsertUnlessTaken,
    LockTimeout,
    ReadSession,
    SchemaBehind,
    WriteSession,
    check_schema,
    current_revision,
    each_in_own_unit_of_work,
    head_revision,
    lock_wait_at_most,
    notify_after_commit,
    ping,
    read_session,
    rollback_unit,
    upgrade_schema,
    write_session,
)
from kasir.db.models import NAMING_CONVENTION, Base, UTCDateTime
from kasir.db.queries import fetch, fetch_one, fetch_value, run
from kasir.db.statements import Statement, binds
from kasir.db.unit import held_rows, on_commit

# What a unit of work hands the rooms: every repository and service takes one.
Session = AsyncSession

__all__ = [
    "NAMING_CONVENTION",
    "UNAVAILABLE",
    "Base",
    "Database",
    "InsertUnlessTaken",
    "LockTimeout",
    "ReadSession",
    "SchemaBehind",
    "Session",
    "Statement",
    "UTCDateTime",
    "WriteSession",
    "binds",
    "check_schema",
    "current_revision",
    "each_in_own_unit_of_work",
    "fetch",
    "fetch_one",
    "fetch_value",
    "head_revision",
    "held_rows",
    "lock_wait_at_most",
    "notify_after_commit",
    "on_commit",
    "ping",
    "read_session",
    "rollback_unit",
    "run",
    "upgrade_schema",
    "write_session",
]
