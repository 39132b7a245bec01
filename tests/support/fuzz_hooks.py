"""Schemathesis hooks for tests/test_api_fuzz.py, loaded by `schemathesis run` (SCHEMATHESIS_HOOKS).

- `before_load_schema` removes the credential headers and the operations' `security` from the document: they
  are the signer's (SIGNED_HEADERS). A fuzzed signature or timestamp is refused before anything else is read, so the
  fuzz would never pass authentication; the refusals themselves are fuzzed in tests/test_parser_fuzz.py.
- `before_load_schema` also gives the merchant-facing bodies one valid example each (the test helpers' bodies),
  as the document has none yet (issue 26): Schemathesis sends it and builds cases around it, so the fuzz
  reaches past validation into the services. Their references carry SEED_MARK, which the signer makes unique.
- The admin creations (a merchant, a console user) get one too: a generated public key is never a key.
- `flatmap_case` starts half of the stateful phase's positive creations (a payment, a checkout, a charge, a
  merchant) from those examples: a generated creation body is almost never accepted (its rules across fields),
  so without them the chains of kasir.openapi.LINKS (pay, refund, void, ask) would never start.
- `before_call` signs every request Schemathesis sends, the checks' own follow-up requests too.
- `after_call` counts the answers per operation and status into KASIR_FUZZ_STATUSES (JSON), so the
  test can tell that the signed requests got past authentication; the same per phase into `<that>.phases`,
  and the signed routes' 401s as sent into `<that>.refused`.
"""

from __future__ import annotations

import atexit
import copy
import json
import os
from collections import Counter
from typing import Any

import schemathesis
from hypothesis import strategies as st
from schemathesis.generation.meta import TestPhase
from schemathesis.generation.modes import GenerationMode

from tests.support.builders import public_pem
from tests.support.fuzz_signer import SEED_MARK, SIGNED_HEADERS, FuzzMerchant, KasirSigner
from tests.support.wire import links as links_wire
from tests.support.wire import va as va_wire
from tests.support.wire.card import charge_body
from tests.support.wire.dialect import dialect_body
from tests.support.wire.snap import calculation_body, checkout_body
from tests.support.wire.wallet import create_body

_signer = KasirSigner(
    FuzzMerchant.from_json(os.environ["KASIR_FUZZ_MERCHANT"]),
    os.environ["KASIR_FUZZ_ADMIN_TOKEN"],
    decoy_id=os.environ["KASIR_FUZZ_DECOY"],
)
_statuses: Counter[str] = Counter()
_refused: list[dict[str, Any]] = []  # the signed routes' 401s (the test fails on any), as sent
_phases: Counter[str] = Counter()  # the same answers, per phase: "stateful POST /ewallet/v2/refund 200"


@schemathesis.hook
def before_load_schema(context: schemathesis.HookContext, raw_schema: dict[str, Any]) -> None:
    for path, operations in raw_schema["paths"].items():
        owned = next((names for prefix, names in SIGNED_HEADERS.items() if path.startswith(prefix)), ())
        lowered = {name.lower() for name in owned}
        for operation in operations.values():
            if isinstance(operation, dict):
                # The credentials of the security schemes are the signer's too: it adds them to every request,
                # so the fuzzer's own "request without credentials" cases would always be signed.
                operation.pop("security", None)
            if isinstance(operation, dict) and "parameters" in operation:
                operation["parameters"] = [
                    p for p in operation["parameters"] if not (p["in"] == "header" and p["name"].lower() in lowered)
                ]


