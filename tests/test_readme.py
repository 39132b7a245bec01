"""The README opens with the two commands; the operator guide's settings table lists every setting."""

from __future__ import annotations

import re
from pathlib import Path

from kasir.config import Settings

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
SETTINGS_PAGE = ROOT / "docs" / "operator" / "settings.md"


def test_readme_opens_with_the_two_commands():
    opening = README[:400]
    assert "make run" in opening
    assert "make test" in opening


def test_readme_is_short_and_links_the_settings():
    assert len(README.splitlines()) <= 160
    assert "docs/operator/settings.md" in README


def _table_variables() -> set[str]:
    """Every `KASIR_...` named in the first column of the settings table (a row may name several)."""
    names: set[str] = set()
    for line in SETTINGS_PAGE.read_text().splitlines():
        cells = line.split("|")
        if line.startswith("|") and len(cells) > 2:
            names.update(re.findall(r"`(KASIR_[A-Z0-9_]+)`", cells[1]))
    return names


def test_every_setting_is_in_the_settings_table():
    table = _table_variables()
    for name in Settings.model_fields:
        assert f"KASIR_{name.upper()}" in table, name


def test_the_settings_table_names_no_setting_that_does_not_exist():
    fields = {f"KASIR_{name.upper()}" for name in Settings.model_fields}
    assert _table_variables() <= fields, sorted(_table_variables() - fields)
