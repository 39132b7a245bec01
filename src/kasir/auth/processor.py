"""A processor's own signature on what it posts to /processors/{name}/notify.

The processor named in the path verifies its notification (`Processor.notifications`: its key,
its scheme) and says what changed; a forged one is `ForgedNotification` (401), nothing applied.
A processor that is not configured, or the simulator in production, is 404 as an unknown path.
Every forged notification is counted per source address (kasir.ratelimit): while the address is
locked the answer is 429 before any check, so a signature cannot be guessed at the route's pace.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fastapi import Request

from kasir.auth.scheme import Authenticator, FailedAuthentications, source
from kasir.config import get_settings
from kasir.errors import NotFound
from kasir.processors.protocols import ForgedNotification, Notification
from kasir.processors.registry import current


@dataclass(frozen=True, slots=True)
class SignedNotifications:
    """What a processor's verified notification says changed, and which processor said it."""

    processor: str
    notifications: Sequence[Notification]


class ProcessorSignatureAuthenticator(Authenticator[SignedNotifications]):
    scheme = "processor signature"

    def __init__(self) -> None:
        self.rate_limit = FailedAuthentications()

    async def __call__(self, request: Request) -> SignedNotifications:
        name = request.path_params["name"]
        processor = current().by_name.get(name)
        if processor is None or (processor.simulates and get_settings().is_production):
            raise NotFound("Not Found")
        database, address = source(request)
        await self.rate_limit.before(database, address)
        try:
            notifications = await processor.notifications(request.headers, await request.body())
        except ForgedNotification:
            await self.rate_limit.failed(database, address)
            raise
        return SignedNotifications(name, notifications)


processor_signature = ProcessorSignatureAuthenticator()
