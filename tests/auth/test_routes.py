"""The route guard: every route of the application names its scheme (kasir.auth), every scheme a
route names is rate limited, and every merchant POST that moves money is keyed (kasir.idempotency).

It reads what the routes declare, through FastAPI's public route API: the dependencies in
`route.dependant` (an authenticator, `public`, `keyed`), the routers' included ones among them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, iter_route_contexts
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from kasir.auth import Authenticator, OneOf, access_token, basic, public, snap_signature, wallet_signature
from kasir.idempotency.service import keyed
from kasir.kit.routing import StaticPathIndex
from kasir.tokens.service import Product

# The schemes whose caller is a merchant of the payment API: a POST of theirs moves money unless listed below.
MERCHANT_SCHEMES: tuple[Authenticator[Any], ...] = (
    basic,
    wallet_signature,
    *snap_signature.schemes,
    access_token(Product.PAYMENT),
    access_token(Product.DISBURSEMENT),
)

# Merchant POSTs that move no money, and why: no X-Idempotency-Key for them.
MOVES_NO_MONEY = {
    "/ewallet/v2/inquiry": "reads a transaction (a read-only unit)",
    "/card-v2/inquiry": "reads a card order (a read-only unit)",
    "/va/inquiry": "reads a virtual account and its payments (a read-only unit)",
    "/v1.0/bnpl/payment-calculation": "prices the instalment options; writes only X-EXTERNAL-ID's claim",
    "/v1.1/bnpl/payment-calculation": "the same route under the interface's sample prefix",
    "/v1.0/bnpl/status": "reads a transaction; writes only X-EXTERNAL-ID's claim",
    "/v1.1/bnpl/status": "the same route under the interface's sample prefix",
}


def _calls(dependant: Dependant) -> Iterator[Any]:
    for dependency in dependant.dependencies:
        yield dependency.call
        yield from _calls(dependency)


def _schemes(authenticator: Authenticator[Any]) -> Iterator[Authenticator[Any]]:
    """The schemes an authenticator may apply: its own, or each of a OneOf's."""
    if isinstance(authenticator, OneOf):
        for scheme in authenticator.schemes:
            yield from _schemes(scheme)
    else:
        yield authenticator


def _api_routes(app: FastAPI) -> Iterator[tuple[str, str, Dependant, list[Any]]]:
    """(method, path, dependant, dependency calls) of every API route, and AssertionError for any other
    kind of route that is not a public document or static file."""
    for context in iter_route_contexts(app.routes):
        route = context.original_route
        if isinstance(route, StaticPathIndex):
            continue  # an index of the routes below (kasir.kit.routing), not a route of its own
        if isinstance(route, Mount) and isinstance(route.app, StaticFiles):
            continue  # public: static files (the documents' scripts)
        if isinstance(route, Route) and not isinstance(route, APIRoute) and route.path == app.openapi_url:
            continue  # public: the OpenAPI document
        assert isinstance(route, APIRoute), f"{route!r}: not an API route, so it cannot declare a scheme"
        dependant = context.dependant
        calls = list(_calls(dependant))
        for method in sorted(context.methods or ()):
            yield method, context.path, dependant, calls


def problems(app: FastAPI) -> list[str]:
    found = []
    for method, path, _dependant, calls in _api_routes(app):
        route = f"{method} {path}"
        declared = [call for call in calls if isinstance(call, Authenticator)]
        if not declared:
            found.append(
                f"{route} declares no scheme: depend on one of kasir.auth's authenticators "
                "(WalletSigned, SnapSigned, ...), or dependencies=[PUBLIC] when it proves no caller"
            )
            continue
        schemes = [scheme for authenticator in declared for scheme in _schemes(authenticator)]
        for scheme in schemes:
            if scheme is not public and scheme.rate_limit is None:
                found.append(f"{route} authenticates with {scheme!r}, which has no rate limit (kasir.ratelimit)")
        moves_money = method == "POST" and path not in MOVES_NO_MONEY
        if moves_money and any(scheme in MERCHANT_SCHEMES for scheme in schemes) and keyed not in calls:
            found.append(
                f"{route} is a merchant POST that moves money but is not keyed: declare `once: Keyed` and run its "
                "unit with once.run(...) (kasir.idempotency), or list it in MOVES_NO_MONEY with the reason"
            )
    return found


def test_every_route_declares_a_rate_limited_scheme_and_money_moving_posts_are_keyed(app: FastAPI) -> None:
    assert problems(app) == []


def test_the_guard_sees_every_route_family(app: FastAPI) -> None:
    """The guard cannot pass by seeing nothing: each family is found, with the scheme it declares."""
    schemes_by_route = {
        f"{method} {path}": {
            scheme.scheme for call in calls if isinstance(call, Authenticator) for scheme in _schemes(call)
        }
        for method, path, _dependant, calls in _api_routes(app)
    }
    expected = {
        "POST /ewallet/v2/create-payment": {"basic + x-req-signature"},
        "POST /card-v2/v1/charge": {"basic", "basic + x-req-signature"},
        "POST /card-v2/v1/charge-direct": {"basic + x-req-signature"},
        "POST /v1.0/bnpl/qr-checkout": {"snap symmetric", "snap asymmetric"},
        "POST /auth/merchants/v1.0/access-token/b2b": {"snap asymmetric (token request)"},
        "GET /admin/payments": {"admin bearer"},
        "POST /admin/merchants": {"admin bearer"},
        "GET /console/overview": {"console session"},
        "POST /console/sign-in": {"console sign-in"},
        "GET /healthz": {"public"},
        "GET /metrics": {"public"},
        "GET /card/pages/{order_id}": {"public"},
    }
    assert {route: schemes_by_route.get(route) for route in expected} == expected
