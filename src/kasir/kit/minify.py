"""JSON minify exactly as docs/decisions.md §3.2 defines it.

`minify(body)` removes whitespace outside JSON strings and changes nothing else: no key
reordering, no re-escaping, no number normalisation. The result is what SNAP signs.
"""

from __future__ import annotations

_WHITESPACE = frozenset(b" \t\n\r")
_QUOTE = 0x22
_BACKSLASH = 0x5C


def minify(body: bytes) -> bytes:
    """Strip insignificant whitespace from a JSON document (bytes in, bytes out).

    Works on the raw bytes, so non-ASCII text inside strings passes through untouched.
    Invalid JSON is minified the same way (the signature check comes before parsing).
    """
    if not body:
        return b""
    # Fast path: nothing to strip (the common case for machine-made bodies).
    if not any(b in body for b in (b" ", b"\n", b"\t", b"\r")):
        return body
    out = bytearray()
    in_string = False
    escaped = False
    for byte in body:
        if in_string:
            out.append(byte)
            if escaped:
                escaped = False
            elif byte == _BACKSLASH:
                escaped = True
            elif byte == _QUOTE:
                in_string = False
        elif byte == _QUOTE:
            in_string = True
            out.append(byte)
        elif byte not in _WHITESPACE:
            out.append(byte)
    return bytes(out)
