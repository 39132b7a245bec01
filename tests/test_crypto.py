"""kit/crypto: HmacKey is HMAC, whatever the key and message."""

from __future__ import annotations

import hmac

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kasir.kit.crypto import HmacKey


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
