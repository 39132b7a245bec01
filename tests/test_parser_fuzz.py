"""The signature and credential parsers under random input (hardening, item 8): each either answers or
refuses with the error its route renders (a 4xx), never anything else (a 500), and never accepts a forgery."""

from __future__ import annotations

import base64
from collections.abc import Callable

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kasir.auth.basic import parse_basic
from kasir.config import Settings, configure, get_settings
from kasir.errors import KasirError
from kasir.kit.crypto import b64decode_strict, constant_time_equals, generate_rsa_private_key, public_key_pem
from kasir.snap.headers import check_timestamp, parse_json_body
from kasir.snap.signatures import verify_asymmetric, verify_symmetric
from kasir.tokens.service import Product, read_access_token

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_PUBLIC_PEM = public_key_pem(generate_rsa_private_key().public_key()).decode()
_MESSAGE = "POST:/v1.0/bnpl/qr-checkout:0123abcd:2026-11-24T10:00:00+07:00"
text = st.text(max_size=300)
printable = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=300)


@FUZZ
@given(header=st.one_of(st.none(), text, printable.map(lambda s: "Basic " + s),
                        st.binary(max_size=200).map(lambda b: "Basic " + base64.b64encode(b).decode())))  # fmt: skip
def test_basic_auth_parses_or_refuses(header: str | None) -> None:
    assert status_of(lambda: parse_basic(header)) in (None, 401)


@FUZZ
@given(signature=st.one_of(text, st.binary(max_size=300).map(lambda b: base64.b64encode(b).decode())))
def test_a_random_symmetric_signature_never_verifies(signature: str) -> None:
    assert verify_symmetric("client-secret", _MESSAGE, signature) is False


@FUZZ
@given(signature=st.binary(max_size=300))
def test_a_random_rsa_signature_never_verifies(signature: bytes) -> None:
    assert verify_asymmetric(_PUBLIC_PEM, _MESSAGE, signature) is False


@FUZZ
@given(value=st.one_of(text, printable))
def test_base64_decodes_or_refuses(value: str) -> None:
    try:
        assert isinstance(b64decode_strict(value), bytes)
    except ValueError:
        pass


@FUZZ
@given(value=st.one_of(text, printable))
def test_x_timestamp_parses_or_refuses(value: str) -> None:
    assert status_of(lambda: check_timestamp(value, 300)) in (None, 400, 401)


@FUZZ
@given(body=st.one_of(st.binary(max_size=500), printable.map(str.encode), st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(text, children, max_size=4),
    max_leaves=30).map(lambda v: repr(v).encode())))  # fmt: skip
def test_a_json_body_parses_or_is_a_bad_request(body: bytes) -> None:
    assert status_of(lambda: parse_json_body(body)) in (None, 400)


@FUZZ
@given(value=st.one_of(text, printable, printable.map(lambda s: s + "." + s)))
@example(value=":.\x80")  # found by this test: a TypeError (500) before constant_time_equals compared bytes
def test_a_random_access_token_is_refused(value: str) -> None:
    previous = get_settings()
    configure(Settings(secret_key="fuzz-key"))
    try:
        assert status_of(lambda: read_access_token(value, Product.PAYMENT)) == 401
    finally:
        configure(previous)  # the session's app reads the process's settings: give them back as they were


def test_secrets_with_non_ascii_characters_compare_without_an_error() -> None:
    """Found by the fuzz: hmac.compare_digest raised TypeError on a non-ASCII token (a 500 on BNPL)."""
    assert not constant_time_equals("token-\x80", "token-x")
    assert constant_time_equals("rahasia-é", "rahasia-é")
    assert not constant_time_equals("\ud800", "x")


def status_of(call: Callable[[], object]) -> int | None:
    """None when `call` answered; the HTTP status of the KasirError it raised (any other exception fails)."""
    try:
        call()
    except KasirError as error:
        return error.http_status
    return None
