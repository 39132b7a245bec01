"""`kasir worker` and `kasir callbacks list|show|replay|recover`."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Annotated

import typer
from prometheus_client import start_http_server
from rich.table import Table

from kasir.audit.service import Actor
from kasir.callbacks.models import CallbackStatus
from kasir.callbacks.repository import callback_repository
from kasir.callbacks.schemas import CallbackView, RecoverAnswer
from kasir.callbacks.service import Recovery, callback_outbox
from kasir.callbacks.worker import run_worker_until_signalled
from kasir.cli_support import console, fail, print_table, run_in_session
from kasir.config import get_settings
from kasir.db import Database, SchemaBehind, Session, check_schema
from kasir.kit.clock import parse_aware
from kasir.kit.logs import configure_logging
from kasir.merchants.sealing import SecretKeyMismatch, check_secret_key
from kasir.merchants.service import secret_box
from kasir.products import declare_products

log = logging.getLogger("kasir.worker")
callbacks_app = typer.Typer(help="Inspect and replay callbacks.", no_args_is_help=True)


def worker(
    metrics_port: Annotated[
        int | None,
        typer.Option(
            min=0,
            max=65535,
            help="Serve Prometheus metrics on this port at /metrics (default: KASIR_WORKER_METRICS_PORT)",
        ),
    ] = None,
) -> None:
    """Deliver callbacks and run expiries as a separate process (SIGTERM finishes in-flight attempts)."""

    settings = get_settings()
    declare_products()  # the processor calls a stopped process left, which the worker finishes
    # The same JSON lines as `kasir serve` (its app configures them): every attempt, every failure.
    configure_logging(settings.log_level, settings.log_format)
    port = settings.worker_metrics_port if metrics_port is None else metrics_port
    if port:
        serve_worker_metrics(settings.worker_metrics_host, port)

    async def main() -> None:
        database = Database(settings)
        try:
            await check_schema(database)
            async with database.unit_of_work(read_only=True) as session:
                await check_secret_key(session, secret_box())  # it opens hash keys to sign callbacks
            await run_worker_until_signalled(database, settings)
        finally:
            await database.dispose()

    try:
        asyncio.run(main())
    except (SchemaBehind, SecretKeyMismatch) as exc:
        fail(str(exc))


def serve_worker_metrics(host: str, port: int) -> None:
    """The worker's own /metrics (a thread of this process): its deliveries, attempts and latencies."""
    try:
        start_http_server(port, addr=host)
    except OSError as exc:
        fail(
            f"cannot serve the worker's metrics on {host}:{port} ({exc.strerror or exc}): choose another port with "
            "KASIR_WORKER_METRICS_PORT or --metrics-port"
        )
    log.info("worker metrics", extra={"url": f"http://{host}:{port}/metrics"})


@callbacks_app.command("list")
def list_callbacks(
    status: Annotated[CallbackStatus | None, typer.Option(help="pending, delivering, delivered or failed")] = None,
    merchant: Annotated[str | None, typer.Option("--merchant", help="Merchant id")] = None,
    transaction: Annotated[str | None, typer.Option("--transaction", help="Transaction id")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 50,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """List callbacks, newest first."""

    async def work(session: Session) -> list[CallbackView]:
        rows = await callback_repository.search(
            session,
            status=status.value if status else None,
            merchant_id=merchant,
            transaction_ref=transaction,
            limit=limit,
        )
        return [CallbackView.of(row) for row in rows]

    views = run_in_session(work, read_only=True)
    if as_json:
        typer.echo(json.dumps([v.model_dump(mode="json", exclude_none=True) for v in views], indent=2))
        return
    table = Table("id", "event id", "kind", "transaction", "event", "status", "attempts", "last error")
    for view in views:
        table.add_row(
            str(view.id),
            str(view.event_id),
            view.kind,
            view.transaction_ref,
            view.event,
            view.status,
            f"{view.attempts_made}/{view.max_attempts}",
            view.last_error or "",
        )
    print_table(table)


@callbacks_app.command("show")
def show(callback_id: int) -> None:
    """One callback with its payload and every attempt, and every delivery of its event (JSON)."""

    async def work(session: Session) -> CallbackView:
        callback, attempts = await callback_outbox.show(session, callback_id)
        event = await callback_outbox.event(session, callback_id)
        return CallbackView.of(callback, attempts, with_payload=True, event=event)

    view = run_in_session(work, read_only=True)
    typer.echo(json.dumps(view.model_dump(mode="json"), indent=2))


@callbacks_app.command("replay")
def replay(callback_id: int) -> None:
    """Deliver a callback's event again: same payload and X-Kasir-Callback-Id, fresh signature headers."""

    async def work(session: Session) -> tuple[int, int]:
        replay = await callback_outbox.replay(session, callback_id)
        return replay.id, replay.event_key

    new_id, event_id = run_in_session(work)
    console.print(f"callback {callback_id} queued again as callback {new_id} (event {event_id})")


@callbacks_app.command("recover")
def recover(
    merchant: Annotated[str, typer.Option("--merchant", help="Merchant id")],
    since: Annotated[str, typer.Option("--since", help="ISO 8601 with offset: events recorded since then")],
    url: Annotated[
        str | None,
        typer.Option(help="Deliver them here (default: the merchant's callback URL now, else each event's)"),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say how many and where; send nothing")] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation")] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Deliver again a merchant's given-up events since a time (none delivered since; one audited action)."""
    try:
        moment = parse_aware(since)
    except ValueError:
        fail("--since must be an ISO 8601 time with offset (2026-11-24T00:00:00+07:00)")

    async def plan(session: Session) -> Recovery:
        return await callback_outbox.recover(session, merchant, moment, url=url, dry_run=True)

    async def work(session: Session) -> Recovery:
        return await callback_outbox.recover(session, merchant, moment, url=url, actor=Actor.cli())

    review = run_in_session(plan, read_only=True)
    if as_json and dry_run:
        typer.echo(RecoverAnswer.of(review, dry_run=True).model_dump_json(indent=2))
        return
    if not review.events:
        console.print(f"no given-up event of {merchant} since {since}", highlight=False)
        return
    if not as_json:
        for target, count in review.targets():
            console.print(f"{count} events to {target}", highlight=False)
    if dry_run:
        return
    if not yes and not typer.confirm(f"deliver {len(review.events)} given-up events of {merchant} again?"):
        raise typer.Exit(1)
    done = run_in_session(work)
    if as_json:
        typer.echo(RecoverAnswer.of(done, dry_run=False).model_dump_json(indent=2))
        return
    console.print(
        f"{len(done.replays)} events queued again: "
        + ", ".join(f"#{replay.id} (event #{replay.event_key})" for replay in done.replays),
        highlight=False,
    )
