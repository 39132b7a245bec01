"""What decides whether a 200 was really saved: group commit's failure branches, on a real SQLite file.

Each unit of work answers only after its batch's COMMIT is on disk. When something goes wrong
between a unit's statements and that COMMIT, no unit of the batch may report success, nothing
of the batch may be in the file, and the next unit must work.
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select, text

import kasir.db.sqlite
from kasir.card.models import CardOrder
from kasir.config import Settings
from kasir.db import Database
from tests.card.helpers import charge_body, post_charge
from tests.support.builders import make_merchant


@pytest.fixture
async def grouped(tmp_path: Path) -> Any:
    database = Database(Settings(data_dir=tmp_path, secret_key="k", sqlite_group_commit_max=8))
    async with database.engine.begin() as connection:
        await connection.execute(text("CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT UNIQUE)"))
    yield database, tmp_path / "kasir.db"
    await database.dispose()


def committed_names(path: Path) -> set[str]:
    """Read with a separate sqlite3 connection: only what was really committed is visible."""
    with sqlite3.connect(path) as connection:
        return {row[0] for row in connection.execute("SELECT name FROM item")}


async def write(database: Database, name: str) -> None:
    async with database.unit_of_work() as session:
        await session.execute(text("INSERT INTO item (name) VALUES (:name)"), {"name": name})


def is_file(connection: sqlite3.Connection, path: Path) -> bool:
    return any(Path(row[2]) == path for row in connection.execute("PRAGMA database_list") if row[2])


def busy(message: str = "database is locked") -> sqlite3.OperationalError:
    error = sqlite3.OperationalError(message)
    error.sqlite_errorcode = sqlite3.SQLITE_BUSY  # type: ignore[attr-defined]
    return error


async def test_a_commit_that_fails_fails_every_unit_of_its_batch_and_leaves_nothing(
    grouped: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    database, path = grouped
    real_commit = kasir.db.sqlite._commit_sqlite
    commits: list[str] = []

    def disk_full_once(connection: sqlite3.Connection) -> None:
        if not is_file(connection, path):  # another test's leftover worker shares the loop: not ours to fail
            real_commit(connection)
            return
        commits.append("tried")
        if len(commits) == 1:
            connection.rollback()  # what SQLite does to a transaction whose COMMIT failed for I/O
            raise sqlite3.OperationalError("database or disk is full")
        real_commit(connection)

    monkeypatch.setattr(kasir.db.sqlite, "_commit_sqlite", disk_full_once)
    outcomes = await asyncio.gather(*(write(database, f"batch-{n}") for n in range(5)), return_exceptions=True)
    assert commits[0] == "tried"
    failed = [o for o in outcomes if isinstance(o, Exception)]
    assert failed, outcomes
    assert all("disk is full" in str(o) for o in failed), outcomes
    # Whatever succeeded was in a later batch, and is on disk; nothing of the failed batch is.
    succeeded = {f"batch-{n}" for n, o in enumerate(outcomes) if not isinstance(o, Exception)}
    assert committed_names(path) == succeeded
    await write(database, "after")
    assert committed_names(path) == succeeded | {"after"}


async def test_a_busy_commit_is_retried_until_it_goes_through(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process's reader or checkpoint can hold SQLite busy at COMMIT: retried, not failed."""

    class Busy:
        def __init__(self, times: int) -> None:
            self.left, self.commits = times, 0

        def commit(self) -> None:
            self.commits += 1
            if self.left:
                self.left -= 1
                raise busy()

    connection = Busy(3)
    kasir.db.sqlite._commit_sqlite(connection)  # type: ignore[arg-type]
    assert connection.commits == 4
    monkeypatch.setattr(kasir.db.sqlite, "SQLITE_BUSY_SECONDS", 0.05)
    forever = Busy(10_000)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        kasir.db.sqlite._commit_sqlite(forever)  # type: ignore[arg-type]
    failing = Busy(0)
    failing.commit = lambda: (_ for _ in ()).throw(sqlite3.OperationalError("disk I/O error"))  # type: ignore[method-assign]
    with pytest.raises(sqlite3.OperationalError, match="I/O"):
        kasir.db.sqlite._commit_sqlite(failing)  # type: ignore[arg-type]


