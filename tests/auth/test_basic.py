"""Basic auth of the wallet and card endpoints (docs/decisions.md §3.4), including its per-process cache."""

from __future__ import annotations

import pytest

from kasir.auth.basic import basic, known_merchants, parse_basic
from kasir.config import get_settings
from kasir.errors import Unauthorized
from kasir.merchants.service import merchant_id_caches, token_signer_cache
from tests.support.builders import make_merchant
from tests.support.wire import basic_auth


async def check(app, header: str | None):
    return await basic.authenticate(app.state.database, header, address="192.0.2.1")


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


async def test_the_merchant_caches_keep_entries_for_the_credential_cache_setting(app, monkeypatch):
    merchant = await make_merchant(app)
    merchant_id = merchant.credentials.merchant_id
    assert merchant_id_caches  # the other rooms' (BNPL's SNAP check keeps one), as a rotation forgets them
    caches = (known_merchants, token_signer_cache, *merchant_id_caches)
    monkeypatch.setattr(get_settings(), "credential_cache_seconds", 0)
    known_merchants.forget(merchant_id)
    await check(app, basic_auth(merchant_id, merchant.credentials.secret))
    assert known_merchants.get(merchant_id) is None
    for cache in caches:
        cache.put("MCH-CACHE-PROBE", "kept")
        assert cache.get("MCH-CACHE-PROBE") is None
    monkeypatch.setattr(get_settings(), "credential_cache_seconds", 60)
    await check(app, basic_auth(merchant_id, merchant.credentials.secret))
    assert known_merchants.get(merchant_id) is not None
    for cache in caches:
        cache.put("MCH-CACHE-PROBE", "kept")
        assert cache.get("MCH-CACHE-PROBE") == "kept"
        cache.forget("MCH-CACHE-PROBE")
