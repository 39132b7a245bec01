"""The OpenAPI document as a merchant's code generator uses it (issue 26 item 1).

- It validates as OpenAPI 3.1 (openapi-spec-validator), names every operation and every body, declares its
  credentials, its response headers and the three callbacks as webhooks.
- A client generated from it by openapi-python-client (offline, in a temporary directory), imported as a new
  user would, makes a wallet payment, a BNPL checkout and a card charge against `kasir serve` and parses the
  answers into its typed objects.
- /docs and /redoc load nothing from another host: Chromium, with every request off 127.0.0.1 refused, shows
  the operations.
"""

from __future__ import annotations

import asyncio
import base64
import importlib
import json
import re
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate

from kasir.openapi import LINKS, OPERATION_IDS
from tests.conftest import TEST_ADMIN_TOKEN
from tests.sdk.test_links import link_callback
from tests.support.builders import make_merchant, public_pem, rsa_key, unique_name
from tests.support.receiver import CallbackReceiver
from tests.support.server import ServedKasir
from tests.support.wire import links as links_wire
from tests.support.wire import va as va_wire
from tests.support.wire import x_req_signature
from tests.support.wire.card import CHARGE, charge_body, post_charge
from tests.support.wire.dialect import dialect_body, post_dialect
from tests.support.wire.snap import checkout_body, external_id, snap_symmetric, snap_timestamp, token_signature
from tests.support.wire.wallet import create, create_body, dummy_payment

_OPERATION_ID = re.compile(r"^[a-z][A-Za-z0-9]{2,40}$")


@pytest.fixture
async def document(client: httpx.AsyncClient) -> dict[str, Any]:
    response = await client.get("/openapi.json")
    assert response.status_code == 200
    return dict(response.json())


def _operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(method, path, op) for path, item in document["paths"].items() for method, op in item.items()]


async def test_the_document_validates_as_openapi_3_1(document: dict[str, Any]) -> None:
    assert document["openapi"].startswith("3.1")
    validate(document)  # raises on any error


async def test_every_operation_has_its_short_stable_id(document: dict[str, Any]) -> None:
    ids = {(method, path): op.get("operationId") for method, path, op in _operations(document)}
    assert ids == {key: OPERATION_IDS[key] for key in ids}, "a route without its id in kasir.openapi.OPERATION_IDS"
    assert all(_OPERATION_ID.match(operation_id) for operation_id in ids.values())
    assert len(set(ids.values())) == len(ids)


async def test_pages_and_images_are_not_operations_and_metrics_is_text(document: dict[str, Any]) -> None:
    paths = set(document["paths"])
    assert not [path for path in paths if "/pages/" in path or path.endswith(".png") or path.startswith("/console")]
    assert set(document["paths"]["/metrics"]["get"]["responses"]["200"]["content"]) == {"text/plain"}
    assert "HTTPValidationError" not in json.dumps(document)  # Kasir answers 400 in the route's format, never 422


