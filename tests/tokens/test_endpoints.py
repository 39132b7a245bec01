"""interface.md endpoints 1 and 2; docs/decisions.md §3.1 and §4 (service code 73)."""

from __future__ import annotations

import asyncio
import json
import re

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from kasir.kit.clock import clock, parse_aware
from kasir.tokens.service import Product, read_access_token
from tests.support.builders import make_merchant, rsa_key
from tests.support.wire.snap import (
    GRANT,
    access_token,
    checkout_body,
    post_signed,
    snap_timestamp,
    token_headers,
    token_signature,
)

PAYMENT_PATH = "/auth/merchants/v1.0/access-token/b2b"
DISBURSEMENT_PATH = "/api/v1.0/access-token/b2b"
GENERIC_PATH = "/v1.0/access-token/b2b"  # docs/decisions.md §12.2: endpoint 1 under SNAP's generic path


@pytest.mark.slow
@pytest.mark.parametrize("path", [PAYMENT_PATH, DISBURSEMENT_PATH])
async def test_token_over_real_http_from_served_process(app, served, path):
    merchant = await make_merchant(app)
    async with httpx.AsyncClient(base_url=served.base_url) as http:
        response = await http.post(path, headers=token_headers(merchant), content=GRANT)

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["responseCode"] == "2007300"
    assert body["responseMessage"] == "Successful"
    assert body["tokenType"] == "Bearer"
    assert body["expiresIn"] == "900"  # a string, per the interface
    assert 0 < len(body["accessToken"]) <= 2048
    assert response.headers["X-CLIENT-KEY"] == merchant.client_id
    server_time = parse_aware(response.headers["X-TIMESTAMP"])
    assert abs((server_time - clock.now()).total_seconds()) < 60
    assert response.headers["X-Request-ID"]


@pytest.mark.slow
async def test_request_log_lines_are_json_without_secrets(app, served):
    merchant = await make_merchant(app)
    headers = token_headers(merchant)
    async with httpx.AsyncClient(base_url=served.base_url) as http:
        response = await http.post(PAYMENT_PATH, headers=headers, content=GRANT)
    token = response.json()["accessToken"]
    request_id = response.headers["X-Request-ID"]

    log = await asyncio.to_thread(served.log_once_it_has, request_id)
    assert token not in log
    assert headers["X-SIGNATURE"] not in log
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    ours = [line for line in lines if line.get("request_id") == request_id]
    assert len(ours) == 1
    assert ours[0]["route"] == PAYMENT_PATH
    assert ours[0]["status"] == 200
    assert isinstance(ours[0]["latency_ms"], float)


async def test_additional_info_is_echoed(app, client):
    merchant = await make_merchant(app)
    body = json.dumps({"grantType": "client_credentials", "additionalInfo": {"note": "halo"}})
    response = await client.post(PAYMENT_PATH, headers=token_headers(merchant), content=body)
    assert response.status_code == 200
    assert response.json()["additionalInfo"] == {"note": "halo"}


@pytest.mark.parametrize("header", ["X-TIMESTAMP", "X-CLIENT-KEY", "X-SIGNATURE"])
async def test_missing_header(app, client, header):
    merchant = await make_merchant(app)
    response = await client.post(PAYMENT_PATH, headers=token_headers(merchant, **{header: None}), content=GRANT)
    assert response.status_code == 400
    assert response.json() == {"responseCode": "4007302", "responseMessage": f"Invalid Mandatory Field {header}"}


async def test_missing_content_type(app, client):
    merchant = await make_merchant(app)
    headers = token_headers(merchant)
    del headers["Content-Type"]
    response = await client.post(PAYMENT_PATH, headers=headers, content=GRANT.encode())
    assert response.json() == {"responseCode": "4007302", "responseMessage": "Invalid Mandatory Field Content-Type"}


async def test_wrong_content_type(app, client):
    merchant = await make_merchant(app)
    headers = token_headers(merchant, Content_Type="text/plain")
    response = await client.post(PAYMENT_PATH, headers=headers, content=GRANT)
    assert response.status_code == 400
    assert response.json()["responseCode"] == "4007300"
    assert "Content-Type" in response.json()["responseMessage"]


@pytest.mark.parametrize("bad", ["2026-11-22", "22/11/2026 10:00:00", "2026-11-22T10:00:00", "yesterday"])
async def test_malformed_timestamp(app, client, bad):
    merchant = await make_merchant(app)
    response = await client.post(PAYMENT_PATH, headers=token_headers(merchant, timestamp=bad), content=GRANT)
    assert response.status_code == 400
    assert response.json() == {"responseCode": "4007301", "responseMessage": "Invalid Field Format X-TIMESTAMP"}


