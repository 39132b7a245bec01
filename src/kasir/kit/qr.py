"""QR images the service hands out (qrUrl, qr_url)."""

from __future__ import annotations

import io

import segno


def qr_png(content: str, *, border: int = 4) -> bytes:
    """A PNG of `content`, error correction M, 6 pixels a module."""
    buffer = io.BytesIO()
    segno.make(content, error="m", micro=False).save(buffer, kind="png", scale=6, border=border)
    return buffer.getvalue()
