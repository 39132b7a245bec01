"""What every HTML page Kasir serves outside the console shares: its response headers.

A Content-Security-Policy without inline scripts (scripts are files the package serves), no
framing by another site (clickjacking), no referrer, and never cached (the pages show payment data).
"""

from __future__ import annotations

from fastapi.responses import HTMLResponse

PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        "frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
    ),
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def html_page(content: str, status_code: int = 200) -> HTMLResponse:
    return HTMLResponse(content, status_code=status_code, headers=PAGE_HEADERS)