async def test_timestamp_with_fraction_and_z_is_accepted(app, client):
    merchant = await make_merchant(app)
    timestamp = clock.now().isoformat(timespec="milliseconds").replace("+00:00", "Z")
    response = await client.post(PAYMENT_PATH, headers=token_headers(merchant, timestamp=timestamp), content=GRANT)
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("offset", [-301, 301])
async def test_timestamp_outside_allowed_skew(app, client, offset):
    merchant = await make_merchant(app)
    timestamp = snap_timestamp(offset)
    response = await client.post(PAYMENT_PATH, headers=token_headers(merchant, timestamp=timestamp), content=GRANT)
    assert response.status_code == 401
    assert response.json()["responseCode"] == "4017300"
    assert "X-TIMESTAMP" in response.json()["responseMessage"]


async def test_unknown_client(app, client):
    merchant = await make_merchant(app)
    timestamp = snap_timestamp()
    headers = token_headers(merchant, timestamp=timestamp, X_CLIENT_KEY="CLI-NOBODY")
    headers["X-SIGNATURE"] = token_signature(merchant.private_key, "CLI-NOBODY", timestamp)
    response = await client.post(PAYMENT_PATH, headers=headers, content=GRANT)
    assert response.status_code == 401
    assert response.json() == {"responseCode": "4017300", "responseMessage": "Unauthorized. Unknown X-CLIENT-KEY"}


async def test_wrong_signature(app, client):
    merchant = await make_merchant(app)
    timestamp = snap_timestamp()
    # Signed over another string (a different timestamp) with the right key.
    signature = token_signature(merchant.private_key, merchant.client_id, snap_timestamp(-1))
    headers = token_headers(merchant, timestamp=timestamp, X_SIGNATURE=signature)
    response = await client.post(PAYMENT_PATH, headers=headers, content=GRANT)
    assert response.status_code == 401
    assert response.json()["responseCode"] == "4017300"


async def test_signature_made_with_another_key(app, client):
    merchant = await make_merchant(app)
    timestamp = snap_timestamp()
    signature = token_signature(rsa_key(1), merchant.client_id, timestamp)
    response = await client.post(
        PAYMENT_PATH, headers=token_headers(merchant, timestamp=timestamp, X_SIGNATURE=signature), content=GRANT
    )
    assert response.status_code == 401
    assert response.json()["responseCode"] == "4017300"


async def test_concurrent_requests_each_get_their_own_verification(app, client):
    """Concurrent token requests, signed well and forged: each answer is its own."""
    first, second = await make_merchant(app), await make_merchant(app, key_slot=2)
    timestamp = snap_timestamp()
    forged = token_signature(second.private_key, first.client_id, timestamp)  # the other merchant's key
    requests = [
        token_headers(merchant, timestamp=timestamp, **({"X_SIGNATURE": forged} if forge else {}))
        for merchant, forge in [(first, False), (second, False), (first, True), (second, False), (first, False)]
    ]
    responses = await asyncio.gather(*(client.post(PAYMENT_PATH, headers=h, content=GRANT) for h in requests))
    assert [r.status_code for r in responses] == [200, 200, 401, 200, 200]
    issued = [r.json()["accessToken"] for r in responses if r.status_code == 200]
    merchants = [read_access_token(token, Product.PAYMENT).merchant_id for token in issued]
    assert merchants == [first.id, second.id, second.id, first.id]


async def test_signature_not_base64(app, client):
    merchant = await make_merchant(app)
    response = await client.post(
        PAYMENT_PATH, headers=token_headers(merchant, X_SIGNATURE="not base64!"), content=GRANT
    )
    assert response.json() == {"responseCode": "4007301", "responseMessage": "Invalid Field Format X-SIGNATURE"}


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        ('{"grantType":"password"}', "4007301", "Invalid Field Format grantType"),
        ("{}", "4007302", "Invalid Mandatory Field grantType"),
        ('{"grantType":"client_credentials","additionalInfo":"x"}', "4007301", "Invalid Field Format additionalInfo"),
        ("[]", "4007301", "Invalid Field Format body"),
    ],
)
async def test_bad_grant(app, client, body, code, message):
    merchant = await make_merchant(app)
    response = await client.post(PAYMENT_PATH, headers=token_headers(merchant), content=body)
    assert response.status_code == 400
    assert response.json() == {"responseCode": code, "responseMessage": message}


@pytest.mark.parametrize("body", ['{"grantType": ', "", "grantType=client_credentials"])
async def test_malformed_json(app, client, body):
    merchant = await make_merchant(app)
    response = await client.post(PAYMENT_PATH, headers=token_headers(merchant), content=body)
    assert response.status_code == 400
    assert response.json() == {"responseCode": "4007300", "responseMessage": "Bad Request. Body is not valid JSON"}


async def test_rotated_key_stops_old_signatures(app, client):
    from kasir.merchants.service import merchant_service
    from tests.support.builders import public_pem

    merchant = await make_merchant(app)
    async with app.state.database.unit_of_work() as session:
        await merchant_service.rotate_key(session, merchant.id, public_pem(rsa_key(2)))

    old = await client.post(PAYMENT_PATH, headers=token_headers(merchant), content=GRANT)
    assert old.json()["responseCode"] == "4017300"
    merchant.private_key = rsa_key(2)
    new = await client.post(PAYMENT_PATH, headers=token_headers(merchant), content=GRANT)
    assert new.json()["responseCode"] == "2007300"


