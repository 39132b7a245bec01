"""The interactive API documentation (/docs: Swagger UI, /redoc: ReDoc), served with no CDN.

FastAPI's own pages load Swagger UI and ReDoc from a CDN, which an air-gapped install cannot reach. Here the
pages load the files shipped by the `fastapi-offline` package (its `static/` folder: Swagger UI's bundle and
CSS, ReDoc's standalone bundle, a favicon), served under /docs/assets/; the pages name no other host.
"""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from kasir.auth.scheme import PUBLIC

ASSETS = Path(fastapi_offline.__file__).parent / "static"
ASSETS_PATH = "/docs/assets"
# Nothing but this server: ReDoc's sidebar asks a CDN for its logo, which the browser then does not fetch.
# FastAPI's pages start Swagger UI and ReDoc with an inline script; ReDoc styles itself inline and searches in
# a worker made from a blob.
POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; worker-src 'self' blob:; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)


def _confined(page: HTMLResponse) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = POLICY
    return page


def add_docs(app: FastAPI, openapi_url: str, docs_url: str = "/docs", redoc_url: str = "/redoc") -> None:
    router = APIRouter(include_in_schema=False)
    title = app.title

    @router.get(docs_url, response_class=HTMLResponse, dependencies=[PUBLIC])
    async def swagger_ui() -> HTMLResponse:
        return _confined(
            get_swagger_ui_html(
                openapi_url=openapi_url,
                title=f"{title} - Swagger UI",
                swagger_js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
                swagger_css_url=f"{ASSETS_PATH}/swagger-ui.css",
                swagger_favicon_url=f"{ASSETS_PATH}/favicon.png",
            )
        )

    @router.get(redoc_url, response_class=HTMLResponse, dependencies=[PUBLIC])
    async def redoc() -> HTMLResponse:
        return _confined(
            get_redoc_html(
                openapi_url=openapi_url,
                title=f"{title} - ReDoc",
                redoc_js_url=f"{ASSETS_PATH}/redoc.standalone.js",
                redoc_favicon_url=f"{ASSETS_PATH}/favicon.png",
                with_google_fonts=False,
            )
        )

    app.router.routes.extend(router.routes)
    app.router.routes.append(Mount(ASSETS_PATH, app=StaticFiles(directory=ASSETS), name="docs-assets"))
