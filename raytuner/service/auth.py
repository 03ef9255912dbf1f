"""API keys of the tuning service: random, shown once, stored salted and hashed, revocable.

A key reads ``rt_<key id>_<secret>``: the key id (public, 8 bytes) finds the
stored entry, the secret (32 random bytes, 256 bits) is checked against
``sha256(salt + secret)`` in constant time. With that much entropy a fast
hash is safe (nothing to brute-force), and checking a key costs microseconds,
which matters at thousands of requests per second. Keys never appear in logs;
only key ids and names do.

Example:
    >>> import tempfile
    >>> from raytuner.store import JsonStore
    >>> keys = ApiKeys(JsonStore(tempfile.mkdtemp()).ledger())
    >>> key = keys.create("alice")
    >>> keys.verify(key).name
    'alice'
    >>> wrong = key[:-1] + ("B" if key.endswith("A") else "A")     # a different last character
    >>> keys.verify(wrong) is None, keys.verify("nonsense") is None
    (True, True)
    >>> keys.revoke(keys.verify(key).key_id); keys.verify(key) is None
    True
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

from raytuner.crowd.keys import matches, new_key, parse_key
from raytuner.errors import InvalidInputError, shown
from raytuner.store.ledger import Ledger

__all__ = ["ApiKeys", "KeyInfo", "open_keys"]

log = logging.getLogger(__name__)

#: How often (at most) :meth:`ApiKeys.verify` re-reads the keys log.
REFRESH_SECONDS = 1.0

_NAME = re.compile(r"[A-Za-z0-9_.@-]{1,64}")
_HEX = re.compile(r"(?:[0-9a-f]{2})+")
#: The fields (and their types) of a key document; one without them is skipped.
_FIELDS: dict[str, type | tuple[type, ...]] = {"name": str, "salt": str, "hash": str, "created": (int, float)}


@dataclass(frozen=True)
class KeyInfo:
    """A stored key's public part: its id, the name it was made for, when."""

    key_id: str
    name: str
    created: float
    revoked: bool = False


