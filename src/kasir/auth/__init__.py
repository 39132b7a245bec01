"""One home for authentication: one authenticator per scheme, each owning its rate limit and caches.

A route names the scheme it needs in one line, as a FastAPI dependency (the aliases below, or
`dependencies=[PUBLIC]` / `[ADMIN]`); the authenticator checks the request before the route's unit
of work opens, asks the failed-authentication lockout (kasir.ratelimit) before it checks and counts
a failure after, and answers the proven caller. Every route has the same shape:

    authenticate (a dependency) → parse → I/O that must happen before the unit (DNS)
      → one unit: `once.run(...)` (`Keyed`, kasir.idempotency) for a money-moving POST, a read unit otherwise
      → answer

    scheme                      authenticator            routes
    basic                       basic                    POST /card-v2/v1/charge (camelCase)
    basic + x-req-signature     wallet_signature         /ewallet/v2/* , the card dialect's charges,
                                                         the simulator's dummy payment
    snap symmetric              snap_symmetric           /v1.0|v1.1/bnpl/* with Authorization: Bearer
    snap asymmetric             snap_asymmetric          /v1.0|v1.1/bnpl/* without it
                                (snap_signature picks one of the two by the Authorization header)
    snap disbursement           snap_disbursement        the disbursement routes (/api/v1.x/... of
                                                         docs/decisions.md §11.1): symmetric only,
                                                         over a disbursement token
    snap asymmetric, token      token_request(product)   the two access-token paths
    access token of a product   access_token(product)    a route that takes a bare Bearer token
    processor's signature       processor_signature      POST /processors/{name}/notify
    admin bearer                admin_bearer (ADMIN)     /admin/*
    console sign-in / session   console_sign_in,         /console/* (kasir.auth.console)
                                console_session[_checked]
    public                      public (PUBLIC)          /healthz, /readyz, /metrics, documents,
                                                         static files, the customers' hosted pages

The route guard (tests/auth/test_routes.py) walks the application's routes and refuses one that
names no scheme, a scheme without a rate limit, or a merchant's POST that moves money without `Keyed`.

Errors (the route's wire format renders them, kasir.errors):

    KasirError
    ├── BadRequest
    │   ├── InvalidFieldFormat          a header's or signed field's form (x-version, X-TIMESTAMP, ...)
    │   └── InvalidMandatoryField       a required header missing (X-SIGNATURE, Authorization, ...)
    ├── Unauthorized                    credentials or a signature that do not verify; counted
    │   ├── InvalidToken                401xx01: a token forged, expired or of another product
    │   └── StaleTimestamp              X-TIMESTAMP outside the skew: not counted (kasir.snap.headers)
    ├── Conflict
    │   └── ExternalIdReused            409xx00: X-EXTERNAL-ID used today (claimed in the route's unit)
    └── TooManyRequests
        └── RateLimited                 429: too many token requests or tokens (kasir.ratelimit)
            └── AuthenticationLocked    429 (wallet 04): too many failed authentications
"""

from __future__ import annotations

from functools import cache
from typing import Annotated

from fastapi import Depends

from kasir.auth.access_token import AccessTokenAuthenticator, TokenRequest, TokenRequestAuthenticator
from kasir.auth.admin import ADMIN, admin_bearer
from kasir.auth.basic import BasicCaller, basic
from kasir.auth.processor import SignedNotifications, processor_signature
from kasir.auth.scheme import PUBLIC, Authenticator, OneOf, public
from kasir.auth.snap import SnapCaller, snap_asymmetric, snap_disbursement, snap_signature, snap_symmetric
from kasir.auth.wallet import WalletCaller, wallet_signature
from kasir.tokens.service import AccessToken, Product


@cache
def access_token(product: Product) -> AccessTokenAuthenticator:
    """The authenticator of `product`'s access tokens (one per product)."""
    return AccessTokenAuthenticator(product)


@cache
def token_request(product: Product) -> TokenRequestAuthenticator:
    """The authenticator of a request for `product`'s access token (one per product)."""
    return TokenRequestAuthenticator(product)


BasicAuthenticated = Annotated[BasicCaller, Depends(basic)]
WalletSigned = Annotated[WalletCaller, Depends(wallet_signature)]
SnapSigned = Annotated[SnapCaller, Depends(snap_signature)]
DisbursementSigned = Annotated[SnapCaller, Depends(snap_disbursement)]
PaymentToken = Annotated[AccessToken, Depends(access_token(Product.PAYMENT))]
PaymentTokenRequest = Annotated[TokenRequest, Depends(token_request(Product.PAYMENT))]
DisbursementTokenRequest = Annotated[TokenRequest, Depends(token_request(Product.DISBURSEMENT))]
ProcessorSigned = Annotated[SignedNotifications, Depends(processor_signature)]

__all__ = [
    "ADMIN",
    "PUBLIC",
    "AccessToken",
    "Authenticator",
    "BasicAuthenticated",
    "BasicCaller",
    "DisbursementSigned",
    "DisbursementTokenRequest",
    "OneOf",
    "PaymentToken",
    "PaymentTokenRequest",
    "ProcessorSigned",
    "SnapCaller",
    "SignedNotifications",
    "SnapSigned",
    "WalletCaller",
    "WalletSigned",
    "access_token",
    "admin_bearer",
    "basic",
    "processor_signature",
    "public",
    "snap_asymmetric",
    "snap_disbursement",
    "snap_signature",
    "snap_symmetric",
    "token_request",
    "wallet_signature",
]
