"""X-Idempotency-Key for every merchant POST that creates or moves money (docs/decisions.md §7, for all of them).

    endpoint: authenticate (kasir.auth), `once: Keyed` (the key, checked), parse, check what needs the
        network (DNS), then  return await once.run(merchant_id, handler)

One unit of work holds it all:

1. the key is claimed with one INSERT ... ON CONFLICT DO NOTHING, the unit's first statement;
2. the handler runs in that unit;
3. its answer is stored with the key, and the unit commits: the answer and what it reports are
   durable together.

A refusal (a 4xx the handler raises) is kept with the key too, without what the handler wrote:
the unit rolls back whole, and a second unit claims the key again and stores the refusal. A
savepoint around the handler would keep the first unit, but it costs every request two more
statements (on PostgreSQL two round trips) for what only a refusal needs. Should a retry of the
same request have taken the key in between, its answer is the key's and this request replays it.

A 5xx, a crash or a lost connection rolls the whole unit back, the key with it: the client's
retry with the same key runs afresh at once (no takeover timer).

A request that must ask a processor (a card charge, a refund, a void) cannot hold its unit of
work open meanwhile (kasir.db). Its handler answers a `Deferred` instead of a response: the
unit commits the key *without* an answer, with what the request is about to ask, and the
deferred finishes after it (kasir.processors.calls): asks, then records the answer and the
key's answer in a second unit. Until then the key answers 409 REQUEST_IN_PROGRESS; a 5xx there
(the processor did not answer) frees the key, as above. A key found taken answers:

    same body, answered            the stored answer, byte for byte, with `Idempotent-Replayed: true`
                                   ("same" by meaning, docs/decisions.md §12.5: `request_fingerprint`)
    another body                   422 IDEMPOTENCY_KEY_REUSED
    first request still running    409 REQUEST_IN_PROGRESS with Retry-After (on PostgreSQL, after
                                   waiting KASIR_IDEMPOTENCY_WAIT_SECONDS for the key's row; on
                                   SQLite a process's writers take turns, so the first has finished)

each in the route's own wire format (kasir.errors). Keys are scoped by merchant and route, and
expire after 24 hours (`kasir.idempotency.jobs.purge_expired_keys`, run by the worker).

    KasirError
    ├── Conflict
    │   └── RequestInProgress (errors.py)   409 REQUEST_IN_PROGRESS, Retry-After
    └── UnprocessableEntity
        └── IdempotencyKeyReused            422 IDEMPOTENCY_KEY_REUSED
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from functools import lru_cache
from typing import Annotated, Any, Protocol, runtime_checkable

from fastapi import Depends, Request
from fastapi.responses import Response

from kasir.config import get_settings
from kasir.db import Database, LockTimeout, Session, lock_wait_at_most
from kasir.errors import InvalidFieldFormat, KasirError, RequestInProgress, UnprocessableEntity, render
from kasir.idempotency.repository import NewKey, StoredKey, idempotency_repository
from kasir.kit.clock import clock
from kasir.kit.crypto import HmacKey, constant_time_equals, derive_key
from kasir.kit.logs import forget_request_field

KEY_HEADER = "X-Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
KEY_MAX = 255  # docs/decisions.md §7
TTL = timedelta(hours=24)  # docs/decisions.md §7
RETRY_AFTER_SECONDS = 1
# The key of the raw-body fingerprint, which keys stored before docs/decisions.md §12.5 hold. Named for
# the card charge, whose keys came first: the keys moved from its table keep their fingerprints.
_FINGERPRINT_PURPOSE = "kasir/card-idempotency"
# The key of the fingerprint by meaning (§12.5): a key of its own, so that no fingerprint of one kind can
# pass for one of the other.
_MEANING_PURPOSE = "kasir/idempotency-meaning"
# Headers of an answer that are not the answer's own: made afresh for every response.
_NOT_STORED = frozenset({b"content-length", b"x-request-id", b"date", b"server"})


@dataclass(frozen=True, slots=True)
class KeyRef:
    """A claimed X-Idempotency-Key, by name."""

    merchant_id: str
    scope: str
    key: str


@runtime_checkable
class Deferred(Protocol):
    """A handler's answer that a processor must give first (kasir.processors.calls.PendingCall)."""

    async def hold(self, session: Session, key: KeyRef | None) -> None:
        """In the handler's unit of work: record what is about to be asked, and for which key."""
        ...

    async def finish(self, request: Request, database: Database) -> Response:
        """After that unit committed: ask, record the answer, answer the key; the response."""
        ...


Handler = Callable[[Session], Awaitable[Response | Deferred]]


class IdempotencyKeyReused(UnprocessableEntity):
    card_status = "IDEMPOTENCY_KEY_REUSED"

    def __init__(self) -> None:
        super().__init__(f"{KEY_HEADER} was already used with a different request body", field=KEY_HEADER)


