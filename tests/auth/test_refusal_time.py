"""A refused Basic authentication does the same work whether the merchant id exists or not (issue 43 N11).

Measured on 2026-11-27, a refusal took 8.9 ms for a known id and 6.3 ms for an unknown one: ids could be
enumerated by the time of a refusal. The test counts the work (database reads) of each refusal, which the
time follows, rather than timing it on a shared machine.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from fastapi import FastAPI

from kasir.auth.basic import basic, known_merchants
from kasir.errors import Unauthorized
from kasir.merchants.repository import merchant_repository
from tests.support.builders import make_merchant
from tests.support.wire import basic_auth


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    counted: Counter[str] = Counter()
    for name in ("get", "grace"):
        real = getattr(merchant_repository, name)

        async def counting(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            counted[_name] += 1
            return await _real(*args, **kwargs)

        monkeypatch.setattr(merchant_repository, name, counting)
    return counted


async def refusal_reads(app: FastAPI, reads: Counter[str], user: str, secret: str) -> Counter[str]:
    reads.clear()
    with pytest.raises(Unauthorized):
        await basic.authenticate(app.state.database, basic_auth(user, secret), address="203.0.113.9")
    return Counter(reads)


async def test_a_refusal_reads_as_much_for_an_unknown_id_as_for_a_known_one(app: FastAPI, reads: Counter[str]) -> None:
    merchant = await make_merchant(app)
    known_merchants.forget(merchant.id)
    known = await refusal_reads(app, reads, merchant.id, "wrong")
    unknown = await refusal_reads(app, reads, "MCHNOSUCHMERCHANT", "wrong")
    # A merchant this process remembers (its last request proved its credentials): no read is needed to refuse.
    proven = basic_auth(merchant.id, merchant.credentials.secret)
    await basic.authenticate(app.state.database, proven, address="203.0.113.9")
    remembered = await refusal_reads(app, reads, merchant.id, "wrong")
    assert known == unknown == remembered == Counter(get=1, grace=1)
