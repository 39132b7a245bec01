"""`kasir keygen` and `kasir merchant ...`."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from kasir.audit.service import Actor
from kasir.cli_support import console, err_console, fail, print_table, run_in_session
from kasir.config import get_settings
from kasir.db import Database, SchemaBehind, Session, check_schema
from kasir.kit.crypto import (
    SecretBox,
    generate_rsa_private_key,
    private_key_pem,
    public_key_fingerprint,
    public_key_pem,
)
from kasir.merchants.repository import SEALED, MerchantRow
from kasir.merchants.sealing import BATCH_ROWS, Resealed, record_rotation, reseal_batch
from kasir.merchants.service import CredentialKind, MerchantCredentials, merchant_service, validate_public_key

merchant_app = typer.Typer(help="Create and inspect merchants.", no_args_is_help=True)


def write_key_pair(directory: Path, *, force: bool = False) -> tuple[Path, Path]:
    """RSA-2048: `private.pem` (PKCS#8, mode 0600) and `public.pem` (SubjectPublicKeyInfo)."""
    private_path, public_path = directory / "private.pem", directory / "public.pem"
    if not force:
        for path in (private_path, public_path):
            if path.exists():
                fail(f"{path} already exists (use --force to overwrite)")
    directory.mkdir(parents=True, exist_ok=True)
    key = generate_rsa_private_key()
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(private_key_pem(key))
    public_path.write_bytes(public_key_pem(key.public_key()))
    return private_path, public_path


def keygen(
    out: Annotated[Path, typer.Option("--out", help="Directory for private.pem and public.pem")],
    force: Annotated[bool, typer.Option(help="Overwrite existing files")] = False,
) -> None:
    """Generate an RSA-2048 key pair for a merchant."""
    private_path, public_path = write_key_pair(out, force=force)
    console.print(f"private key (PKCS#8): {private_path}\npublic key:           {public_path}")


def _read_public_key(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror}")
    try:
        return validate_public_key(data)
    except Exception as exc:  # MerchantError says what is wrong with the key in one line
        fail(f"{path}: {getattr(exc, 'message', str(exc))}")


def credentials_json(credentials: MerchantCredentials) -> dict[str, str | None]:
    return {
        "merchant_id": credentials.merchant_id,
        "name": credentials.name,
        "client_id": credentials.client_id,
        "client_secret": credentials.client_secret,
        "secret": credentials.secret,
        "hash_key": credentials.hash_key,
        "callback_url": credentials.callback_url,
    }


def _print_credentials(values: dict[str, str | None], title: str) -> None:
    table = Table(title=title, show_header=False)
    for key, value in values.items():
        table.add_row(key, value or "-")
    print_table(table)


@merchant_app.command("create")
def create(
    name: Annotated[str, typer.Option("--name", help="Merchant name (unique)")],
    public_key: Annotated[Path | None, typer.Option("--public-key", help="Merchant's PEM public key")] = None,
    generate_key: Annotated[
        Path | None, typer.Option("--generate-key", help="Generate a key pair into this directory")
    ] = None,
    callback_url: Annotated[str | None, typer.Option("--callback-url", help="Default callback URL")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print credentials as JSON")] = False,
) -> None:
    """Create a merchant and print all its credentials (shown once)."""
    if (public_key is None) == (generate_key is None):
        fail("give exactly one of --public-key FILE or --generate-key DIR")
    if public_key is not None:
        pem = _read_public_key(public_key)
    else:
        assert generate_key is not None
        for path in (generate_key / "private.pem", generate_key / "public.pem"):
            if path.exists():
                fail(f"{path} already exists")

        async def check(session: Session) -> None:
            await merchant_service.check_new(session, name=name, callback_url=callback_url)

        run_in_session(check, read_only=True)  # a bad name or URL is refused before any file is written
        _private_path, public_path = write_key_pair(generate_key)
        pem = public_path.read_text()

    async def work(session: Session) -> MerchantCredentials:
        _merchant, credentials = await merchant_service.create(
            session, name=name, public_key=pem, callback_url=callback_url, actor=Actor.cli()
        )
        return credentials

    credentials = run_in_session(work)
    values = credentials_json(credentials)
    if as_json:
        typer.echo(json.dumps(values, indent=2))
        return
    _print_credentials(values, "Merchant created: store these now, secrets are not shown again")
    if generate_key is not None:
        console.print(f"private key: {generate_key / 'private.pem'}")


def _summary(merchant: MerchantRow) -> dict[str, str | None]:
    return {
        "merchant_id": merchant.id,
        "name": merchant.name,
        "client_id": merchant.client_id,
        "callback_url": merchant.callback_url,
        "created_at": merchant.created_at.isoformat(timespec="seconds"),
        "state": "disabled" if merchant.disabled_at else "active",
    }


@merchant_app.command("list")
def list_merchants(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List merchants (no secrets)."""

    async def work(session: Session) -> list[dict[str, str | None]]:
        return [_summary(m) for m in await merchant_service.list(session)]

    rows = run_in_session(work, read_only=True)
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table("merchant_id", "name", "client_id", "callback_url", "created_at", "state")
    for row in rows:
        table.add_row(*(value or "-" for value in row.values()))
    print_table(table)


@merchant_app.command("show")
def show(merchant_id: str, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Show one merchant; secrets masked."""

    async def work(session: Session) -> dict[str, str | None]:
        merchant = await merchant_service.get(session, merchant_id)
        secrets = merchant_service.secrets(merchant)
        masked = MerchantCredentials(
            merchant.id,
            merchant.name,
            merchant.client_id,
            secrets.client_secret,
            secrets.secret,
            secrets.hash_key,
            merchant.callback_url,
        ).masked()
        masked["public_key_sha256"] = public_key_fingerprint(merchant.public_key_pem)
        masked["created_at"] = merchant.created_at.isoformat(timespec="seconds")
        masked["updated_at"] = merchant.updated_at.isoformat(timespec="seconds")
        return masked

    values = run_in_session(work, read_only=True)
    if as_json:
        typer.echo(json.dumps(values, indent=2))
        return
    _print_credentials(values, f"Merchant {merchant_id}")


@merchant_app.command("rotate-key")
def rotate_key(
    merchant_id: str,
    public_key: Annotated[Path, typer.Option("--public-key", help="The new PEM public key")],
    grace: Annotated[int, typer.Option("--grace", help="Seconds the old key still verifies (default 0)")] = 0,
) -> None:
    """Replace a merchant's RSA public key; signatures made with the old key stop verifying (after --grace)."""
    pem = _read_public_key(public_key)

    async def work(session: Session) -> str:
        merchant = await merchant_service.rotate_key(session, merchant_id, pem, grace_seconds=grace, actor=Actor.cli())
        return public_key_fingerprint(merchant.public_key_pem)

    fingerprint = run_in_session(work)
    console.print(f"public key of {merchant_id} replaced (sha256 {fingerprint})")


@merchant_app.command("rotate")
def rotate(
    merchant_id: str,
    kind: Annotated[CredentialKind, typer.Option("--kind", help="The credential to replace")],
    grace: Annotated[int, typer.Option("--grace", help="Seconds the old value is still accepted (default 0)")] = 0,
    public_key: Annotated[Path | None, typer.Option("--public-key", help="The new PEM public key")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Replace one credential; the new value is printed once."""
    pem = _read_public_key(public_key) if public_key is not None else None

    async def work(session: Session) -> dict[str, str | None]:
        rotated = await merchant_service.rotate(
            session, merchant_id, kind, public_key=pem, grace_seconds=grace, actor=Actor.cli()
        )
        until = rotated.old_accepted_until
        return {
            "merchant_id": rotated.merchant_id,
            "kind": rotated.kind.value,
            "new_value": rotated.new_value,
            "old_accepted_until": until.isoformat() if until else None,
        }

    values = run_in_session(work)
    if as_json:
        typer.echo(json.dumps(values, indent=2))
        return
    _print_credentials(values, f"{kind.value} of {merchant_id} rotated: store the new value now")


@merchant_app.command("confirm-rotation")
def confirm_rotation(
    merchant_id: str,
    kind: Annotated[CredentialKind, typer.Option("--kind", help="hash_key or client_secret")],
) -> None:
    """The merchant verifies callbacks with the rotated value: sign them with it from now (not the old one)."""

    async def work(session: Session) -> str:
        confirmed = await merchant_service.confirm_switch(session, merchant_id, kind, actor=Actor.cli())
        return confirmed.isoformat(timespec="seconds")

    confirmed_at = run_in_session(work)
    console.print(
        f"callbacks of {merchant_id} are signed with its current {kind.value} (switch confirmed {confirmed_at})",
        highlight=False,
    )


@merchant_app.command("set-callback-url")
def set_callback_url(
    merchant_id: str, url: Annotated[str, typer.Argument(help="The new default callback URL ('' removes it)")]
) -> None:
    """Change a merchant's default callback URL (the SSRF rules of callbacks apply)."""

    async def work(session: Session) -> str | None:
        merchant = await merchant_service.change_callback_url(session, merchant_id, url or None, actor=Actor.cli())
        return merchant.callback_url

    console.print(f"default callback URL of {merchant_id}: {run_in_session(work) or '-'}", highlight=False)


@merchant_app.command("disable")
def disable(merchant_id: str) -> None:
    """Refuse the merchant's credentials and tokens (401); its pending callbacks are still delivered."""

    async def work(session: Session) -> None:
        await merchant_service.set_disabled(session, merchant_id, True, actor=Actor.cli())

    run_in_session(work)
    console.print(f"merchant {merchant_id} disabled", highlight=False)


@merchant_app.command("enable")
def enable(merchant_id: str) -> None:
    """Accept a disabled merchant's credentials again."""

    async def work(session: Session) -> None:
        await merchant_service.set_disabled(session, merchant_id, False, actor=Actor.cli())

    run_in_session(work)
    console.print(f"merchant {merchant_id} enabled", highlight=False)


# --- kasir merchant sub-merchant ...: the ids the card dialect's `sub-merchant-id` may name -----

sub_merchant_app = typer.Typer(help="A merchant's sub-merchant ids (the card dialect's sub-merchant-id).")
merchant_app.add_typer(sub_merchant_app, name="sub-merchant")


@sub_merchant_app.command("add")
def add_sub_merchant(
    merchant_id: str,
    sub_merchant_id: str,
    name: Annotated[str | None, typer.Option("--name", help="A label for operators")] = None,
) -> None:
    """Allow `sub-merchant-id: SUB_MERCHANT_ID` on the merchant's card charges."""

    async def work(session: Session) -> None:
        await merchant_service.add_sub_merchant(session, merchant_id, sub_merchant_id, name, actor=Actor.cli())

    run_in_session(work)
    console.print(f"sub-merchant {sub_merchant_id} added to {merchant_id}", highlight=False)


@sub_merchant_app.command("list")
def list_sub_merchants(merchant_id: str, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """The merchant's sub-merchant ids."""

    async def work(session: Session) -> list[dict[str, str | None]]:
        found = await merchant_service.sub_merchants(session, merchant_id)
        return [{"sub_merchant_id": s.sub_merchant_id, "name": s.name} for s in found]

    rows = run_in_session(work)
    if as_json:
        console.print_json(json.dumps(rows))
        return
    for row in rows:
        console.print(f"{row['sub_merchant_id']}\t{row['name'] or '-'}", highlight=False)


@sub_merchant_app.command("remove")
def remove_sub_merchant(merchant_id: str, sub_merchant_id: str) -> None:
    """Refuse `sub-merchant-id: SUB_MERCHANT_ID` on the merchant's charges from now on."""

    async def work(session: Session) -> None:
        await merchant_service.remove_sub_merchant(session, merchant_id, sub_merchant_id, actor=Actor.cli())

    run_in_session(work)
    console.print(f"sub-merchant {sub_merchant_id} removed from {merchant_id}", highlight=False)


# --- kasir secrets: KASIR_SECRET_KEY rotation (kasir.merchants.sealing) ----------------------

secrets_app = typer.Typer(help="The merchant secrets KASIR_SECRET_KEY seals.", no_args_is_help=True)


async def reseal_all(
    database: Database, box: SecretBox, *, write: bool = True, batch_rows: int = BATCH_ROWS
) -> list[Resealed]:
    """Every sealed value re-sealed with `box`'s current key, one unit of work per batch of rows, so a
    rotation never holds the write seat (or row locks) for the whole table; then the run's audit entry in
    a unit of its own (`write=False`: only counted, nothing recorded)."""
    reports = []
    for table in SEALED:
        report = Resealed(table)
        after: str | int | None = None
        while True:
            async with database.unit_of_work(read_only=not write) as session:
                after = await reseal_batch(session, box, report, after, write=write, batch_rows=batch_rows)
            if after is None:
                break
        reports.append(report)
    if write:
        async with database.unit_of_work() as session:
            await record_rotation(session, reports)
    return reports


def _reseal(*, write: bool, batch_rows: int) -> list[Resealed]:
    settings = get_settings()
    box = SecretBox(settings.resolved_secret_key(), settings.previous_secret_keys())

    async def main() -> list[Resealed]:
        database = Database(settings)
        try:
            await check_schema(database)
            return await reseal_all(database, box, write=write, batch_rows=batch_rows)
        finally:
            await database.dispose()

    try:
        return asyncio.run(main())
    except SchemaBehind as exc:
        fail(str(exc))


def _report(reports: list[Resealed], *, as_json: bool, done: str) -> None:
    """The counts; exit 1 when a value opens with no key, or (checking) still needs a previous one."""
    if as_json:
        typer.echo(json.dumps({report.table: report.counts() for report in reports}))
    else:
        table = Table("table", done, "already current", "changed meanwhile", "unreadable")
        for report in reports:
            table.add_row(
                report.table,
                str(report.resealed),
                str(report.current),
                str(report.changed_meanwhile),
                str(len(report.unreadable)),
            )
        print_table(table)
    unreadable = [where for report in reports for where in report.unreadable]
    if unreadable:
        shown = ", ".join(unreadable[:10]) + (f" and {len(unreadable) - 10} more" if len(unreadable) > 10 else "")
        fail(
            f"{len(unreadable)} sealed values open with neither KASIR_SECRET_KEY nor KASIR_SECRET_KEY_PREVIOUS "
            f"({shown}): add the key they were sealed with to KASIR_SECRET_KEY_PREVIOUS and run this again",
            code=1,
        )


@secrets_app.command("rotate")
def rotate_secrets(
    batch: Annotated[int, typer.Option(min=1, max=10_000, help="Rows per transaction")] = BATCH_ROWS,
    as_json: Annotated[bool, typer.Option("--json", help="Print the counts as JSON")] = False,
) -> None:
    """Re-seal every merchant secret with KASIR_SECRET_KEY, opening it with KASIR_SECRET_KEY_PREVIOUS where needed.

    Run it after every process has the new key (and the old one in KASIR_SECRET_KEY_PREVIOUS); then the old
    key can be removed. Idempotent: a value already sealed with the current key is not written again.
    """
    reports = _reseal(write=True, batch_rows=batch)
    _report(reports, as_json=as_json, done="re-sealed")
    if any(report.changed_meanwhile for report in reports):
        err_console.print("some rows changed while this ran: run it again to check them", highlight=False)
    elif not as_json:
        console.print("every sealed secret opens with KASIR_SECRET_KEY alone", highlight=False)


@secrets_app.command("check")
def check_secrets(
    as_json: Annotated[bool, typer.Option("--json", help="Print the counts as JSON")] = False,
) -> None:
    """Count the sealed secrets that still need a key in KASIR_SECRET_KEY_PREVIOUS (changes nothing).

    Exit code 0 when every one opens with KASIR_SECRET_KEY alone, 1 otherwise.
    """
    reports = _reseal(write=False, batch_rows=BATCH_ROWS)
    _report(reports, as_json=as_json, done="to re-seal")
    pending = sum(report.resealed for report in reports)
    if pending:
        fail(f"{pending} sealed values still need KASIR_SECRET_KEY_PREVIOUS: run `kasir secrets rotate`", code=1)
    if not as_json:
        console.print("every sealed secret opens with KASIR_SECRET_KEY alone", highlight=False)
