"""Moved to tests.support.wire.wallet; these names stay only for tests/db, which imports them here.

Delete this file once tests/db imports `from tests.support.wire import wallet` (this branch leaves tests/db alone).
"""

from tests.support.wire.wallet import CREATE, assert_problem, create_body, post_wallet

__all__ = ["CREATE", "assert_problem", "create_body", "post_wallet"]
