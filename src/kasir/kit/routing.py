"""Find a request's route by its exact path when the path has no parameters.

Starlette (and FastAPI's APIRouter) match a request against every route in order, a regular
expression and a few dictionaries per route, until one matches: with Kasir's ~40 routes the
card charge, near the end, paid more for the scan than for any SQL statement of the charge,
and over twenty times what the index costs. Every SNAP API path is static, so one dictionary
look-up finds them.

`StaticPathIndex` is a route put first in the router's list. It answers only for a path it
can answer exactly as the scan would: a static route's path, taken only when no route before
that route could match the path (checked once, when the index is built), and only when the
method is one the route takes. Anything else (a path with parameters, a wrong method, which
the scan answers with 405, an unknown path, which gets 404 or the slash redirect) is left to
the scan, so what a request gets is unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from starlette.datastructures import URLPath
from starlette.routing import BaseRoute, Host, Match, NoMatchFound, Route
from starlette.types import Receive, Scope, Send


class StaticPathIndex(BaseRoute):
    def __init__(self, routes: Sequence[BaseRoute]) -> None:
        self._by_path: dict[str, Route] = {}
        for position, route in enumerate(routes):
            if isinstance(route, Host):
                break  # matched on the Host header: what comes after it cannot be decided by path alone
            if not _is_static(route):
                continue
            assert isinstance(route, Route)
            # An earlier route of the same path matches it too (PARTIAL, for another method): the first wins.
            if not any(_may_match(earlier, route) for earlier in routes[:position]):
                self._by_path[route.path] = route

    @property
    def paths(self) -> frozenset[str]:
        return frozenset(self._by_path)

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] != "http":
            return Match.NONE, {}
        route = self._by_path.get(get_route_path(scope))
        if route is None:
            return Match.NONE, {}
        match, child_scope = route.matches(scope)
        # A method the route does not take (PARTIAL) is the scan's to answer (405, or a later route).
        return (match, child_scope) if match is Match.FULL else (Match.NONE, {})

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._by_path[get_route_path(scope)].handle(scope, receive, send)

    def url_path_for(self, name: str, /, **path_params: Any) -> URLPath:
        raise NoMatchFound(name, path_params)  # the indexed routes are still in the list, and answer for themselves


def _is_static(route: BaseRoute) -> bool:
    return isinstance(route, Route) and not route.param_convertors and bool(route.methods)


def _may_match(earlier: BaseRoute, static: Route) -> bool:
    """Could `earlier` match a request for `static`'s path, with any of its methods?"""
    for method in static.methods or ():
        probe: Scope = {
            "type": "http",
            "path": static.path,
            "root_path": "",
            "method": method,
            "headers": [],
            "query_string": b"",
        }
        match, _ = earlier.matches(probe)
        if match is not Match.NONE:
            return True
    return False


def get_route_path(scope: Scope) -> str:
    """The path a route matches: the request's path less the app's `root_path` (as Starlette's routes
    take it; Starlette's own helper for this is private, so it is written here, to the same rules)."""
    path: str = scope["path"]
    root_path: str = scope.get("root_path", "")
    if not root_path or not path.startswith(root_path):
        return path
    if path == root_path:
        return ""
    return path[len(root_path) :] if path[len(root_path)] == "/" else path
