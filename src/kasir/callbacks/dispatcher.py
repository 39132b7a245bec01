"""Claiming due callbacks, sending one attempt, and recording how it went.

Claims are short transactions: a worker takes due callbacks (FOR UPDATE SKIP LOCKED on
PostgreSQL; SQLite serialises writers), sets a lease longer than the HTTP timeout and bumps
the fence. The HTTP attempt happens outside any transaction. Its result is written only
if the fence still matches, so a worker whose lease expired cannot overwrite the work of
the worker that took over; the attempt itself is recorded either way.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlsplit, urlunsplit

import httpx

from kasir import __version__
from kasir.callbacks import metrics
from kasir.callbacks.models import CallbackKind, CallbackStatus
from kasir.callbacks.policies import POLICIES
from kasir.callbacks.repository import callback_repository
from kasir.callbacks.service import SignedIds
from kasir.callbacks.signing import (
    bnpl_svc_signature,
    snap_notify_headers,
    svc_signature,
    svc_signature_header,
    with_query_signature,
    x_req_signature,
)
from kasir.callbacks.ssrf import DELIVERY_LOOKUPS, UnsafeCallbackUrl, resolve_checked
from kasir.config import Settings
from kasir.db import Database
from kasir.kit import http_client
from kasir.kit.clock import clock, isoformat_seconds
from kasir.merchants.service import CallbackSigning, merchant_service

log = logging.getLogger("kasir.callbacks")

RESPONSE_EXCERPT_BYTES = 2048
USER_AGENT = f"Kasir-Callbacks/{__version__}"


@dataclass(frozen=True, slots=True)
class ClaimedCallback:
    id: int
    fence: int
    kind: CallbackKind
    merchant_id: str
    transaction_ref: str
    url: str
    payload: bytes
    svc_signature: str | None  # as recorded (rows from before signatures were made at send time)
    signed_ids: SignedIds | None  # what svc-signature is made of, signed at send time
    event_key: int  # X-Kasir-Callback-Id: the event's, on every delivery of it
    attempt_offset: int  # attempts of the event's earlier deliveries
    attempt_number: int  # of this delivery: its policy counts these
    max_attempts: int
    created_at_unix: float
    signing: CallbackSigning | None  # the merchant's signing values (None: nothing to sign with them)

    @property
    def event_attempt(self) -> int:
        """X-Kasir-Attempt: counted across the event, never a number the merchant saw for it."""
        return self.attempt_offset + self.attempt_number


@dataclass(frozen=True, slots=True)
class AttemptResult:
    accepted: bool
    http_status: int | None
    error: str | None
    excerpt: str | None
    latency_ms: int
    request_url: str | None = None  # as sent (before the production path connects to the checked address)
    request_headers: dict[str, str] | None = None


async def claim_due(
    database: Database, worker: str, limit: int, lease_seconds: float, skip_merchants: Collection[str] = ()
) -> list[ClaimedCallback]:
    """Take up to `limit` due callbacks whose earlier siblings (same transaction) are settled, none of
    `skip_merchants`."""
    now = clock.now()
    claimed: list[ClaimedCallback] = []
    # One UPDATE takes the lease and needs no transaction around it; a worker claims at every wake-up,
    # often for one callback or none. Should a merchant's read below fail, the claimed callbacks wait
    # out their lease and are claimed again, as after a worker's crash.
    async with database.unit_of_work(atomic=False) as session:
        lease_until = now + timedelta(seconds=lease_seconds)
        rows = await callback_repository.claim(session, now, limit, worker, lease_until, skip_merchants)
        if not rows:
            return []
        signings: dict[str, CallbackSigning] = {}
        for (
            id_,
            fence,
            kind,
            merchant_id,
            ref,
            url,
            payload,
            svc_signature,
            signed_ids,
            event_id,
            offset,
            made,
            most,
            created_at,
            _,
        ) in rows:
            needs_signing = kind in _SNAP_NOTIFIED or signed_ids is not None
            if needs_signing and merchant_id not in signings:
                signings[merchant_id] = await merchant_service.callback_signing(session, merchant_id)
            claimed.append(
                ClaimedCallback(
                    id=id_,
                    fence=fence,
                    kind=CallbackKind(kind),
                    merchant_id=merchant_id,
                    transaction_ref=ref,
                    url=url,
                    payload=payload.encode(),
                    svc_signature=svc_signature,
                    signed_ids=None if signed_ids is None else SignedIds.decoded(signed_ids),
                    event_key=id_ if event_id is None else event_id,
                    attempt_offset=offset,
                    attempt_number=made + 1,
                    max_attempts=most,
                    created_at_unix=created_at.timestamp(),
                    signing=signings.get(merchant_id) if needs_signing else None,
                )
            )
    return claimed


async def give_back(database: Database, callbacks: Collection[ClaimedCallback]) -> None:
    """Claimed callbacks handed back unsent, due again at once (for this worker's next claim or another's)."""
    async with database.unit_of_work() as session:
        await callback_repository.give_back(session, [(callback.id, callback.fence) for callback in callbacks])


# The kinds sent with SNAP's notify headers and X-SIGNATURE (docs/decisions.md §3.6): BNPL's, and the transfers'
# (§11.8).
_SNAP_NOTIFIED = frozenset({CallbackKind.BNPL.value, CallbackKind.PAYOUT.value})


def _bnpl_signature_of(payload: bytes, hash_key: str) -> str | None:
    try:
        body = json.loads(payload)
        return bnpl_svc_signature(hash_key, body["originalReferenceNo"], body["originalPartnerReferenceNo"])
    except (ValueError, KeyError, TypeError):
        return None


def svc_signature_of(callback: ClaimedCallback) -> str | None:
    """The attempt's svc-signature: made now from the recorded ids with the hash key the merchant verifies
    with now (docs/decisions.md §8), or as recorded by rows from before that (a BNPL one with none: from its
    payload)."""
    if callback.signed_ids is not None:
        assert callback.signing is not None
        ids = callback.signed_ids
        hash_key = callback.signing.hash_key.now()
        return svc_signature(
            ids.transaction_id, x_req_signature(hash_key, ids.external_id, ids.order_id), ids.sub_merchant_id
        )
    if callback.svc_signature is None and callback.kind is CallbackKind.BNPL:
        assert callback.signing is not None  # recorded before BNPL notifications carried svc-signature
        return _bnpl_signature_of(callback.payload, callback.signing.hash_key.now())
    return callback.svc_signature


def request_for(callback: ClaimedCallback) -> tuple[str, dict[str, str]]:
    """The URL and headers of one attempt; signatures computed now (fresh on every attempt and replay)."""
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Kasir-Callback-Id": str(callback.event_key),
        "X-Kasir-Attempt": str(callback.event_attempt),
    }
    url = callback.url
    if callback.kind.value in _SNAP_NOTIFIED:
        assert callback.signing is not None
        headers.update(
            snap_notify_headers(
                client_secret=callback.signing.client_secret.now(),
                partner_id=callback.merchant_id,
                callback_url=callback.url,
                body=callback.payload,
                timestamp=isoformat_seconds(clock.now()),
            )
        )
    # interface.md Events: every callback carries svc-signature (BNPL's beside its SNAP headers, issue 26).
    signature = svc_signature_of(callback)
    if signature is not None:
        headers[svc_signature_header()] = signature
        if callback.kind in (CallbackKind.WALLET, CallbackKind.VA):  # §3.5, §9.7: also as a query parameter
            url = with_query_signature(url, signature)
    return url, headers


async def send_attempt(
    http: httpx.AsyncClient | httpx.AsyncBaseTransport, callback: ClaimedCallback, settings: Settings
) -> AttemptResult:
    """One attempt, through a client, or straight through a transport (the worker's: kasir.kit.http_client.post)."""
    url, headers = request_for(callback)
    sent_url, sent_headers = url, dict(headers)  # what the attempt records as sent
    extensions: dict[str, str] = {}
    started = time.perf_counter()
    try:
        async with asyncio.timeout(settings.callback_timeout_seconds):  # a slow DNS answer counts too
            if settings.is_production:
                # Resolve and check again (DNS may answer otherwise than when the URL was given), connect
                # to the address that was checked; keep the name for Host and TLS SNI.
                target = await resolve_checked(
                    url, allowed_networks=settings.callback_allowed_networks, lookups=DELIVERY_LOOKUPS
                )
                headers["Host"] = _host_header(target.host, target.parts.port)
                if target.parts.scheme == "https":
                    extensions["sni_hostname"] = target.host
                literal = f"[{target.address}]" if ":" in target.address else target.address
                url = urlunsplit(target.parts._replace(netloc=f"{literal}:{target.port}"))
            # A merchant's answer is read up to a bound: one endpoint's endless answer costs no more memory
            # than another's, and the attempt's timeout cuts one that trickles.
            limit = settings.callback_answer_max_bytes
            if isinstance(http, httpx.AsyncClient):
                request = http.build_request(
                    "POST", url, content=callback.payload, headers=headers, extensions=extensions
                )
                response = await http_client.read_at_most(await http.send(request, stream=True), limit)
            else:
                response = await http_client.post(
                    http,
                    url,
                    content=callback.payload,
                    headers=headers,
                    timeout=settings.callback_timeout_seconds,
                    max_body_bytes=limit,
                    extensions=extensions,
                )
    except UnsafeCallbackUrl as exc:
        return AttemptResult(False, None, f"refused: {exc.reason}", None, _ms(started), sent_url, sent_headers)
    except TimeoutError:
        timeout = f"timeout after {settings.callback_timeout_seconds:g} s"
        return AttemptResult(False, None, timeout, None, _ms(started), sent_url, sent_headers)
    except httpx.HTTPError as exc:
        failure = f"{type(exc).__name__}: {exc}"[:500]
        return AttemptResult(False, None, failure, None, _ms(started), sent_url, sent_headers)
    excerpt = response.content[:RESPONSE_EXCERPT_BYTES].decode("utf-8", errors="replace")
    accepted = POLICIES[callback.kind].accepts(response)
    error = None
    if not accepted:
        error = f"HTTP {response.status_code} not accepted"
        if response.extensions.get(http_client.BODY_CUT):
            error += f" (answer longer than {settings.callback_answer_max_bytes} bytes, cut)"
        if response.is_redirect:
            error = f"HTTP {response.status_code} redirect (not followed)"
    return AttemptResult(accepted, response.status_code, error, excerpt, _ms(started), sent_url, sent_headers)


def _host_header(host: str, port: int | None) -> str:
    """Host as the URL names it: the name (an IPv6 literal in brackets) and an explicit port; never userinfo."""
    name = f"[{host}]" if ":" in host else host
    return name if port is None else f"{name}:{port}"


def _ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)


