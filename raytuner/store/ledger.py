"""The trial ledger a history store keeps beside its records: sessions, handed-out trials, API keys.

Evaluations live in the history store (JSON files or MongoDB). Every face of
a tuning session (a :class:`~raytuner.session.TuningSession` in Python, the
Ray searchers and scheduler, the gRPC service) adds to three append-only
logs, kept where the store is, so that a restarted process rebuilds what was
in flight by replaying them:

- **sessions**: one document per service session (its problem, strategy,
  options, tasks, seed, owner), written when the session is created;
- **trials**: one document per handed-out trial (session id, trial id, task,
  configuration, provenance), written before the trial is handed out, so a
  trial asked before a restart can be told after it;
- **keys**: the service's API key documents (salted hashes, never the keys)
  and their revocations;
- **session_evaluations**: the records of a session whose ``save_func_eval``
  is no (kept out of the history store, still durable), with its session id;
- **crowd_downloads**: one document per download of the crowd's records into
  the store's cache (:mod:`raytuner.crowd.cache`), so a later run
  reads the cache rather than downloading again.

Get a store's ledger from the store: :meth:`raytuner.store.HistoryStore.ledger`.
:class:`JsonLedger` keeps the logs as JSON-lines files in the store
directory's ``.service`` folder (flushed and fsync'd per line);
:class:`MongoLedger` in collections ``service_<log>`` of the store's database
(:data:`MONGO_COLLECTIONS`; journaled writes). Reading a
ledger writes nothing: the folder, files and indexes are made by the first
append.

Example:
    >>> import tempfile
    >>> from raytuner.store import JsonStore
    >>> ledger = JsonStore(tempfile.mkdtemp()).ledger()
    >>> list(ledger.read("sessions"))        # reading made nothing
    []
    >>> ledger.append("sessions", {"session_id": "s1", "problem_name": "demo"})
    >>> [d["session_id"] for d in ledger.read("sessions")]
    ['s1']
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from raytuner.errors import InvalidInputError
from raytuner.store.journal import BadLine, fsync_dir, quarantine

__all__ = ["Ledger", "JsonLedger", "MongoLedger", "LOGS", "MONGO_COLLECTIONS"]

log = logging.getLogger(__name__)

#: The ledger's logs.
LOGS = ("sessions", "trials", "keys", "session_evaluations", "crowd_downloads", "grants")
#: The MongoDB collection of each log (names kept from the first release, so existing data loads).
MONGO_COLLECTIONS = {name: f"service_{name}" for name in LOGS}


class Ledger(ABC):
    """Append-only logs of JSON documents; an append is durable when it returns."""

    @abstractmethod
    def append(self, name: str, document: dict[str, Any]) -> None:
        """Append ``document`` to log ``name``.

        Args:
            name: One of :data:`LOGS`.
            document: A JSON-ready mapping.
        """

    @abstractmethod
    def read(self, name: str, **equal: Any) -> Iterator[dict[str, Any]]:
        """The documents of log ``name`` in append order, those whose fields equal ``equal``.

        Args:
            name: One of :data:`LOGS`.
            **equal: Field values a document must have (``session_id="..."``).
        """

    def close(self) -> None:
        """Release what the ledger holds (it holds nothing between appends by default)."""


def _check_log(name: str) -> str:
    if name not in LOGS:
        raise InvalidInputError("log", f"unknown ledger log {name!r}", allowed=LOGS)
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


class JsonLedger(Ledger):
    """JSON-lines logs under ``DIRECTORY/.service`` (a JSON store's directory).

    Each append opens the log, writes one whole line, fsyncs and closes it,
    so a ledger holds no file between appends. A torn last line (a writer
    killed mid-line) is moved to ``<log>.jsonl.corrupt`` before this ledger's
    first append to that log; readers skip it.

    Args:
        directory: The store directory (``.service`` is made under it by the first append).
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory) / ".service"
        self._lock = threading.Lock()
        self._checked: set[str] = set()

    def __repr__(self) -> str:
        return f"JsonLedger({str(self.directory)!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {"directory": str(self.directory.parent)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["directory"])  # type: ignore[misc]

    def _path(self, name: str) -> Path:
        return self.directory / f"{_check_log(name)}.jsonl"

    def append(self, name: str, document: dict[str, Any]) -> None:
        """Append ``document`` to log ``name``; on disk (fsync'd) when this returns.

        Args:
            name: One of :data:`LOGS`.
            document: A JSON-ready mapping.
        """
        path = self._path(name)
        data = (json.dumps(document, separators=(",", ":")) + "\n").encode("utf-8")
        with self._lock:
            if name not in self._checked:
                created = not self.directory.is_dir()
                self.directory.mkdir(parents=True, exist_ok=True)
                if created:
                    fsync_dir(self.directory.parent)
                _quarantine_torn_tail(path)
                self._checked.add(name)
            new = not path.exists()
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            if new:
                fsync_dir(self.directory)

    def read(self, name: str, **equal: Any) -> Iterator[dict[str, Any]]:
        """The documents of log ``name`` in append order whose fields equal ``equal``; a torn or bad line is skipped.

        Args:
            name: One of :data:`LOGS`.
            **equal: Field values a document must have.
        """
        path = self._path(name)
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


#: Turns a MongoDB driver's errors into raytuner's while an action runs (``errors("read ...")``).
ErrorMapper = Callable[[str], AbstractContextManager[None]]


class MongoLedger(Ledger):
    """The logs as collections of a MongoDB database (see :data:`MONGO_COLLECTIONS`); journaled appends.

    Build it with :meth:`raytuner.store.MongoStore.ledger`, which hands over
    the store's collections (journaled write concern) and its error mapping.

    Args:
        collections: Each log's collection (pymongo ``Collection``), by log name.
        errors: The store's error mapping: driver errors become
            :class:`~raytuner.errors.StoreError` or
            :class:`~raytuner.errors.InvalidInputError`.
    """

    def __init__(self, collections: Mapping[str, Any], errors: ErrorMapper) -> None:
        missing = [name for name in LOGS if name not in collections]
        if missing:
            raise InvalidInputError("collections", f"no collection for log {missing[0]!r}", allowed=LOGS)
        self._collections = dict(collections)
        self._errors = errors
        self._lock = threading.Lock()
        self._order = 0
        self._indexed = False

    def _create_indexes(self) -> None:
        """Create the lookup indexes if missing (before this ledger's first append)."""
        if self._indexed:
            return
        self._collections["trials"].create_index([("session_id", 1), ("_order", 1)])
        self._collections["sessions"].create_index([("session_id", 1)])
        self._collections["session_evaluations"].create_index([("session_id", 1), ("_order", 1)])
        self._indexed = True

    def append(self, name: str, document: dict[str, Any]) -> None:
        """Append ``document`` to log ``name``; journaled when this returns.

        Args:
            name: One of :data:`LOGS`.
            document: A JSON-ready mapping.
        """
        collection = self._collections[_check_log(name)]
        with self._lock:
            self._order = max(self._order + 1, time.time_ns())
            order = self._order
        with self._errors(f"append to the ledger's {name} log"):
            self._create_indexes()
            collection.insert_one({**document, "_order": order})

    def read(self, name: str, **equal: Any) -> Iterator[dict[str, Any]]:
        """The documents of log ``name`` in append order whose fields equal ``equal``.

        Args:
            name: One of :data:`LOGS`.
            **equal: Field values a document must have.
        """
        collection = self._collections[_check_log(name)]
        with self._errors(f"read the ledger's {name} log"):
            for document in collection.find(dict(equal), {"_id": False}).sort("_order", 1):
                document.pop("_order", None)
                yield document