def _seed_examples() -> dict[str, dict[str, Any]]:
    mark = SEED_MARK.decode()
    card = charge_body(externalId=f"{mark}-E", orderId=f"{mark}-O")
    wallet_body = create_body(external_id=f"{mark}-E", order_id=f"{mark}-O")
    qr = create_body(channel="QRIS", external_id=f"{mark}-E", order_id=f"{mark}-O")
    checkout = checkout_body(partner_reference_no=f"{mark}-P")
    seeds = {"/card-v2/v1/charge": card, "/ewallet/v2/create-payment": wallet_body, "/ewallet/v2/create-qr": qr}
    dialect = dialect_body(external_id=f"{mark}-E", order_id=f"{mark}-O")
    seeds["/card-v2/v1/charge-direct"] = seeds["/card-v2/v2/charge-direct"] = dialect
    seeds["/va"] = {**va_wire.create_body("http://127.0.0.1:9/cb"), "external_id": f"{mark}-E", "order_id": f"{mark}-O"}
    link = links_wire.create_body(channels=[{"channel": "CARD"}, {"channel": "DANA"}, {"channel": "VA", "acq": "BCA"}])
    seeds["/payment-page/payment"] = {**link, "external_id": f"{mark}-E", "order_id": f"{mark}-O"}
    for version in ("v1.0", "v1.1"):
        seeds[f"/{version}/bnpl/payment-calculation"] = calculation_body()
        seeds[f"/{version}/bnpl/qr-checkout"] = checkout
    # A merchant and an operator: where the admin chains (rotate, disable, reset a password) start.
    seeds["/admin/merchants"] = {"name": f"fuzz {mark}", "public_key": public_pem(_signer.merchant.private_key)}
    seeds["/admin/users"] = {"email": f"{mark.lower()}@fuzz.example", "role": "operator"}
    return seeds


_SEEDS = _seed_examples()


@schemathesis.hook("before_load_schema")
def add_seed_examples(context: schemathesis.HookContext, raw_schema: dict[str, Any]) -> None:
    for path, example in _SEEDS.items():
        raw_schema["paths"][path]["post"]["requestBody"]["content"]["application/json"]["example"] = example


@schemathesis.hook
def flatmap_case(context: schemathesis.HookContext, case: schemathesis.Case) -> st.SearchStrategy[schemathesis.Case]:
    meta = case.meta
    seed = _SEEDS.get(case.path) if case.method.upper() == "POST" else None
    # Positive cases only: a negative one (a header left out, a body of random bytes) with the example's body
    # and the signer's headers would be a valid request, which the checks would then see accepted.
    positive = meta is not None and all(c.mode == GenerationMode.POSITIVE for c in meta.components.values())
    if seed is None or meta is None or meta.phase.name != TestPhase.STATEFUL or not positive:
        return st.just(case)
    seeded = case.derive()
    seeded.body = copy.deepcopy(seed)
    # Still a positive case, its body the valid example: revalidated against its headers as generated (before
    # the signer adds its own), its metadata could call it negative, and the checks would then expect a refusal.
    seeded.freeze_metadata()
    return st.sampled_from([case, seeded])


@schemathesis.hook
def before_call(context: schemathesis.HookContext, case: schemathesis.Case, kwargs: dict[str, Any]) -> None:
    kwargs["auth"] = _signer


@schemathesis.hook
def after_call(context: schemathesis.HookContext, case: schemathesis.Case, response: schemathesis.Response) -> None:
    status = str(response.status_code)
    if status == "401" and not _utf8(response.request.body):
        # A body that is not UTF-8 (the fuzzing phase's raw bytes) has no text a SNAP signature can be made
        # over as the server reads it: its 401 is not a signer's failure.
        status = "401-body-not-utf8"
    _statuses[f"{case.method.upper()} {case.path} {status}"] += 1
    if status == "401" and case.path.startswith(tuple(SIGNED_HEADERS)) and len(_refused) < 20:
        # What the signer got wrong, to read: the request as sent and the server's answer.
        body = response.request.body
        shown = body.decode("utf-8", "backslashreplace") if isinstance(body, bytes) else str(body)
        _refused.append({"request": f"{case.method.upper()} {response.request.path_url}", "body": shown[:2000],
                         "headers": {k: v for k, v in response.request.headers.items() if k != "Authorization"},
                         "answer": response.text[:500]})  # fmt: skip
    meta = case.meta
    _phases[f"{meta.phase.name if meta else 'check'} {case.method.upper()} {case.path} {status}"] += 1


def _utf8(body: object) -> bool:
    if isinstance(body, str):
        body = body.encode("utf-8", "surrogatepass")
    if not isinstance(body, bytes):
        return True
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@atexit.register
def _write_statuses() -> None:
    path = os.environ.get("KASIR_FUZZ_STATUSES")
    if path:
        with open(path, "w") as out:
            json.dump(dict(_statuses), out, indent=1, sort_keys=True)
        with open(f"{path}.phases", "w") as out:
            json.dump(dict(_phases), out, indent=1, sort_keys=True)
        with open(f"{path}.refused", "w") as out:
            json.dump(_refused, out, indent=1)
