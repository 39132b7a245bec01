"""`kasir payments find ID` and `kasir payments list ...`: the console's payments query on the command line."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from kasir.cli_support import console, fail, print_table, run_in_session
from kasir.console.format import jakarta_time
from kasir.db import Session
from kasir.kit.money import rupiah
from kasir.payments.repository import PaymentRow
from kasir.payments.schemas import PaymentView
from kasir.payments.service import parse_filter, payments_service

payments_app = typer.Typer(help="Find and list payments of every product.", no_args_is_help=True)


def _print(rows: list[PaymentRow], next_cursor: str | None, as_json: bool) -> None:
    if as_json:
        body = {"payments": [PaymentView.of(row).model_dump(mode="json") for row in rows], "next_cursor": next_cursor}
        typer.echo(json.dumps(body, indent=2))
        return
    table = Table("created (WIB)", "product", "id", "order_id", "channel", "status", "amount", "merchant_id")
    for row in rows:
        table.add_row(
            jakarta_time(row.created_at),
            row.product,
            row.id,
            row.order_id or "-",
            row.channel,
            row.status,
            rupiah(row.amount),
            row.merchant_id,
        )
    print_table(table)
    if next_cursor:
        console.print(f"more: --cursor {next_cursor}", highlight=False)


@payments_app.command("find")
def find(
    payment: Annotated[
        str, typer.Argument(help="Any id: transaction, external, order, VA number, partnerReferenceNo, reference")
    ],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Every payment one of whose ids is ID (exit code 1 when there is none)."""

    async def work(session: Session) -> list[PaymentRow]:
        return await payments_service.find(session, None, payment)

    rows = run_in_session(work, read_only=True)
    if not rows and not as_json:
        fail(f"no payment with id {payment!r}", code=1)
    _print(rows, None, as_json)
    if not rows:
        raise typer.Exit(1)


@payments_app.command("list")
def list_payments(
    product: Annotated[str | None, typer.Option(help="wallet | bnpl | card | va | link")] = None,
    status: Annotated[
        str | None, typer.Option(help="pending | paid | refunded | void | expired | failed | cancelled")
    ] = None,
    channel: Annotated[
        str | None, typer.Option(help="DANA, QRIS, CARD, BNPL, BCA (a VA's bank), LINK (every payment link), ...")
    ] = None,
    merchant: Annotated[str | None, typer.Option(help="Merchant id")] = None,
    since: Annotated[str | None, typer.Option(help="2026-11-24 (Asia/Jakarta) or ISO 8601 with offset")] = None,
    until: Annotated[str | None, typer.Option(help="2026-11-24 (the whole day) or ISO 8601 with offset")] = None,
    query: Annotated[str | None, typer.Option("--q", help="Any id")] = None,
    limit: Annotated[int, typer.Option(min=1, max=500)] = 50,
    cursor: Annotated[str | None, typer.Option(help="The `more:` cursor of the previous page")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Payments, newest first."""

    async def work(session: Session) -> tuple[list[PaymentRow], str | None]:
        where = parse_filter(
            scope=None,
            merchant_id=merchant,
            product=product,
            status=status,
            channel=channel,
            since=since,
            until=until,
            query=query,
        )
        page = await payments_service.list(session, where, cursor=cursor, limit=limit)
        return page.rows, page.next_cursor

    rows, next_cursor = run_in_session(work, read_only=True)
    _print(rows, next_cursor, as_json)


def replay_given_up(
    merchant: Annotated[str, typer.Option("--merchant", help="Merchant id")],
    since: Annotated[str, typer.Option("--since", help="ISO 8601 with offset, or a date (Asia/Jakarta)")],
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation")] = False,
) -> None:
    """Deliver again every given-up callback of a merchant recorded since a time (one audited action)."""
    from kasir.audit.service import Actor
    from kasir.payments.repository import payments_repository
    from kasir.payments.service import _moment, payment_actions

    moment = _moment(since, "since")
    assert moment is not None

    async def count(session: Session) -> int:
        return len(await payments_repository.given_up_since(session, merchant, moment))

    waiting = run_in_session(count, read_only=True)
    if waiting == 0:
        console.print(f"no given-up callback of {merchant} since {since}", highlight=False)
        return
    if not yes and not typer.confirm(f"replay {waiting} given-up callbacks of {merchant}?"):
        raise typer.Exit(1)

    async def work(session: Session) -> list[tuple[int, int | None]]:
        replays = await payment_actions.replay_given_up(session, None, merchant, moment, Actor.cli())
        return [(r.id, r.replay_of) for r in replays]

    done = run_in_session(work)
    console.print(f"{len(done)} callbacks queued again: " + ", ".join(f"#{new} (of #{old})" for new, old in done))
