"""The SDK's retry rule against a scripted HTTP server on 127.0.0.1 (tests/sdk/scripted.py).

Every call that creates or moves money carries one X-Idempotency-Key for all its tries and is tried
again after a dropped connection, a 5xx and a 409 with Retry-After (REQUEST_IN_PROGRESS), waiting
at least Retry-After; a 409 without Retry-After and a 422 are final. Reads carry no key.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from kasir_client import (
    APIError,
    AsyncClient,
    ChargeResult,
    Client,
    ConfigurationError,
    ConflictError,
    TransportError,
    ValidationError,
)

from tests.sdk.helpers import sdk_credentials
from tests.sdk.scripted import Reply, ScriptedServer, Seen
from tests.support import builders
from tests.support.builders import make_merchant
from tests.support.wire.snap import snap_asymmetric

WALLET_REF = {"transaction_id": "WT-1", "external_id": "EXT-1", "order_id": "ORDER-1"}

CARD_OK = {
    "statusCode": "00",
    "statusMessage": "SUCCESS",
    "data": {"transactionId": "CT-1", "paymentStatus": "PENDING", "link": "http://pay/CT-1"},
}
WALLET_OK = {"response_code": "00", "response_message": "Success", **WALLET_REF, "transaction_status": "PENDING"}
BNPL_OK = {
    "responseCode": "2009200",
    "responseMessage": "Successful",
    "referenceNo": "BN-1",
    "partnerReferenceNo": "ORDER-1",
    "latestTransactionStatus": "01",
}


@dataclass(frozen=True)
class Format:
    """One wire format's answers (interface.md; the card, wallet and SNAP error renderers)."""

    ok: dict[str, Any]
    in_progress: dict[str, Any]  # 409 + Retry-After
    unavailable: dict[str, Any]  # an outage, with Retry-After
    unavailable_status: int  # docs/decisions.md §4: wallet 98 and SNAP 500xx00 are HTTP 500; the card's is 503
    duplicate: dict[str, Any]  # 409 without Retry-After: final
    reused: dict[str, Any]  # 422: the key was used with another body


CARD = Format(
    ok=CARD_OK,
    in_progress={"statusCode": "409", "statusMessage": "REQUEST_IN_PROGRESS", "errors": []},
    unavailable={"statusCode": "503", "statusMessage": "SERVICE_UNAVAILABLE", "errors": []},
    unavailable_status=503,
    duplicate={
        "statusCode": "409",
        "statusMessage": "DUPLICATE_ORDER",
        "errors": [{"field": "orderId", "message": "already used"}],
    },
    reused={
        "statusCode": "422",
        "statusMessage": "IDEMPOTENCY_KEY_REUSED",
        "errors": [{"field": "X-Idempotency-Key", "message": "already used with a different request body"}],
    },
)
WALLET = Format(
    ok=WALLET_OK,
    in_progress={"response_code": "03", "response_message": "A request with this idempotency key is still running"},
    unavailable={"response_code": "98", "response_message": "Service temporarily unavailable; retry"},
    unavailable_status=500,
    duplicate={"response_code": "03", "response_message": "Failed Request"},
    reused={"response_code": "01", "response_message": "X-Idempotency-Key was already used with a different body"},
)
SNAP = Format(
    ok=BNPL_OK,
    in_progress={"responseCode": "4099200", "responseMessage": "Request In Progress"},
    unavailable={"responseCode": "5009200", "responseMessage": "Service temporarily unavailable; retry"},
    unavailable_status=500,
    duplicate={"responseCode": "4099201", "responseMessage": "Duplicate partnerReferenceNo"},
    reused={"responseCode": "4229200", "responseMessage": "X-Idempotency-Key was already used"},
)


@dataclass(frozen=True)
class MoneyCall:
    method: str
    path: str
    payload: dict[str, Any]
    format: Format


MONEY_CALLS = [
    MoneyCall("card_charge", "/card-v2/v1/charge", {"externalId": "EXT-1", "orderId": "ORDER-1"}, CARD),
    MoneyCall(
        "wallet_create_payment",
        "/ewallet/v2/create-payment",
        {"external_id": "EXT-1", "order_id": "ORDER-1", "payment_channel": "DANA"},
        WALLET,
    ),
    MoneyCall(
        "wallet_create_qr",
        "/ewallet/v2/create-qr",
        {"external_id": "EXT-1", "order_id": "ORDER-1", "payment_channel": "QRIS"},
        WALLET,
    ),
    MoneyCall("wallet_refund", "/ewallet/v2/refund", {**WALLET_REF, "refund_amount": 30_000}, WALLET),
    MoneyCall("wallet_void", "/ewallet/v2/void", {**WALLET_REF, "reason": "customer cancelled"}, WALLET),
    MoneyCall(
        "wallet_dummy_payment",
        "/ewallet/v2/dummy-payment",
        {**WALLET_REF, "payment_method": "wallet", "payment_channel": "DANA"},
        WALLET,
    ),
    MoneyCall(
        "bnpl_checkout",
        "/v1.0/bnpl/qr-checkout",
        {"partnerReferenceNo": "ORDER-1", "paymentDetails": {"amount": {"value": "150000.00", "currency": "IDR"}}},
        SNAP,
    ),
]
BY_NAME = {call.method: call for call in MONEY_CALLS}
money_calls = pytest.mark.parametrize("call", MONEY_CALLS, ids=[call.method for call in MONEY_CALLS])


