"""The trial ledger a history store keeps beside its records: sessions, handed-out trials, API keys.

Evaluations live in the history store (JSON files or MongoDB). Every face of
a tuning session (a :class:`~raytuner.session.tuning_session.TuningSession` in Python, the
Ray searchers and scheduler, the gRPC service) adds to three append-only
logs, kept where the store is, so that a restarted process rebuilds what was
in flight by replaying them:

- **sessions**: one document per service session (its problem, engine,
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
(:data:`MONGO_COLLECTIONS`; journaled writes, in the order the database server
took them: a process whose clock is behind cannot put a revocation before the
key it revokes). Reading a
ledger writes nothing: the folder, files and indexes are made by the first
append. Readers get JSON objects only: a damaged line of a JSON log is
skipped with a warning and kept by the writer in ``<log>.jsonl.corrupt``; a
write that fails (a full disk) is a :class:`~raytuner.errors.StoreError`
that leaves nothing behind (see :class:`JsonLedger`).

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

import fcntl
import json
import logging
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import Any

import bson

from raytuner.errors import InvalidInputError, StoreError
from raytuner.store.journal import BadLine, fsync_dir, quarantine
from raytuner.store.jsontext import dumps_standard, loads_stored
from raytuner.store.problem_files import cut_back, flock_current

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

    def close(self) -> None:  # noqa: B027 (an optional hook: nothing by default)
        """Release what the ledger holds (it holds nothing between appends by default)."""


def _check_log(name: str) -> str:
    if name not in LOGS:
        raise InvalidInputError("log", f"unknown ledger log {name!r}", allowed=LOGS)
    return name


def _document(line: bytes) -> dict[str, Any]:
    """The JSON object one ledger line (without its newline) holds.

    Raises:
        ValueError: naming why the line cannot be read (not UTF-8, not JSON, not an object).
    """
    try:
        document = loads_stored(line)
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg})") from None
    except RecursionError:
        raise ValueError("not usable JSON (nested too deeply)") from None
    if not isinstance(document, dict):
        raise ValueError(f"a JSON {type(document).__name__}, not an object")
    return document


def _scan(path: Path) -> Iterator[dict[str, Any] | BadLine]:
    """Each line of a log: its document, or a :class:`BadLine` (the last one torn when it has no newline)."""
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        return
    with fh:
        offset = 0
        for line in fh:
            start, offset = offset, offset + len(line)
            if not line.endswith(b"\n"):
                if line.strip():
                    yield BadLine(start, line, _TORN)
                return
            if not line.strip():
                continue
            try:
                yield _document(line[:-1])
            except ValueError as exc:
                yield BadLine(start, line[:-1], str(exc))


_TORN = "torn write: no newline at the end"


class JsonLedger(Ledger):
    """JSON-lines logs under ``DIRECTORY/.service`` (a JSON store's directory).

    Each append takes the log's lock file (``<log>.jsonl.lock``, ``flock``, so
    appends of several processes take turns; it is removed after the append),
    cuts a torn last line, writes
    one whole line, fsyncs and closes the log, so a ledger holds no file
    between appends. A write that fails (a full disk) is undone and raises
    :class:`~raytuner.errors.StoreError`: the log never keeps a fragment that
    the next line would be glued to.

    A line that cannot be read (a torn write, bytes that are not UTF-8, NUL
    bytes, JSON that is not an object) is skipped by readers with one warning
    naming the file and its byte offset; the writer moves it, whole and with
    its offset, to ``<log>.jsonl.corrupt`` on its first append to that log, or
    on :meth:`repair`. Readers only ever get JSON objects.

    Args:
        directory: The store directory (``.service`` is made under it by the first append).
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory) / ".service"
        self._lock = threading.Lock()
        self._checked: set[str] = set()
        self._warned: set[tuple[str, int, bytes]] = set()

    def __repr__(self) -> str:
        return f"JsonLedger({str(self.directory)!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {"directory": str(self.directory.parent)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["directory"])  # type: ignore[misc]  # unpickling: open anew

    def _path(self, name: str) -> Path:
        return self.directory / f"{_check_log(name)}.jsonl"

    @contextmanager
    def _exclusive(self, path: Path) -> Iterator[None]:
        """This process's lock and the log's lock file, held exclusively (made with the folder if missing)."""
        with self._lock:
            if not self.directory.is_dir():
                self.directory.mkdir(parents=True, exist_ok=True)
                fsync_dir(self.directory.parent)
            lock = path.with_name(path.name + ".lock")
            fd = flock_current(os.open(lock, os.O_RDWR | os.O_CREAT, 0o644), lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                with suppress(OSError):
                    lock.unlink()  # no lock file stays between appends: the next one makes it again
                os.close(fd)  # closing releases the lock

    def append(self, name: str, document: dict[str, Any]) -> None:
        """Append ``document`` to log ``name``; on disk (fsync'd) when this returns.

        Args:
            name: One of :data:`LOGS`.
            document: A JSON-ready mapping.

        Raises:
            StoreError: The line could not be written whole (a full disk); nothing of it is kept.
        """
        path = self._path(name)
        data = (dumps_standard(document) + "\n").encode("utf-8")
        try:
            with self._exclusive(path):
                if name in self._checked:
                    self._cut_torn_tail(path)
                else:
                    self._quarantine(path)
                    self._checked.add(name)
                _append_line(path, data)
        except OSError as exc:
            raise StoreError(f"cannot append to {path}: {exc.strerror or exc}") from None

    def repair(self, name: str) -> int:
        """Move every unreadable line of log ``name`` to ``<log>.jsonl.corrupt`` (with its offset); returns how many.

        A writer's operation (:meth:`append` does it once per log); reading never does it.

        Args:
            name: One of :data:`LOGS`.
        """
        path = self._path(name)
        if not path.exists():
            return 0
        try:
            with self._exclusive(path):
                moved = self._quarantine(path)
                self._checked.add(name)
                return moved
        except OSError as exc:
            raise StoreError(f"cannot repair {path}: {exc.strerror or exc}") from None

    def _quarantine(self, path: Path) -> int:
        """Keep the log's unreadable lines in its quarantine file and rewrite the log without them (locked)."""
        bad = [item for item in _scan(path) if isinstance(item, BadLine)]
        if not bad:
            return 0
        if bad == [bad[-1]] and bad[-1].reason == _TORN:
            return self._cut_torn_tail(path)
        target = path.with_name(path.name + ".corrupt")
        quarantine(target, path, bad)
        skip = {line.offset for line in bad}
        tmp = path.with_name(f".{path.name}.tmp")
        with open(path, "rb") as src, open(tmp, "wb") as out:
            offset = 0
            for line in src:
                if offset not in skip:
                    out.write(line)
                offset += len(line)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
        fsync_dir(self.directory)
        log.warning(
            "%s: moved %d unreadable line(s) (byte offset(s) %s: %s) to %s",
            path,
            len(bad),
            ", ".join(str(line.offset) for line in bad),
            bad[0].reason,
            target,
        )
        return len(bad)

    @staticmethod
    def _cut_torn_tail(path: Path) -> int:
        """Move a last line without its newline (a killed or failed writer's) to the quarantine file (locked)."""
        try:
            fh = open(path, "rb+")
        except FileNotFoundError:
            return 0
        with fh:
            size = os.fstat(fh.fileno()).st_size
            if size == 0 or os.pread(fh.fileno(), 1, size - 1) == b"\n":
                return 0
            keep = size - 1
            while keep > 0:  # back to the last newline, a block at a time
                start = max(0, keep - 65536)
                found = os.pread(fh.fileno(), keep - start, start).rfind(b"\n")
                if found >= 0:
                    keep = start + found + 1
                    break
                keep = start
            target = path.with_name(path.name + ".corrupt")
            quarantine(target, path, [BadLine(keep, os.pread(fh.fileno(), size - keep, keep), _TORN)])
            log.warning(
                "%s: moved a torn last line (%d bytes at byte offset %d) left by an interrupted write to %s",
                path,
                size - keep,
                keep,
                target,
            )
            fh.truncate(keep)
            fh.flush()
            os.fsync(fh.fileno())
            return 1

    def read(self, name: str, **equal: Any) -> Iterator[dict[str, Any]]:
        """The documents of log ``name`` in append order whose fields equal ``equal``; unreadable lines skipped.

        Only JSON objects are yielded. Each unreadable line is named once (file and byte offset) in a warning.

        Args:
            name: One of :data:`LOGS`.
            **equal: Field values a document must have.
        """
        path = self._path(name)
        for item in _scan(path):
            if isinstance(item, BadLine):
                self._warn(path, item)
            elif all(item.get(k) == v for k, v in equal.items()):
                yield item

    def _warn(self, path: Path, line: BadLine) -> None:
        key = (str(path), line.offset, line.data)
        if key in self._warned:
            return
        self._warned.add(key)
        log.warning(
            "%s: skipping an unreadable line at byte offset %d (%s); the next append or `raytuner "
            "history repair %s` keeps it in %s",
            path,
            line.offset,
            line.reason,
            self.directory.parent,
            path.name + ".corrupt",
        )


def _append_line(path: Path, data: bytes) -> None:
    """Write ``data`` at the end of ``path`` and fsync it; on a failure cut what was written and re-raise."""
    new = not path.exists()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        start = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except OSError:
            cut_back(fd, start, path)
            raise
    finally:
        os.close(fd)
    if new:
        fsync_dir(path.parent)


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
        with self._errors(f"append to the ledger's {name} log"):
            self._create_indexes()
            # an empty timestamp: the server puts its own (unique, increasing) time in, so appends sort in the
            # order the database took them, whatever the clocks of the processes that made them (the field
            # next to _id, where the store's records keep theirs)
            collection.insert_one({"_order": bson.Timestamp(0, 0), **document})

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
