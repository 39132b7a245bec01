"""`kasir-client`: keygen, token, sign (headers for curl), verify-callback."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from kasir_client._client import IDEMPOTENT_PATHS, TOKEN_PATHS, Client, _Core
from kasir_client._errors import KasirError
from kasir_client._models import Credentials
from kasir_client._signing import load_private_key
from kasir_client._webhooks import (
    verify_bnpl_notification,
    verify_payment_page_callback,
    verify_va_callback,
    verify_wallet_callback,
)


class CommandError(Exception):
    """A mistake the user can fix: said in one line (no traceback), exit status 2."""


def _credentials(args: argparse.Namespace) -> Credentials:
    try:
        credentials = Credentials.from_files(args.credentials, getattr(args, "private_key", None))
    except OSError as exc:
        raise CommandError(f"cannot read {exc.filename or args.credentials}: {exc.strerror or exc}") from exc
    except ValueError as exc:  # JSONDecodeError and a PEM that does not load
        raise CommandError(f"{args.credentials} is not a credentials file ({exc})") from exc
    except (KeyError, TypeError) as exc:
        raise CommandError(
            f"{args.credentials} lacks {exc}: use the JSON of `kasir merchant create --json` "
            "(merchant_id, client_id, client_secret, secret, hash_key)"
        ) from exc
    if credentials.private_key_pem is not None:
        try:
            load_private_key(credentials.private_key_pem)
        except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
            raise CommandError(f"{args.private_key} is not an unencrypted RSA private key in PEM ({exc})") from exc
    return credentials


def keygen(args: argparse.Namespace) -> int:
    out = Path(args.out)
    private = out / "private.pem"
    public = out / "public.pem"
    existing = [str(p) for p in (private, public) if p.exists()]
    if existing and not args.force:
        raise CommandError(
            f"{' and '.join(existing)} already exist{'s' if len(existing) == 1 else ''}: "
            "a new key would lock out the old one; pass --force to replace it"
        )
    out.mkdir(parents=True, exist_ok=True)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if args.force and private.exists():
        private.unlink()  # O_CREAT with 0o600 applies only to a new file
    fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
    public.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    print(f"{private}\n{public}")
    return 0


def token(args: argparse.Namespace) -> int:
    with Client(args.base_url, _credentials(args)) as client:
        print(client.access_token(args.product))
    return 0


def sign(args: argparse.Namespace) -> int:
    """Print the headers of a signed request, as curl -H arguments."""
    body = sys.stdin.buffer.read() if args.body == "-" else _read(args.body) if args.body else b""
    core = _Core("http://unused", _credentials(args))
    key = args.idempotency_key if args.path in IDEMPOTENT_PATHS else None  # only money-moving routes take one
    if args.kind == "token":
        request = core._token_request(args.product)
    elif args.kind == "snap":
        token = None if args.asymmetric else args.token
        request = core._snap_request(args.path, body, args.external_id, token, key)
    elif args.kind == "wallet":
        request = core._wallet_request(args.path, _json_body(body), key)
    else:
        request = core._card_request(_json_body(body), args.idempotency_key)
    for name, value in request.headers.items():
        print(f"-H '{name}: {value}'")
    return 0


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from exc


def _json_body(body: bytes) -> dict[str, object]:
    try:
        data = json.loads(body or b"{}")
    except ValueError as exc:
        raise CommandError(f"the body is not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise CommandError("the body must be a JSON object")
    return data


def _parse_http(raw: bytes) -> tuple[str, dict[str, str], dict[str, str], bytes]:
    """A raw HTTP request (request line, headers, blank line, body) -> (target, headers, query, body)."""
    # Only the head is normalised: the body is kept byte for byte (it is what was signed).
    ends = [(raw.find(sep), sep) for sep in (b"\r\n\r\n", b"\n\n") if raw.find(sep) >= 0]
    at, separator = min(ends) if ends else (len(raw), b"")
    head, body = raw[:at], raw[at + len(separator) :]
    lines = head.decode("latin-1").replace("\r\n", "\n").split("\n")
    target = lines[0].split(" ")[1] if " " in lines[0] else "/"
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip()] = value.strip()
    query = dict(parse_qsl(urlsplit(target).query))
    return target, headers, query, body


def verify_callback(args: argparse.Namespace) -> int:
    raw = sys.stdin.buffer.read() if args.file == "-" else _read(args.file)
    _target, headers, query, body = _parse_http(raw)
    credentials = _credentials(args)
    data = {"hash_key": credentials.hash_key, "client_secret": credentials.client_secret}
    order = (args.external_id, args.order_id) if args.external_id and args.order_id else None
    try:
        if args.kind == "wallet":
            event: object = verify_wallet_callback(body, headers, hash_key=data["hash_key"], query=query, order=order)
        elif args.kind == "va":
            event = verify_va_callback(body, headers, hash_key=data["hash_key"], query=query, order=order)
        elif args.kind == "payment-page":
            event = verify_payment_page_callback(body, headers, hash_key=data["hash_key"], query=query, order=order)
        else:
            if not args.callback_url:
                print("error: --callback-url is required for bnpl", file=sys.stderr)
                return 2
            event = verify_bnpl_notification(
                body,
                headers,
                client_secret=data["client_secret"],
                callback_url=args.callback_url,
                merchant_id=credentials.merchant_id,
                tolerance=None if args.tolerance <= 0 else args.tolerance,
                hash_key=data["hash_key"],
            )
    except KasirError as exc:
        print(f"INVALID: {exc}", file=sys.stderr)
        return 1
    print(f"OK {type(event).__name__}: {json.dumps(getattr(event, 'raw', {}), ensure_ascii=False)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kasir-client", description="Kasir merchant tools")
    commands = parser.add_subparsers(dest="command", required=True)

    p = commands.add_parser("keygen", help="RSA-2048 pair: DIR/private.pem (PKCS#8), DIR/public.pem")
    p.add_argument("--out", required=True)
    p.add_argument("--force", action="store_true", help="replace an existing private.pem / public.pem")
    p.set_defaults(run=keygen)

    def with_credentials(p: argparse.ArgumentParser, key: bool = True) -> None:
        p.add_argument("--credentials", required=True, help="credentials.json from `kasir merchant create --json`")
        if key:
            p.add_argument("--private-key", help="the merchant's PEM private key")

    p = commands.add_parser("token", help="print an access token")
    with_credentials(p)
    p.add_argument("--base-url", default="http://127.0.0.1:8000")
    p.add_argument("--product", choices=sorted(TOKEN_PATHS), default="payment")
    p.set_defaults(run=token)

    p = commands.add_parser("sign", help="print signed headers for a body (curl -H arguments)")
    with_credentials(p)
    p.add_argument("kind", choices=["token", "snap", "wallet", "card"])
    p.add_argument("--path", default="/v1.0/bnpl/payment-calculation", help="the route (snap, wallet)")
    p.add_argument("--body", help="file with the JSON body, or - for stdin")
    p.add_argument("--token", help="access token (SNAP symmetric signature)")
    p.add_argument("--asymmetric", action="store_true", help="SNAP asymmetric (RSA) signature, no token")
    p.add_argument("--external-id", default=str(int.from_bytes(os.urandom(8), "big")))
    p.add_argument(
        "--idempotency-key",
        default=os.urandom(8).hex(),
        help="X-Idempotency-Key of card and of the wallet and BNPL routes that create or move money",
    )
    p.add_argument("--product", choices=sorted(TOKEN_PATHS), default="payment")
    p.set_defaults(run=sign)

    p = commands.add_parser("verify-callback", help="verify a raw HTTP callback request (file or stdin)")
    with_credentials(p, key=False)
    p.add_argument("kind", choices=["wallet", "va", "payment-page", "bnpl"])
    p.add_argument("--file", default="-")
    p.add_argument("--callback-url", help="the callbackUrl the BNPL notification was sent to")
    p.add_argument("--external-id", help="your order's external_id: the signature is checked against it")
    p.add_argument("--order-id", help="your order's order_id (with --external-id)")
    p.add_argument(
        "--tolerance",
        type=float,
        default=300.0,
        help="bnpl: seconds X-TIMESTAMP may be from now (default 300; 0 turns the check off)",
    )
    p.set_defaults(run=verify_callback)

    args = parser.parse_args(argv)
    try:
        return int(args.run(args))
    except CommandError as exc:
        print(f"kasir-client: error: {exc}", file=sys.stderr)
        return 2
    except KasirError as exc:
        print(f"kasir-client: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
