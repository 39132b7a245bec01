"""Cryptographic primitives, named for what the interface uses them for.

Nothing here knows about merchants or wire formats; `snap/` and the product rooms
compose these into the signatures of docs/decisions.md §3.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Sequence
from functools import lru_cache

from cryptography.exceptions import InvalidSignature
from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

RSA_KEY_BITS = 2048  # interface.md Limits: RSA 2048 bit


class KeyError_(ValueError):
    """A key file that is not what the interface requires (message is one line)."""


def constant_time_equals(a: str | bytes, b: str | bytes) -> bool:
    """Compared as bytes: `hmac.compare_digest` refuses str with non-ASCII characters (a TypeError, so a
    500 for any header a client fills with them), and a lone surrogate has no plain UTF-8 encoding."""
    if isinstance(a, str):
        a = a.encode("utf-8", "surrogatepass")
    if isinstance(b, str):
        b = b.encode("utf-8", "surrogatepass")
    return hmac.compare_digest(a, b)


def sha256_hex(data: str | bytes) -> str:
    if isinstance(data, str):
        data = data.encode()
    return hashlib.sha256(data).hexdigest()


_INNER_PAD = bytes(x ^ 0x36 for x in range(256))
_OUTER_PAD = bytes(x ^ 0x5C for x in range(256))


class HmacKey:
    """HMAC (RFC 2104) under one key, for keys used on every request: the key's two padded
    blocks are hashed once, and each message costs two hash-state copies.

    About half the time of `hmac.digest`, which has OpenSSL 3 look up and set up the MAC on
    every call (more so under load). Same output.
    """

    __slots__ = ("_inner", "_outer")

    def __init__(self, key: bytes, hash_name: str = "sha256") -> None:
        block_size = hashlib.new(hash_name).block_size
        if len(key) > block_size:
            key = hashlib.new(hash_name, key).digest()
        key = key.ljust(block_size, b"\0")
        self._inner = hashlib.new(hash_name, key.translate(_INNER_PAD))
        self._outer = hashlib.new(hash_name, key.translate(_OUTER_PAD))

    def digest(self, message: bytes) -> bytes:
        inner = self._inner.copy()
        inner.update(message)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()


def hmac_sha512_b64(key: str | bytes, message: str | bytes) -> str:
    if isinstance(key, str):
        key = key.encode()
    if isinstance(message, str):
        message = message.encode()
    return base64.b64encode(hmac.digest(key, message, "sha512")).decode()


def b64decode_strict(value: str) -> bytes:
    """Standard Base64 with padding; raises ValueError on anything else."""
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise ValueError("not valid Base64") from exc


# --- RSA ---------------------------------------------------------------------------


def generate_rsa_private_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=RSA_KEY_BITS)


def private_key_pem(key: rsa.RSAPrivateKey) -> bytes:
    """PKCS#8 PEM, unencrypted (interface.md: the private key is PKCS8)."""
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def public_key_pem(key: rsa.RSAPublicKey) -> bytes:
    """SubjectPublicKeyInfo PEM (`BEGIN PUBLIC KEY`)."""
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def load_merchant_public_key(pem: bytes | str) -> rsa.RSAPublicKey:
    """Validate a merchant's public key: PEM `BEGIN PUBLIC KEY`, RSA, 2048 bits.

    Raises KeyError_ with a one-line reason for anything else.
    """
    data = pem.encode() if isinstance(pem, str) else pem
    if b"-----BEGIN PUBLIC KEY-----" not in data:
        if b"-----BEGIN" in data and b"PRIVATE KEY-----" in data:
            raise KeyError_("this is a private key; give the public key (BEGIN PUBLIC KEY)")
        raise KeyError_("not a PEM public key (expected a '-----BEGIN PUBLIC KEY-----' block)")
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise KeyError_("the PEM public key could not be parsed") from exc
    if not isinstance(key, rsa.RSAPublicKey):
        raise KeyError_(f"not an RSA key ({type(key).__name__.lstrip('_')}); RSA 2048-bit is required")
    if key.key_size != RSA_KEY_BITS:
        raise KeyError_(f"RSA key is {key.key_size} bits; {RSA_KEY_BITS} bits are required")
    return key