async def test_unknown_route_answers_json_with_request_id(client):
    response = await client.get("/no/such/route")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"] == "NotFound"
    assert response.headers["X-Request-ID"] == response.json()["request_id"]


async def test_unknown_route_under_a_snap_prefix_answers_snap(client):
    response = await client.post("/auth/merchants/v1.0/access-token/other")
    assert response.status_code == 404
    assert response.json()["responseCode"] == "4047301"


async def test_ec_key_is_refused_at_registration(app):
    from cryptography.hazmat.primitives import serialization

    from kasir.errors import BadRequest
    from kasir.merchants.service import merchant_service

    ec_pem = (
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    with pytest.raises(BadRequest, match="not an RSA key"):
        async with app.state.database.unit_of_work() as session:
            await merchant_service.create(session, name="ec-merchant", public_key=ec_pem)


def _refusals(merchant) -> dict[str, tuple[dict[str, str], bytes, int]]:
    timestamp = snap_timestamp()
    wrong = token_signature(merchant.private_key, merchant.client_id, snap_timestamp(-1))
    return {
        "missing X-SIGNATURE": (token_headers(merchant, X_SIGNATURE=None), GRANT.encode(), 400),
        "wrong Content-Type": (token_headers(merchant, Content_Type="text/plain"), GRANT.encode(), 400),
        "stale X-TIMESTAMP": (token_headers(merchant, timestamp=snap_timestamp(-400)), GRANT.encode(), 401),
        "wrong signature": (token_headers(merchant, timestamp=timestamp, X_SIGNATURE=wrong), GRANT.encode(), 401),
        "bad grant": (token_headers(merchant), b'{"grantType": "password"}', 400),
        "not JSON": (token_headers(merchant), b"{", 400),
    }


@pytest.mark.parametrize("path", [PAYMENT_PATH, DISBURSEMENT_PATH, GENERIC_PATH])
async def test_refusals_carry_x_timestamp_and_x_client_key(app, client, path):
    # Issue 26: a token error answer carries X-TIMESTAMP (server time) and X-CLIENT-KEY (the request's)
    # as a success does.
    merchant = await make_merchant(app)
    for name, (headers, body, status) in _refusals(merchant).items():
        response = await client.post(path, headers=headers, content=body)
        assert response.status_code == status, (name, response.text)
        assert response.json()["responseCode"].startswith(f"{status}73"), name
        assert response.headers["X-CLIENT-KEY"] == merchant.client_id, name
        assert abs((clock.now() - parse_aware(response.headers["X-TIMESTAMP"])).total_seconds()) < 60, name


async def test_refusal_without_a_client_key_carries_x_timestamp_only(app, client):
    merchant = await make_merchant(app)
    response = await client.post(PAYMENT_PATH, headers=token_headers(merchant, X_CLIENT_KEY=None), content=GRANT)
    assert response.json() == {"responseCode": "4007302", "responseMessage": "Invalid Mandatory Field X-CLIENT-KEY"}
    assert "X-CLIENT-KEY" not in response.headers
    parse_aware(response.headers["X-TIMESTAMP"])


async def test_generic_path_issues_a_payment_token_that_opens_bnpl(app, client):
    merchant = await make_merchant(app)
    response = await client.post(GENERIC_PATH, headers=token_headers(merchant), content=GRANT)
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["responseCode"], body["responseMessage"], body["tokenType"], body["expiresIn"]) == (
        "2007300",
        "Successful",
        "Bearer",
        "900",
    )
    assert response.headers["X-CLIENT-KEY"] == merchant.client_id
    assert read_access_token(body["accessToken"], Product.PAYMENT).merchant_id == merchant.id

    token = await access_token(client, merchant, GENERIC_PATH)
    checkout = await post_signed(client, merchant, "/v1.0/bnpl/qr-checkout", checkout_body(), token=token)
    assert checkout.status_code == 200, checkout.text
    assert checkout.json()["responseCode"] == "2009200"


async def test_generic_path_refuses_as_the_payment_path_does(app, client):
    merchant = await make_merchant(app)
    # The same refusal, built afresh for each path (a timestamp and signature of its own).
    for name in _refusals(merchant):
        answers = []
        for path in (PAYMENT_PATH, GENERIC_PATH):
            headers, body, _status = _refusals(merchant)[name]
            response = await client.post(path, headers=headers, content=body)
            # How far a stale X-TIMESTAMP is counts from when each was made: a second may pass between the two.
            said = re.sub(r"is \d+ s away", "is N s away", response.text)
            answers.append((response.status_code, json.loads(said)))
        assert answers[0] == answers[1], name
    unknown = await client.post("/v1.0/access-token/other")
    assert (unknown.status_code, unknown.json()["responseCode"]) == (404, "4047301")
    wrong_method = await client.get(GENERIC_PATH)
    assert (wrong_method.status_code, wrong_method.json()["responseCode"]) == (405, "4057300")
