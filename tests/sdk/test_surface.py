"""The SDK's surface for merchants (issue 28): explicit options, an injectable transport, the request
hook and logger, the User-Agent, one set of error fields for raised and returned errors, confirming a
callback by inquiry, the BNPL timestamp tolerance, the CLI's one-line errors and keygen's refusal,
and the Python 3.10 checker."""

from __future__ import annotations

import inspect
import json
import logging
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from kasir_client import (
    USER_AGENT,
    APIError,
    AsyncClient,
    BnplNotification,
    Client,
    ConfirmationError,
    ConflictError,
    Credentials,
    RequestLog,
    SignatureError,
    ValidationError,
    WalletCallback,
    __version__,
    sign_bnpl_notification,
    verify_bnpl_notification,
)

from tests.sdk.helpers import kasir_client_command, sdk_credentials
from tests.sdk.test_card import charge_body
from tests.support.builders import make_merchant
from tests.support.wire.callbacks import notify_signature

main = kasir_client_command()

ROOT = Path(__file__).resolve().parents[2]
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
CREDENTIALS = Credentials(
    merchant_id="M-1",
    client_id="C-1",
    client_secret="client-secret-not-in-logs",
    secret="secret-not-in-logs",
    hash_key="hash-key-not-in-logs",
    private_key_pem=KEY.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ),
)
REF = {"transaction_id": "WT-1", "external_id": "EXT-1", "order_id": "ORDER-1"}
PAID = {"response_code": "00", "response_message": "Success", **REF, "transaction_status": "PAID", "amount": 100_000}


def scripted(*answers: httpx.Response) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    """A transport that answers `answers` in order and keeps the requests it was sent."""
    seen: list[httpx.Request] = []
    queue = list(answers)

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return queue.pop(0)

    return httpx.MockTransport(handle), seen


def answer(status: int, body: object, request_id: str | None = None, **headers: str) -> httpx.Response:
    if request_id is not None:
        headers["X-Request-ID"] = request_id
    return httpx.Response(status, json=body, headers=headers)


# --- options, transport, hook, logger, User-Agent -------------------------------------------


def test_options_are_named_keywords_and_a_typo_names_itself():
    for cls in (Client, AsyncClient):
        parameters = inspect.signature(cls.__init__).parameters
        named = {"timeout", "max_retries", "backoff", "max_delay", "signing", "transport", "on_request", "logger"}
        assert named <= set(parameters)
        assert all(parameters[name].kind is inspect.Parameter.KEYWORD_ONLY for name in named)
        assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
        with pytest.raises(TypeError, match="timout"):
            cls("http://127.0.0.1:1", CREDENTIALS, timout=3)  # type: ignore[call-arg]


def test_transport_user_agent_hook_and_logger(caplog):
    transport, seen = scripted(
        answer(503, {"response_code": "05", "response_message": "busy"}, "rid-1"),
        answer(200, PAID, "rid-2"),
    )
    entries: list[RequestLog] = []
    caplog.set_level(logging.DEBUG, logger="kasir_client")
    with Client("http://kasir.test", CREDENTIALS, transport=transport, backoff=0, on_request=entries.append) as c:
        result = c.wallet_inquiry(REF)
    assert result.request_id == "rid-2"
    assert [r.headers["User-Agent"] for r in seen] == [USER_AGENT] * 2
    assert USER_AGENT == f"kasir-client/{__version__}"
    assert [(e.attempt, e.status, e.request_id, e.will_retry) for e in entries] == [
        (1, 503, "rid-1", True),
        (2, 200, "rid-2", False),
    ]
    assert all(e.method == "POST" and e.path == "/ewallet/v2/inquiry" and e.error is None for e in entries)
    retried = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(retried) == 1
    assert "try 1: 503" in retried[0].getMessage()
    assert "rid-1" in retried[0].getMessage()
    for secret in (CREDENTIALS.hash_key, CREDENTIALS.secret, "x-req-signature", "Basic "):
        assert secret not in caplog.text  # never a header or a body


