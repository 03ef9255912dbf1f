"""What the tuning service keeps beside the history store: sessions, handed-out trials, API keys.

Evaluations live in the history store (JSON files or MongoDB) like any
other run's. The service adds three append-only logs, kept where the store
is, so a restarted server rebuilds every session by replaying them:

- **sessions**: one document per session (its problem, strategy, options,
  tasks, seed, owner's key id), written when the session is created;
- **trials**: one document per handed-out trial (id, task, configuration,
  provenance), written before ``Ask`` answers, so a trial asked before a
  restart can be told after it;
- **keys**: API key documents (salted hashes, never the keys) and their
  revocations.

:class:`JsonCatalog` keeps them as JSON-lines files in the store directory's
``.service`` folder (flushed and fsync'd per line); :class:`MongoCatalog` in
collections of the store's database (journaled writes).

Example:
    >>> import tempfile
    >>> catalog = JsonCatalog(tempfile.mkdtemp())
    >>> catalog.append("sessions", {"session_id": "s1", "problem_name": "demo"})
    >>> [d["session_id"] for d in catalog.read("sessions")]
    ['s1']
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Iterator

from raytuner.errors import InvalidInputError
from raytuner.store.base import HistoryStore
from raytuner.store.journal import BadLine, quarantine

__all__ = ["Catalog", "JsonCatalog", "MongoCatalog", "open_catalog", "LOGS"]

log = logging.getLogger(__name__)

#: The catalog's logs.
LOGS = ("sessions", "trials", "keys")


class Catalog(ABC):
    """Append-only logs of documents; an append is durable when it returns."""

    @abstractmethod
    def append(self, name: str, document: dict[str, Any]) -> None:
        """Append ``document`` to log ``name`` (one of :data:`LOGS`)."""

    @abstractmethod
    def read(self, name: str, **equal: Any) -> Iterator[dict[str, Any]]:
        """The documents of log ``name`` in order, those whose fields equal ``equal``."""

    def close(self) -> None:
        """Release files or connections."""


def _check_log(name: str) -> str:
    if name not in LOGS:
        raise InvalidInputError("log", f"unknown catalog log {name!r}", allowed=LOGS)
    return name


def _quarantine_torn_tail(path: Path) -> None:
    """Move a last line that a killed writer left without its newline to ``<log>.jsonl.corrupt``.

    Appends then start on a fresh line; the torn bytes are kept, never dropped.
    """
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as fh:
        data = fh.read()
        if data.endswith(b"\n"):
            return
        keep = data.rfind(b"\n") + 1
        target = path.with_name(path.name + ".corrupt")
        quarantine(target, path, [BadLine(keep, data[keep:], "torn write: no newline at the end")])
        log.warning("%s: moved a torn last line (%d bytes at byte offset %d) left by an interrupted write to %s",
                    path, len(data) - keep, keep, target)
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())


class JsonCatalog(Catalog):
    """JSON-lines logs under ``DIRECTORY/.service`` (a JSON store's directory)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory) / ".service"
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._files: dict[str, Any] = {}

    def _file(self, name: str) -> Any:
        handle = self._files.get(name)
        if handle is None:
            path = self.directory / f"{_check_log(name)}.jsonl"
            _quarantine_torn_tail(path)
            handle = self._files[name] = open(path, "a", encoding="utf-8")  # noqa: SIM115 - kept open
            dir_fd = os.open(self.directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        return handle

    def append(self, name: str, document: dict[str, Any]) -> None:
        line = json.dumps(document, separators=(",", ":")) + "\n"
        with self._lock:
            handle = self._file(name)
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def read(self, name: str, **equal: Any) -> Iterator[dict[str, Any]]:
        path = self.directory / f"{_check_log(name)}.jsonl"
        if not path.exists():
            return
        with open(path, encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                if not line.endswith("\n"):
                    log.warning("%s: ignoring a torn last line %d", path, number)
                    break
                try:
                    document = json.loads(line)
                except json.JSONDecodeError:
                    log.warning("%s: ignoring line %d, which is not JSON", path, number)
                    continue
                if all(document.get(k) == v for k, v in equal.items()):
                    yield document

    def close(self) -> None:
        with self._lock:
            for handle in self._files.values():
                handle.close()
            self._files.clear()


class MongoCatalog(Catalog):
    """Collections ``service_sessions``, ``service_trials`` and ``service_keys`` of a MongoStore's database."""

    def __init__(self, store: Any) -> None:
        from pymongo import ASCENDING  # noqa: PLC0415 - pymongo only when MongoDB is used

        from raytuner.store.mongo_store import DURABLE  # noqa: PLC0415

        self._errors = store._errors           # driver errors become StoreError, like the store's own
        database = store.client[store.database]
        self._collections = {name: database.get_collection(f"service_{name}", write_concern=DURABLE)
                             for name in LOGS}
        with self._errors("create the service's indexes"):
            self._collections["trials"].create_index([("session_id", ASCENDING), ("_order", ASCENDING)])
            self._collections["sessions"].create_index([("session_id", ASCENDING)])
        self._lock = threading.Lock()
        self._order = 0

    def append(self, name: str, document: dict[str, Any]) -> None:
        with self._lock:
            self._order = max(self._order + 1, time.time_ns())
            order = self._order
        collection = self._collections[_check_log(name)]
        with self._errors(f"append to the service's {name} log"):
            collection.insert_one({**document, "_order": order})

    def read(self, name: str, **equal: Any) -> Iterator[dict[str, Any]]:
        collection = self._collections[_check_log(name)]
        with self._errors(f"read the service's {name} log"):
            for document in collection.find(dict(equal), {"_id": False}).sort("_order", 1):
                document.pop("_order", None)
                yield document


def open_catalog(store: HistoryStore) -> Catalog:
    """The catalog kept beside ``store``: a :class:`JsonCatalog` for a JSON store, else a :class:`MongoCatalog`."""
    directory = getattr(store, "directory", None)
    if directory is not None:
        return JsonCatalog(directory)
    return MongoCatalog(store)
