"""kasir-client against the real server (tokens) and against a scripted server (retries, mapping)."""

from __future__ import annotations

import asyncio
import uuid

import kasir_client
import pytest
from kasir_client import (
    AsyncClient,
    AuthenticationError,
    Client,
    ConfigurationError,
    ConflictError,
    TransportError,
)

from tests.sdk.helpers import sdk_credentials
from tests.support.builders import make_merchant
from tests.support.postgres import free_port
from tests.support.receiver import Answer
from tests.support.wire import basic_auth, x_req_signature
from tests.support.wire.snap import snap_asymmetric, token_signature

PUBLIC = {
    # clients and credentials
    "Client",
    "AsyncClient",
    "Credentials",
    # results and events
    "BnplCalculation",
    "BnplNotification",
    "BnplTransaction",
    "ChargeResult",
    "InstallmentOption",
    "PaymentLinkResult",
    "PaymentPageCallback",
    "SelectedChannel",
    "PayoutAccount",
    "PayoutBalance",
    "PayoutHistory",
    "PayoutHistoryEntry",
    "PayoutNotification",
    "PayoutTransfer",
    "VaCallback",
    "VaPayment",
    "VaPaymentResult",
    "VaResult",
    "WalletCallback",
    "WalletResult",
    "RequestLog",
    # request bodies (TypedDicts), the User-Agent sent
    "bodies",
    "USER_AGENT",
    # exceptions
    "KasirError",
    "ConfigurationError",
    "TransportError",
    "APIError",
    "AuthenticationError",
    "ValidationError",
    "NotFoundError",
    "ConflictError",
    "ServerError",
    "SignatureError",
    "ConfirmationError",
    # callbacks
    "verify_wallet_callback",
    "verify_payment_page_callback",
    "verify_bnpl_notification",
    "verify_va_callback",
    "sign_wallet_callback",
    "sign_payment_page_callback",
    "sign_bnpl_notification",
    "sign_va_callback",
    "verify_payout_notification",
    "sign_payout_notification",
}


def test_public_surface_is_exactly_all():
    public = {name for name in dir(kasir_client) if not name.startswith("_")}
    assert set(kasir_client.__all__) == public
    assert public == PUBLIC  # a change of the public surface is a decision, made here too
    assert len(kasir_client.__all__) == len(set(kasir_client.__all__))
    for name in ("KasirError", "APIError", "SignatureError", "ServerError"):
        assert name in kasir_client.__doc__
    # The tree drawn in the docstring is the class tree.
    for name in ("ConfigurationError", "TransportError", "APIError", "SignatureError", "ConfirmationError"):
        assert getattr(kasir_client, name).__bases__ == (kasir_client.KasirError,)
    for name in ("AuthenticationError", "ValidationError", "NotFoundError", "ConflictError", "ServerError"):
        assert getattr(kasir_client, name).__bases__ == (kasir_client.APIError,)
    for name in kasir_client.__all__:
        assert getattr(kasir_client, name) is not None
    assert "ValidationError" in kasir_client.__doc__  # the exception tree is drawn


@pytest.mark.slow
async def test_tokens_over_real_http_are_cached_per_product(app, served):
    merchant = await make_merchant(app)
    async with AsyncClient(served.base_url, sdk_credentials(merchant)) as client:
        payment = await client.access_token()
        assert await client.access_token() == payment  # cached
        disbursement = await client.access_token("disbursement")
        assert disbursement != payment

    # The sync client too, in a thread (the test loop is running).
    def sync() -> str:
        with Client(served.base_url, sdk_credentials(merchant)) as sync_client:
            return sync_client.access_token()

    assert await asyncio.to_thread(sync)


@pytest.mark.slow
async def test_wrong_key_is_an_authentication_error(app, served):
    merchant = await make_merchant(app)
    other = await make_merchant(app, key_slot=1)
    credentials = sdk_credentials(merchant)
    wrong = type(credentials)(**{**credentials.__dict__, "private_key_pem": sdk_credentials(other).private_key_pem})
    async with AsyncClient(served.base_url, wrong) as client:
        with pytest.raises(AuthenticationError) as caught:
            await client.access_token()
    assert caught.value.code == "4017300"


async def test_token_request_is_signed_per_the_formula(app, receiver):
    merchant = await make_merchant(app)
    receiver.answer(Answer(status=200, body={"responseCode": "2007300", "accessToken": "T", "expiresIn": "900"}))
    async with AsyncClient(receiver.url("").rstrip("/"), sdk_credentials(merchant)) as client:
        assert await client.access_token() == "T"
    [request] = await receiver.wait_for(1)
    assert request.path == "/auth/merchants/v1.0/access-token/b2b"
    assert request.headers["x-client-key"] == merchant.client_id
    ts = request.headers["x-timestamp"]
    assert request.headers["x-signature"] == token_signature(merchant.private_key, merchant.client_id, ts)


