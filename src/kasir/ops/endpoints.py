"""Liveness, readiness and (benchmark mode) the same-run ceiling."""

from __future__ import annotations

import json

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from kasir.auth.scheme import PUBLIC
from kasir.db import SchemaBehind, check_schema, ping
from kasir.ops.schemas import Health, Readiness

router = APIRouter(tags=["operations"])


@router.get("/healthz", summary="Liveness: the process answers", response_model=Health, dependencies=[PUBLIC])
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    summary="Readiness: the database is reachable, migrated and takes writes, and the clocks agree",
    dependencies=[PUBLIC],
    responses={
        200: {"model": Readiness, "description": "Ready"},
        503: {"model": Readiness, "description": "Not ready, with the reason"},
    },
)
async def readyz(request: Request) -> JSONResponse:
    database = request.app.state.database
    try:
        await ping(database)
        await check_schema(database)
    except SchemaBehind as exc:
        return JSONResponse({"status": "not ready", "reason": str(exc)}, status_code=503)
    except Exception as exc:  # any driver error means "not ready"; say its kind, not its details
        return JSONResponse(
            {"status": "not ready", "reason": f"database unreachable ({type(exc).__name__})"}, status_code=503
        )
    try:
        # Reads alone would say ready while every payment fails to save (a full disk, a read-only database).
        await ping(database, write=True)
    except Exception as exc:
        return JSONResponse(
            {"status": "not ready", "reason": f"database cannot take writes ({type(exc).__name__})"}, status_code=503
        )
    clock_agreement = request.app.state.clock_agreement
    if not clock_agreement.agrees:
        return JSONResponse({"status": "not ready", "reason": clock_agreement.disagreement()}, status_code=503)
    return JSONResponse({"status": "ready", "products": live_products()})


def live_products() -> dict[str, str | None]:
    """Each product's processor (several: `NAME,NAME` when channels go to different ones), or None where the
    product is switched off (no processor)."""
    from kasir.processors.registry import PRODUCTS, ConfigurationError, processors_of

    try:
        return {product: ",".join(p.name for p in processors_of(product)) or None for product in PRODUCTS}
    except ConfigurationError:
        return dict.fromkeys(PRODUCTS)


bench_router = APIRouter(tags=["benchmark"], include_in_schema=False)


@bench_router.post("/bench/ceiling", dependencies=[PUBLIC])
async def bench_ceiling(request: Request) -> JSONResponse:
    """The benchmark's ceiling: same framework, middleware and server; parse the body, answer. No database."""
    body = json.loads(await request.body())
    return JSONResponse({"statusCode": "00", "statusMessage": "SUCCESS", "fields": len(body)})
