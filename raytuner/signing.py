"""Ed25519 key pairs for the crowd repository: the client signs each call, the server keeps public keys only.

GPTuneCrowd (paper 000) offers public/private key pairs beside random API
keys. Here a user makes a key pair on their own machine
(:func:`generate_key_pair`, ``raytuner crowd keys generate``); the
administrator registers the public key (``raytuner crowd keys register``).
The private key never leaves the user's machine.

Each call carries a fresh *signed credential* where an API key would go:
``rtsig_<key id>_<unix seconds>_<nonce>_<signature>``. The signature is
over ``raytuner-crowd-v1``, the key id, the time, the nonce and the method
called (the repository's action, for example ``upload``), so a credential
signed for a query cannot upload. The server accepts a credential once,
within :data:`WINDOW_SECONDS` of its time: an old one has expired, a
replayed one (its nonce already seen) is refused.

The key id is the first 8 bytes of the SHA-256 of the raw public key (hex),
so a private key alone says which public key it belongs to.

Example:
    >>> private_pem, public_key = generate_key_pair()
    >>> signer = Signer.from_pem(private_pem)
    >>> credential = signer.credential("upload", now=1_800_000_000)
    >>> signed = parse_signed(credential)
    >>> signed.key_id == key_id_of(public_key), signed.timestamp
    (True, 1800000000)
    >>> verify(public_key, signed, "upload"), verify(public_key, signed, "query_function_evaluations")
    (True, False)
    >>> parse_signed("rt_0123456789abcdef_" + "x" * 43) is None
    True
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from raytuner.errors import InvalidInputError

__all__ = [
    "Signer",
    "SignedCredential",
    "generate_key_pair",
    "parse_signed",
    "verify",
    "key_id_of",
    "public_key_text",
    "WINDOW_SECONDS",
    "CONTEXT",
    "is_signed",
    "DASHBOARD_SIGN_IN",
    "weak_key",
]

#: How far (seconds) a credential's time may lie from the server's clock, either way.
WINDOW_SECONDS = 60

#: The method a dashboard sign-in token is signed for (``raytuner crowd keys token``).
DASHBOARD_SIGN_IN = "dashboard_sign_in"

#: What every signed message starts with (a signature for anything else never verifies here).
CONTEXT = "raytuner-crowd-v1"

_SIGNED = re.compile(r"rtsig_([0-9a-f]{16})_([0-9]{1,12})_([0-9a-f]{16})_([A-Za-z0-9_-]{86})")
_METHOD = re.compile(r"[a-z_]{1,64}")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def key_id_of(public_key: str) -> str:
    """The key id of a public key: the first 8 bytes of the SHA-256 of its raw bytes, as hex.

    Args:
        public_key: the raw public key, URL-safe base64 (:func:`public_key_text` checks and normalises one).
    """
    return hashlib.sha256(_unb64(public_key)).hexdigest()[:16]


_P = 2**255 - 19
_D = -121665 * pow(121666, _P - 2, _P) % _P


def _double(point: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    """A point of edwards25519 doubled, in extended coordinates (RFC 8032, 5.1.4)."""
    x, y, z, _ = point
    a, b, c = x * x % _P, y * y % _P, 2 * z * z % _P
    h = (a + b) % _P
    e = (h - (x + y) * (x + y)) % _P
    g = (a - b) % _P
    f = (c + g) % _P
    return e * f % _P, g * h % _P, f * g % _P, e * h % _P


def weak_key(raw: bytes) -> bool:
    """Whether 32 bytes are no safe Ed25519 public key: off the curve, not canonical, or of small order.

    A key of small order (the identity among them) verifies signatures that
    anyone can make, so it is refused at registration (RFC 8032 decoding,
    then [8]A must not be the identity).

    Args:
        raw: the raw public key.

    >>> weak_key(bytes([1]) + bytes(31)), weak_key(bytes(32))      # the identity; a point of order 4
    (True, True)
    >>> weak_key(Ed25519PrivateKey.generate().public_key().public_bytes(serialization.Encoding.Raw,
    ...                                                                 serialization.PublicFormat.Raw))
    False
    """
    if len(raw) != 32:
        return True
    y = int.from_bytes(raw, "little") & ((1 << 255) - 1)
    sign = raw[31] >> 7
    if y >= _P:
        return True
    x2 = (y * y - 1) * pow(_D * y * y + 1, _P - 2, _P) % _P
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P:
        x = x * pow(2, (_P - 1) // 4, _P) % _P
    if (x * x - x2) % _P or (x == 0 and sign):
        return True
    if x & 1 != sign:
        x = _P - x
    point = (x, y, 1, x * y % _P)
    for _ in range(3):
        point = _double(point)
    return point[0] == 0 and point[1] == point[2]


def public_key_text(value: Any) -> str:
    """``value`` as the canonical public key text (32 raw bytes, URL-safe base64 without padding).

    Takes that text itself or a PEM ``PUBLIC KEY`` block; anything else is refused naming the field.

    Args:
        value: the public key a user gave.

    >>> public_key_text("not a key")
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: public_key: not an Ed25519 public key (allowed: 43 characters of URL-safe base64 (raytuner crowd keys generate), a PEM PUBLIC KEY block)
    """
    allowed = ["43 characters of URL-safe base64 (raytuner crowd keys generate)", "a PEM PUBLIC KEY block"]
    text = value.strip() if isinstance(value, str) else ""
    raw = b""
    try:
        if text.startswith("-----BEGIN PUBLIC KEY-----"):
            key = serialization.load_pem_public_key(text.encode())
            if isinstance(key, Ed25519PublicKey):
                raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        elif re.fullmatch(r"[A-Za-z0-9_-]{43}", text):
            raw = _unb64(text)
    except (ValueError, TypeError, binascii.Error, UnsupportedAlgorithm):
        pass
    if not raw:
        raise InvalidInputError("public_key", "not an Ed25519 public key", allowed=allowed)
    if weak_key(raw):
        raise InvalidInputError(
            "public_key",
            "a weak Ed25519 key (off the curve or of small order) that anyone could sign for",
            allowed=allowed,
        )
    return _b64(raw)


def generate_key_pair() -> tuple[bytes, str]:
    """A new key pair: the private key as unencrypted PKCS#8 PEM (keep it; never send it) and the public key text."""
    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return pem, _b64(public)


