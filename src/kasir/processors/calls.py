"""Asking a processor outside any unit of work, and finishing what a stopped process left asked.

A unit of work holds SQLite's one write seat, or a PostgreSQL connection and row locks: a
processor's seconds inside one would stall every other write (kasir.db). So a charge, refund or
void that needs a processor's answer takes three steps:

1. **hold**, in the request's unit of work: the product records what it is about to ask (a card
   attempt SUBMITTED; nothing for a refund or void) and a `processor_call` row naming the
   request's X-Idempotency-Key. At most one call per payment is in flight: a second refund
   while a void is at the issuer is refused (`CallInProgress`, 409, not kept with its key), never
   sent. The unit commits; the key has no answer yet (its retries: 409 REQUEST_IN_PROGRESS).
2. **ask**: the processor is called, with no unit of work open.
3. **record**, in a unit of its own: the row is deleted (whoever deletes it records: the
   request, or the worker below, never both), the product records the answer (`Action.record`,
   with its callback), and the key gets its answer (`Action.respond`).

When the ask raises (`ProcessorUnavailable`: no decision was made; `ProcessorRefused`), step 3
takes step 1 back instead (`Action.undo`): the request answers the error, a 4xx kept with its
key, a 5xx freeing it.

A process that stops between 1 and 3 leaves the row. `finish_stalled_calls`, one of the worker's
jobs, picks up calls older than twice the slowest processor's timeout and a margin
(`stalled_after`) and asks again without what was never stored (the
acquirer's status of the attempt; a refund or void asked again, idempotent by its reference),
then records as step 3 does, the key's answer with it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

from fastapi import Request
from fastapi.responses import Response

from kasir.db import Database, Session
from kasir.errors import Conflict, KasirError, render
from kasir.idempotency.service import KeyRef, keep_answer, release_key
from kasir.kit.clock import clock
from kasir.processors.protocols import CardCharge, ProcessorUnavailable, Product
from kasir.processors.repository import processor_call_repository

log = logging.getLogger("kasir.processors")

# What Kasir recorded of the card of an attempt asked again (`ask_again`): the masked number, first 6 and
# last 4. For a processor that keeps no record of its own across processes (the staging simulator decides
# by the card); a real acquirer answers from its own records.
recorded_card: ContextVar[str | None] = ContextVar("recorded_card", default=None)

# A processor that names no `timeout_seconds` is given this long to answer.
UNNAMED_TIMEOUT_SECONDS = 30.0
# Beyond twice the slowest processor's timeout, this much more: a call older than that was left
# by a process that stopped (asking too soon could record "no answer" while the first ask succeeds).
STALL_MARGIN = timedelta(seconds=10)


def stalled_after() -> timedelta:
    """How old an unrecorded call is before the worker finishes it: after any request asking it gave up."""
    from kasir.processors.registry import current

    timeouts = [float(getattr(p, "timeout_seconds", UNNAMED_TIMEOUT_SECONDS)) for p in current().by_name.values()]
    return timedelta(seconds=2 * max(timeouts, default=0.0)) + STALL_MARGIN


class CallInProgress(Conflict):
    """Another request of the same payment is with the processor: retry in a moment."""

    card_status = "REQUEST_IN_PROGRESS"
    wallet_code = "03"
    default_message = "Failed Request: another request for this payment is with the processor; retry in a moment"
    kept_with_key = False

    def __init__(self) -> None:
        super().__init__(headers={"Retry-After": "1"})


@dataclass(slots=True)
class Call:
    """One ask of a processor about one payment."""

    action: str  # "card.charge", "wallet.refund", "wallet.void": the product's `Action` (its offer's)
    product: Product
    reference: str  # Kasir's transaction id
    details: dict[str, Any]  # what recording and asking again need (JSON; never card data)
    # The card, for this one ask: never stored, so a call picked up after a crash asks for status.
    card: CardCharge | None = field(default=None, repr=False)
    key: KeyRef | None = None


class Action(Protocol):
    """What a product does around one kind of processor call."""

    async def ask(self, call: Call) -> Any:
        """Ask the processor (no unit of work is open)."""
        ...

    async def ask_again(self, call: Call) -> Any:
        """Ask again after a crash, with only what was stored (`call.card` is None)."""
        ...

    async def lock(self, session: Session, call: Call) -> None:
        """Take the payment's row lock. Step 3 takes it before it deletes the call's row, in the order
        step 1 took them (the handler locked the payment, then wrote the call): a refund's hold waiting
        on the row being deleted while the recording unit waits on the payment it locked is a deadlock.
        """
        ...

    async def record(self, session: Session, call: Call, answer: Any, *, fresh: bool) -> Any:
        """Record the processor's answer (with its callback); what the caller gets back. `fresh` False:
        another unit of work recorded it already (the worker, or the request that outlasted it): only
        what is recorded is read back."""
        ...

    async def undo(self, session: Session, call: Call, error: KasirError) -> None:
        """Take back what `hold` recorded: the ask raised, nothing was decided."""
        ...

    async def respond(self, session: Session, call: Call, recorded: Any) -> Response:
        """The API's answer to the request, as its idempotency key keeps it."""
        ...