def request_in_progress() -> RequestInProgress:
    return RequestInProgress(field=KEY_HEADER, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


def idempotency_key(request: Request) -> str | None:
    """The request's X-Idempotency-Key, checked (400 in the route's format), or None."""
    key = request.headers.get(KEY_HEADER)
    if key is None:
        return None
    if not 1 <= len(key) <= KEY_MAX or not key.isprintable():
        raise InvalidFieldFormat(KEY_HEADER, f"must be 1 to {KEY_MAX} printable characters")
    return key


@dataclass(frozen=True, slots=True)
class Once:
    """A keyed route's X-Idempotency-Key, and the request whose one unit of work `run` runs (`run_once`)."""

    request: Request
    key: str | None

    async def run(self, merchant_id: str, handler: Handler, *, scope: str | None = None) -> Response:
        """`run_once` with the request's raw body, scoped by `scope` (default: the route's own path)."""
        request = self.request
        # scope['path'] is the route's static path: request.url would parse it all
        scope = scope or f"POST {request.scope['path']}"
        body = await request.body()
        database = request.app.state.database
        return await run_once(request, database, self.key, merchant_id=merchant_id, scope=scope, body=body,
                              handler=handler)  # fmt: skip


async def keyed(request: Request) -> Once:
    """Dependency: the request's checked X-Idempotency-Key (400 in the route's format), ready to `run`."""
    return Once(request, idempotency_key(request))


# A money-moving route's declaration that it is keyed (the route guard reads it: tests/auth/test_routes.py).
Keyed = Annotated[Once, Depends(keyed)]


@lru_cache(maxsize=16)
def _fingerprint_key(secret_key: str, purpose: str) -> HmacKey:
    return HmacKey(derive_key(secret_key, purpose))


class _NotJson(ValueError):
    pass


def _no_constant(name: str) -> Any:
    raise _NotJson(name)  # NaN, Infinity: Python's json takes them, JSON does not


def _number(value: Decimal) -> str:
    """A number by value, exactly: `10000`, `10000.0`, `1e4` and `1.0E+4` are all `1E4`; no digit is lost
    (Decimal.normalize would round to its context's precision)."""
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)  # a parsed JSON number is finite
    significant = "".join(map(str, digits)).lstrip("0")
    if not significant:
        return "0"  # 0, 0.0, -0 and 0e5 are one value
    stripped = significant.rstrip("0")
    exponent += len(significant) - len(stripped)
    return f"{'-' if sign else ''}{stripped}E{exponent}"


def _canonical(value: Any, out: list[str]) -> None:
    if isinstance(value, dict):
        out.append("{")
        for index, name in enumerate(sorted(value)):
            out.append(("," if index else "") + json.dumps(name) + ":")
            _canonical(value[name], out)
        out.append("}")
    elif isinstance(value, list):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _canonical(item, out)
        out.append("]")
    elif isinstance(value, Decimal):
        out.append(_number(value))
    else:  # a string (escapes said one way by json.dumps), true, false, null
        out.append(json.dumps(value))


def canonical_json(body: bytes) -> bytes | None:
    """docs/decisions.md §12.5: one text for every body that parses to the same JSON value (key order,
    whitespace, escapes and the spelling of numbers do not matter); None for a body that is not JSON."""
    try:
        value = json.loads(body, parse_float=Decimal, parse_int=Decimal, parse_constant=_no_constant)
        out: list[str] = []
        _canonical(value, out)
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return None
    return "".join(out).encode()


def request_fingerprint(body: bytes, secret_key: str | None = None) -> str:
    """Keyed hash of the body's meaning (`canonical_json`; a plain SHA-256 of a body with a card number
    could be brute-forced). The routes refuse a body that is not JSON before they run, so the raw bytes
    are hashed only for a caller that passes one anyway (with a mark no canonical text starts with)."""
    secret = secret_key or get_settings().resolved_secret_key()
    canonical = canonical_json(body)
    return _fingerprint_key(secret, _MEANING_PURPOSE).digest(canonical or b"\x00raw:" + body).hex()


def raw_fingerprint(body: bytes, secret_key: str | None = None) -> str:
    """The fingerprint keys stored before §12.5 hold: a keyed hash of the raw bytes."""
    return _fingerprint_key(secret_key or get_settings().resolved_secret_key(), _FINGERPRINT_PURPOSE).digest(body).hex()


def _same_request(stored_hash: str, fingerprint: str, body: bytes) -> bool:
    """The stored fingerprint is this body's: by meaning under the current key, or (a key made before a
    rotation and retried after it) one in KASIR_SECRET_KEY_PREVIOUS; or, for a key stored before §12.5
    (kept 24 hours), the raw bytes' under any of them: its byte-identical retry still replays."""
    if constant_time_equals(stored_hash, fingerprint):
        return True
    settings = get_settings()
    previous = settings.previous_secret_keys()
    if any(constant_time_equals(stored_hash, request_fingerprint(body, key)) for key in previous):
        return True
    keys = (settings.resolved_secret_key(), *previous)
    return any(constant_time_equals(stored_hash, raw_fingerprint(body, key)) for key in keys)


