"""`kasir user ...`: console users (the same service as the admin API's /admin/users, audited as cli:<os user>)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from kasir.audit.service import Actor
from kasir.cli_support import console, print_table, run_in_session
from kasir.console.repository import ConsoleUserRow
from kasir.console.service import console_users
from kasir.db import Session

user_app = typer.Typer(help="Console users: operators and merchant users.", no_args_is_help=True)


def _read_password(from_stdin: bool) -> str | None:
    if not from_stdin:
        return None
    return sys.stdin.readline().rstrip("\r\n")


def _row(user: ConsoleUserRow) -> dict[str, str | None]:
    return {
        "id": str(user.id),
        "email": user.email,
        "role": user.role,
        "merchant_id": user.merchant_id,
        "state": "disabled" if user.disabled_at else ("locked" if user.locked_until else "active"),
        "created_at": user.created_at.isoformat(timespec="seconds"),
    }


@user_app.command("create")
def create(
    email: Annotated[str, typer.Option("--email", help="Sign-in email")],
    role: Annotated[
        str,
        typer.Option(
            "--role",
            help="operator (every merchant), merchant (one merchant) or merchant_admin (one merchant, and its users)",
        ),
    ],
    merchant: Annotated[str | None, typer.Option("--merchant", help="The merchant id a merchant user sees")] = None,
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="Read the password from stdin instead of generating one")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Create a console user; prints a generated password once (or takes one from stdin)."""
    password = _read_password(password_stdin)

    async def work(session: Session) -> tuple[dict[str, str | None], str]:
        user, shown = await console_users.create(
            session, email=email, role=role, merchant_id=merchant, password=password, actor=Actor.cli()
        )
        return _row(user), shown

    row, shown = run_in_session(work)
    if as_json:
        typer.echo(json.dumps({**row, "password": None if password_stdin else shown}, indent=2))
        return
    console.print(f"console user {row['email']} ({row['role']}) created", highlight=False)
    if not password_stdin:
        console.print(f"password (shown once): {shown}", highlight=False)


@user_app.command("list")
def list_users(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List console users."""

    async def work(session: Session) -> list[dict[str, str | None]]:
        return [_row(user) for user in await console_users.list(session)]

    rows = run_in_session(work, read_only=True)
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table("id", "email", "role", "merchant_id", "state", "created_at")
    for row in rows:
        table.add_row(*(value or "-" for value in row.values()))
    print_table(table)


@user_app.command("disable")
def disable(email: Annotated[str, typer.Argument(help="Email (or id) of the user")]) -> None:
    """Disable a console user: its sessions end at once."""

    async def work(session: Session) -> str:
        return (await console_users.set_disabled(session, email, True, actor=Actor.cli())).email

    console.print(f"console user {run_in_session(work)} disabled", highlight=False)


@user_app.command("enable")
def enable(email: Annotated[str, typer.Argument(help="Email (or id) of the user")]) -> None:
    """Enable a disabled console user."""

    async def work(session: Session) -> str:
        return (await console_users.set_disabled(session, email, False, actor=Actor.cli())).email

    console.print(f"console user {run_in_session(work)} enabled", highlight=False)


@user_app.command("unlock")
def unlock(email: Annotated[str, typer.Argument(help="Email (or id) of the user")]) -> None:
    """Lift a sign-in lock (too many failed sign-ins in a row) before it ends; the password stays."""

    async def work(session: Session) -> str:
        return (await console_users.unlock(session, email, actor=Actor.cli())).email

    console.print(f"console user {run_in_session(work)} unlocked", highlight=False)


@user_app.command("reset-password")
def reset_password(
    email: Annotated[str, typer.Argument(help="Email (or id) of the user")],
    password_stdin: Annotated[bool, typer.Option("--password-stdin", help="Read the new password from stdin")] = False,
) -> None:
    """Give a user a new password (printed once unless read from stdin); its sessions end, a lock is lifted."""
    password = _read_password(password_stdin)

    async def work(session: Session) -> tuple[str, str]:
        user, shown = await console_users.reset_password(session, email, password, actor=Actor.cli())
        return user.email, shown

    who, shown = run_in_session(work)
    console.print(f"password of {who} reset", highlight=False)
    if not password_stdin:
        console.print(f"new password (shown once): {shown}", highlight=False)


DEMO_OPERATOR = "operator@kasir.demo"
DEMO_MERCHANT_USER = "merchant@kasir.demo"


def demo_console_users(merchant_id: str, directory: Path, base_url: str) -> None:
    """The demo operator and demo merchant user, once; their passwords in `directory/console-users.txt` (0600)."""
    from kasir.console.service import UserNotFound

    path = directory / "console-users.txt"

    async def existing(session: Session) -> set[str]:
        found: set[str] = set()
        for email in (DEMO_OPERATOR, DEMO_MERCHANT_USER):
            try:
                await console_users.get(session, email)
            except UserNotFound:
                continue
            found.add(email)
        return found

    # A unit per user: each hashes its password before its first statement (kasir.console.service), so no
    # unit holds SQLite's write seat while a password is hashed.
    present = run_in_session(existing, read_only=True)
    passwords: dict[str, str] = {}
    for email, role, merchant in ((DEMO_OPERATOR, "operator", None), (DEMO_MERCHANT_USER, "merchant", merchant_id)):
        if email in present and path.exists():
            continue

        async def make(session: Session, email: str = email, role: str = role, merchant: str | None = merchant) -> str:
            if email in present:
                return (await console_users.reset_password(session, email, actor=Actor.cli()))[1]
            _user, password = await console_users.create(
                session, email=email, role=role, merchant_id=merchant, actor=Actor.cli()
            )
            return password

        passwords[email] = run_in_session(make)
    if passwords:
        known = (
            dict(line.split(" ", 1) for line in path.read_text().splitlines() if " " in line) if path.exists() else {}
        )
        known.update(passwords)
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.writelines(f"{email} {password}\n" for email, password in known.items())
    lines = path.read_text().splitlines()
    console.print(
        f"\n[bold]Console[/bold] {base_url}/console/sign-in  (passwords in {path})", highlight=False, soft_wrap=True
    )
    for line in lines:
        email, _, password = line.partition(" ")
        console.print(f"  {email:<24} {password}", highlight=False)
