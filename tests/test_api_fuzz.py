"""Schemathesis against a real `kasir serve` (hardening, issue 24 item 8): every operation of the OpenAPI
document, positive and negative data, every check, each request signed as a merchant signs it
(tests/support/fuzz_hooks.py). Never a 500.

Run as Schemathesis's own CLI, configured by tests/schemathesis.toml. The server has a database of its
own (fuzzed admin calls create, rotate and disable things) and no callback worker (fuzzed callback URLs
point anywhere: nothing is sent off 127.0.0.1).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import secrets
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from kasir.config import Settings
from kasir.db import Database, upgrade_schema
from tests.conftest import TEST_ADMIN_TOKEN, TEST_SECRET_KEY
from tests.support.builders import public_pem, rsa_key
from tests.support.fuzz_signer import SIGNED_HEADERS, FuzzMerchant
from tests.support.postgres import PostgresCluster
from tests.support.process import end_with_parent
from tests.support.server import ServedKasir
from tests.support.wire import compact
from tests.support.wire.snap import token_headers

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "tests" / "schemathesis.toml"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
async def fuzz_server(
    settings_env: dict[str, str], data_dir: Path, postgres: PostgresCluster | None
) -> AsyncIterator[tuple[ServedKasir, FuzzMerchant]]:
    url = postgres.create_database("kasir_fuzz") if postgres else f"sqlite+aiosqlite:///{data_dir / 'kasir-fuzz.db'}"
    database = Database(Settings(database_url=url, data_dir=data_dir, secret_key=TEST_SECRET_KEY))
    try:
        await upgrade_schema(database)
    finally:
        await database.dispose()
    server = ServedKasir(
        {
            **settings_env,
            "KASIR_DATABASE_URL": url,
            "KASIR_EMBEDDED_WORKER": "false",
            # Thousands of requests from one address, many of them with credentials the fuzz breaks on
            # purpose: the rate limits (tested in tests/ratelimit) would answer most of them 429 before
            # the parsers under test saw them.
            "KASIR_RATE_LIMIT_TOKEN_REQUESTS_PER_IP": "0",
            "KASIR_RATE_LIMIT_TOKENS_PER_CLIENT": "0",
            "KASIR_RATE_LIMIT_FAILURES_PER_IP": "0",
            "KASIR_RATE_LIMIT_FAILURES_PER_MERCHANT": "0",
        }
    )
    await asyncio.to_thread(server.start)
    try:
        yield server, await asyncio.to_thread(_make_merchant, server.base_url)
    finally:
        await asyncio.to_thread(server.stop)


def _make_merchant(base_url: str) -> FuzzMerchant:
    """A merchant made through the admin API, and its access tokens (BNPL is signed with the payment product's,
    the payout routes with the disbursement product's)."""
    key = rsa_key(0)
    with httpx.Client(base_url=base_url, timeout=30) as http:
        created = http.post(
            "/admin/merchants",
            json={"name": "fuzz", "public_key": public_pem(key)},
            headers={"Authorization": f"Bearer {TEST_ADMIN_TOKEN}"},
        )
        assert created.status_code == 201, created.text
        fields = created.json()
        merchant = FuzzMerchant(
            fields["merchant_id"], fields["client_id"], fields["client_secret"], fields["secret"],
            fields["hash_key"], key,
        )  # fmt: skip
        token = http.post(
            "/auth/merchants/v1.0/access-token/b2b",
            content=compact({"grantType": "client_credentials"}),
            headers=token_headers(merchant),
        )
        assert token.status_code == 200, token.text
        merchant.access_token = token.json()["accessToken"]
        disbursement = http.post(
            "/api/v1.0/access-token/b2b",
            content=compact({"grantType": "client_credentials"}),
            headers=token_headers(merchant),
        )
        assert disbursement.status_code == 200, disbursement.text
        merchant.disbursement_token = disbursement.json()["accessToken"]
        decoy = http.post(
            "/admin/merchants",
            json={"name": "fuzz-decoy", "public_key": public_pem(key)},
            headers={"Authorization": f"Bearer {TEST_ADMIN_TOKEN}"},
        )
        assert decoy.status_code == 201, decoy.text
        merchant.decoy_id = decoy.json()["merchant_id"]
    return merchant


# The merchant-facing products, fuzzed statefully on their own: Schemathesis starts its chains from the
# operations it judges likely to succeed, and takes every id-named body field (external_id, order_id) for a
# reference to something no operation creates, so beside the admin routes a payment's creation is never a start.
PRODUCTS = r"^/(ewallet/v2|card-v2|v1\.[01]/bnpl)/"
# `make fuzz`: the long run (all phases, new seeds each round) for this many seconds, results written to
# KASIR_FUZZ_RESULTS (a path without its extension: .md and .json are added).
FUZZ_SECONDS = float(os.environ.get("KASIR_FUZZ_SECONDS") or 0)
# Operations only a link gives real ids to (a generated id finds nothing): a 2xx there in the stateful phase is
# a link followed.
PRODUCT_LINK_TARGETS = {"/ewallet/v2/inquiry", "/ewallet/v2/refund", "/ewallet/v2/void", "/ewallet/v2/dummy-payment",
                        "/card-v2/inquiry", "/v1.0/bnpl/status", "/v1.1/bnpl/status"}  # fmt: skip
ADMIN_LINK_TARGETS = {"/admin/merchants/{merchant_id}/rotate-key", "/admin/merchants/{merchant_id}/rotate",
                      "/admin/merchants/{merchant_id}/disable", "/admin/merchants/{merchant_id}/callback-url",
                      "/admin/users/{user_id}/disable", "/admin/users/{user_id}/reset-password",
                      "/admin/merchants/{merchant_id}/sub-merchants/{sub_merchant_id}"}  # fmt: skip
FIVE_XX = tuple(f" 5{n:02}" for n in range(100))


@dataclass
class FuzzRun:
    """One `schemathesis run`: its exit status, its report, the answers it got per "METHOD path status"."""

    returncode: int
    report: str
    answers: Counter[str]
    phases: Counter[str]  # "stateful POST /ewallet/v2/refund 200": count
    refused: list[dict[str, Any]]  # the signed routes' 401s as sent (fuzz_hooks.py)

    @property
    def scenarios(self) -> int:
        return sum(int(found) for found in re.findall(r"Scenarios:\s+(\d+)", self.report))


async def run_schemathesis(
    server: ServedKasir, merchant: FuzzMerchant, data_dir: Path, *options: str, timeout: float = 600
) -> FuzzRun:
    statuses_path = data_dir / f"fuzz-statuses-{server.port}-{next(_runs)}.json"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "SCHEMATHESIS_HOOKS": "tests.support.fuzz_hooks",
        "KASIR_FUZZ_MERCHANT": merchant.to_json(),
        "KASIR_FUZZ_ADMIN_TOKEN": TEST_ADMIN_TOKEN,
        "KASIR_FUZZ_DECOY": merchant.decoy_id,
        "KASIR_FUZZ_STATUSES": str(statuses_path),
    }
    command = [
        str(Path(sys.executable).parent / "schemathesis"), "--config-file", str(CONFIG), "run",
        f"{server.base_url}/openapi.json", "--no-color", *options,
    ]  # fmt: skip
    run = await asyncio.to_thread(
        subprocess.run, command, env=env, cwd=data_dir, capture_output=True, text=True, timeout=timeout,
        preexec_fn=end_with_parent,
    )  # fmt: skip
    # "POST /card-v2/v1/charge 400": count, and the same per phase (fuzz_hooks.py)
    answers = Counter(json.loads(statuses_path.read_text()))
    phases = Counter(json.loads(Path(f"{statuses_path}.phases").read_text()))
    refused = json.loads(Path(f"{statuses_path}.refused").read_text())
    return FuzzRun(run.returncode, run.stdout + run.stderr, answers, phases, refused)