async def run_once(
    request: Request,
    database: Database,
    key: str | None,
    *,
    merchant_id: str,
    scope: str,
    body: bytes,
    handler: Handler,
) -> Response:
    """Run `handler` in a unit of work of its own, at most once per (merchant, scope, key) when the
    request carries a key (`idempotency_key`; see the module docstring). `body` is the raw request body."""
    if key is None:
        async with database.unit_of_work() as session:
            outcome = await handler(session)
            if not isinstance(outcome, Response):  # a Deferred (a Protocol: isinstance of it is slow)
                await outcome.hold(session, None)
        return outcome if isinstance(outcome, Response) else await outcome.finish(request, database)
    fingerprint = request_fingerprint(body)
    claimed = KeyRef(merchant_id, scope, key)
    try:
        async with database.unit_of_work() as session:
            stored = await _claim(session, merchant_id, scope, key, fingerprint, body)
            if stored is not None:
                return _replay(stored)
            try:
                outcome = await handler(session)
                if not isinstance(outcome, Response):  # a Deferred
                    await outcome.hold(session, claimed)
            except KasirError as error:
                if error.http_status >= 500 or not error.kept_with_key:
                    raise  # the whole unit rolls back: the key is free for the retry
                raise _Refused(error) from error  # the unit rolls back: the handler's writes go
            if isinstance(outcome, Response):
                await keep_answer(session, claimed, outcome)
    except _Refused as refused:
        return await _keep_refusal(request, database, claimed, fingerprint, body, refused.error)
    return outcome if isinstance(outcome, Response) else await outcome.finish(request, database)


class _Refused(Exception):
    """A handler's refusal to keep with its key, carried out of the unit of work it rolls back."""

    def __init__(self, error: KasirError) -> None:
        super().__init__(error.message)
        self.error = error


async def _keep_refusal(
    request: Request, database: Database, key: KeyRef, fingerprint: str, body: bytes, error: KasirError
) -> Response:
    """Store `error`'s answer with the key in a unit of its own (the handler's was rolled back)."""
    forget_request_field("transaction_id")  # that of an undone payment, if it got so far
    response = render(request, error)
    async with database.unit_of_work() as session:
        stored = await _claim(session, key.merchant_id, key.scope, key.key, fingerprint, body)
        if stored is not None:
            return _replay(stored)  # a retry of this request took the key in between: its answer stands
        await keep_answer(session, key, response)
    return response


async def keep_answer(session: Session, key: KeyRef, response: Response) -> None:
    """Store `response` as the key's answer (replayed byte for byte to the key's later requests)."""
    headers = {name.decode(): value.decode() for name, value in response.raw_headers if name not in _NOT_STORED}
    answer = bytes(response.body).decode()
    await idempotency_repository.answer(
        session, key.merchant_id, key.scope, key.key, response.status_code, json.dumps(headers), answer
    )


async def release_key(session: Session, key: KeyRef) -> None:
    """Free a key left without an answer (its request ended in a 5xx): the retry runs afresh."""
    await idempotency_repository.release(session, key.merchant_id, key.scope, key.key)


async def _claim(
    session: Session, merchant_id: str, scope: str, key: str, fingerprint: str, body: bytes
) -> StoredKey | None:
    """None when this request owns the key now; the stored answer to replay; or the refusal raised."""
    now = clock.now()
    new = NewKey(merchant_id, scope, key, fingerprint, now, now + TTL)
    repository = idempotency_repository
    wait = get_settings().idempotency_wait_seconds
    try:
        if await repository.claim(session, new, wait_seconds=wait):  # the common case: one statement
            return None
        async with lock_wait_at_most(session, wait):
            stored = await repository.find(session, merchant_id, scope, key)
            if stored is None or stored.expires_at <= now:
                # Expired (or purged between the two statements): a new key for whoever takes it first.
                if await repository.take_over(session, new) or await repository.claim(session, new, wait_seconds=wait):
                    return None
                raise request_in_progress()
    except LockTimeout:
        raise request_in_progress() from None
    if not _same_request(stored.request_hash, fingerprint, body):
        raise IdempotencyKeyReused()
    if stored.response_status is None or stored.response_body is None:
        raise request_in_progress()  # never committed so; said for safety
    return stored


def _replay(stored: StoredKey) -> Response:
    assert stored.response_status is not None
    assert stored.response_body is not None
    headers: dict[str, str] = json.loads(stored.response_headers or "{}")
    headers[REPLAYED_HEADER] = "true"
    return Response(stored.response_body, status_code=stored.response_status, headers=headers)
