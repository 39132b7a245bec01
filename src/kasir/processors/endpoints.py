"""POST /processors/{name}/notify: a processor's own signed notification, applied.

The processor named in the path verifies its notification (`Processor.notifications`: a
forged one is refused, 401, nothing applied) and says what changed; each change is applied by
the product service in its own unit of work, with its callback (kasir.processors.service). A
processor retries a notification until it gets a 2xx: applying one again changes nothing.
A processor's own routes (the simulator's pages) are its `router()`, included by the app.
"""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from kasir.config import get_settings
from kasir.errors import NotFound, WireFormat, wire
from kasir.processors.registry import current
from kasir.processors.schemas import ProcessorNotificationAnswer
from kasir.processors.service import apply

log = logging.getLogger("kasir.processors")

router = APIRouter(tags=["processors"])


@router.post(
    "/processors/{name}/notify",
    summary="A processor's notification (signed by the processor)",
    openapi_extra=wire(WireFormat.PLAIN),
    responses={200: {"model": ProcessorNotificationAnswer, "description": "The notifications applied"}},
)
async def notify(name: str, request: Request) -> JSONResponse:
    processor = current().by_name.get(name)
    if processor is None or (processor.simulates and get_settings().is_production):
        raise NotFound("Not Found")
    body = await request.body()
    notifications = await processor.notifications(request.headers, body)
    database = request.app.state.database
    applied = []
    for notification in notifications:
        async with database.unit_of_work() as session:
            state = await apply(session, notification, by=name)
        applied.append({"product": notification.product, "reference": notification.reference, "status": state})
        log.info(
            "processor notification",
            extra={"processor": name, "transaction_id": notification.reference, "event": notification.event.value},
        )
    return JSONResponse({"applied": applied})
