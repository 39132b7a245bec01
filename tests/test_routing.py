"""The static-path index answers exactly as the route scan would, only sooner."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import APIRouter, FastAPI
from starlette.routing import Host, Match, Router

from kasir.kit.routing import StaticPathIndex


def _indexed(app: FastAPI) -> StaticPathIndex:
    index = StaticPathIndex(app.router.routes)
    app.router.routes.insert(0, index)
    return index


def _app() -> FastAPI:
    app = FastAPI()

    @app.get("/items/{item_id}")
    async def item(item_id: str) -> dict[str, str]:
        return {"route": "item", "item_id": item_id}

    @app.get("/items/special")  # shadowed by /items/{item_id}: the scan never reaches it
    async def special() -> dict[str, str]:
        return {"route": "special"}

    @app.post("/pay")
    async def pay() -> dict[str, str]:
        return {"route": "pay"}

    @app.put("/pay")
    async def pay_put() -> dict[str, str]:
        return {"route": "pay-put"}

    @app.get("/pay")  # a second static route of the same path, for another method
    async def pay_get() -> dict[str, str]:
        return {"route": "pay-get"}

    admin = APIRouter(prefix="/admin")

    @admin.get("/stats")
    async def stats() -> dict[str, str]:
        return {"route": "stats"}

    app.include_router(admin)

    @app.get("/admin/stats")  # after the included router that also matches it
    async def shadowed_stats() -> dict[str, str]:
        return {"route": "shadowed"}

    return app


@pytest.fixture
async def indexed() -> AsyncIterator[tuple[StaticPathIndex, httpx.AsyncClient]]:
    app = _app()
    index = _indexed(app)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        yield index, http


async def test_a_static_path_is_found_in_the_index(indexed: tuple[StaticPathIndex, httpx.AsyncClient]) -> None:
    index, http = indexed
    assert "/pay" in index.paths
    response = await http.post("/pay")
    assert response.status_code == 200
    assert response.json() == {"route": "pay"}
    matched, _ = index.matches({"type": "http", "path": "/pay", "root_path": "", "method": "POST", "headers": []})
    assert matched is Match.FULL


async def test_a_static_path_shadowed_by_an_earlier_route_is_left_to_the_scan(
    indexed: tuple[StaticPathIndex, httpx.AsyncClient],
) -> None:
    index, http = indexed
    assert "/items/special" not in index.paths
    assert "/admin/stats" not in index.paths  # the included router before it matches it
    assert (await http.get("/items/special")).json() == {"route": "item", "item_id": "special"}
    assert (await http.get("/admin/stats")).json() == {"route": "stats"}


REQUESTS = [
    ("POST", "/pay"),
    ("PUT", "/pay"),
    ("GET", "/pay"),
    ("HEAD", "/pay"),
    ("DELETE", "/pay"),  # 405 from the first route of the path
    ("GET", "/items/special"),
    ("GET", "/items/42"),
    ("POST", "/items/42"),
    ("GET", "/admin/stats"),
    ("GET", "/nowhere"),
    ("POST", "/pay/"),  # the slash redirect
    ("GET", "/items/42/"),
]


@pytest.mark.parametrize(("method", "path"), REQUESTS)
async def test_every_request_gets_what_the_scan_gives(method: str, path: str) -> None:
    scanned, indexed = _app(), _app()
    _indexed(indexed)
    answers = []
    for app in (scanned, indexed):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
            response = await http.request(method, path, follow_redirects=False)
        headers = {name: response.headers.get(name) for name in ("allow", "location", "content-type")}
        answers.append((response.status_code, response.content, headers))
    assert answers[0] == answers[1]


def test_url_path_for_still_finds_indexed_routes() -> None:
    app = _app()
    index = _indexed(app)
    assert app.router.routes[0] is index
    assert app.url_path_for("pay") == "/pay"
    assert app.url_path_for("item", item_id="7") == "/items/7"


async def test_nothing_after_a_host_route_is_indexed() -> None:
    routes = [Host("api.example.com", app=Router()), *_app().router.routes]
    assert StaticPathIndex(routes).paths == frozenset()


async def test_kasir_indexes_every_static_snap_path(app: FastAPI) -> None:
    index = app.router.routes[0]
    assert isinstance(index, StaticPathIndex)
    for path in (
        "/auth/merchants/v1.0/access-token/b2b",
        "/api/v1.0/access-token/b2b",
        "/card-v2/v1/charge",
        "/ewallet/v2/create-payment",
        "/ewallet/v2/inquiry",
        "/v1.0/bnpl/payment-calculation",
        "/v1.1/bnpl/qr-checkout",
    ):
        assert path in index.paths, path