class ApiKeys:
    """The key registry over a ledger's ``keys`` log (see the module documentation).

    Args:
        ledger: The ledger of the service's store (:meth:`raytuner.store.HistoryStore.ledger`).
    """

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._lock = threading.Lock()
        self._refreshing = threading.Lock()
        self._entries: dict[str, dict[str, Any]] = {}
        self._loaded = 0.0
        self._skipped: set[tuple[int, str]] = set()  # damaged documents already warned about
        self.refresh()

    def refresh(self) -> None:
        """Re-read the keys log: keys created or revoked by another process (the CLI) take effect.

        The new registry is built aside and swapped in whole, so a concurrent ``verify`` sees
        either the old or the new keys, never an empty registry; on a read error the old keys stay.
        """
        entries: dict[str, dict[str, Any]] = {}
        with self._lock:  # a key created meanwhile in this process is not lost
            try:
                revoked: dict[str, int] = {}  # each revoked key id: the number of its revocation's document
                for number, document in enumerate(self.ledger.read("keys"), 1):
                    problem = self._apply(entries, document)
                    if problem is None and document.get("revoke"):
                        revoked.setdefault(document["key_id"], number)
                    self._warn(number, problem)
                for key_id, number in revoked.items():  # a revocation holds wherever it lies in the log
                    if key_id in entries:
                        entries[key_id]["revoked"] = True
                    else:
                        self._warn(number, f"revokes {key_id!r}, which no document creates")
            finally:
                self._loaded = time.monotonic()
            self._entries = entries

    def _warn(self, number: int, problem: str | None) -> None:
        """Warn once that document ``number`` of the keys log is skipped for ``problem`` (``None``: it is not)."""
        if problem is not None and (number, problem) not in self._skipped:
            self._skipped.add((number, problem))
            log.warning("keys log of %s: skipping document %d: %s", self.ledger, number, problem)

    @staticmethod
    def _apply(entries: dict[str, dict[str, Any]], document: dict[str, Any]) -> str | None:
        """Apply one document of the keys log to ``entries``; what is wrong with it when it is skipped.

        A damaged document costs its own key only: one without the fields a key or a revocation has
        (``{}``) changes nothing. A revocation of a key not (yet) in ``entries`` changes nothing here:
        :meth:`refresh` applies every revocation after the whole log is read, since a key is never
        revived and a log written by an earlier release may hold a revocation before its key (ordered
        by a lagging clock).
        """
        if not isinstance(document, dict):
            return f"a JSON {type(document).__name__}, not a key object"
        key_id = document.get("key_id")
        if not isinstance(key_id, str) or not key_id:
            return "no key_id"
        if document.get("revoke"):
            if key_id in entries:
                entries[key_id] = dict(entries[key_id], revoked=True)
            return None
        wrong = [f for f, kind in _FIELDS.items() if not isinstance(document.get(f), kind)]
        if wrong:
            return f"key {key_id!r} lacks a valid {', '.join(wrong)}"
        if not (_HEX.fullmatch(document["salt"]) and _HEX.fullmatch(document["hash"])):
            return f"key {key_id!r}: its salt and hash are not hexadecimal"
        entries[key_id] = dict(document, revoked=False)
        return None

    def create(self, name: str) -> str:
        """A new key for ``name``, returned once (only its salted hash is kept).

        Args:
            name: Whom the key is for: 1-64 of letters, digits, ``_ . @ -``.
        """
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise InvalidInputError("name", f"{shown(name)} is not a key name: 1-64 of letters, digits, _ . @ -")
        key, key_id, salt, digest = new_key()
        document = {"key_id": key_id, "name": name, "salt": salt, "hash": digest, "created": time.time()}
        with self._lock:
            self.ledger.append("keys", document)
            self._entries = dict(self._entries)
            self._apply(self._entries, document)
        log.info("created API key %s for %s", key_id, name)
        return key

    def revoke(self, key_id: str) -> None:
        """Revoke the key with id ``key_id``: it no longer authenticates.

        Args:
            key_id: The key's public id.
        """
        with self._lock:
            if key_id not in self._entries:
                raise InvalidInputError("key_id", f"no key with id {shown(key_id)}")
            document = {"key_id": key_id, "revoke": True, "time": time.time()}
            self.ledger.append("keys", document)
            self._entries = dict(self._entries)
            self._apply(self._entries, document)
        log.info("revoked API key %s", key_id)

    def verify(self, key: str | None) -> KeyInfo | None:
        """The key's info when ``key`` is a valid, unrevoked key, else ``None``.

        Args:
            key: The key a request carries (``None``: none).
        """
        parts = parse_key(key)
        if parts is None:
            return None
        if time.monotonic() - self._loaded > REFRESH_SECONDS and self._refreshing.acquire(blocking=False):
            try:  # one thread re-reads; the others use the keys known
                self.refresh()
            except Exception as exc:  # the store may be down; keep what we knew
                log.warning("cannot re-read the API keys (%s); using the keys known", type(exc).__name__)
            finally:
                self._refreshing.release()
        entry = self._entries.get(parts[0])
        if entry is None or entry["revoked"] or not matches(entry["salt"], entry["hash"], parts[1]):
            return None
        return self._info(entry)

    @staticmethod
    def _info(entry: dict[str, Any]) -> KeyInfo:
        return KeyInfo(entry["key_id"], entry["name"], entry["created"], entry["revoked"])

    def list(self) -> list[KeyInfo]:
        """Every key's public part, oldest first."""
        return [self._info(e) for e in self._entries.values()]


def open_keys(location: str | os.PathLike[str]) -> ApiKeys:
    """The key registry of the service whose store is at ``location``.

    Args:
        location: The store's directory or ``mongodb://`` URI.
    """
    from raytuner.store import open_store  # the store package is heavier than this module

    return ApiKeys(open_store(location).ledger())