Also = Callable[[Session, Any], Awaitable[None]]

_ACTIONS: dict[str, Action] = {}


def register(name: str, action: Action) -> None:
    """A product's action, by name (kasir.processors.offers.declare registers each product's)."""
    _ACTIONS[name] = action


def action_of(name: str) -> Action:
    action = _ACTIONS.get(name)
    if action is None:
        raise LookupError(
            f"no product declared the processor call {name!r}: the entry point must call "
            "kasir.products.declare_products() at start-up"
        )
    return action


@dataclass(frozen=True, slots=True)
class Finished:
    recorded: Any
    response: Response


@dataclass(slots=True)
class PendingCall:
    """A handler's answer that waits for a processor (kasir.idempotency.service.Deferred)."""

    call: Call

    async def hold(self, session: Session, key: KeyRef | None) -> None:
        self.call.key = key
        call = self.call
        values = {
            "product": call.product,
            "reference": call.reference,
            "action": call.action,
            "details": call.details,
            "key_merchant_id": key.merchant_id if key else None,
            "key_scope": key.scope if key else None,
            "key": key.key if key else None,
            "started_at": clock.now(),
        }
        if not await processor_call_repository.add(session, values):
            raise CallInProgress()

    async def complete(
        self,
        database: Database,
        refusal: Callable[[KasirError], Response] | None = None,
        also: Also | None = None,
    ) -> Finished:
        """Ask, then record (`also`: more to write in the recording unit, e.g. the console's audit).
        A KasirError from the processor is undone and raised again (the key is freed, or for a 4xx
        keeps `refusal(error)` when given)."""
        action = action_of(self.call.action)
        try:
            answer = await action.ask(self.call)
        except KasirError as error:
            await _undo(database, action, self.call, error, refusal)
            raise
        return await _record(database, action, self.call, answer, also)

    async def finish(self, request: Request, database: Database) -> Response:
        try:
            return (await self.complete(database, refusal=lambda error: render(request, error))).response
        except KasirError as error:
            if error.http_status >= 500:
                raise
            return render(request, error)


async def _record(database: Database, action: Action, call: Call, answer: Any, also: Also | None = None) -> Finished:
    async with database.unit_of_work() as session:
        # Whoever deletes the row records; the other (a request that outlasted `stalled_after`, or
        # the worker) reads back what was recorded.
        await action.lock(session, call)
        fresh = await processor_call_repository.forget(session, call.product, call.reference)
        recorded = await action.record(session, call, answer, fresh=fresh)
        if also is not None and fresh:
            await also(session, recorded)
        response = await action.respond(session, call, recorded)
        if call.key is not None:
            await keep_answer(session, call.key, response)
    return Finished(recorded, response)


async def _undo(
    database: Database,
    action: Action,
    call: Call,
    error: KasirError,
    refusal: Callable[[KasirError], Response] | None,
) -> None:
    async with database.unit_of_work() as session:
        await action.lock(session, call)
        if not await processor_call_repository.forget(session, call.product, call.reference):
            return  # the worker finished it meanwhile
        await action.undo(session, call, error)
        if call.key is None:
            return
        if error.http_status >= 500 or refusal is None:
            await release_key(session, call.key)
        else:
            await keep_answer(session, call.key, refusal(error))


# --- the worker's job ------------------------------------------------------------------------


async def finish_stalled_calls(database: Database) -> int:
    """Finish the calls a stopped process left in flight; how many were finished."""
    async with database.unit_of_work(read_only=True) as session:
        stalled = await processor_call_repository.stalled(session, clock.now() - stalled_after())
    finished = 0
    for values in stalled:
        key = None
        if values["key"] is not None:
            key = KeyRef(values["key_merchant_id"], values["key_scope"], values["key"])
        call = Call(values["action"], values["product"], values["reference"], values["details"], key=key)
        action = action_of(call.action)
        try:
            answer = await action.ask_again(call)
        except ProcessorUnavailable:
            log.warning(
                "processor call still unanswered", extra={"transaction_id": call.reference, "action": call.action}
            )
            continue
        except KasirError as error:
            await _undo(database, action, call, error, None)
            log.warning(
                "processor call refused when asked again",
                extra={"transaction_id": call.reference, "action": call.action, "error": error.message},
            )
            continue
        await _record(database, action, call, answer)
        finished += 1
        log.warning(
            "processor call finished by the worker", extra={"transaction_id": call.reference, "action": call.action}
        )
    return finished
