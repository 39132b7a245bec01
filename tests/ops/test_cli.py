"""Operating the `kasir` command: one line and exit code 2 for a bad setting, an unreachable database or a
port in use; what `kasir serve` prints and writes at start; links that follow --port (serve's and
demo-merchant's); whole ids in tables.

The messages and outputs are checked in-process (tests/support/cli.py: Typer's runner through kasir.cli.main,
what the console script runs); the installed binary runs once per command family."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import typer
from fastapi import FastAPI
from typer.testing import Result

from kasir.cli import app
from kasir.db.reachability import database_failure
from tests.support.builders import make_merchant
from tests.support.cli import kasir_beside_app, run_kasir
from tests.support.postgres import free_port
from tests.support.server import ServedKasir
from tests.support.wire.wallet import create

KASIR = str(Path(sys.executable).parent / "kasir")
# Every command that reads the settings and the database: the server, the worker, the schema, and the others.
COMMANDS = [
    ("serve", "--port", "9"),
    ("worker",),
    ("db", "upgrade"),
    ("db", "current"),
    ("merchant", "list"),
    ("secrets", "check"),
    ("callbacks", "list"),
    ("user", "list"),
    ("payments", "list"),
    ("demo-merchant",),
]
# The installed binary runs one command of each family (test_the_installed_kasir_reaches_each_command_family),
# but `serve`, which test_serve_hands_out_its_own_port_... starts for real, and `keygen`, the merchant family's
# (kasir.merchants.cli, tests/merchants/test_cli.py).
FAMILIES = [
    ("worker",),
    ("db", "upgrade"),
    ("merchant", "list"),
    ("secrets", "check"),
    ("callbacks", "list"),
    ("user", "list"),
    ("payments", "list"),
    ("demo-merchant",),
]


def one_line(result: Result | subprocess.CompletedProcess[str]) -> str:
    code = result.exit_code if isinstance(result, Result) else result.returncode
    assert code == 2, (code, result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def unreachable_postgresql() -> tuple[str, str]:
    """A URL with a password where nobody listens, and the line every command says for it."""
    port = free_port()
    url = f"postgresql+asyncpg://kasir:hunter2@127.0.0.1:{port}/kasir"
    return url, (
        f"error: cannot use the database at KASIR_DATABASE_URL=postgresql+asyncpg://kasir:…@127.0.0.1:{port}/kasir "
        "(connection refused): check that PostgreSQL runs there and the URL's host, port, user, password and "
        "database name"
    )


@pytest.mark.slow
@pytest.mark.parametrize("command", FAMILIES, ids=" ".join)
def test_the_installed_kasir_reaches_each_command_family(command: tuple[str, ...], tmp_path: Path) -> None:
    """A subprocess, once per family: the console script pyproject.toml installs reaches the family's command in
    a new interpreter (its imports, the database driver in a real main thread) and a user sees one line on the
    real stderr (no warning or log line of an import) and exit status 2. Everything else is asked in-process."""
    url, line = unreachable_postgresql()
    base = {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "COLUMNS": "80"}
    env = {**base, "KASIR_DATA_DIR": str(tmp_path), "KASIR_DATABASE_URL": url}
    result = subprocess.run([KASIR, *command], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert one_line(result) == line


def test_every_command_family_runs_in_the_installed_binary() -> None:
    """A family added to the `kasir` command gets its run of the real binary here too."""
    families = set(typer.main.get_command(app).commands)  # type: ignore[attr-defined]  # a group: its commands
    assert families == {command[0] for command in FAMILIES} | {"serve", "keygen"}


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_bad_setting_is_one_line_naming_the_variable(command: tuple[str, ...], tmp_path: Path) -> None:
    line = one_line(run_kasir(*command, env={"KASIR_DATA_DIR": str(tmp_path), "KASIR_ENV": "prod"}))
    assert line == "error: KASIR_ENV: Input should be 'staging' or 'production' (not 'prod')"


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_an_unreachable_postgresql_is_one_line_naming_the_url_without_its_password(
    command: tuple[str, ...], tmp_path: Path
) -> None:
    url, line = unreachable_postgresql()
    assert one_line(run_kasir(*command, env={"KASIR_DATA_DIR": str(tmp_path), "KASIR_DATABASE_URL": url})) == line


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_postgresql_socket_directory_without_its_socket_is_one_line(command: tuple[str, ...], tmp_path: Path) -> None:
    """The shipped deployment's URL form (deploy/kasir.env.example), with no PostgreSQL listening in that directory."""
    url = f"postgresql+asyncpg://kasir@/kasir?host={tmp_path}&port=5432"
    line = one_line(run_kasir(*command, env={"KASIR_DATA_DIR": str(tmp_path), "KASIR_DATABASE_URL": url}))
    assert line == (
        f"error: cannot use the database at KASIR_DATABASE_URL={url} (no PostgreSQL socket in the host directory "
        "for that port): check that PostgreSQL runs there and the URL's host, port, user, password and database name"
    )


def test_a_postgresql_socket_the_process_may_not_open_is_named() -> None:
    """What asyncpg raises for a socket file the process's user may not open (not reproducible as root, which
    the test runs may be: asked of the function the `kasir` command's errors come from)."""
    url = "postgresql+asyncpg://kasir@/kasir?host=/var/run/postgresql"
    line = database_failure(PermissionError(13, "Permission denied"), url)
    assert line == (
        f"cannot use the database at KASIR_DATABASE_URL={url} (permission denied on the PostgreSQL socket): "
        "check that PostgreSQL runs there and the URL's host, port, user, password and database name"
    )


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_sqlite_file_that_cannot_be_made_is_one_line(command: tuple[str, ...], tmp_path: Path) -> None:
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")
    line = one_line(run_kasir(*command, env={"KASIR_DATA_DIR": str(not_a_directory / "var")}))
    assert f"KASIR_DATABASE_URL=sqlite+aiosqlite:///{not_a_directory}/var/kasir.db" in line
    assert "(not a directory" in line
    assert line.endswith("check that the file's directory (KASIR_DATA_DIR) exists and is writable")