def test_a_failing_hook_does_not_fail_the_payment(caplog):
    transport, _ = scripted(answer(200, PAID, "rid-1"))

    def broken(entry: RequestLog) -> None:
        raise RuntimeError("the merchant's metrics are down")

    with Client("http://kasir.test", CREDENTIALS, transport=transport, on_request=broken) as client:
        assert client.wallet_inquiry(REF).transaction_status == "PAID"
    assert "on_request hook failed" in caplog.text


def test_transport_errors_reach_the_hook():
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    entries: list[RequestLog] = []
    client = Client(
        "http://kasir.test", CREDENTIALS, transport=httpx.MockTransport(refuse), max_retries=1, backoff=0,
        on_request=entries.append,
    )  # fmt: skip
    with client, pytest.raises(Exception, match="ConnectError"):
        client.wallet_inquiry(REF)
    assert [(e.status, e.will_retry) for e in entries] == [(None, True), (None, False)]
    assert all(e.error and "refused" in e.error for e in entries)


async def test_async_client_takes_an_async_transport():
    seen: list[httpx.Request] = []

    async def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answer(200, PAID, "rid-a")

    async with AsyncClient("http://kasir.test", CREDENTIALS, transport=httpx.MockTransport(handle)) as client:
        result = await client.wallet_inquiry(REF)
    assert result.request_id == "rid-a"
    assert seen[0].headers["User-Agent"] == USER_AGENT


# --- errors: the same fields raised and returned ----------------------------------------------


def test_raised_errors_carry_status_code_message_fields_and_request_id():
    transport, _ = scripted(
        answer(409, {"response_code": "03", "response_message": "Refund amount exceeds the paid amount"}, "rid-w"),
        answer(400, {"responseCode": "4009001", "responseMessage": "Invalid Field Format amount"}, "rid-s"),
    )
    with Client("http://kasir.test", CREDENTIALS, transport=transport, signing="asymmetric") as client:
        with pytest.raises(ConflictError) as wallet:
            client.wallet_refund({**REF, "refund_amount": 1})  # type: ignore[typeddict-item]
        with pytest.raises(ValidationError) as snap:
            client.bnpl_status(reference_no="R-1")
    error = wallet.value
    assert (error.status, error.code, error.request_id) == (409, "03", "rid-w")
    assert error.message == "Refund amount exceeds the paid amount"
    assert error.errors == []
    assert str(error) == "HTTP 409 03: Refund amount exceeds the paid amount (X-Request-ID rid-w)"
    assert (snap.value.status, snap.value.code, snap.value.request_id) == (400, "4009001", "rid-s")
    assert "rid-s" in str(snap.value)


def test_a_refused_charge_returns_the_same_error():
    body = {
        "statusCode": "400",
        "statusMessage": "VALIDATION_ERROR",
        "errors": [{"field": "itemDetails[0].qty", "message": "must be 1 to 999"}],
    }
    transport, _ = scripted(answer(400, body, "rid-c"), answer(200, {"statusCode": "00", "data": {"link": "L"}}))
    with Client("http://kasir.test", CREDENTIALS, transport=transport) as client:
        refused = client.card_charge(charge_body("http://127.0.0.1:1/cb"))  # type: ignore[arg-type]
        ok = client.card_charge(charge_body("http://127.0.0.1:1/cb"))  # type: ignore[arg-type]
    assert not refused.is_success
    assert refused.request_id == "rid-c"
    error = refused.error
    assert isinstance(error, ValidationError)
    assert (error.status, error.code, error.message, error.request_id) == (400, "400", "VALIDATION_ERROR", "rid-c")
    assert error.errors == body["errors"] == refused.errors
    assert error.http_status == refused.http_status == 400
    assert str(error) == ("HTTP 400 400: VALIDATION_ERROR [itemDetails[0].qty: must be 1 to 999] (X-Request-ID rid-c)")
    with pytest.raises(ValidationError):
        refused.raise_for_error()
    assert refused.message == "itemDetails[0].qty: must be 1 to 999"  # as in 0.1
    assert ok.is_success
    assert ok.error is None
    assert ok.raise_for_error() is ok


