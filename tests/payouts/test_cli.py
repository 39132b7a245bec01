"""`kasir merchant top-up` and the demo merchant's funds (docs/decisions.md §11.3), as an operator runs them."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import run_kasir


def test_the_operator_tops_a_merchant_up_from_the_command_line_and_the_demo_merchant_is_funded_once(
    tmp_path: Path,
) -> None:
    env = {"KASIR_ENV": "staging", "KASIR_DATA_DIR": str(tmp_path)}  # a database of its own: it writes
    assert run_kasir("db", "upgrade", env=env).exit_code == 0
    for _ in range(2):  # run twice: funded once
        assert run_kasir("demo-merchant", env=env).exit_code == 0
    merchant_id = json.loads((tmp_path / "demo" / "credentials.json").read_text())["merchant_id"]
    done = run_kasir("merchant", "top-up", merchant_id, "250000", "--note", "Setoran Senin", env=env)
    assert done.exit_code == 0, done.output
    assert "available 100,250,000" in done.stdout
    assert "ledger 100,250,000" in done.stdout
    for args, words in (
        (("0", "--note", "x"), "AMOUNT"),
        (("1000", "--note", " "), "--note"),
        (("1000",), "--note"),
    ):
        refused = run_kasir("merchant", "top-up", merchant_id, *args, env=env)
        assert refused.exit_code == 2, refused.output
        assert words in refused.output
    unknown = run_kasir("merchant", "top-up", "MCHNOSUCH", "1000", "--note", "x", env=env)
    assert unknown.exit_code != 0
    assert "MCHNOSUCH" in unknown.output