def _message(key_id: str, timestamp: int, nonce: str, method: str) -> bytes:
    return f"{CONTEXT}\n{key_id}\n{timestamp}\n{nonce}\n{method}".encode()


class Signer:
    """Signs crowd calls with a user's private key (see the module documentation).

    Args:
        private_key: the user's Ed25519 private key.

    Example:
        >>> signer = Signer.from_pem(generate_key_pair()[0])
        >>> signer.credential("upload").startswith(f"rtsig_{signer.key_id}_")
        True
    """

    def __init__(self, private_key: Ed25519PrivateKey) -> None:
        self._private = private_key
        raw = private_key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        self.public_key = _b64(raw)
        self.key_id = key_id_of(self.public_key)

    def __repr__(self) -> str:
        return f"Signer(key_id={self.key_id!r})"

    @classmethod
    def from_pem(cls, pem: bytes) -> Signer:
        """The signer of an unencrypted PKCS#8 PEM Ed25519 private key.

        Args:
            pem: the key file's bytes (as :func:`generate_key_pair` makes them).
        """
        try:
            key = serialization.load_pem_private_key(pem, password=None)
        except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
            raise InvalidInputError("private_key", f"not an unencrypted PEM private key ({exc})") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise InvalidInputError(
                "private_key",
                f"a {type(key).__name__}, not an Ed25519 key",
                allowed=["Ed25519 (raytuner crowd keys generate)"],
            )
        return cls(key)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Signer:
        """The signer of the private key in the file at ``path``.

        Args:
            path: the private key file (``raytuner crowd keys generate --out PATH``).
        """
        try:
            pem = Path(path).expanduser().read_bytes()
        except OSError as exc:
            raise InvalidInputError("private_key", f"cannot read {os.fspath(path)!r} ({exc.strerror})") from None
        return cls.from_pem(pem)

    def credential(self, method: str, now: float | None = None) -> str:
        """A fresh credential for one call of ``method``, good once within :data:`WINDOW_SECONDS` of ``now``.

        Args:
            method: the repository action called (``upload``, ``query_function_evaluations``, ...).
            now: the time to sign (default ``None``: the clock's).
        """
        if not isinstance(method, str) or not _METHOD.fullmatch(method):
            raise InvalidInputError("method", f"{method!r} is not a method name", allowed=["1-64 of a-z and _"])
        timestamp = int(time.time() if now is None else now)
        nonce = secrets.token_hex(8)
        signature = self._private.sign(_message(self.key_id, timestamp, nonce, method))
        return f"rtsig_{self.key_id}_{timestamp}_{nonce}_{_b64(signature)}"


@dataclass(frozen=True)
class SignedCredential:
    """A signed credential's parts (the signature not yet checked)."""

    key_id: str
    timestamp: int
    nonce: str
    signature: bytes


def is_signed(credential: Any) -> bool:
    """Whether ``credential`` claims to be a signed credential (starts ``rtsig_``), well-formed or not.

    Args:
        credential: what a caller presented.
    """
    return isinstance(credential, str) and credential.startswith("rtsig_")


def parse_signed(credential: Any) -> SignedCredential | None:
    """The parts of a well-formed signed credential, else ``None`` (API keys and non-strings included).

    Args:
        credential: what a caller presented.
    """
    match = _SIGNED.fullmatch(credential) if isinstance(credential, str) else None
    if match is None:
        return None
    return SignedCredential(match.group(1), int(match.group(2)), match.group(3), _unb64(match.group(4)))


def verify(public_key: str, signed: SignedCredential, method: str) -> bool:
    """Whether ``signed`` carries a valid signature by ``public_key`` for a call of ``method``.

    The time window and replays are the server's to check
    (:meth:`~raytuner.crowd.accounts.UserAccounts.authenticate`).

    Args:
        public_key: the registered public key text.
        signed: the credential's parts.
        method: the action being called.
    """
    try:
        Ed25519PublicKey.from_public_bytes(_unb64(public_key)).verify(
            signed.signature, _message(signed.key_id, signed.timestamp, signed.nonce, method)
        )
    except (InvalidSignature, ValueError):
        return False
    return True