def load_private_key_pem(pem: bytes) -> rsa.RSAPrivateKey:
    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, rsa.RSAPrivateKey):
        raise KeyError_("not an RSA private key")
    return key


@lru_cache(maxsize=4096)
def _cached_public_key(pem: str) -> rsa.RSAPublicKey:
    # Parsing a PEM costs more than verifying a signature; keys change rarely.
    key = serialization.load_pem_public_key(pem.encode())
    assert isinstance(key, rsa.RSAPublicKey)
    return key


def rsa_sha256_sign_b64(private_key: rsa.RSAPrivateKey, message: str | bytes) -> str:
    """Base64 of RSASSA-PKCS1-v1_5 SHA-256 (SHA256withRSA)."""
    if isinstance(message, str):
        message = message.encode()
    return base64.b64encode(private_key.sign(message, padding.PKCS1v15(), hashes.SHA256())).decode()


# Stateless, so made once: the token path verifies on every request.
_PKCS1V15 = padding.PKCS1v15()
_SHA256 = hashes.SHA256()


def rsa_sha256_verify(public_key_pem_text: str, message: str | bytes, signature: bytes) -> bool:
    """True when `signature` (decoded) is a valid SHA256withRSA signature of `message`."""
    if isinstance(message, str):
        message = message.encode()
    try:
        _cached_public_key(public_key_pem_text).verify(signature, message, _PKCS1V15, _SHA256)
    except InvalidSignature:
        return False
    return True


def public_key_fingerprint(pem: str) -> str:
    """SHA-256 of the DER SubjectPublicKeyInfo, hex, for display."""
    der = _cached_public_key(pem).public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return hashlib.sha256(der).hexdigest()


# --- keys derived from the service's secret key -----------------------------------


def derive_key(secret_key: str, purpose: str) -> bytes:
    """A 32-byte key for one purpose, so one setting can serve several uses safely."""
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=purpose.encode()).derive(secret_key.encode())


_OPENED_KEPT = 10_000  # a few per merchant: more merchants than this start over, which is only slower


class SecretBox:
    """Encrypts merchant secrets at rest (Fernet: AES-128-CBC + HMAC-SHA256) under the service's secret key.

    It also opens what earlier keys sealed (`previous`, KASIR_SECRET_KEY_PREVIOUS), so a new key can be
    deployed before `kasir secrets rotate` re-seals every value with it (`reseal`).
    """

    def __init__(self, secret_key: str, previous: Sequence[str] = ()) -> None:
        self._current = _fernet(secret_key)
        self._previous = [_fernet(key) for key in previous if key != secret_key]
        # Opened values by their sealed text: every callback and signed request opens its merchant's
        # secrets, and a Fernet token's HMAC and AES cost more than the rest of a callback's record.
        # A value sealed anew (rotation) is a new text; a box with other keys is another box.
        self._opened: dict[str, str] = {}

    def seal(self, plaintext: str) -> str:
        return self._current.encrypt(plaintext.encode()).decode()

    def open(self, ciphertext: str) -> str:
        opened = self._opened.get(ciphertext)
        if opened is not None:
            return opened
        token = ciphertext.encode()
        for fernet in (self._current, *self._previous):
            try:
                opened = fernet.decrypt(token).decode()
            except InvalidToken:
                continue
            if len(self._opened) >= _OPENED_KEPT:
                self._opened.clear()
            self._opened[ciphertext] = opened
            return opened
        raise ValueError(
            "a stored secret cannot be decrypted: it was sealed with a key that is neither KASIR_SECRET_KEY "
            "nor one in KASIR_SECRET_KEY_PREVIOUS"
        )

    def is_current(self, ciphertext: str) -> bool:
        """Sealed with the current key (so no previous key is needed to open it)."""
        try:
            self._current.decrypt(ciphertext.encode())
        except InvalidToken:
            return False
        return True

    def reseal(self, ciphertext: str) -> str | None:
        """The value sealed with the current key; None when it already is. ValueError when no key opens it."""
        if self.is_current(ciphertext):
            return None
        return self.seal(self.open(ciphertext))


def _fernet(secret_key: str) -> Fernet:
    return Fernet(base64.urlsafe_b64encode(derive_key(secret_key, "kasir/secrets-at-rest")))
