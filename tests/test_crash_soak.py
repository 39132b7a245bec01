"""The crash soak, short (scripts/soak.py; `make soak` runs the full one): keyed card charges and their
callbacks while the API server, the embedded-worker server and a `kasir worker` process are SIGKILLed and
restarted at least 10 times, on the suite's database. Nothing lost, nothing charged twice, every request
answered. One separate worker here (the full soak runs two) keeps the restarts, which cost most of the
time on a loaded machine, fewer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import TEST_DB
from tests.support.postgres import PostgresCluster
from tests.support.process import end_with_parent

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
KILLS = 10
PAYMENTS = 100
TRANSFERS = 40  # issue 46: keyed transfers through the reference connector's payout rail, under the same kills


def test_crash_soak_loses_no_callback_and_charges_no_key_twice(
    tmp_path: Path, postgres: PostgresCluster | None
) -> None:
    out = tmp_path / "soak.json"
    env = {
        **os.environ,
        "SOAK_DB": TEST_DB,
        "SOAK_KILLS": str(KILLS),
        "SOAK_PAYMENTS": str(PAYMENTS),
        "SOAK_WORKERS": "1",
        "SOAK_CLIENTS": "8",
        "SOAK_RATE": "10",
        "SOAK_KILL_PAUSE": "0.3",
        "SOAK_REFUSE_EVERY": "25",
        "SOAK_TRANSFERS": str(TRANSFERS),
        "SOAK_PAYOUT_CLIENTS": "2",
        "SOAK_CLIENT_DEADLINE": "90",
        "SOAK_DRAIN_TIMEOUT": "120",
        "SOAK_OUT": str(out),
    }
    if postgres is not None:  # a database of its own on the suite's cluster
        env["SOAK_DATABASE_URL"] = postgres.create_database(f"soak_{os.getpid()}")
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "soak.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,  # a hung soak fails here instead of holding the suite
        preexec_fn=end_with_parent,
    )
    print(run.stdout)
    assert out.exists(), run.stdout[-3000:] + run.stderr[-3000:]
    result = json.loads(out.read_text())

    assert result["kills"]["total"] >= KILLS
    assert set(result["kills"]["by_process"]) == {"api server", "embedded-worker server", "worker 1"}
    assert result["kills"]["servers_killed_with_charges_in_flight"] >= 1  # kills in the middle of keyed charges
    payments, callbacks = result["payments"], result["callbacks"]
    assert payments["keys"] >= PAYMENTS
    assert payments["unanswered"] == 0
    assert payments["wrong_answers"] == 0, payments["wrong_answer_examples"]
    assert payments["answers_not_matching_the_order"] == 0
    assert payments["keys_retried"] > 0  # the clients did meet the kills
    assert result["double_charges"] == 0
    assert result["orders"] == payments["keys"]
    assert callbacks["recorded"] == payments["keys"]  # one callback per payment
    assert callbacks["lost"] == 0, callbacks["lost_examples"]
    assert callbacks["given_up"] >= callbacks["given_up_expected"] > 0  # the refused URL ends given up
    assert callbacks["delivered"] + callbacks["given_up"] == callbacks["recorded"]
    payouts = result["payouts"]
    assert payouts["transfers"]["keys"] >= TRANSFERS
    assert payouts["transfers"]["accepted"] == payouts["transfers"]["keys"], payouts["transfers"]["refused_examples"]
    assert payouts["transfers_lost"] == 0, payouts["transfers_lost_examples"]
    assert payouts["transfers_sent_twice"] == 0
    assert payouts["balance_mismatches"] == 0, payouts["balance_mismatch_examples"]
    assert payouts["state_mismatches"] == 0, payouts["state_mismatch_examples"]
    assert payouts["notifications"]["lost"] == 0, payouts["notifications"]["lost_examples"]
    assert result["drained"]
    assert result["passed"]
    assert run.returncode == 0, run.stderr[-3000:]
    # lost, double charges, unanswered; transfers lost, sent twice, balance mismatches, notifications lost
    assert (tmp_path / "soak.md").read_text().count("**0**") == 7
