"""Basic auth of the wallet and card endpoints (decisions.md §3.4), including its per-process cache."""

from __future__ import annotations

import pytest

from kasir.errors import Unauthorized
from kasir.merchants.basic_auth import authenticate_basic, parse_basic
from tests.support.builders import make_merchant
from tests.support.signing import basic_auth


async def check(app, header: str | None):
    async with app.state.database.unit_of_work(read_only=True) as session:
        return await authenticate_basic(session, header)


async def test_two_and_three_part_forms_are_accepted(app):
    merchant = await make_merchant(app)
    creds = merchant.credentials
    two_part = basic_auth(creds.merchant_id, creds.secret)
    three_part = basic_auth(creds.merchant_id, creds.secret, creds.hash_key)
    for header in (two_part, three_part):
        caller = await check(app, header)
        assert caller.merchant.id == creds.merchant_id
        assert caller.secrets.hash_key == creds.hash_key


async def test_wrong_secret_or_hash_key_is_refused_even_after_a_cached_success(app):
    merchant = await make_merchant(app)
    creds = merchant.credentials
    await check(app, basic_auth(creds.merchant_id, creds.secret))  # now in the process cache
    for header in (
        basic_auth(creds.merchant_id, creds.secret + "x"),
        basic_auth(creds.merchant_id, creds.secret, creds.hash_key + "x"),
        basic_auth(creds.merchant_id, creds.hash_key),
    ):
        with pytest.raises(Unauthorized) as raised:
            await check(app, header)
        assert raised.value.field == "authorization"
        assert creds.secret not in raised.value.message


@pytest.mark.parametrize(
    "header",
    [None, "", "Bearer abc", "Basic", "Basic !!!", basic_auth("only-one-part"), basic_auth("a", "b", "c", "d")],
)
def test_malformed_headers_are_unauthorized(header):
    with pytest.raises(Unauthorized):
        parse_basic(header)


async def test_unknown_merchant_is_unauthorized(app):
    with pytest.raises(Unauthorized):
        await check(app, basic_auth("MCHUNKNOWN", "secret"))