@pytest.mark.slow
async def test_request_id_is_the_servers(app, served):
    merchant = await make_merchant(app)
    async with AsyncClient(served.base_url, sdk_credentials(merchant)) as client:
        bad = charge_body("http://127.0.0.1:1/cb")
        bad["itemDetails"][0]["qty"] = 0
        refused = await client.card_charge(bad)
        with pytest.raises(APIError) as raised:
            await client.wallet_inquiry({"transaction_id": "nope", "external_id": "E", "order_id": "O"})
    async with httpx.AsyncClient() as http:
        health = await http.get(f"{served.base_url}/healthz", headers={"X-Request-ID": "probe-1"})
    assert health.headers["X-Request-ID"] == "probe-1"  # what the SDK reads is the server's header
    assert refused.error is not None
    assert refused.error.request_id
    assert refused.error.errors
    assert refused.error.errors[0]["field"] == "itemDetails[0].qty"
    assert refused.error.request_id in str(refused.error)
    assert raised.value.status == 404
    assert raised.value.request_id
    assert raised.value.request_id != refused.error.request_id


# --- confirming a callback by inquiry ---------------------------------------------------------


def wallet_event(status: str = "PAID", **changes: str) -> WalletCallback:
    ids = {**REF, **changes}
    return WalletCallback(transaction_status=status, amount=None, raw={}, **ids)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("inquiry", "amount", "problem"),
    [
        (PAID, 100_000, None),
        (PAID, None, None),
        (PAID, "100000", None),
        ({**PAID, "transaction_status": "EXPIRED"}, 100_000, "is EXPIRED, not PAID"),
        ({**PAID, "amount": 1_000}, 100_000, "is for 1000, not 100000"),
        ({**PAID, "order_id": "ORDER-2"}, 100_000, "belongs to another order_id"),
    ],
)
def test_confirm_wallet_payment(inquiry, amount, problem):
    transport, seen = scripted(answer(200, inquiry, "rid-i"))
    with Client("http://kasir.test", CREDENTIALS, transport=transport) as client:
        if problem is None:
            assert client.confirm_wallet_payment(wallet_event(), amount=amount).transaction_status == "PAID"
        else:
            with pytest.raises(ConfirmationError, match=problem) as caught:
                client.confirm_wallet_payment(wallet_event(), amount=amount)
            assert caught.value.result.request_id == "rid-i"
    [request] = seen
    assert request.url.path == "/ewallet/v2/inquiry"
    assert json.loads(request.content) == REF  # the callback's transaction, asked with our own credentials


async def test_confirm_bnpl_payment_async():
    status = {
        "responseCode": "2009200",
        "originalPartnerReferenceNo": "P-1",
        "originalReferenceNo": "R-1",
        "latestTransactionStatus": "00",
        "paymentDetails": {"amount": {"value": "150000.00", "currency": "IDR"}},
    }
    event = BnplNotification("P-1", "R-1", "00", "Success", None, 3, {})

    def handle(request: httpx.Request) -> httpx.Response:
        assert json.loads(request.content) == {"originalPartnerReferenceNo": "P-1", "originalReferenceNo": "R-1"}
        return answer(200, status)

    transport = httpx.MockTransport(handle)
    async with AsyncClient("http://kasir.test", CREDENTIALS, transport=transport, signing="asymmetric") as client:
        assert (await client.confirm_bnpl_payment(event, amount="150000")).status == "00"
        with pytest.raises(ConfirmationError, match="not 99"):
            await client.confirm_bnpl_payment(event, amount=99)
        with pytest.raises(ConfirmationError, match="is 00, not 05"):
            await client.confirm_bnpl_payment(event, status="05")


# --- BNPL timestamp tolerance -------------------------------------------------------------------


