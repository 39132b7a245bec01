"""Databases for the tests of kasir.db: this run's kind (KASIR_TEST_DB), with the tests' own table.

SQLite: a file of the test's own. PostgreSQL: the session's server, in a database of these tests
(`kasir_db_probe`), its table made before each test and dropped after it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kasir.config import Settings
from kasir.db import Database
from tests.conftest import WRITE_SEAT_WATCHDOG_SECONDS
from tests.db.probe import metadata
from tests.support.postgres import PostgresCluster
from tests.support.probe_tables import database_with_tables


@pytest.fixture(scope="session")
def probe_url(postgres: PostgresCluster | None) -> str | None:
    """The PostgreSQL database of these tests (None on a SQLite run)."""
    return None if postgres is None else postgres.create_database("kasir_db_probe")


@pytest.fixture
def lane_settings(tmp_path: Path, probe_url: str | None) -> Settings:
    """Settings for this run's database, as the suite runs it (the write-seat watchdog on)."""
    settings = Settings(data_dir=tmp_path, secret_key="k", debug_write_seat_seconds=WRITE_SEAT_WATCHDOG_SECONDS)
    return settings if probe_url is None else settings.model_copy(update={"database_url": probe_url})


@pytest.fixture
def on_postgres(probe_url: str | None) -> bool:
    return probe_url is not None


@pytest.fixture
async def database(lane_settings: Settings) -> AsyncIterator[Database]:
    async with database_with_tables(lane_settings, metadata) as made:
        yield made
