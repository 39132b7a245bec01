"""The database, behind one interface.

    Database(settings)                 the strategy (SQLite or PostgreSQL), chosen once from the URL
      .unit_of_work(read_only=False)   a Session committed at the end, rolled back on exception
      .unit_of_work(atomic=False)      each statement commits by itself (one UPDATE): fewer round trips
      .listen(channel, on_wake)        wake-ups from commits that notified the channel
      .keeps_counters                  rate-limit counters in the database (PostgreSQL) or in memory
    database_time(database)            the database's own clock (the worker acts only while it agrees)
    Statement(core statement)          a Core statement compiled once, run on the unit's connection
    fetch/fetch_one/fetch_value/run    a Core statement built per call (filters, IN lists)
    on_commit(session, action)         run an action after the unit commits
    locked_once(session, key, read)    a row read locked once per unit (read again without a statement)
    notify_after_commit(session, ch)   wake the channel's listeners after the unit commits
    lock_wait_at_most(session, s)      wait at most s for a row another unit holds (LockTimeout)
    InsertUnlessTaken(table, ...)      INSERT ... ON CONFLICT DO NOTHING waiting at most s, in one statement
    Base, UTCDateTime                  the models' declarative base and aware UTC datetimes
    UNAVAILABLE                        what an unreachable or overloaded database raises (an outage)

The strategies (`sqlite.py`, `postgres.py`) are the only modules that know a dialect or a driver;
the rooms' repositories write SQLAlchemy Core statements and run them through this interface.
"""

from kasir.db.database import (
    UNAVAILABLE,
    Database,
    InsertUnlessTaken,
    ReadSession,
    SchemaBehind,
    WriteSession,
    check_schema,
    current_revision,
    database_time,
    each_in_own_unit_of_work,
    head_revision,
    ping,
    read_session,
    run_migrations,
    upgrade_schema,
    write_session,
)
from kasir.db.models import NAMING_CONVENTION, Base, UTCDateTime
from kasir.db.session import (
    DatabaseUnavailable,
    LockTimeout,
    Session,
    held_rows,
    lock_wait_at_most,
    locked_once,
    notify_after_commit,
    on_commit,
    rollback_unit,
)
from kasir.db.statements import Statement, binds, fetch, fetch_one, fetch_value, run

__all__ = [
    "NAMING_CONVENTION",
    "UNAVAILABLE",
    "Base",
    "Database",
    "DatabaseUnavailable",
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
    "database_time",
    "each_in_own_unit_of_work",
    "fetch",
    "fetch_one",
    "fetch_value",
    "head_revision",
    "held_rows",
    "lock_wait_at_most",
    "locked_once",
    "notify_after_commit",
    "on_commit",
    "ping",
    "read_session",
    "rollback_unit",
    "run",
    "run_migrations",
    "upgrade_schema",
    "write_session",
]