@pytest.mark.parametrize("url", ["mysql://kasir@127.0.0.1/kasir", "kasir.db"])
def test_a_url_kasir_cannot_use_is_one_line(url: str, tmp_path: Path) -> None:
    line = one_line(run_kasir("db", "upgrade", env={"KASIR_DATA_DIR": str(tmp_path), "KASIR_DATABASE_URL": url}))
    assert line.startswith(f"error: KASIR_DATABASE_URL={url} is not a database URL Kasir can use")
    assert "postgresql+asyncpg://" in line


def test_a_port_in_use_is_one_line(settings_env: dict[str, str], migrated: None) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = one_line(run_kasir("serve", "--port", str(port), env=settings_env))
    assert line == (
        f"error: port {port} on 127.0.0.1 is in use (another `kasir serve`?): stop it or choose another --port"
    )


def test_demo_merchant_refuses_a_production_database(settings_env: dict[str, str], migrated: None) -> None:
    line = one_line(run_kasir("demo-merchant", env={**settings_env, "KASIR_ENV": "production"}))
    assert "KASIR_ENV=production" in line
    assert "staging only" in line


@pytest.mark.parametrize(
    ("args", "public_url", "base"),
    [
        (("--port", "8181"), None, "http://127.0.0.1:8181"),
        (("--host", "0.0.0.0", "--port", "8282"), None, "http://127.0.0.1:8282"),  # noqa: S104
        (("--port", "8181"), "https://pay.example.test", "https://pay.example.test"),
    ],
)
def test_demo_merchant_names_the_server_make_run_serves(
    args: tuple[str, ...], public_url: str | None, base: str, tmp_path: Path
) -> None:
    """`make run PORT=8181` passes its --host and --port to demo-merchant: the token script and the console's
    sign-in it prints name that server, not :8000 (KASIR_PUBLIC_URL, where set, still decides)."""
    env = {"KASIR_ENV": "staging", "KASIR_DATA_DIR": str(tmp_path)}  # a database of its own: it writes
    if public_url is not None:
        env["KASIR_PUBLIC_URL"] = public_url
    assert run_kasir("db", "upgrade", env=env).exit_code == 0
    result = run_kasir("demo-merchant", *args, env=env)
    assert result.exit_code == 0, result.output
    script = (tmp_path / "demo" / "get-token.sh").read_text()
    assert f"curl -sS -X POST {base}/auth/merchants/v1.0/access-token/b2b " in script
    assert f"curl -sS -X POST {base}/auth/merchants/v1.0/access-token/b2b " in result.stdout
    assert f"{base}/console/sign-in" in result.stdout
    assert ":8000" not in script + result.stdout


@pytest.mark.slow
async def test_serve_hands_out_its_own_port_and_writes_the_admin_token_at_start(
    app: FastAPI, settings_env: dict[str, str], tmp_path: Path
) -> None:
    """No KASIR_PUBLIC_URL and no KASIR_ADMIN_TOKEN: links name --port, admin.token is there before any request.

    A subprocess: it serves, on a port of its own (and it is the `serve` family's run of the installed binary)."""
    server = ServedKasir({**settings_env, "KASIR_DATA_DIR": str(tmp_path)}, args=("--no-worker",))
    server.env.pop("KASIR_PUBLIC_URL")
    server.env.pop("KASIR_ADMIN_TOKEN")
    await asyncio.to_thread(server.start)
    try:
        token_file = tmp_path / "admin.token"
        assert token_file.exists()  # before the first admin request
        assert token_file.stat().st_mode & 0o777 == 0o600
        banner = server.log().split('{"time"', 1)[0].splitlines()  # what it printed before its JSON log lines
        base = server.base_url
        assert banner[0].startswith(f"Kasir staging on {base} (version ")
        assert f"  public URL:  {base}" in banner
        assert f"  API docs:    {base}/docs" in banner
        assert f"  console:     {base}/console" in banner
        assert f"  metrics:     {base}/metrics" in banner
        assert f"  admin token: {token_file}" in banner
        assert any("make demo" in line for line in banner)
        assert all(len(line) <= 100 for line in banner), banner  # short lines: nothing for a terminal to break

        merchant = await make_merchant(app)
        async with httpx.AsyncClient(base_url=base) as client:
            tx = await create(client, merchant, payment_channel="DANA")
            admin = await client.get(
                "/admin/callbacks",
                params={"limit": 1},
                headers={"Authorization": f"Bearer {token_file.read_text().strip()}"},
            )
        assert tx["payment_url"].startswith(f"{base}/ewallet/pages/")
        assert admin.status_code == 200
    finally:
        await asyncio.to_thread(server.stop)


async def test_tables_show_whole_ids_in_80_columns(app: FastAPI) -> None:
    merchants = [
        await make_merchant(app, callback_url="https://shop.example/a/rather/long/callback/path") for _ in "ab"
    ]
    result = await kasir_beside_app("merchant", "list")  # 80 columns, a pipe's width (tests/support/cli.py)
    assert result.exit_code == 0, result.output
    for merchant in merchants:
        assert merchant.id in result.stdout
        assert merchant.client_id in result.stdout
    assert "…" not in result.stdout
