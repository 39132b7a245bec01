"""create_app(): routers, middleware, error handlers; nothing else."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.openapi.utils import get_openapi

from kasir import __version__
from kasir.audit.endpoints import router as audit_router
from kasir.bnpl.endpoints import router as bnpl_router
from kasir.callbacks.endpoints import router as callbacks_router
from kasir.callbacks.schemas import webhook_payloads
from kasir.callbacks.worker import DeliveryWorker
from kasir.card.endpoints import router as card_router
from kasir.clock_agreement import ClockAgreement
from kasir.config import Settings, configure, get_settings
from kasir.console.admin import router as console_users_router
from kasir.console.endpoints import router as console_router
from kasir.console.self_service import router as console_self_service_router
from kasir.db import Database, check_schema
from kasir.errors import install_error_handlers
from kasir.kit.logs import configure_logging
from kasir.kit.routing import StaticPathIndex
from kasir.merchants.endpoints import router as merchants_router
from kasir.merchants.sealing import check_secret_key
from kasir.merchants.service import secret_box
from kasir.middleware import RequestContextMiddleware
from kasir.openapi import complete_document
from kasir.ops.docs import add_docs
from kasir.ops.endpoints import bench_router
from kasir.ops.endpoints import router as ops_router
from kasir.payments.endpoints import router as payments_router
from kasir.payouts.endpoints import router as payouts_router
from kasir.payouts.endpoints import snap_router as payouts_snap_router
from kasir.processors.endpoints import router as processors_router
from kasir.products import declare_products
from kasir.snap.openapi import extra_components
from kasir.tokens.endpoints import router as token_router
from kasir.va.endpoints import router as va_router
from kasir.wallet.endpoints import router as wallet_router

log = logging.getLogger("kasir.app")

# (young, middle, old) generation thresholds: see the lifespan below; bench/results/2026-11-25-gc.md.
GC_THRESHOLDS = (10_000, 20, 20)


def product_routers(settings: Settings) -> list[APIRouter]:
    """The rooms' routers, in the order their routes are matched; the console's pages only when KASIR_CONSOLE."""
    routers = [
        merchants_router,
        callbacks_router,
        wallet_router,
        va_router,
        bnpl_router,
        card_router,
        processors_router,
        audit_router,
        payments_router,
        payouts_router,
        payouts_snap_router,
    ]
    if settings.console:
        routers.extend((console_self_service_router, console_router))
    return routers


def processor_routers() -> list[APIRouter]:
    """The routes an installed processor serves itself (`Processor.router()`), for the configured ones.

    A configuration that cannot be served is `kasir serve`'s to refuse (one line); here it adds nothing.
    """
    from kasir.processors.registry import ConfigurationError, current

    try:
        processors = current()
    except ConfigurationError:
        return []
    routers = (processor.router() for processor in processors.by_name.values())
    return [router for router in routers if router is not None]


def add_routes(app: FastAPI, router: APIRouter) -> None:
    """The router's routes, as the app's own when the router adds nothing to them (no prefix, no dependencies).

    `include_router` wraps a router in a layer that is matched route by route twice per request
    (once to find the router, once to find the route): for the card charge, the last router,
    about three times what the same routes cost held by the app itself. Routers with a prefix or
    dependencies (the admin API) are included as usual.
    """
    if router.prefix or router.dependencies:
        app.include_router(router)
    else:
        app.router.routes.extend(router.routes)


def create_app(settings: Settings | None = None, *, check_schema_on_start: bool = True) -> FastAPI:
    if settings is not None:
        configure(settings)
    settings = get_settings()
    declare_products()
    configure_logging(settings.log_level, settings.log_format)
    if log.isEnabledFor(logging.DEBUG):
        log.debug("settings", extra={"settings": settings.loggable()})

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        database = Database(settings)
        worker: DeliveryWorker | None = None
        worker_task: asyncio.Task[None] | None = None
        watching: asyncio.Task[None] | None = None
        try:
            if check_schema_on_start:
                await check_schema(database)
                async with database.unit_of_work(read_only=True) as session:
                    await check_secret_key(session, secret_box())  # a wrong key stops here, not as 500s later
            app.state.database = database
            # A server whose clock stepped answers 503 until it agrees with the database's again.
            await clock_agreement.check(database)
            watching = asyncio.create_task(clock_agreement.watch(database))
            worker = DeliveryWorker(database, settings) if settings.embedded_worker else None
            app.state.worker = worker  # the embedded worker, or None: whoever must know when it is idle (tests)
            worker_task = asyncio.create_task(worker.run()) if worker else None
            # Objects made at start-up live for the whole process: keep them out of every full GC pass.
            gc.collect()
            gc.freeze()
            # A request allocates thousands of container objects, nearly all freed by reference counting
            # before any collection could find them; CPython's default (a young-generation pass every 700)
            # spends its passes walking the live objects of the requests in flight. Collect cycles less often.
            gc.set_threshold(*GC_THRESHOLDS)
            yield
        finally:
            if watching is not None:
                watching.cancel()
            if worker is not None and worker_task is not None:
                worker.stop()
                await worker_task
            await database.dispose()

    app = FastAPI(
        title="Kasir API",
        version=__version__,
        description="Payment platform: SNAP access tokens, wallet, virtual-account, BNPL and card payments, "
        "signed callbacks.",
        lifespan=lifespan,
        # Off in production unless asked (KASIR_PUBLIC_DOCS): see the settings.
        # /docs and /redoc load their scripts from the installed package, not a CDN (kasir.ops.docs).
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json" if settings.serves_docs else None,
    )
    app.state.settings = settings
    clock_agreement = ClockAgreement(
        settings.max_database_clock_skew_seconds, stops="every request but the health checks answers 503"
    )
    app.state.clock_agreement = clock_agreement
    app.add_middleware(
        RequestContextMiddleware,
        max_body_bytes=settings.max_body_bytes,
        hidden_prefixes=settings.hidden_path_prefixes(),
        clock_agreement=clock_agreement,
    )
    install_error_handlers(app)
    add_routes(app, ops_router)
    if settings.serves_docs:
        add_docs(app, "/openapi.json")
    if settings.bench_mode:
        add_routes(app, bench_router)
    add_routes(app, token_router)
    for router in product_routers(settings):
        add_routes(app, router)
    add_routes(app, console_users_router)
    for router in processor_routers():
        add_routes(app, router)
    # Last: it indexes the routes above (kasir.kit.routing: the scan cost the card charge more than its SQL).
    app.router.routes.insert(0, StaticPathIndex(app.router.routes))

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            schema.setdefault("components", {}).setdefault("schemas", {}).update(extra_components())
            complete_document(schema, webhook_payloads())
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app