def options(**overrides: Any) -> dict[str, Any]:
    # A backoff of 1 ms: a wait of tenths of a second between tries can only be Retry-After's.
    # BNPL signs with the RSA key, so no token request enters the script.
    return {"backoff": 0.001, "signing": "asymmetric", **overrides}


async def outcome(client: AsyncClient, call: MoneyCall, **kwargs: Any) -> Any:
    """The call's result, or the APIError it raised (card answers failures as a ChargeResult)."""
    try:
        return await getattr(client, call.method)(call.payload, **kwargs)
    except APIError as exc:
        return exc


def status(result: Any) -> int:
    if isinstance(result, ChargeResult):
        return result.http_status
    if isinstance(result, APIError):
        return result.status
    return 200  # a wallet or BNPL result is only ever made of a 2xx answer


def one_key(requests: list[Seen]) -> str:
    """The X-Idempotency-Key all the tries carried, after checking they carried the same one and body."""
    keys = {r.headers.get("x-idempotency-key") for r in requests}
    assert len(keys) == 1, keys
    assert len({r.body for r in requests}) == 1
    [key] = keys
    assert key is not None
    return key


def assert_signed_per_try(requests: list[Seen], merchant: builders.TestMerchant, path: str) -> None:
    """BNPL: one X-EXTERNAL-ID for the call; each try signed for its own X-TIMESTAMP (the formula)."""
    assert len({r.headers["x-external-id"] for r in requests}) == 1
    for r in requests:
        expected = snap_asymmetric(merchant.private_key, "POST", path, r.body.decode(), r.headers["x-timestamp"])
        assert r.headers["x-signature"] == expected


@money_calls
async def test_request_in_progress_is_retried_after_retry_after_with_the_same_key(app, call: MoneyCall):
    merchant = await make_merchant(app)
    script = [Reply(409, call.format.in_progress, retry_after="0.3"), Reply(200, call.format.ok, replayed=True)]
    async with ScriptedServer(*script) as server:
        async with AsyncClient(server.base_url, sdk_credentials(merchant), **options()) as client:
            result = await outcome(client, call)
    assert status(result) == 200
    assert result.replayed  # the retry got the first request's answer again
    assert result.raw == call.format.ok
    first, second = server.requests
    assert first.path == second.path == call.path
    assert uuid.UUID(one_key(server.requests)).version == 4  # made by the SDK
    assert second.at - first.at >= 0.3
    if call.format is SNAP:
        assert_signed_per_try(server.requests, merchant, call.path)


@money_calls
async def test_unavailable_and_a_dropped_connection_are_retried_with_the_same_key(app, call: MoneyCall):
    merchant = await make_merchant(app)
    script = [
        Reply(call.format.unavailable_status, call.format.unavailable, retry_after="0.3"),
        Reply(drop=True),  # the request was read, then the connection lost: the service let go of the key
        Reply(200, call.format.ok),
    ]
    async with ScriptedServer(*script) as server:
        async with AsyncClient(server.base_url, sdk_credentials(merchant), **options()) as client:
            result = await outcome(client, call, idempotency_key="order-1-step-1")
    assert status(result) == 200
    assert not result.replayed
    assert len(server.requests) == 3
    assert one_key(server.requests) == "order-1-step-1"
    assert server.requests[1].at - server.requests[0].at >= 0.3
    if call.format is SNAP:
        assert_signed_per_try(server.requests, merchant, call.path)


@money_calls
@pytest.mark.parametrize("final", ["duplicate", "reused"])
async def test_a_409_without_retry_after_and_a_422_are_not_retried(app, call: MoneyCall, final: str):
    merchant = await make_merchant(app)
    answer = Reply(409 if final == "duplicate" else 422, getattr(call.format, final))
    async with ScriptedServer(answer, Reply(200, call.format.ok)) as server:
        async with AsyncClient(server.base_url, sdk_credentials(merchant), **options()) as client:
            result = await outcome(client, call)
    assert len(server.requests) == 1
    assert status(result) == answer.status
    if call.format is CARD:
        assert not result.is_success
        assert result.raw == answer.body
    else:
        assert isinstance(result, ConflictError if final == "duplicate" else ValidationError)
        assert result.body == answer.body


