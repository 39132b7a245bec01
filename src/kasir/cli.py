"""The `kasir` command."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import shlex
import socket
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
import uvicorn
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from kasir import __version__
from kasir.audit.service import Actor
from kasir.callbacks.cli import callbacks_app, worker
from kasir.cli_support import console, err_console, fail, run_in_session
from kasir.config import Settings, configure, get_settings
from kasir.console.cli import demo_console_users, user_app
from kasir.db import Database, SchemaBehind, Session, check_schema, current_revision, head_revision, upgrade_schema
from kasir.db.reachability import database_failure, masked_url
from kasir.kit.http_server import NoDelayHttpToolsProtocol, connection_cap
from kasir.merchants.cli import credentials_json, keygen, merchant_app, secrets_app, write_key_pair
from kasir.merchants.sealing import SecretKeyMismatch, check_secret_key
from kasir.merchants.service import MerchantCredentials, merchant_service, secret_box
from kasir.ops.metrics import prepare_multiprocess
from kasir.payments.cli import payments_app, replay_given_up
from kasir.payouts import cli as payouts_cli
from kasir.payouts.service import payout_service
from kasir.processors.registry import ConfigurationError, check_configuration
from kasir.products import declare_products

app = typer.Typer(help="Kasir payment platform.", no_args_is_help=True, pretty_exceptions_enable=False)


class EventLoop(StrEnum):
    """The server's event loop. asyncio by default: under load uvloop (0.23, Linux) answers some
    connections hundreds of milliseconds late while it serves others again and again (64
    connections, one process: p99 200-670 ms against asyncio's 32-48 ms, for the same
    throughput; with a bare asyncio.Protocol server too, so it is uvloop's, not Kasir's)."""

    ASYNCIO = "asyncio"
    UVLOOP = "uvloop"


db_app = typer.Typer(help="Database schema.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(merchant_app, name="merchant")
merchant_app.command("top-up")(payouts_cli.top_up)
app.add_typer(secrets_app, name="secrets")
app.command("keygen")(keygen)
callbacks_app.command("replay-given-up")(replay_given_up)
app.add_typer(callbacks_app, name="callbacks")
app.command("worker")(worker)
app.add_typer(user_app, name="user")
app.add_typer(payments_app, name="payments")

DEMO_MERCHANT_NAME = "Demo Merchant"


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Apply every pending migration."""

    async def main() -> tuple[str | None, str | None]:
        database = Database(get_settings())
        try:
            before = await current_revision(database)
            await upgrade_schema(database)
            return before, await current_revision(database)
        finally:
            await database.dispose()

    before, after = asyncio.run(main())
    if before == after:
        console.print(f"database schema is up to date ({after})")
    else:
        console.print(f"database schema upgraded: {before or 'empty'} -> {after}")


@db_app.command("current")
def db_current() -> None:
    """Show the schema revision of the database and of the code."""

    async def main() -> str | None:
        database = Database(get_settings())
        try:
            return await current_revision(database)
        finally:
            await database.dispose()

    console.print(f"database: {asyncio.run(main()) or 'empty'}\ncode:     {head_revision()}")


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on")] = 8000,
    workers: Annotated[int, typer.Option(help="Server processes")] = 1,
    worker: Annotated[
        bool | None,
        typer.Option(
            "--worker/--no-worker",
            help="Run the callback worker inside the server (default: KASIR_EMBEDDED_WORKER, true)",
        ),
    ] = None,
    loop: Annotated[EventLoop, typer.Option(help="Event loop: asyncio (even latency) or uvloop")] = EventLoop.ASYNCIO,
) -> None:
    """Serve the HTTP API (uvicorn)."""
    if worker is not None:
        # Before the settings are read: one process serves the app with this process's settings,
        # the processes of --workers N read the environment afresh.
        os.environ["KASIR_EMBEDDED_WORKER"] = "true" if worker else "false"
        configure(None)
    settings = _served_at(host, port)

    async def check() -> None:
        database = Database(settings)
        try:
            await check_schema(database)
            async with database.unit_of_work(read_only=True) as session:
                await check_secret_key(session, secret_box(), warn=False)  # the app warns, once its log is set up
        finally:
            await database.dispose()

    declare_products()  # the channels KASIR_PROCESSORS may name, and the simulator
    try:
        live = check_configuration(settings)
    except ConfigurationError as exc:
        fail(str(exc))
    try:
        asyncio.run(check())
    except (SchemaBehind, SecretKeyMismatch) as exc:
        fail(str(exc))
    _refuse_a_port_in_use(host, port)
    admin_token = None
    if settings.admin_api and settings.admin_token is None:
        settings.resolved_admin_token()  # written now, for the operator to read before the first admin request
        admin_token = settings.data_dir / "admin.token"
    if workers > 1:
        prepare_multiprocess(settings.data_dir, port)  # before uvicorn starts the processes: they inherit it
    for line in _banner(settings, host, port, workers, live, admin_token):
        typer.echo(line)
    cap = connection_cap(settings.max_connections)
    if cap < settings.max_connections:
        typer.echo(
            f"Connections per process: {cap}, not KASIR_MAX_CONNECTIONS={settings.max_connections}: the open-file "
            "limit (ulimit -n) leaves no more"
        )
    uvicorn.run(
        "kasir.app:create_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        loop=loop.value,
        http=NoDelayHttpToolsProtocol,
        log_config=None,
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=20,
        limit_concurrency=cap,  # requests (and connections: kasir.kit.http_server) past it: 503
        # uvicorn believes X-Forwarded-For from 127.0.0.1 unless told otherwise: the source address
        # the rate limits count is the TCP peer's unless KASIR_TRUSTED_PROXIES names the proxies.
        proxy_headers=bool(settings.trusted_proxies.strip()),
        forwarded_allow_ips=settings.trusted_proxies.strip() or None,
    )


