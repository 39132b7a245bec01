"""The merchant guides say what the wire sends: a payment-page callback's `paid_date` and `card_token` are `""`
until set (docs/merchant/field-rules.md), never `null`, and no guide says otherwise."""

from __future__ import annotations

import re

from tests.docs.markdown import ROOT

EMPTY_UNTIL_SET = ("paid_date", "card_token")


def test_no_guide_says_an_empty_string_field_is_null() -> None:
    wrong = []
    for path in sorted((ROOT / "docs" / "merchant").glob("*.md")):
        text = path.read_text()
        for field in EMPTY_UNTIL_SET:
            # The field's name and, within the same sentence, `null`.
            for match in re.finditer(rf"`{field}`[^.]*?`null`", text):
                wrong.append(f"{path.relative_to(ROOT)}: {match.group(0)!r}")
    assert not wrong, wrong
