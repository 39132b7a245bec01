"""The README's settings table lists every setting, and opens with the two commands."""

from __future__ import annotations

from pathlib import Path

from kasir.config import Settings

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_readme_opens_with_the_two_commands():
    opening = README[:400]
    assert "make run" in opening
    assert "make test" in opening


def test_every_setting_is_in_the_readme_table():
    for name in Settings.model_fields:
        assert f"`KASIR_{name.upper()}`" in README, name