def _served_at(host: str, port: int) -> Settings:
    """The settings, with the links Kasir hands out (pages, QR codes, the demo's token script) pointing at a
    server listening on `host`:`port`, unless KASIR_PUBLIC_URL says otherwise."""
    settings = get_settings()
    if "public_url" not in settings.model_fields_set:
        os.environ["KASIR_PUBLIC_URL"] = f"http://{_browsable(host)}:{port}"
        configure(None)
        settings = get_settings()
    return settings


def _browsable(host: str) -> str:
    """The address a browser on this machine reaches a server listening on `host` at."""
    if host in ("0.0.0.0", ""):  # noqa: S104 (naming it, not binding it)
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def _refuse_a_port_in_use(host: str, port: int) -> None:
    """One line instead of uvicorn's dozen when the port is taken (the check and the bind race harmlessly)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is no conflict
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                fail(f"port {port} on {host} is in use (another `kasir serve`?): stop it or choose another --port")
            fail(f"cannot listen on {host}:{port} ({exc.strerror or exc}): check --host and --port")


def _banner(settings: Settings, host: str, port: int, workers: int, live: str, admin_token: Path | None) -> list[str]:
    """What `kasir serve` prints before it serves: short lines, each a thing the operator looks for."""
    base = settings.public_url
    processes = f"{workers} processes, " if workers > 1 else ""
    listening = f"[{host}]" if ":" in host else host
    lines = [
        f"Kasir {settings.env} on http://{listening}:{port} ({processes}version {__version__})",
        f"  public URL:  {base}",
        f"  database:    {masked_url(settings.resolved_database_url)}",
        f"  {live}",
    ]
    if settings.serves_docs:
        lines.append(f"  API docs:    {base}/docs")
    if settings.console:
        lines.append(f"  console:     {base}/console")
    if settings.serves_metrics:
        lines.append(f"  metrics:     {base}/metrics")
    if admin_token is not None:
        lines.append(f"  admin token: {admin_token}")
    if not settings.is_production:
        lines.append("  try it:      `make demo` in another terminal (a merchant goes through every product)")
    return lines


@app.command("demo-merchant")
def demo_merchant(
    out: Annotated[Path | None, typer.Option(help="Directory for the demo credentials")] = None,
    host: Annotated[str, typer.Option(help="Address `kasir serve` listens on (unless KASIR_PUBLIC_URL is set)")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option(help="Port `kasir serve` listens on (unless KASIR_PUBLIC_URL is set)")] = 8000,
) -> None:
    """Create the demo merchant once (idempotent) and print how to get a token with it.

    The token script and the console's sign-in name the server `kasir serve --host --port` will be: give them
    the same --host and --port (`make run PORT=...` does)."""
    settings = _served_at(host, port)
    if settings.is_production:
        fail("KASIR_ENV=production: the demo merchant and its published console passwords are for staging only")
    directory = out or settings.data_dir / "demo"
    credentials_path = directory / "credentials.json"
    private_path, public_path = directory / "private.pem", directory / "public.pem"

    async def work(session: Session) -> MerchantCredentials:
        merchant = await merchant_service.get_by_name(session, DEMO_MERCHANT_NAME)
        if merchant is None:
            write_key_pair(directory, force=True)
            created, credentials = await merchant_service.create(
                session, name=DEMO_MERCHANT_NAME, public_key=public_path.read_text()
            )
            await fund_demo_merchant(session, created.id)
            return credentials
        await fund_demo_merchant(session, merchant.id)
        if not private_path.exists():  # the key was lost: issue a new pair
            write_key_pair(directory, force=True)
            await merchant_service.rotate_key(session, merchant.id, public_path.read_text())
        secrets = merchant_service.secrets(merchant)
        return MerchantCredentials(
            merchant.id,
            merchant.name,
            merchant.client_id,
            secrets.client_secret,
            secrets.secret,
            secrets.hash_key,
            merchant.callback_url,
        )

    credentials = run_in_session(work)
    if settings.admin_api and settings.admin_token is None:
        settings.resolved_admin_token()  # the file the lines below name exists now, not after `kasir serve`
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(credentials_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(credentials_json(credentials), handle, indent=2)
    script = directory / "get-token.sh"
    script.write_text("#!/bin/sh\n" + _token_example(settings.public_url, credentials.client_id, private_path) + "\n")
    script.chmod(0o755)
    console.print(
        f"\n[bold]Demo merchant[/bold] {credentials.merchant_id} ({DEMO_MERCHANT_NAME})\n"
        f"  credentials: {credentials_path}\n  private key: {private_path}\n  public key:  {public_path}\n"
        f"  admin token: {settings.data_dir / 'admin.token'}\n\n"
        f"Get an access token (or run {script}):\n",
        highlight=False,
        soft_wrap=True,  # long paths stay whole on their line
    )
    typer.echo(_token_example(settings.public_url, credentials.client_id, private_path))
    if settings.console:
        demo_console_users(credentials.merchant_id, directory, settings.public_url)


DEMO_DISBURSEMENT_FUNDS = 100_000_000  # docs/decisions.md §11.3


async def fund_demo_merchant(session: Session, merchant_id: str) -> None:
    """The demo merchant's disbursement balance, topped up once (a run again adds nothing)."""
    if (await payout_service.balance(session, merchant_id)).ledger == 0:
        await payout_service.top_up(session, merchant_id, DEMO_DISBURSEMENT_FUNDS, "Demo funds", Actor.cli())