def retry_delay(settings: Settings, retry_number: int) -> float:
    """Seconds before retry `retry_number` (1-based): the schedule's entry, ±10 % jitter."""
    schedule = settings.callback_schedule or [10]
    base = schedule[min(retry_number - 1, len(schedule) - 1)]
    return base * random.uniform(0.9, 1.1)  # noqa: S311 (jitter, not security)


async def record_attempt(
    database: Database, callback: ClaimedCallback, result: AttemptResult, worker: str, settings: Settings
) -> str:
    """Write the attempt and the callback's next state; answers the new status ("lost" if fenced off)."""
    [status] = await record_attempts(database, [(callback, result)], worker, settings)
    return status


async def record_attempts(
    database: Database, outcomes: Sequence[tuple[ClaimedCallback, AttemptResult]], worker: str, settings: Settings
) -> list[str]:
    """Record several attempts in one transaction (one commit, one disk flush, for all of them).

    Each callback's next state follows the same rules as one at a time; each answer is its new
    status, or "lost" when its fence moved on (another worker took it over).
    """
    now = clock.now()
    decided: list[tuple[ClaimedCallback, AttemptResult, CallbackStatus, datetime]] = []
    for callback, result in outcomes:
        if result.accepted:
            status, next_at = CallbackStatus.DELIVERED, now
        elif callback.attempt_number >= callback.max_attempts:
            status, next_at = CallbackStatus.FAILED, now
        else:
            status, next_at = (
                CallbackStatus.PENDING,
                now + timedelta(seconds=retry_delay(settings, callback.attempt_number)),
            )
        decided.append((callback, result, status, next_at))
    recorded: list[bool] = []
    async with database.unit_of_work() as session:
        for callback, result, status, next_at in decided:
            await callback_repository.add_attempt(
                session,
                callback_id=callback.id,
                number=callback.event_attempt,
                fence=callback.fence,
                worker=worker,
                started_at=now - timedelta(milliseconds=result.latency_ms),
                latency_ms=result.latency_ms,
                http_status=result.http_status,
                error=result.error,
                response_excerpt=result.excerpt,
                accepted=result.accepted,
                request_url=result.request_url,
                request_headers=None if result.request_headers is None else json.dumps(result.request_headers),
            )
            recorded.append(
                await callback_repository.record_outcome(
                    session,
                    callback.id,
                    callback.fence,
                    status=status.value,
                    attempts_made=callback.attempt_number,
                    next_attempt_at=next_at,
                    delivered_at=now if result.accepted else None,
                    last_error=result.error,
                )
            )
    answers: list[str] = []
    for (callback, result, status, _), kept in zip(decided, recorded, strict=True):
        if not kept:
            log.warning("callback lease lost before the result was written", extra={"callback_id": callback.id})
            answers.append("lost")
            continue
        metrics.record(callback.kind.value, status.value, result.latency_ms, callback.created_at_unix, now.timestamp())
        log.info(
            "callback attempt",
            extra={
                "callback_id": callback.id,
                "kind": callback.kind.value,
                "event_id": callback.event_key,
                "attempt": callback.event_attempt,
                "http_status": result.http_status,
                "outcome": status.value,
                "latency_ms": result.latency_ms,
            },
        )
        if status is CallbackStatus.FAILED:
            # The merchant will not hear of this payment unless someone acts: say who, where and why.
            log.warning(
                "callback exhausted its attempts",
                extra={
                    "callback_id": callback.id,
                    "kind": callback.kind.value,
                    "merchant_id": callback.merchant_id,
                    "transaction_ref": callback.transaction_ref,
                    "url_host": urlsplit(callback.url).hostname or "",
                    "attempts": callback.attempt_number,
                    "last_error": result.error,
                },
            )
        answers.append(status.value)
    return answers
