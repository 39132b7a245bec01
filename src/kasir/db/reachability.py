"""Why a command could not use the database, as one line an operator can act on (the `kasir` command's errors)."""

from __future__ import annotations

import errno
import socket
import sqlite3
from collections.abc import Iterator

from sqlalchemy.exc import ArgumentError

from kasir.db.session import UnsupportedDatabaseUrl

# PostgreSQL's SQLSTATE codes a failed connection carries (asyncpg puts them on its exceptions).
_SQLSTATE_REASONS = {
    "28P01": "password authentication failed",
    "28000": "the role may not connect",
    "3D000": "the database does not exist",
    "57P03": "the server is starting up or shutting down",
    "53300": "too many connections",
}


def database_failure(exc: BaseException, url: str) -> str | None:
    """The line for `exc` if it says the database at `url` is unreachable or the URL is wrong, else None."""
    shown = masked_url(url)
    sqlite = url.startswith("sqlite")
    for error in _chain(exc):
        if isinstance(error, ArgumentError | UnsupportedDatabaseUrl) or (
            isinstance(error, ImportError) and not url.startswith(("sqlite+aiosqlite:", "postgresql+asyncpg:"))
        ):
            return (
                f"KASIR_DATABASE_URL={shown} is not a database URL Kasir can use ({error}): "
                "use sqlite+aiosqlite:///PATH or postgresql+asyncpg://USER:PASSWORD@HOST:PORT/DATABASE"
            )
        reason = _reason(error)
        if sqlite and isinstance(error, OSError) and error.filename and str(error.filename) in url:
            reason = f"{error.strerror or type(error).__name__}: {error.filename}".lower()
        elif not sqlite and isinstance(error, FileNotFoundError):  # a `host=/directory` URL: the Unix socket
            reason = "no PostgreSQL socket in the host directory for that port"
        elif not sqlite and isinstance(error, PermissionError):
            reason = "permission denied on the PostgreSQL socket"
        if reason is not None:
            fix = (
                "check that the file's directory (KASIR_DATA_DIR) exists and is writable"
                if sqlite
                else "check that PostgreSQL runs there and the URL's host, port, user, password and database name"
            )
            return f"cannot use the database at KASIR_DATABASE_URL={shown} ({reason}): {fix}"
    return None


def masked_url(url: str) -> str:
    """`url` without its password."""
    scheme, separator, rest = url.partition("://")
    if separator and "@" in rest:
        credentials, _, host = rest.rpartition("@")
        user = credentials.split(":", 1)[0]
        return f"{scheme}://{user}:…@{host}" if ":" in credentials else url
    return url


def _reason(error: BaseException) -> str | None:
    sqlstate = getattr(error, "sqlstate", None)
    if isinstance(sqlstate, str) and sqlstate in _SQLSTATE_REASONS:
        return _SQLSTATE_REASONS[sqlstate]
    if isinstance(error, ConnectionRefusedError):
        return "connection refused"
    if isinstance(error, socket.gaierror):
        return "host name not found"
    if isinstance(error, TimeoutError):
        return "timed out"
    if isinstance(error, ConnectionError) or (
        isinstance(error, OSError) and error.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EADDRNOTAVAIL)
    ):
        return (error.strerror or type(error).__name__).lower()
    if isinstance(error, sqlite3.OperationalError) and "unable to open" in str(error):
        return "unable to open the SQLite file"
    return None


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        error = pending.pop(0)
        if id(error) in seen:
            continue
        seen.add(id(error))
        yield error
        pending.extend(e for e in (error.__cause__, error.__context__, getattr(error, "orig", None)) if e is not None)
        if isinstance(error, BaseExceptionGroup):
            pending.extend(error.exceptions)