async def test_missing_private_key_is_a_configuration_error(app):
    merchant = await make_merchant(app)
    credentials = sdk_credentials(merchant)
    keyless = type(credentials)(**{**credentials.__dict__, "private_key_pem": None})
    async with AsyncClient("http://127.0.0.1:9", keyless) as client:
        with pytest.raises(ConfigurationError):
            await client.access_token()


CHARGE_OK = {
    "statusCode": "00",
    "statusMessage": "SUCCESS",
    "data": {"transactionId": "T1", "externalId": "E1", "paymentStatus": "PENDING", "link": "http://pay/T1"},
}


async def test_card_charge_retries_5xx_with_the_same_idempotency_key(app, receiver):
    merchant = await make_merchant(app)
    receiver.answer(
        Answer(status=503, body={"statusCode": "503", "statusMessage": "SERVICE_UNAVAILABLE", "errors": []}),
        Answer(status=500, body="oops", content_type="text/plain"),
        Answer(status=200, body=CHARGE_OK),
    )
    async with AsyncClient(receiver.url("").rstrip("/"), sdk_credentials(merchant), backoff=0.01) as client:
        result = await client.card_charge({"externalId": "E1", "orderId": "O1"})
    assert result.is_success
    assert result.link == "http://pay/T1"
    requests = await receiver.wait_for(3)
    keys = {r.headers["x-idempotency-key"] for r in requests}
    assert len(keys) == 1
    credentials = merchant.credentials
    assert requests[0].headers["authorization"] == basic_auth(
        credentials.merchant_id, credentials.secret, credentials.hash_key
    )


async def test_card_charge_never_retries_4xx_and_maps_failures(app, receiver):
    merchant = await make_merchant(app)
    receiver.answer(
        Answer(
            status=409,
            body={
                "statusCode": "409",
                "statusMessage": "DUPLICATE_ORDER",
                "errors": [{"field": "orderId", "message": "already used"}],
            },
        )
    )
    async with AsyncClient(receiver.url("").rstrip("/"), sdk_credentials(merchant), backoff=0.01) as client:
        result = await client.card_charge({"externalId": "E1", "orderId": "O1"})
    assert not result.is_success
    assert result.status_code == "409"
    assert result.link is None
    assert "orderId" in result.message
    assert len(receiver.requests) == 1


async def test_business_failure_with_http_200_is_not_success(app, receiver):
    merchant = await make_merchant(app)
    receiver.answer(
        Answer(
            status=200,
            body={"statusCode": "05", "statusMessage": "DECLINED", "data": {"link": "http://should-not-be-used"}},
        )
    )
    async with AsyncClient(receiver.url("").rstrip("/"), sdk_credentials(merchant)) as client:
        result = await client.card_charge({})
    assert not result.is_success
    assert result.link is None
    assert result.message == "DECLINED"


async def test_connection_errors_are_retried_then_raised(app):
    merchant = await make_merchant(app)
    async with AsyncClient(
        f"http://127.0.0.1:{free_port()}", sdk_credentials(merchant), backoff=0.01, max_retries=2
    ) as client:
        with pytest.raises(TransportError):
            await client.card_charge({})


async def test_wallet_request_headers(app, receiver):
    merchant = await make_merchant(app)
    receiver.answer(
        Answer(
            status=200,
            body={
                "response_code": "00",
                "response_message": "Success",
                "transaction_id": "W1",
                "transaction_status": "PENDING",
            },
        )
    )
    async with AsyncClient(receiver.url("").rstrip("/"), sdk_credentials(merchant)) as client:
        result = await client.wallet_create_payment({"external_id": "E-9", "order_id": "O-9"})
    assert result.transaction_id == "W1"
    [request] = await receiver.wait_for(1)
    assert request.path == "/ewallet/v2/create-payment"
    assert request.headers["x-version"] == "v3"
    assert request.headers["x-req-signature"] == x_req_signature(merchant.credentials.hash_key, "E-9", "O-9")
    assert uuid.UUID(request.headers["x-idempotency-key"]).version == 4


WALLET_OK = {"response_code": "00", "response_message": "Success", "transaction_id": "W1", "transaction_status": "PAID"}
WALLET_503 = {"response_code": "98", "response_message": "System Error"}


async def test_wallet_refund_is_sent_again_after_a_read_timeout_with_the_same_key(app, receiver):
    # The first try may still be running when the second arrives: the key makes them one refund.
    merchant = await make_merchant(app)
    receiver.answer(Answer(delay=1.0, body=WALLET_OK), Answer(body=WALLET_OK))
    async with AsyncClient(
        receiver.url("").rstrip("/"), sdk_credentials(merchant), timeout=0.3, backoff=0.01
    ) as client:
        refunded = await client.wallet_refund(
            {"transaction_id": "W1", "external_id": "E", "order_id": "O", "refund_amount": 1}
        )
    assert refunded.transaction_status == "PAID"
    requests = await receiver.wait_for(2)
    assert requests[0].headers["x-idempotency-key"] == requests[1].headers["x-idempotency-key"]
    assert requests[0].body == requests[1].body