def test_bnpl_notification_timestamp_tolerance():
    payload = {"originalPartnerReferenceNo": "P-1", "originalReferenceNo": "R-1", "latestTransactionStatus": "00"}
    keys = {"client_secret": "s3cret", "callback_url": "https://shop.example/bnpl"}
    now = datetime.now(UTC)

    def signed(at: datetime) -> tuple[bytes, dict[str, str]]:
        return sign_bnpl_notification(payload, merchant_id="M-1", at=at, **keys)

    for fresh in (now, now - timedelta(seconds=290), now + timedelta(seconds=290)):
        body, headers = signed(fresh)
        headers |= {"X-Kasir-Callback-Id": "42", "X-Kasir-Attempt": "3"}
        event = verify_bnpl_notification(body, headers, **keys)
        assert (event.callback_id, event.attempt, event.timestamp) == ("42", 3, headers["X-TIMESTAMP"])
    for stale in (now - timedelta(seconds=310), now + timedelta(seconds=310), now - timedelta(days=30)):
        body, headers = signed(stale)
        with pytest.raises(SignatureError, match="tolerance 300 s"):
            verify_bnpl_notification(body, headers, **keys)
        assert verify_bnpl_notification(body, headers, tolerance=None, **keys).latest_transaction_status == "00"
    body, headers = signed(now - timedelta(seconds=100))
    with pytest.raises(SignatureError, match="tolerance 60 s"):
        verify_bnpl_notification(body, headers, tolerance=60, **keys)
    # A signed timestamp without an offset is refused, not guessed at.
    naive = now.replace(tzinfo=None).isoformat(timespec="seconds")
    headers = {"X-TIMESTAMP": naive, "X-SIGNATURE": notify_signature("s3cret", keys["callback_url"], body, naive)}
    with pytest.raises(SignatureError, match="no UTC offset"):
        verify_bnpl_notification(body, headers, **keys)


# --- the kasir-client command ---------------------------------------------------------------------


def test_keygen_refuses_to_overwrite_without_force(tmp_path, capsys):
    assert main(["keygen", "--out", str(tmp_path)]) == 0
    first = (tmp_path / "private.pem").read_bytes()
    capsys.readouterr()
    assert main(["keygen", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "already exist" in err
    assert "--force" in err
    assert (tmp_path / "private.pem").read_bytes() == first
    (tmp_path / "private.pem").chmod(0o644)
    assert main(["keygen", "--out", str(tmp_path), "--force"]) == 0
    assert (tmp_path / "private.pem").read_bytes() != first
    assert (tmp_path / "private.pem").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "cannot read"),
        ("{not json", "is not a credentials file"),
        ('{"merchant_id": "M-1"}', "lacks 'client_id'"),
    ],
)
def test_a_bad_credentials_file_is_one_line(tmp_path, capsys, content, says):
    path = tmp_path / "credentials.json"
    if content is not None:
        path.write_text(content)
    for command in (["token"], ["sign", "wallet"], ["verify-callback", "wallet", "--file", str(path)]):
        assert main([*command, "--credentials", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("kasir-client: error: ")
        assert says in err
        assert err.count("\n") == 1


def test_a_bad_private_key_is_one_line(tmp_path, capsys):
    credentials = tmp_path / "credentials.json"
    credentials.write_text(
        json.dumps({k: "x" for k in ("merchant_id", "client_id", "client_secret", "secret", "hash_key")})
    )
    key = tmp_path / "private.pem"
    key.write_text("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")
    assert main(["token", "--credentials", str(credentials), "--private-key", str(key)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"kasir-client: error: {key} is not an unencrypted RSA private key in PEM")
    assert err.count("\n") == 1


@pytest.mark.slow
def test_the_installed_command_prints_no_traceback(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [str(Path(sys.executable).parent / "kasir-client"), "token", "--credentials", str(tmp_path / "missing.json")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [f"kasir-client: error: cannot read {tmp_path / 'missing.json'}: "
                                                "No such file or directory"]  # fmt: skip


# --- Python 3.10 ----------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("source", "says"),
    [
        ("from datetime import UTC\n", "datetime.UTC"),
        ("import tomllib\n", "tomllib"),
        ("from typing import NotRequired, TypedDict\n\nA = TypedDict('A', {'a': NotRequired[int]})\n", "NotRequired"),
        ("try:\n    pass\nexcept* ValueError:\n    pass\n", "except*"),
    ],
)
def test_the_310_check_refuses_newer_python(tmp_path, source, says):
    copy = tmp_path / "src"
    shutil.copytree(ROOT / "sdk" / "src", copy, ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    (copy / "kasir_client" / "_newer.py").write_text(source)
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "check_sdk.py"), "compat", "--src", str(copy)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert says in done.stdout + done.stderr


@pytest.mark.slow
def test_the_sdk_passes_the_310_check():
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "check_sdk.py"), "compat"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    requires = (ROOT / "sdk" / "pyproject.toml").read_text()
    assert 'requires-python = ">=3.10"' in requires
    assert 'target-version = "py310"' in requires
