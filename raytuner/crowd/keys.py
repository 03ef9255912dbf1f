"""Crowd API keys: the tuning service's scheme (``rt_<key id>_<secret>``).

The key id (8 random bytes, hex) is public and finds the stored entry; the
secret (32 random bytes, 256 bits, URL-safe base64) is stored only as
``sha256(salt + secret)`` with a 16-byte random salt and checked with
:func:`hmac.compare_digest`. The same format as
:mod:`raytuner.service.auth`, so one client-side key handling serves both;
the helpers live here because the crowd layer sits below the service.

Example:
    >>> key, key_id, salt, digest = new_key()
    >>> parse_key(key)[0] == key_id
    True
    >>> matches(salt, digest, parse_key(key)[1]), matches(salt, digest, "x" * 43)
    (True, False)
    >>> parse_key("rt_nothex_123") is None, parse_key({"$gt": ""}) is None
    (True, True)
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from typing import Any

__all__ = ["new_key", "parse_key", "digest", "matches", "KEY_PATTERN"]

#: What a key looks like; anything else is rejected before the database is asked.
KEY_PATTERN = re.compile(r"rt_([0-9a-f]{16})_([A-Za-z0-9_-]{43})")


def digest(salt: str, secret: str) -> str:
    """``sha256(salt bytes + secret)`` as hex (a fast hash is safe for a 256-bit random secret).

    Args:
        salt: the key's salt (hex).
        secret: the key's secret part.
    """
    return hashlib.sha256(bytes.fromhex(salt) + secret.encode()).hexdigest()


def new_key() -> tuple[str, str, str, str]:
    """A fresh key: ``(key, key_id, salt, digest)``; only the last three are stored."""
    key_id = secrets.token_hex(8)
    secret = secrets.token_urlsafe(32)
    salt = secrets.token_hex(16)
    return f"rt_{key_id}_{secret}", key_id, salt, digest(salt, secret)


def parse_key(key: Any) -> tuple[str, str] | None:
    """``(key_id, secret)`` of a well-formed key, else ``None`` (non-strings included).

    Args:
        key: what the caller sent (any value).
    """
    match = KEY_PATTERN.fullmatch(key) if isinstance(key, str) else None
    return (match.group(1), match.group(2)) if match else None


def matches(salt: str, stored_digest: str, secret: str) -> bool:
    """Whether ``secret`` hashes to ``stored_digest``, compared in constant time.

    Args:
        salt: the key's salt (hex).
        stored_digest: what :func:`digest` gave when the key was made.
        secret: the secret to check.
    """
    return hmac.compare_digest(stored_digest, digest(salt, secret))
