"""The product pages' side of a processor's checkout: where the customer goes next."""

from __future__ import annotations

from fastapi.responses import RedirectResponse, Response

from kasir.errors import NotFound
from kasir.kit.pages import html_page
from kasir.processors.protocols import Checkout


def hand_over(checkout: Checkout) -> Response:
    """The processor's own page (the in-process simulator's), or a redirect to its checkout."""
    if checkout.html is not None:
        return html_page(checkout.html)
    if checkout.url is None:
        raise NotFound("Not Found")
    return RedirectResponse(checkout.url, status_code=303)
