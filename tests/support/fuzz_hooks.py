"""Schemathesis hooks for tests/test_api_fuzz.py, loaded by `schemathesis run` (SCHEMATHESIS_HOOKS).

- `before_load_schema` removes the credential headers from the document: they are the signer's
  (SIGNED_HEADERS). A fuzzed signature or timestamp is refused before anything else is read, so the
  fuzz would never pass authentication; the refusals themselves are fuzzed in tests/test_parser_fuzz.py.
- `before_call` signs every request Schemathesis sends, the checks' own follow-up requests too.
- `after_call` counts the answers per operation and status into KASIR_FUZZ_STATUSES (JSON), so the
  test can tell that the signed requests got past authentication.
"""

from __future__ import annotations

import atexit
import json
import os
from collections import Counter
from typing import Any

import schemathesis

from tests.support.fuzz_signer import SIGNED_HEADERS, FuzzMerchant, KasirSigner

_signer = KasirSigner(
    FuzzMerchant.from_json(os.environ["KASIR_FUZZ_MERCHANT"]),
    os.environ["KASIR_FUZZ_ADMIN_TOKEN"],
    decoy_id=os.environ["KASIR_FUZZ_DECOY"],
)
_statuses: Counter[str] = Counter()


@schemathesis.hook
def before_load_schema(context: schemathesis.HookContext, raw_schema: dict[str, Any]) -> None:
    for path, operations in raw_schema["paths"].items():
        owned = next((names for prefix, names in SIGNED_HEADERS.items() if path.startswith(prefix)), ())
        lowered = {name.lower() for name in owned}
        for operation in operations.values():
            if isinstance(operation, dict) and "parameters" in operation:
                operation["parameters"] = [
                    p for p in operation["parameters"] if not (p["in"] == "header" and p["name"].lower() in lowered)
                ]


@schemathesis.hook
def before_call(context: schemathesis.HookContext, case: schemathesis.Case, kwargs: dict[str, Any]) -> None:
    kwargs["auth"] = _signer


@schemathesis.hook
def after_call(context: schemathesis.HookContext, case: schemathesis.Case, response: schemathesis.Response) -> None:
    _statuses[f"{case.method.upper()} {case.path} {response.status_code}"] += 1


@atexit.register
def _write_statuses() -> None:
    path = os.environ.get("KASIR_FUZZ_STATUSES")
    if path:
        with open(path, "w") as out:
            json.dump(dict(_statuses), out, indent=1, sort_keys=True)