_runs = itertools.count()


def signed_refusals(answers: Counter[str]) -> list[str]:
    """The signed routes' 401s: a request the signer got wrong never reached the parsers under test."""
    return [key for key in answers if key.endswith(" 401") and key.split(" ")[1].startswith(tuple(SIGNED_HEADERS))]


@pytest.mark.skipif(bool(FUZZ_SECONDS), reason="`make fuzz` runs the long run alone")
async def test_schemathesis_finds_nothing(fuzz_server: tuple[ServedKasir, FuzzMerchant], data_dir: Path) -> None:
    server, merchant = fuzz_server
    every = await run_schemathesis(server, merchant, data_dir)
    assert every.returncode == 0, every.report
    products = await run_schemathesis(server, merchant, data_dir, "--phases", "stateful", "--include-path-regex",
                                      PRODUCTS, "--max-time", "25")  # fmt: skip
    assert products.returncode == 0, products.report
    print(every.report[-1500:], products.report[-1500:])  # the summaries, shown with -s
    answers = every.answers + products.answers
    document = httpx.get(f"{server.base_url}/openapi.json", timeout=30).json()
    operations = {f"{method.upper()} {path}" for path, item in document["paths"].items() for method in item}
    answered = {key.rsplit(" ", 1)[0] for key in answers}
    per_operation: Counter[str] = Counter()
    for key, count in answers.items():
        per_operation[key.rsplit(" ", 1)[0]] += count
    print("requests per operation:", per_operation.most_common())  # shown with -s
    assert operations <= answered, f"never called: {sorted(operations - answered)}"
    assert not [key for key in answers if key.endswith(FIVE_XX)], answers
    # Every request was signed right: none of the signed routes said 401 (the fuzz got past authentication),
    # the stateful phase's requests too.
    assert not signed_refusals(answers), every.refused + products.refused
    # The stateful phase followed the links (kasir.openapi.LINKS): an operation they lead to answered 2xx with
    # the ids a creation gave, among the products' (a payment's inquiry, a checkout's status, ...) and the
    # admin routes' (a merchant created, then rotated or disabled, ...).
    assert every.scenarios > 0, every.report
    assert products.scenarios > 0, products.report
    followed = {key.split(" ", 2)[2].rsplit(" ", 1)[0] for key in every.phases + products.phases
                if key.startswith("stateful ") and key.endswith((" 200", " 201", " 204"))}  # fmt: skip
    assert followed & PRODUCT_LINK_TARGETS, sorted(followed)
    assert followed & ADMIN_LINK_TARGETS, sorted(followed)