async def test_a_broken_savepoint_fails_the_whole_batch(grouped: Any) -> None:
    """A unit whose savepoint cannot be released leaves the shared transaction in a state nobody can vouch for."""
    database, path = grouped
    first_wrote, release_first = asyncio.Event(), asyncio.Event()

    async def breaks_its_savepoint() -> None:
        async with database.unit_of_work() as session:
            await session.execute(text("INSERT INTO item (name) VALUES ('breaker')"))
            raw = await kasir.db.sqlite.raw_connection(session)
            raw.execute("RELEASE kasir_unit")  # gone: the unit's own RELEASE will fail
            first_wrote.set()
            await release_first.wait()

    async def joins_the_batch() -> None:
        await first_wrote.wait()
        await write(database, "bystander")

    breaker = asyncio.create_task(breaks_its_savepoint())
    bystander = asyncio.create_task(joins_the_batch())
    await first_wrote.wait()
    await asyncio.sleep(0.05)  # the bystander waits for the seat
    release_first.set()
    outcomes = await asyncio.gather(breaker, bystander, return_exceptions=True)
    assert isinstance(outcomes[0], Exception), outcomes
    assert "breaker" not in committed_names(path)
    if not isinstance(outcomes[1], Exception):
        assert "bystander" in committed_names(path)  # it took a batch of its own, after the abort
    await write(database, "after")
    assert "after" in committed_names(path)


CRASH_BEFORE_COMMIT = """
import asyncio, os, sys
from sqlalchemy import text
import kasir.db.sqlite
from kasir.config import Settings
from kasir.db import Database

def crash(connection):
    print("statements done, COMMIT not sent", flush=True)
    os._exit(9)  # SIGKILL-like: no rollback, no cleanup

kasir.db.sqlite._commit_sqlite = crash

async def main():
    db = Database(Settings(data_dir=sys.argv[1], secret_key="k"))
    async with db.unit_of_work() as session:
        await session.execute(text("INSERT INTO item (name) VALUES ('lost')"))
    print("ANSWERED", flush=True)  # never: the unit answers only after its COMMIT

asyncio.run(main())
"""


async def test_a_crash_between_the_last_statement_and_commit_leaves_nothing_and_no_answer(grouped: Any) -> None:
    database, path = grouped
    await write(database, "before")
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CRASH_BEFORE_COMMIT, str(path.parent), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 9, err.decode()
    assert "COMMIT not sent" in out.decode()
    assert "ANSWERED" not in out.decode()
    assert committed_names(path) == {"before"}
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    await write(database, "after")  # the dead process's lock and turn are gone with it
    assert committed_names(path) == {"before", "after"}


async def test_a_charge_whose_commit_fails_answers_503_saves_nothing_and_frees_its_key(
    app: FastAPI, client: httpx.AsyncClient, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not settings.resolved_database_url.startswith("sqlite"):
        pytest.skip("SQLite's group commit")
    merchant = await make_merchant(app)
    body = charge_body(mode="OPEN", number=None)
    real_commit = kasir.db.sqlite._commit_sqlite

    def fails(connection: sqlite3.Connection) -> None:
        connection.rollback()
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(kasir.db.sqlite, "_commit_sqlite", fails)
    refused = await post_charge(client, merchant, body, key="fault-key")
    assert refused.status_code == 503, refused.text
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["statusMessage"] == "SERVICE_UNAVAILABLE"
    monkeypatch.setattr(kasir.db.sqlite, "_commit_sqlite", real_commit)
    async with app.state.database.unit_of_work(read_only=True) as session:
        orders = await session.scalar(
            select(func.count()).select_from(CardOrder).where(CardOrder.merchant_id == merchant.id)
        )
    assert orders == 0
    retried = await post_charge(client, merchant, body, key="fault-key")
    assert retried.status_code == 200, retried.text
    assert "idempotent-replayed" not in retried.headers


async def test_every_route_answers_an_unavailable_database_with_503_in_its_own_format(
    app: FastAPI, client: httpx.AsyncClient, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mapped once (kasir.errors), not per endpoint: the wallet's format says it as `98`."""
    if not settings.resolved_database_url.startswith("sqlite"):
        pytest.skip("SQLite's group commit")
    from tests.wallet import helpers as wallet

    merchant = await make_merchant(app)

    def fails(connection: sqlite3.Connection) -> None:
        connection.rollback()
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(kasir.db.sqlite, "_commit_sqlite", fails)
    body = wallet.create_body()
    refused = await wallet.post_wallet(client, merchant, wallet.CREATE, body)
    wallet.assert_problem(refused, 503, "98")
    assert refused.headers["retry-after"] == "1"
