"""kit/crypto: HmacKey is HMAC, whatever the key and message; SecretBox seals with one key and opens with several."""

from __future__ import annotations

import hmac

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kasir.kit.crypto import HmacKey, SecretBox


@pytest.mark.parametrize("hash_name", ["sha256", "sha512"])
@given(key=st.binary(max_size=300), messages=st.lists(st.binary(max_size=2000), min_size=1, max_size=4))
def test_hmac_key_agrees_with_the_standard_library(hash_name: str, key: bytes, messages: list[bytes]) -> None:
    # Keys shorter than, as long as and longer than the block (64 and 128 bytes); one key, many messages.
    keyed = HmacKey(key, hash_name)
    for message in messages:
        assert keyed.digest(message) == hmac.digest(key, message, hash_name)


@pytest.mark.parametrize("hash_name", ["sha256", "sha512"])
@pytest.mark.parametrize("length", [0, 1, 63, 64, 65, 127, 128, 129, 1000])
def test_hmac_key_at_the_block_size_edges(hash_name: str, length: int) -> None:
    key = bytes(range(256)) * 4
    keyed = HmacKey(key[:length], hash_name)
    assert keyed.digest(b"charge body") == hmac.digest(key[:length], b"charge body", hash_name)


def test_a_secret_box_opens_what_a_previous_key_sealed_and_reseals_it_with_the_current_one() -> None:
    old, new = SecretBox("key-a"), SecretBox("key-b", ["key-a"])
    sealed = old.seal("client secret")
    assert new.open(sealed) == "client secret"
    assert not new.is_current(sealed)
    resealed = new.reseal(sealed)
    assert resealed is not None
    assert resealed != sealed
    assert SecretBox("key-b").open(resealed) == "client secret"  # no previous key needed any more
    assert new.is_current(resealed)
    assert new.reseal(resealed) is None  # idempotent: nothing to write
    with pytest.raises(ValueError, match="cannot be decrypted"):
        old.open(resealed)
    with pytest.raises(ValueError, match="KASIR_SECRET_KEY_PREVIOUS"):
        SecretBox("key-c", ["key-d"]).reseal(sealed)  # no key opens it: said, never re-sealed