@pytest.mark.skipif(not FUZZ_SECONDS, reason="the long run: `make fuzz` (KASIR_FUZZ_SECONDS)")
async def test_schemathesis_for_a_while(fuzz_server: tuple[ServedKasir, FuzzMerchant], data_dir: Path) -> None:
    """Rounds of every phase on every operation, then the products' stateful chains, each round with seeds
    of its own (Schemathesis adds its cycle's number to the seed within a run), until FUZZ_SECONDS are spent."""
    server, merchant = fuzz_server
    started = time.monotonic()
    deadline = started + FUZZ_SECONDS
    seed = int(os.environ.get("KASIR_FUZZ_SEED") or secrets.randbelow(10**6))
    runs: list[dict[str, Any]] = []
    answers: Counter[str] = Counter()
    phases: Counter[str] = Counter()
    reports: list[str] = []
    refused: list[dict[str, Any]] = []
    while (left := deadline - time.monotonic()) >= 10:
        # Three quarters of a round on everything, a quarter on the products' chains.
        parts = [("all phases, every operation", ()), ("stateful, products", ("--phases", "stateful",
                  "--include-path-regex", PRODUCTS))]  # fmt: skip
        for share, (what, options) in zip((0.75, 0.25), parts, strict=True):
            budget = max(5, int(min(left, 240) * share))
            run_seed = seed + 1000 * len(runs)
            began = time.monotonic()
            run = await run_schemathesis(
                server, merchant, data_dir, "--seed", str(run_seed), "--max-time", str(budget), *options,
                timeout=budget + 600,
            )  # fmt: skip
            answers += run.answers
            phases += run.phases
            reports.append(run.report)
            refused += run.refused
            failures = re.findall(r"^_{3,} (.+?) _{3,}$", run.report, re.MULTILINE)
            took = round(time.monotonic() - began, 1)
            runs.append({"what": what, "seed": run_seed, "max_time": budget, "seconds": took,
                         "requests": sum(run.answers.values()), "scenarios": run.scenarios, "exit": run.returncode,
                         "failures": failures})  # fmt: skip
    results = fuzz_results(answers, phases, runs, time.monotonic() - started)
    results["signed_refusals"] = refused
    target = os.environ.get("KASIR_FUZZ_RESULTS")
    if target:
        write_results(Path(target) if Path(target).is_absolute() else ROOT / target, results, reports)
    assert results["five_xx"] == 0, {key: n for key, n in answers.items() if key.endswith(FIVE_XX)}