@pytest.mark.parametrize("method", ["card_charge", "wallet_refund", "bnpl_checkout"])
async def test_sync_client_follows_the_same_rule(app, method: str):
    call = BY_NAME[method]
    merchant = await make_merchant(app)
    script = [
        Reply(drop=True),
        Reply(409, call.format.in_progress, retry_after="1"),  # as the service sends it
        Reply(call.format.unavailable_status, call.format.unavailable, retry_after="0"),
        Reply(200, call.format.ok, replayed=True),
    ]

    def run(base_url: str) -> Any:
        with Client(base_url, sdk_credentials(merchant), **options()) as client:
            return getattr(client, call.method)(call.payload)

    async with ScriptedServer(*script) as server:
        result = await asyncio.to_thread(run, server.base_url)
    assert result.replayed
    assert len(server.requests) == 4
    one_key(server.requests)
    assert server.requests[2].at - server.requests[1].at >= 1.0


async def test_retry_after_is_capped_at_max_delay(app):
    merchant = await make_merchant(app)
    call = BY_NAME["wallet_refund"]
    script = [
        Reply(409, WALLET.in_progress, retry_after="86400"),  # a hostile or mistaken day
        Reply(500, WALLET.unavailable, retry_after="Wed, 21 Oct 2065 07:28:00 GMT"),  # a date: the backoff applies
        Reply(200, WALLET.ok),
    ]
    async with ScriptedServer(*script) as server:
        async with AsyncClient(server.base_url, sdk_credentials(merchant), **options(max_delay=0.3)) as client:
            result = await outcome(client, call)
    assert status(result) == 200
    first, second, third = server.requests
    assert 0.3 <= second.at - first.at < 2.0
    assert third.at - second.at < 0.3


async def test_when_the_tries_run_out_the_last_answer_is_the_outcome(app):
    merchant = await make_merchant(app)
    in_progress = [Reply(409, WALLET.in_progress, retry_after="0")] * 3
    async with ScriptedServer(*in_progress) as server:
        async with AsyncClient(server.base_url, sdk_credentials(merchant), **options(max_retries=2)) as client:
            with pytest.raises(ConflictError) as caught:
                await client.wallet_void({**WALLET_REF})
    assert caught.value.code == "03"
    assert len(server.requests) == 3
    one_key(server.requests)

    async with ScriptedServer(Reply(drop=True), Reply(drop=True)) as server:
        async with AsyncClient(server.base_url, sdk_credentials(merchant), **options(max_retries=1)) as client:
            with pytest.raises(TransportError):
                await client.card_charge({"orderId": "ORDER-1"})
    assert len(server.requests) == 2
    one_key(server.requests)


async def test_reads_carry_no_key_and_keep_their_rules(app):
    merchant = await make_merchant(app)
    script = [
        Reply(drop=True),  # a read is always safe to send again
        Reply(200, WALLET.ok),
        Reply(409, WALLET.in_progress, retry_after="0"),  # not retried: a 409 of a read is not a key's
        Reply(500, SNAP.unavailable, retry_after="0"),
        Reply(200, {**BNPL_OK, "responseCode": "2009300"}),
    ]
    async with ScriptedServer(*script) as server:
        async with AsyncClient(server.base_url, sdk_credentials(merchant), **options()) as client:
            inquiry = await client.wallet_inquiry(WALLET_REF)
            with pytest.raises(ConflictError):
                await client.wallet_inquiry(WALLET_REF)
            status_ = await client.bnpl_status(reference_no="BN-1")
    assert inquiry.transaction_id == "WT-1"
    assert status_.reference_no == "BN-1"
    assert [r.path for r in server.requests] == ["/ewallet/v2/inquiry"] * 3 + ["/v1.0/bnpl/status"] * 2
    assert all("x-idempotency-key" not in r.headers for r in server.requests)


@money_calls
async def test_each_call_has_its_own_key(app, call: MoneyCall):
    merchant = await make_merchant(app)
    async with ScriptedServer(Reply(200, call.format.ok), Reply(200, call.format.ok)) as server:
        async with AsyncClient(server.base_url, sdk_credentials(merchant), **options()) as client:
            await outcome(client, call)
            await outcome(client, call)
    first, second = server.requests
    assert first.headers["x-idempotency-key"] != second.headers["x-idempotency-key"]


@pytest.mark.parametrize("key", ["", "k" * 256, "kunci-ké", "line\nbreak"])
async def test_an_unusable_idempotency_key_is_refused_before_sending(app, key: str):
    merchant = await make_merchant(app)
    async with ScriptedServer() as server:
        async with AsyncClient(server.base_url, sdk_credentials(merchant), **options()) as client:
            for call in MONEY_CALLS:
                with pytest.raises(ConfigurationError):
                    await getattr(client, call.method)(call.payload, idempotency_key=key)
    assert server.requests == []


async def test_the_longest_key_is_sent_as_given(app):
    merchant = await make_merchant(app)
    key = "k" * 255
    async with ScriptedServer(Reply(200, WALLET.ok)) as server:
        async with AsyncClient(server.base_url, sdk_credentials(merchant), **options()) as client:
            await client.wallet_refund(BY_NAME["wallet_refund"].payload, idempotency_key=key)
    assert one_key(server.requests) == key
