"""Moved to tests.support.wire.card; these names stay only for tests/db, which imports them here.

Delete this file once tests/db imports from tests.support.wire.card (this branch leaves tests/db alone).
"""

from tests.support.wire.card import charge_body, post_charge

__all__ = ["charge_body", "post_charge"]