def _token_example(base_url: str, client_id: str, private_key: Path) -> str:
    key = shlex.quote(str(private_key))
    return (
        "TS=$(date -u +%Y-%m-%dT%H:%M:%S+00:00)\n"  # POSIX date (GNU's %:z is not on macOS)
        f"SIG=$(printf '%s|%s' '{client_id}' \"$TS\" | openssl dgst -sha256 -sign {key} | openssl base64 -A)\n"
        f"curl -sS -X POST {base_url}/auth/merchants/v1.0/access-token/b2b \\\n"
        "  -H 'Content-Type: application/json' -H \"X-TIMESTAMP: $TS\" \\\n"
        f"  -H 'X-CLIENT-KEY: {client_id}' -H \"X-SIGNATURE: $SIG\" \\\n"
        '  -d \'{"grantType":"client_credentials"}\''
    )


def main() -> None:
    try:
        app()
    except ValidationError as exc:
        if exc.title != Settings.__name__:
            raise
        # A bad KASIR_ setting: one line naming it, not a traceback (the server does not start).
        problems = "; ".join(
            f"KASIR_{'_'.join(str(part) for part in error['loc'][:1]).upper()}: {_reason(error)}"
            for error in exc.errors()
        )
        err_console.print(f"[red]error:[/red] {problems}", highlight=False, soft_wrap=True)
        raise SystemExit(2) from None
    except Exception as exc:
        # An unreachable database (or a URL that names none): one line naming KASIR_DATABASE_URL.
        try:
            url = get_settings().resolved_database_url
        except ValidationError:
            raise exc from None  # not about the database: the settings were never read
        line = database_failure(exc, url)
        if line is None:
            raise
        err_console.print(f"[red]error:[/red] {line}", highlight=False, soft_wrap=True)
        raise SystemExit(2) from None


def _reason(error: ErrorDetails) -> str:
    reason = error["msg"].removeprefix("Value error, ")
    if error["type"] in ("literal_error", "enum", "bool_parsing", "int_parsing", "float_parsing"):
        reason += f" (not {error['input']!r})"  # a choice or a number: never a secret
    return reason