def fuzz_results(
    answers: Counter[str], phases: Counter[str], runs: list[dict[str, Any]], seconds: float
) -> dict[str, Any]:
    per_operation: dict[str, Counter[str]] = {}
    for key, count in answers.items():
        operation, status = key.rsplit(" ", 1)
        per_operation.setdefault(operation, Counter())[f"{status[0]}xx"] += count
    stateful: Counter[str] = Counter()
    for key, count in phases.items():
        if key.startswith("stateful "):
            stateful[key.split(" ", 1)[1]] += count
    return {
        "database": os.environ.get("KASIR_TEST_DB", "sqlite"),
        "seconds": round(seconds),
        "requests": sum(answers.values()),
        "five_xx": sum(count for key, count in answers.items() if key.endswith(FIVE_XX)),
        "five_xx_answers": {key: count for key, count in answers.items() if key.endswith(FIVE_XX)},
        "stateful_scenarios": sum(run["scenarios"] for run in runs),
        "stateful_requests": sum(stateful.values()),
        "runs": runs,
        "per_operation": {
            operation: dict(sorted(counts.items())) for operation, counts in sorted(per_operation.items())
        },
        "answers": dict(sorted(answers.items())),
        "stateful_answers": dict(sorted(stateful.items())),
    }


def write_results(target: Path, results: dict[str, Any], reports: list[str]) -> None:
    target.with_suffix(".json").write_text(json.dumps(results, indent=1) + "\n")
    lines = [
        f"# Schemathesis, all phases, signed, on {results['database']} (`make fuzz`)",
        "",
        f"tests/test_api_fuzz.py::test_schemathesis_for_a_while against `kasir serve`, every request signed "
        f"(tests/support/fuzz_hooks.py), {results['seconds']} s: {len(results['runs'])} Schemathesis runs "
        "(every phase on every operation, then the merchant products' stateful chains), each with a seed of its own.",
        "",
        f"- requests sent: {results['requests']}",
        f"- answers 5xx: **{results['five_xx']}**" + (f" ({results['five_xx_answers']})" if results["five_xx"] else ""),
        f"- stateful scenarios: {results['stateful_scenarios']} ({results['stateful_requests']} requests)",
        f"- signed routes answering 401 (a request the signer got wrong, in the .json): "
        f"{len(results['signed_refusals'])}",
        "",
        "| run | seed | max time (s) | took (s) | requests | scenarios | exit | failures (not 5xx) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in results["runs"]:
        lines.append(f"| {run['what']} | {run['seed']} | {run['max_time']} | {run['seconds']} | {run['requests']} | "
                     f"{run['scenarios']} | {run['exit']} | {'; '.join(run['failures']) or '-'} |")  # fmt: skip
    lines += [
        "",
        "## Answers by status class, per operation",
        "",
        "| operation | 2xx | 3xx | 4xx | 5xx |",
        "|---|---|---|---|---|",
    ]
    for operation, counts in results["per_operation"].items():
        lines.append(f"| `{operation}` | " + " | ".join(str(counts.get(f"{n}xx", 0)) for n in "2345") + " |")
    lines += ["", "## Stateful answers (status per operation)", ""]
    lines += [f"- `{key}`: {count}" for key, count in results["stateful_answers"].items()]
    # Each run's FAILURES section (up to its warnings or its summary), as Schemathesis printed it.
    failures = re.compile(r"^=+ FAILURES =+$(.*?)^=+ (?:WARNINGS|SUMMARY) =+$", re.MULTILINE | re.DOTALL)
    sections = [found.group(1) for report in reports if (found := failures.search(report))]
    if sections:
        lines += ["", "## Failures Schemathesis reported (each run's, cut at 5,000 characters)", ""]
        for section in sections:
            lines += ["```", section.strip()[:5000], "```", ""]
    target.with_suffix(".md").write_text("\n".join(lines) + "\n")