async def test_wallet_calls_are_retried_on_503_and_inquiry_after_a_timeout(app, receiver):
    merchant = await make_merchant(app)
    receiver.answer(
        Answer(status=503, body=WALLET_503),
        Answer(body=WALLET_OK),
        Answer(delay=1.0, body=WALLET_OK),
        Answer(body=WALLET_OK),
    )
    reference = {"transaction_id": "W1", "external_id": "E", "order_id": "O"}
    async with AsyncClient(
        receiver.url("").rstrip("/"), sdk_credentials(merchant), timeout=0.5, backoff=0.01
    ) as client:
        refunded = await client.wallet_refund({**reference, "refund_amount": 1})
        assert refunded.transaction_status == "PAID"
        inquiry = await client.wallet_inquiry(reference)  # read-only: safe to send again
        assert inquiry.transaction_id == "W1"
    requests = await receiver.wait_for(4)
    assert [r.path for r in requests] == ["/ewallet/v2/refund"] * 2 + ["/ewallet/v2/inquiry"] * 2
    assert requests[0].body == requests[1].body
    assert requests[0].headers["x-idempotency-key"] == requests[1].headers["x-idempotency-key"]
    assert "x-idempotency-key" not in requests[2].headers  # a read carries none


async def test_wallet_calls_are_not_retried_on_4xx(app, receiver):
    merchant = await make_merchant(app)
    receiver.answer(Answer(status=409, body={"response_code": "03", "response_message": "Failed Request"}))
    async with AsyncClient(receiver.url("").rstrip("/"), sdk_credentials(merchant), backoff=0.01) as client:
        with pytest.raises(ConflictError) as caught:
            await client.wallet_void({"transaction_id": "W1", "external_id": "E", "order_id": "O"})
    assert caught.value.code == "03"
    assert len(receiver.requests) == 1


def token_answer(token: str, expires_in: str = "900") -> Answer:
    return Answer(
        body={
            "responseCode": "2007300",
            "responseMessage": "Successful",
            "accessToken": token,
            "tokenType": "Bearer",
            "expiresIn": expires_in,
        }
    )


async def test_token_is_refreshed_before_it_expires(app, receiver):
    merchant = await make_merchant(app)
    # A token with 30 s left is inside the refresh margin: the next call fetches a new one.
    receiver.answer(token_answer("first", expires_in="30"), token_answer("second"), token_answer("third"))
    async with AsyncClient(receiver.url("").rstrip("/"), sdk_credentials(merchant)) as client:
        assert await client.access_token() == "first"
        assert await client.access_token() == "second"
        assert await client.access_token() == "second"  # cached
        assert await client.access_token("disbursement") == "third"  # per product
    paths = [r.path for r in await receiver.wait_for(3)]
    assert paths == [
        "/auth/merchants/v1.0/access-token/b2b",
        "/auth/merchants/v1.0/access-token/b2b",
        "/api/v1.0/access-token/b2b",
    ]


async def test_bnpl_external_id_is_fresh_per_call_and_kept_across_retries(app, receiver):
    merchant = await make_merchant(app)
    calculation = {"responseCode": "2009000", "responseMessage": "Successful", "payments": []}
    receiver.answer(
        Answer(status=503, body={"responseCode": "5039000", "responseMessage": "busy"}),
        Answer(body=calculation),
        Answer(body=calculation),
    )
    body = {"amount": {"value": "10000.00", "currency": "IDR"}, "itemDetails": []}
    async with AsyncClient(
        receiver.url("").rstrip("/"), sdk_credentials(merchant), signing="asymmetric", backoff=0.01
    ) as client:
        await client.bnpl_calculate(body)
        await client.bnpl_calculate(body)
    first, retry, second = await receiver.wait_for(3)
    assert first.headers["x-external-id"] == retry.headers["x-external-id"]
    assert second.headers["x-external-id"] != first.headers["x-external-id"]
    for request in (first, retry, second):
        external_id = request.headers["x-external-id"]
        assert external_id.isdigit()
        assert len(external_id) <= 36
        assert request.headers["x-partner-id"] == merchant.id
        assert "authorization" not in request.headers
        assert request.headers["x-signature"] == snap_asymmetric(
            merchant.private_key,
            "POST",
            "/v1.0/bnpl/payment-calculation",
            request.body.decode(),
            request.headers["x-timestamp"],
        )


async def test_sync_client_retries_with_the_same_idempotency_key(app, receiver):
    merchant = await make_merchant(app)
    receiver.answer(
        Answer(status=502, body="bad gateway", content_type="text/plain"),
        Answer(status=200, body=CHARGE_OK),
    )

    def charge():
        with Client(receiver.url("").rstrip("/"), sdk_credentials(merchant), backoff=0.01) as client:
            return client.card_charge({"externalId": "E1", "orderId": "O1"}, idempotency_key="key-1")

    result = await asyncio.to_thread(charge)
    assert result.is_success
    first, second = await receiver.wait_for(2)
    assert first.headers["x-idempotency-key"] == second.headers["x-idempotency-key"] == "key-1"
    assert first.body == second.body