async def test_every_answer_has_a_named_schema_with_examples(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    for method, path, operation in _operations(document):
        body = operation.get("requestBody")
        if body is not None:
            ref = body["content"]["application/json"]["schema"].get("$ref", "")
            assert ref.startswith("#/components/schemas/"), (method, path)
        for status, response in operation["responses"].items():
            content = response.get("content", {})
            assert bool(content) == (status != "204"), (method, path, status)  # No Content has no body
            if "application/json" in content and path != "/healthz":
                ref = content["application/json"]["schema"].get("$ref", "")
                assert ref.startswith("#/components/schemas/"), (method, path, status)
            assert "X-Request-ID" in response["headers"], (method, path, status)
    names = {"CardChargeRequest", "WalletPaymentRequest", "BnplCheckoutRequest", "WalletTransactionResponse",
             "BnplCheckoutResponse", "BnplStatusResponse", "BnplCalculationResponse", "ChargeResponse"}  # fmt: skip
    assert names <= set(schemas)
    for name in ("SnapErrorBody", "WalletErrorBody", "CardErrorBody", "PlainErrorBody", "WalletTransactionResponse"):
        assert schemas[name]["examples"], name
    assert schemas["SnapErrorBody"]["examples"][0]["responseCode"]
    assert schemas["WalletErrorBody"]["examples"][0]["response_code"]
    assert schemas["CardErrorBody"]["examples"][0]["statusMessage"]


async def test_credentials_are_security_schemes_and_signatures_are_header_parameters(document: dict[str, Any]) -> None:
    schemes = document["components"]["securitySchemes"]
    assert schemes["merchantBasic"] == {**schemes["merchantBasic"], "type": "http", "scheme": "basic"}
    assert schemes["snapAccessToken"]["scheme"] == "bearer"
    paths = document["paths"]
    assert paths["/ewallet/v2/create-payment"]["post"]["security"] == [{"merchantBasic": []}]
    assert paths["/card-v2/v1/charge"]["post"]["security"] == [{"merchantBasic": []}]
    assert paths["/v1.0/bnpl/qr-checkout"]["post"]["security"] == [{"snapAccessToken": []}, {}]
    assert paths["/admin/merchants"]["get"]["security"] == [{"adminToken": []}]

    def headers(path: str) -> set[str]:
        return {p["name"] for p in paths[path]["post"]["parameters"] if p["in"] == "header"}

    assert {"X-TIMESTAMP", "X-CLIENT-KEY", "X-SIGNATURE"} <= headers("/auth/merchants/v1.0/access-token/b2b")
    assert {"X-TIMESTAMP", "X-SIGNATURE", "X-PARTNER-ID", "X-EXTERNAL-ID", "CHANNEL-ID"} <= headers(
        "/v1.0/bnpl/qr-checkout"
    )
    assert "x-req-signature" in headers("/ewallet/v2/create-payment")
    parameters = [p["name"] for _, _, op in _operations(document) for p in op.get("parameters", [])]
    assert "Authorization" not in parameters


async def test_response_headers_are_documented(document: dict[str, Any]) -> None:
    paths = document["paths"]
    charge = paths["/card-v2/v1/charge"]["post"]["responses"]
    assert "Idempotent-Replayed" in charge["200"]["headers"]
    assert "Retry-After" in charge["429"]["headers"]
    assert "Retry-After" in charge["503"]["headers"]
    # docs/decisions.md §4: an outage is HTTP 500 in the wallet and SNAP formats, with Retry-After.
    for path in ("/ewallet/v2/create-payment", "/v1.0/bnpl/qr-checkout", "/card-v2/v1/charge-direct"):
        responses = paths[path]["post"]["responses"]
        assert "503" not in responses, path
        assert "Retry-After" in responses["500"]["headers"], path
    token = paths["/auth/merchants/v1.0/access-token/b2b"]["post"]["responses"]
    for status in ("200", "400", "401"):
        assert {"X-TIMESTAMP", "X-CLIENT-KEY"} <= set(token[status]["headers"]), status
    for method, path, operation in _operations(document):
        if path.startswith("/admin/"):
            assert {"401", "429"} <= set(operation["responses"]), (method, path)


async def test_generic_token_path_is_documented_as_endpoint_1(document: dict[str, Any]) -> None:
    # docs/decisions.md §12.2: the same endpoint under SNAP's generic path.
    paths = document["paths"]
    generic = paths["/v1.0/access-token/b2b"]["post"]
    payment = paths["/auth/merchants/v1.0/access-token/b2b"]["post"]
    assert generic["operationId"] == "createAccessTokenGeneric"
    for part in ("parameters", "requestBody", "responses"):
        assert generic[part] == payment[part], part


async def test_the_callbacks_are_webhooks(document: dict[str, Any]) -> None:
    webhooks = document["webhooks"]
    assert set(webhooks) == {
        "walletNotification", "vaNotification", "paymentPageNotification", "bnplNotification", "transferNotification",
    }  # fmt: skip
    wallet = webhooks["walletNotification"]["post"]
    signatures = {(p["name"], p["in"]) for p in wallet["parameters"]}
    assert {("svc-signature", "header"), ("svc-signature", "query")} <= signatures
    va = {(p["name"], p["in"]) for p in webhooks["vaNotification"]["post"]["parameters"]}
    assert {("svc-signature", "header"), ("svc-signature", "query")} <= va
    bnpl = {p["name"] for p in webhooks["bnplNotification"]["post"]["parameters"]}
    assert {"X-TIMESTAMP", "X-PARTNER-ID", "X-SIGNATURE", "svc-signature"} <= bnpl
    transfer = {p["name"] for p in webhooks["transferNotification"]["post"]["parameters"]}
    assert {"X-TIMESTAMP", "X-PARTNER-ID", "X-VERSION", "X-SIGNATURE", "svc-signature"} <= transfer
    page = webhooks["paymentPageNotification"]["post"]
    assert "message" in page["description"]
    schemas = document["components"]["schemas"]
    for hook in webhooks.values():
        ref = hook["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        assert ref.rsplit("/", 1)[1] in schemas
    assert "card_token" in schemas["PaymentPageNotification"]["required"]


async def test_links_lead_from_what_an_answer_creates_to_what_acts_on_it(document: dict[str, Any]) -> None:
    # issue 43 item 6: Schemathesis's stateful phase (tests/test_api_fuzz.py) and code generators follow them.
    # Every expression names a field the source's request or answer has and a parameter or body field the
    # target takes, so a link cannot go quietly dead when a schema is renamed.
    by_id = {op["operationId"]: (path, op) for _, path, op in _operations(document)}
    schemas = document["components"]["schemas"]

    def resolve(schema: dict[str, Any], pointer: list[str]) -> bool:
        if "$ref" in schema:
            return resolve(schemas[schema["$ref"].rsplit("/", 1)[1]], pointer)
        alternatives = schema.get("oneOf", []) + schema.get("anyOf", [])
        if alternatives:
            return any(resolve(alternative, pointer) for alternative in alternatives)
        if not pointer:
            return True
        if schema.get("type") == "array":
            return pointer[0].isdigit() and resolve(schema["items"], pointer[1:])
        return pointer[0] in schema.get("properties", {}) and resolve(schema["properties"][pointer[0]], pointer[1:])

    def body_schema(operation: dict[str, Any]) -> dict[str, Any]:
        return dict(operation["requestBody"]["content"]["application/json"]["schema"])

    def check(expression: str, path: str, operation: dict[str, Any], status: str) -> None:
        if expression.startswith("$response.body#/"):
            answer = operation["responses"][status]["content"]["application/json"]["schema"]
            assert resolve(answer, expression.split("#/")[1].split("/")), (path, expression)
        elif expression.startswith("$request.body#/"):
            assert resolve(body_schema(operation), expression.split("#/")[1].split("/")), (path, expression)
        else:
            assert expression.startswith("$request.path."), expression
            assert "{" + expression.rsplit(".", 1)[1] + "}" in path, (path, expression)

    found = 0
    for _, path, operation in _operations(document):
        for status, response in operation["responses"].items():
            for name, link in response.get("links", {}).items():
                found += 1
                target_path, target = by_id[link["operationId"]]
                for parameter, expression in link.get("parameters", {}).items():
                    assert "{" + parameter + "}" in target_path, (path, name, parameter)
                    check(expression, path, operation, status)
                for field, expression in link.get("requestBody", {}).items():
                    assert resolve(body_schema(target), [field]), (path, name, field)
                    check(expression, path, operation, status)
    assert found == sum(len(links) for links in LINKS.values())  # each of LINKS on an answer the route gives
    paths = document["paths"]
    created = paths["/ewallet/v2/create-payment"]["post"]["responses"]["200"]["links"]
    assert created["Refund"]["operationId"] == "refundWalletPayment"
    assert created["Refund"]["requestBody"]["transaction_id"] == "$response.body#/transaction_id"
    merchant = paths["/admin/merchants"]["post"]["responses"]["201"]["links"]
    assert merchant["Disable"]["parameters"] == {"merchant_id": "$response.body#/merchant_id"}
    checkout = paths["/v1.0/bnpl/qr-checkout"]["post"]["responses"]["200"]["links"]
    assert checkout["Status"]["operationId"] == "getBnplStatus"
    card = paths["/card-v2/v1/charge"]["post"]["responses"]["200"]["links"]
    assert card["Inquiry"]["operationId"] == "getCardOrder"
    callbacks = paths["/admin/callbacks"]["get"]["responses"]["200"]["links"]
    assert callbacks["Replay"]["parameters"] == {"callback_id": "$response.body#/callbacks/0/id"}


async def test_the_admin_creations_document_their_conflict(document: dict[str, Any]) -> None:
    # A merchant's name and a console user's e-mail are unique: their 409 is an answer a client handles (the
    # stateful fuzz, which now creates both, found it undocumented).
    paths = document["paths"]
    for path in ("/admin/merchants", "/admin/users"):
        conflict = paths[path]["post"]["responses"]["409"]
        assert conflict["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/PlainErrorBody"}


async def test_no_schema_has_a_null_default(document: dict[str, Any]) -> None:
    # A `default: null` on an optional field makes generators type it as always there (openapi-typescript's
    # defaults: a required field of the request), issue 42.
    found: list[str] = []

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            if node.get("default", ...) is None:
                found.append(where)
            for key, value in node.items():
                if key not in ("example", "examples"):  # values, not schemas
                    walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, f"{where}/{index}")

    walk(document, "#")
    assert found == [], "\n".join(found)


def documented_answer(document: dict[str, Any], path: str, status: int, body: Any) -> dict[str, Any]:
    """The schema `document` gives the answer of POST `path` with `status`, after checking `body` against it."""
    schema = document["paths"][path]["post"]["responses"][str(status)]["content"]["application/json"]["schema"]
    # The whole document is the root, so the schema's `#/components/...` references resolve in it.
    errors = [error.message for error in Draft202012Validator({**document, **schema}).iter_errors(body)]
    assert not errors, (path, status, errors)
    ref = schema.get("$ref", "")
    return dict(document["components"]["schemas"][ref.rsplit("/", 1)[1]]) if ref else dict(schema)


async def test_the_dummy_payment_answer_is_documented_as_its_six_fields(
    app: FastAPI, client: httpx.AsyncClient, document: dict[str, Any]
) -> None:
    # interface.md endpoint 3: a client generated from the document reads the fields it promises (issue 42).
    merchant = await make_merchant(app)
    response = await dummy_payment(client, merchant, await create(client, merchant))
    assert response.status_code == 200, response.text
    answer = response.json()
    schema = documented_answer(document, "/ewallet/v2/dummy-payment", 200, answer)
    six = {"external_id", "order_id", "transaction_status", "paid_time", "reference_id", "response_code"}
    assert set(answer) == six
    assert set(schema["properties"]) == set(schema["required"]) == six
    assert schema["examples"][0].keys() == six


def _component(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """The component a `$ref` names, or the schema itself (of an optional field, its alternative that is not null)."""
    alternatives = [s for s in schema.get("anyOf", []) if s.get("type") != "null"]
    if len(alternatives) == 1:
        schema = alternatives[0]
    ref = schema.get("$ref", "")
    return dict(document["components"]["schemas"][ref.rsplit("/", 1)[1]]) if ref else schema


def _fields_documented(document: dict[str, Any], schema: dict[str, Any], value: Any, where: str) -> None:
    """Every key of `value` (an answer Kasir sent) is a property of `schema`, required unless documented as
    sometimes absent, down through objects and lists: a generated client reads each one as a typed field."""
    schema = _component(document, schema)
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        assert set(value) <= set(properties), (where, sorted(set(value) - set(properties)))
        assert set(schema.get("required", [])) <= set(value), where
        for key, item in value.items():
            _fields_documented(document, properties[key], item, f"{where}.{key}")
    elif isinstance(value, list):
        for item in value:
            _fields_documented(document, schema["items"], item, f"{where}[]")


async def test_the_va_answers_and_callback_are_typed(
    app: FastAPI, client: httpx.AsyncClient, document: dict[str, Any], receiver: CallbackReceiver
) -> None:
    # Issue 44 item 5: every key of create, inquiry, cancel and the dummy payment answers, and of the VA
    # callback, is a typed property in the document (no bare `data: object`).
    merchant = await make_merchant(app)
    body = va_wire.create_body(receiver.url("/va"), system="PARTIAL", amount=100_000)
    body["item_details"] = [{"item_id": "SKU-1", "name": "Kopi", "amount": 50_000, "qty": 2}]
    body["billing_address"] = {"city": "Bandung"}
    opened = await va_wire.post(client, merchant, va_wire.CREATE, body)
    assert opened.status_code == 200, opened.text
    va = opened.json()["data"]
    assert va["item_details"][0]["description"] == ""  # every field of an item, documented below
    answers = {
        va_wire.DUMMY: await va_wire.pay(client, merchant, va, 40_000),
        va_wire.INQUIRY: await va_wire.post(client, merchant, va_wire.INQUIRY, va_wire.ref(va)),
        va_wire.CANCEL: await va_wire.cancel(client, merchant, va),
    }
    created = await va_wire.post(client, merchant, va_wire.CREATE, va_wire.create_body(receiver.url("/va2")))
    answers[va_wire.CREATE] = created
    for path, response in answers.items():
        assert response.status_code == 200, (path, response.text)
        schema = documented_answer(document, path, 200, response.json())
        assert schema["properties"]["data"] == {
            "$ref": "#/components/schemas/" + ("VaDummyPaymentData" if path == va_wire.DUMMY else "VaData")
        }
        _fields_documented(document, schema, response.json(), path)
    assert answers[va_wire.INQUIRY].json()["data"]["payment_history"]  # the history's entries were checked too
    refused = await va_wire.post(client, merchant, va_wire.INQUIRY, {**va_wire.ref(va), "order_id": "OTHER"})
    assert refused.status_code == 404
    documented_answer(document, va_wire.INQUIRY, 404, refused.json())

    for path in answers:  # a generated client can send the optional sub-merchant-id
        [header] = [p for p in document["paths"][path]["post"]["parameters"] if p["name"] == "sub-merchant-id"]
        assert (header["in"], header["required"]) == ("header", False)

    hook = document["webhooks"]["vaNotification"]["post"]
    schema = hook["requestBody"]["content"]["application/json"]["schema"]
    paid, cancelled = await receiver.wait_for(2, path="/va")
    for request in (paid, cancelled):
        errors = [error.message for error in Draft202012Validator({**document, **schema}).iter_errors(request.json())]
        assert not errors, errors
        _fields_documented(document, schema, request.json(), "vaNotification")


async def test_the_payment_link_answers_are_typed(
    app: FastAPI, client: httpx.AsyncClient, document: dict[str, Any]
) -> None:
    # Issue 45 item 5: every key of the create and read answers is a typed property (no bare `data: object`),
    # and the create answer leads to the read.
    merchant = await make_merchant(app)
    body = links_wire.create_body(
        channels=[{"channel": "CARD"}, {"channel": "DANA"}, {"channel": "VA", "acq": "BCA"}],
        item_details=[{"item_id": "SKU-1", "name": "Kopi", "amount": 25_000, "qty": 2, "description": "Arabica"}],
        billing_address={"city": "Bandung"},
        success_redirect_url="https://shop.example/thanks",
        additional_data="table 7",
    )
    created = await links_wire.post(client, merchant, body)
    assert created.status_code == 200, created.text
    schema = documented_answer(document, links_wire.CREATE, 200, created.json())
    _fields_documented(document, schema, created.json(), links_wire.CREATE)
    link = created.json()["data"]
    read = await links_wire.read(client, merchant, link["transaction_id"])
    assert read.status_code == 200, read.text
    path = links_wire.CREATE + "/{transaction_id}"
    answer = document["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    errors = [error.message for error in Draft202012Validator({**document, **answer}).iter_errors(read.json())]
    assert not errors, errors
    _fields_documented(document, answer, read.json(), path)
    assert read.json()["data"]["item_details"][0]["description"] == "Arabica"  # checked above, nested
    get = document["paths"][links_wire.CREATE]["post"]["responses"]["200"]["links"]["Get"]
    assert (get["operationId"], get["parameters"]) == (
        "getPaymentLink",
        {"transaction_id": "$response.body#/data/transaction_id"},
    )


async def test_the_payment_page_webhook_covers_a_payment_links_callback(document: dict[str, Any]) -> None:
    # Issue 45 item 5 (docs/decisions.md §10.5): a link paid by VA says VIRTUAL_ACCOUNT / VA / its bank, and adds
    # token, fee, the number mis_version and, with a sub-merchant, sub_merchant_id; a card order's callback has
    # none of these four, so they are documented and optional.
    hook = document["webhooks"]["paymentPageNotification"]["post"]
    assert "payment link" in hook["description"]
    [signature] = [p for p in hook["parameters"] if p["name"] == "svc-signature"]
    assert "sub_merchant_id" in signature["description"]
    schema = hook["requestBody"]["content"]["application/json"]["schema"]
    notification = _component(document, schema)
    assert {"token", "fee", "mis_version", "sub_merchant_id"} <= set(notification["properties"])
    assert not {"token", "fee", "mis_version", "sub_merchant_id"} & set(notification["required"])
    assert notification["properties"]["mis_version"]["type"] == "integer"
    for method, channel, acq in (("VIRTUAL_ACCOUNT", "VA", "BCA-MCP"), ("WALLET", "QRIS", "QRIS"), ("", "", "")):
        status = "EXPIRED" if not method else "SUCCESS"
        item = {"item_id": "SKU-1", "name": "Kopi", "amount": 150_000, "qty": 1, "description": ""}
        payload = link_callback(status, method, channel, acq, sub_merchant_id="SUB-7", item_details=[item])
        errors = [error.message for error in Draft202012Validator({**document, **schema}).iter_errors(payload)]
        assert not errors, errors
        _fields_documented(document, schema, payload, "paymentPageNotification")
    wrong = link_callback("SUCCESS", "BANK_TRANSFER", "VA", "BCA")
    assert list(Draft202012Validator({**document, **schema}).iter_errors(wrong))


async def test_the_payout_answers_are_typed(app: FastAPI, client: httpx.AsyncClient, document: dict[str, Any]) -> None:
    """Issue 46 item 6: a client generated from the document reads every field of the six routes' answers (a
    refusal's too), and the transfer notification's payload is a named schema with every §11.8 field."""
    from kasir.audit.service import Actor
    from kasir.payouts.service import payout_service
    from tests.support.wire import payouts as wire

    merchant = await make_merchant(app)
    async with app.state.database.unit_of_work() as session:
        await payout_service.top_up(session, merchant.id, 1_000_000, "Saldo awal", Actor.cli())
    token = await wire.disbursement_token(client, merchant)
    body = wire.transfer_body()
    answers = {
        wire.BALANCE: await wire.post_payout(client, merchant, wire.BALANCE, {}, token),
        wire.ACCOUNT_INQUIRY: await wire.post_payout(
            client,
            merchant,
            wire.ACCOUNT_INQUIRY,
            {"beneficiaryBankCode": "014", "beneficiaryAccountNo": "1234567890"},
            token,
        ),  # fmt: skip
        wire.TRANSFER: await wire.post_payout(client, merchant, wire.TRANSFER, body, token),
    }
    partner = body["partnerReferenceNo"]
    status = wire.status_body(partner_reference_no=partner)
    answers[wire.TRANSFER_STATUS] = await wire.post_payout(client, merchant, wire.TRANSFER_STATUS, status, token)
    answers[wire.HISTORY_LIST] = await wire.post_payout(client, merchant, wire.HISTORY_LIST, {}, token)
    answers[wire.HISTORY_DETAIL] = await wire.post_payout(client, merchant, wire.HISTORY_DETAIL,
                                                          {"originalPartnerReferenceNo": partner}, token)  # fmt: skip
    for path, response in answers.items():
        assert response.status_code == 200, (path, response.text)
        _fields_documented(document, documented_answer(document, path, 200, response.json()), response.json(), path)
    assert answers[wire.HISTORY_LIST].json()["detailData"]  # the entries were checked too
    refused = await wire.post_payout(client, merchant, wire.TRANSFER, {**body, "partnerReferenceNo": partner}, token)
    assert refused.status_code == 409
    documented_answer(document, wire.TRANSFER, 409, refused.json())
    hook = document["webhooks"]["transferNotification"]["post"]
    payload = _component(document, hook["requestBody"]["content"]["application/json"]["schema"])
    assert set(payload["required"]) == {
        "originalPartnerReferenceNo", "originalReferenceNo", "originalExternalId", "serviceCode",
        "latestTransactionStatus", "transactionStatusDesc", "amount", "beneficiaryAccountNo",
        "beneficiaryAccountName", "beneficiaryBankCode", "sourceAccountNo", "transactionDate", "finishedTime",
        "additionalInfo",
    }  # fmt: skip


async def test_the_card_charge_documents_the_sdk_dialect_too(
    app: FastAPI, client: httpx.AsyncClient, document: dict[str, Any]
) -> None:
    # docs/decisions.md §12.3: one path, two APIs, the body decides; a client generated from the document
    # can make either charge and read either answer (issue 42).
    operation = document["paths"][CHARGE]["post"]
    body = operation["requestBody"]["content"]["application/json"]["schema"]
    schemas = document["components"]["schemas"]
    alternatives = schemas[body["$ref"].rsplit("/", 1)[1]]["oneOf"]
    assert alternatives == [
        {"$ref": "#/components/schemas/CardChargeRequest"},
        {"$ref": "#/components/schemas/DialectChargeRequest"},
    ]
    for request in (charge_body(), dialect_body()):
        errors = list(Draft202012Validator({**document, **body}).iter_errors(request))
        assert not errors, [error.message for error in errors]  # oneOf: exactly one alternative
    headers = {p["name"]: p for p in operation["parameters"] if p["in"] == "header"}
    assert {"x-req-signature", "x-version", "sub-merchant-id", "response-type"} <= set(headers)
    assert not any(headers[name]["required"] for name in ("x-req-signature", "x-version"))  # camelCase needs none

    examples = operation["responses"]["200"]["content"]["application/json"]["examples"]
    assert set(examples) == {"camelCase", "sdk"}  # a documentation page shows both answers
    for example in examples.values():
        documented_answer(document, CHARGE, 200, example["value"])

    merchant = await make_merchant(app)
    camel = await post_charge(client, merchant, charge_body())
    assert camel.status_code == 200, camel.text
    documented_answer(document, CHARGE, 200, camel.json())
    for response_type in ("html", "url"):
        sdk = await post_dialect(client, merchant, CHARGE, dialect_body(), response_type=response_type)
        assert sdk.status_code == 200, sdk.text
        answer = documented_answer(document, CHARGE, 200, sdk.json())
        assert answer["oneOf"][1] == {"$ref": "#/components/schemas/DialectChargeResponse"}
    refused = await post_dialect(client, merchant, CHARGE, {**dialect_body(), "payment_method": "CASH"})
    assert (refused.status_code, refused.json()["response_code"]) == (400, "01")
    documented_answer(document, CHARGE, 400, refused.json())
    unknown = await post_dialect(client, merchant, CHARGE, dialect_body(), sub_merchant_id="NOT-OURS")
    assert (unknown.status_code, unknown.json()["response_code"]) == (403, "04")
    documented_answer(document, CHARGE, 403, unknown.json())
    invalid = await post_charge(client, merchant, {**charge_body(), "paymentMethod": "cash"})
    assert invalid.status_code == 400, invalid.text
    documented_answer(document, CHARGE, 400, invalid.json())


async def test_docs_pages_load_their_assets_from_kasir(client: httpx.AsyncClient) -> None:
    for page in ("/docs", "/redoc"):
        html = (await client.get(page)).text
        assert "/docs/assets/" in html
        assert not re.findall(r"""(?:src|href)=["']?(?:https?:)?//""", html), html  # no other host
    script = await client.get("/docs/assets/swagger-ui-bundle.js")
    assert script.status_code == 200
    assert len(script.content) > 100_000
    assert (await client.get("/docs/assets/redoc.standalone.js")).status_code == 200


# --- a generated client against a running server ----------------------------------------------------------


def _generate_client(document: dict[str, Any], directory: Path) -> Any:
    spec = directory / "openapi.json"
    spec.write_text(json.dumps(document))
    config = directory / "config.yaml"
    config.write_text("post_hooks: []\n")  # no formatter run: nothing outside the venv
    generator = Path(sys.executable).parent / "openapi-python-client"
    run = subprocess.run(
        [str(generator), "generate", "--path", str(spec), "--meta", "none", "--config", str(config)],
        cwd=directory, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Warning" not in run.stdout + run.stderr, run.stdout + run.stderr
    assert (directory / "kasir_api_client").is_dir()  # not the SDK's name (kasir_client)
    sys.path.insert(0, str(directory))
    try:
        return importlib.import_module("kasir_api_client")
    finally:
        sys.path.remove(str(directory))


def _import(package: Any, name: str) -> Any:
    return importlib.import_module(f"{package.__name__}.{name}")


def _merchant_journey(base_url: str, package: Any) -> dict[str, Any]:
    with ExitStack() as clients:
        return _journey(base_url, package, clients)


def _journey(base_url: str, package: Any, clients: ExitStack) -> dict[str, Any]:
    """What a new user writes with the generated client: everything typed, every answer parsed."""
    client_module = _import(package, "client")
    models = _import(package, "models")
    admin_api = _import(package, "api.admin.create_merchant")
    token_api = _import(package, "api.access_token.create_access_token")
    wallet_api = _import(package, "api.wallet.create_wallet_payment")
    inquiry_api = _import(package, "api.wallet.get_wallet_transaction")
    bnpl_api = _import(package, "api.bnpl.create_bnpl_checkout")
    status_api = _import(package, "api.bnpl.get_bnpl_status")
    card_api = _import(package, "api.card.charge_card")
    seen: dict[str, Any] = {}

    admin = clients.enter_context(client_module.AuthenticatedClient(base_url=base_url, token=TEST_ADMIN_TOKEN))
    key = rsa_key(0)
    new = models.MerchantCreate(name=unique_name("gen"), public_key=public_pem(key))
    created = admin_api.sync(client=admin, body=new)
    assert isinstance(created, models.MerchantCreated), created
    basic = base64.b64encode(f"{created.merchant_id}:{created.secret}".encode()).decode()
    merchant = clients.enter_context(client_module.AuthenticatedClient(base_url=base_url, token=basic, prefix="Basic"))

    # Wallet: create-payment, then its inquiry.
    body = models.WalletPaymentRequest.from_dict(create_body())
    signature = x_req_signature(created.hash_key, body.external_id, body.order_id)
    version = models.CreateWalletPaymentXVersion.V3
    payment = wallet_api.sync_detailed(client=merchant, body=body, x_req_signature=signature, x_version=version)
    assert payment.status_code == 200, payment.content
    assert isinstance(payment.parsed, models.WalletTransactionResponse)
    assert payment.parsed.transaction_status == "PENDING"
    assert isinstance(payment.parsed.payment_details, models.WalletAnswerPaymentDetails)
    seen["wallet"] = payment.parsed
    inquiry = models.WalletInquiryRequest(
        transaction_id=payment.parsed.transaction_id, external_id=body.external_id, order_id=body.order_id
    )
    answer = inquiry_api.sync(
        client=merchant, body=inquiry, x_req_signature=signature, x_version=models.GetWalletTransactionXVersion.V3
    )
    assert isinstance(answer, models.WalletTransactionResponse), answer
    assert answer.transaction_id == payment.parsed.transaction_id

    # BNPL: an access token, then the QR checkout and its status, signed with it (the symmetric variant).
    timestamp = snap_timestamp()
    token = token_api.sync(
        client=clients.enter_context(client_module.Client(base_url=base_url)),
        body=models.AccessTokenRequest(grant_type=models.AccessTokenRequestGranttype.CLIENT_CREDENTIALS),
        x_timestamp=timestamp,
        x_client_key=created.client_id,
        x_signature=token_signature(key, created.client_id, timestamp),
    )
    assert isinstance(token, models.AccessTokenResponse), token
    snap = clients.enter_context(client_module.AuthenticatedClient(base_url=base_url, token=token.access_token))

    def signed(path: str, request: Any) -> dict[str, str]:
        stamp = snap_timestamp()
        text = json.dumps(request.to_dict())
        return {
            "x_timestamp": stamp,
            "x_signature": snap_symmetric(created.client_secret, "POST", path, token.access_token, text, stamp),
            "x_partner_id": created.merchant_id,
            "x_external_id": external_id(),
            "channel_id": "95221",
        }

    checkout = models.BnplCheckoutRequest.from_dict(checkout_body())
    content_type = models.CreateBnplCheckoutContentType.APPLICATIONJSON
    made = bnpl_api.sync(
        client=snap, body=checkout, content_type=content_type, **signed("/v1.0/bnpl/qr-checkout", checkout)
    )
    assert isinstance(made, models.BnplCheckoutResponse), made
    assert made.latest_transaction_status == models.BnplCheckoutResponseLatesttransactionstatus.VALUE_1  # "01"
    assert isinstance(made.payment_details.amount, models.BnplAmount)
    seen["bnpl"] = made
    # The inquiry names the transaction by originalReferenceNo or by originalPartnerReferenceNo: two typed forms.
    status_request = models.BnplStatusRequestType0.from_dict({"originalReferenceNo": made.reference_no})
    status = status_api.sync_detailed(
        client=snap,
        body=status_request,
        content_type=models.GetBnplStatusContentType.APPLICATIONJSON,
        **signed("/v1.0/bnpl/status", status_request),
    )
    assert status.status_code == 200, status.content
    seen["bnpl_status"] = status

    # Card: a charge.
    charge = card_api.sync(client=merchant, body=models.CardChargeRequest.from_dict(charge_body()))
    assert isinstance(charge, models.ChargeResponse), charge
    assert isinstance(charge.data, models.ChargeData)
    seen["card"] = charge
    return seen


@pytest.mark.slow
async def test_a_generated_client_pays_with_every_product(
    served: ServedKasir, tmp_path: Path, document: dict[str, Any]
) -> None:
    package = await asyncio.to_thread(_generate_client, document, tmp_path)
    try:
        seen = await asyncio.to_thread(_merchant_journey, served.base_url, package)
    finally:
        for name in [name for name in sys.modules if name.split(".")[0] == "kasir_api_client"]:
            del sys.modules[name]
    assert seen["wallet"].payment_url.startswith(served.base_url)
    assert seen["bnpl"].qr_content.startswith(served.base_url)
    assert seen["card"].status_code == "00"


# --- the interactive docs in a real browser, cut off from every other host -----------------------------------


@pytest.mark.browser
@pytest.mark.slow
async def test_docs_render_the_operations_with_no_other_host(
    served: ServedKasir, chromium: Any, artifacts: Path
) -> None:
    context = await chromium.new_context()
    elsewhere: list[str] = []

    async def only_loopback(route: Any) -> None:
        url = route.request.url
        if url.startswith(served.base_url + "/") or url.startswith("data:"):
            await route.continue_()
        else:
            elsewhere.append(url)
            await route.abort()

    await context.route("**/*", only_loopback)
    try:
        page = await context.new_page()
        await page.goto(f"{served.base_url}/docs")
        await page.wait_for_selector("#operations-card-chargeCard", timeout=30_000)
        assert await page.locator(".opblock").count() >= len(OPERATION_IDS) - 5
        await page.screenshot(path=str(artifacts / "openapi-docs.png"))
        await page.goto(f"{served.base_url}/redoc")
        await page.wait_for_selector('[data-section-id$="operation/chargeCard"]', timeout=30_000, state="attached")
        await page.screenshot(path=str(artifacts / "openapi-redoc.png"))
    finally:
        await context.close()
    assert elsewhere == []
