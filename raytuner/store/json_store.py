"""The embedded history store: one GPTune JSON file per tuning problem.

Layout of a store directory::

    DIR/<problem>.json          the GPTune history file users see and share
    DIR/<problem>.json.journal  append-only JSON lines not yet compacted into it
    DIR/<problem>.json.lock     the lock file (fcntl.flock)
    DIR/<problem>.json.corrupt  journal lines that could not be read (only if any)

An append writes one line to the journal under an exclusive lock and fsyncs
it before returning, so an acknowledged record survives a ``kill -9`` the next
instant; records written together (:meth:`JsonStore.append_batch`, an
import) share one line, so they are stored all or none. Rewriting the whole
growing GPTune file on every append would cost O(n²); instead the journal is
*compacted* into the GPTune file (write a temporary file, fsync, atomic
rename, fsync the directory, then truncate the journal) when it outgrows the
file, on :meth:`JsonStore.compact` and on :meth:`JsonStore.close` of a store
that wrote. Each step leaves a readable pair of files: readers take the union
of both and drop repeated uids, so a crash between the rename and the
truncation loses and duplicates nothing.

Reading never writes: a store that only reads creates no file, takes only a
shared lock (when a writer made the lock file), and compacts nothing. A
journal line that cannot be read (a torn write after a power loss, a flipped
byte) is skipped by readers with a warning; the writer's next compaction
copies it whole, with its byte offset, into ``<problem>.json.corrupt`` before
it truncates the journal, so nothing is ever dropped. The next append after a
torn line starts on a new line.

Several processes may append to the same problem at once: writes are
serialised by the lock, fsyncs run outside it.

A whole GPTune file is read and written (atomically) by
:mod:`raytuner.store.gptune_file`.

Example:
    >>> import tempfile
    >>> from raytuner.records import FunctionEvaluation
    >>> with JsonStore(tempfile.mkdtemp()) as store:
    ...     store.append("demo", FunctionEvaluation.create({"t": 1}, {"x": 0.5}, {"y": 2.0}))
    ...     [r.evaluation_result for r in store.evaluations("demo")]
    [{'y': 2.0}]
"""

from __future__ import annotations

import ctypes
import fcntl
import gc
import json
import logging
import os
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

from pydantic import ValidationError

from raytuner.errors import InvalidInputError, StoreError, from_validation_error
from raytuner.jsontext import loads_stored
from raytuner.records import FunctionEvaluation, SurrogateModelRecord
from raytuner.store.base import EvaluationQuery, HistoryStore, check_problem_name
from raytuner.store.gptune_file import write_history_file
from raytuner.store.gptune_schemas import detect_schema, normalise_history
from raytuner.store.ledger import JsonLedger
from raytuner.store.journal import (
    FUNC_EVAL as _FUNC_EVAL,
    SURROGATE_MODEL as _SURROGATE,
    BadLine,
    encode_entries,
    fsync_dir,
    quarantine,
    read_journal,
)

__all__ = ["JsonStore"]

log = logging.getLogger(__name__)

#: The journal is compacted once it is larger than this and than half the GPTune file,
#: so compaction work stays proportional to the records appended (amortised O(1)).
COMPACT_MIN_BYTES = 4 * 1024 * 1024


def _release_memory() -> None:
    """Hand the memory of a compaction's transient copy of the history back to the OS.

    A compaction parses and re-encodes the whole file once; without this the
    allocator keeps those pages and an appending process's RSS steps up at
    every compaction although it holds nothing.
    """
    gc.collect()
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # not glibc
            pass


class _Problem:
    """Open file descriptors of one problem's journal and lock file."""

    def __init__(self, base: Path) -> None:
        self.main = base
        self.journal = base.with_name(base.name + ".journal")
        self.lock_path = base.with_name(base.name + ".lock")
        self.lock_fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.journal_fd = os.open(self.journal, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        fsync_dir(base.parent)  # a new journal's directory entry must be durable too
        self.thread_lock = threading.Lock()  # flock is per open file, not per thread

    @contextmanager
    def locked(self, exclusive: bool) -> Iterator[None]:
        with self.thread_lock:
            fcntl.flock(self.lock_fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            try:
                yield
            finally:
                fcntl.flock(self.lock_fd, fcntl.LOCK_UN)

    def close(self) -> None:
        os.close(self.journal_fd)
        os.close(self.lock_fd)


class JsonStore(HistoryStore):
    """GPTune JSON files in a directory, with an fsync'd journal per problem.

    Opening a store creates nothing: the directory and a problem's journal and
    lock file are made by its first write.

    Args:
        directory: The store directory (made on the first write if missing).
        compact_min_bytes: The smallest journal that triggers a compaction
            during appends (mostly for tests).
    """

    def __init__(self, directory: str | os.PathLike[str], compact_min_bytes: int = COMPACT_MIN_BYTES) -> None:
        self.directory = Path(directory)
        if self.directory.exists() and not self.directory.is_dir():
            raise StoreError(f"{self.directory} is a file, not a store directory; read a single GPTune "
                             f"file with raytuner.store.read_history_file")
        self.compact_min_bytes = compact_min_bytes
        self._problems: dict[str, _Problem] = {}
        self._guard = threading.Lock()
        self._cache: dict[str, tuple[tuple[int, int, int], dict[str, Any]]] = {}
        self._warned: set[tuple[str, int, bytes]] = set()

    def __repr__(self) -> str:
        return f"JsonStore({str(self.directory)!r})"

    def __getstate__(self) -> dict[str, Any]:
        # Ray pickles searchers (Tuner state): a store travels as its location and reopens lazily
        return {"directory": str(self.directory), "compact_min_bytes": self.compact_min_bytes}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["directory"], state["compact_min_bytes"])  # type: ignore[misc]

    def path(self, problem: str) -> Path:
        """The GPTune file of ``problem``.

        Args:
            problem: the tuning problem's name.
        """
        return self.directory / f"{check_problem_name(problem)}.json"

    def quarantine_path(self, problem: str) -> Path:
        """Where journal lines of ``problem`` that could not be read are kept.

        Args:
            problem: the tuning problem's name.
        """
        return self.directory / f"{check_problem_name(problem)}.json.corrupt"

    def _journal_path(self, problem: str) -> Path:
        return self.directory / f"{check_problem_name(problem)}.json.journal"

    def _writer(self, problem: str) -> _Problem:
        """The problem's open journal and lock file, made on the first write."""
        with self._guard:
            state = self._problems.get(problem)
            if state is None:
                path = self.path(problem)
                self.directory.mkdir(parents=True, exist_ok=True)
                state = self._problems[problem] = _Problem(path)
            return state

    # -- writing -----------------------------------------------------------------------------

    def append(self, problem: str, record: FunctionEvaluation) -> None:
        """Persist one evaluation; it is on disk (fsync'd) when this returns."""
        self._write(problem, [(_FUNC_EVAL, record)])

    def append_model(self, problem: str, record: SurrogateModelRecord) -> None:
        """Persist one surrogate-model record; fsync'd when this returns."""
        self._write(problem, [(_SURROGATE, record)])

    def append_batch(self, problem: str, evaluations: Sequence[FunctionEvaluation] = (),
                     models: Sequence[SurrogateModelRecord] = ()) -> None:
        """Persist evaluations and surrogate models as one journal line: all of them or none.

        Args:
            problem: The tuning problem's name.
            evaluations: ``func_eval`` records to add.
            models: ``surrogate_model`` records to add.
        """
        self._write(problem, [*((_SURROGATE, m) for m in models), *((_FUNC_EVAL, e) for e in evaluations)])

    def _write(self, problem: str, records: Sequence[tuple[str, FunctionEvaluation | SurrogateModelRecord]]) -> None:
        check_problem_name(problem)
        if not records:
            return
        entries = [(kind, record.to_dict()) for kind, record in records]
        try:
            payload = encode_entries(entries)
        except (TypeError, ValueError):
            for i, entry in enumerate(entries):     # name the first record that is not JSON data
                try:
                    encode_entries([entry])
                except (TypeError, ValueError) as exc:
                    raise InvalidInputError(f"records[{i}]", f"cannot be stored as JSON: {exc}") from None
            raise
        state = self._writer(problem)
        with state.locked(exclusive=True):
            size = os.fstat(state.journal_fd).st_size
            if size and os.pread(state.journal_fd, 1, size - 1) != b"\n":
                payload = b"\n" + payload  # a torn line from a crash: start afresh
            view = memoryview(payload)
            while view:
                written = os.write(state.journal_fd, view)
                view = view[written:]
        os.fsync(state.journal_fd)
        journal_size = size + len(payload)
        if journal_size > self.compact_min_bytes and journal_size > self._main_size(state) // 2:
            self.compact(problem)

    @staticmethod
    def _main_size(state: _Problem) -> int:
        try:
            return state.main.stat().st_size
        except FileNotFoundError:
            return 0

    # -- reading -----------------------------------------------------------------------------

    def _read_main(self, path: Path) -> dict[str, Any]:
        try:
            fh = open(path, encoding="utf-8")
        except FileNotFoundError:
            return {}
        with fh:
            st = os.fstat(fh.fileno())
            key = (st.st_ino, st.st_size, st.st_mtime_ns)
            cached = self._cache.get(str(path))
            if cached and cached[0] == key:
                return cached[1]
            try:
                data = loads_stored(fh.read())
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise StoreError(f"{path} is not valid JSON ({exc}); it was not written by raytuner's "
                                 f"atomic writer") from None
        if not isinstance(data, dict) or not all(isinstance(data.get(k, []), list) for k in (_FUNC_EVAL, _SURROGATE)):
            raise StoreError(f"{path} is not a GPTune history file (expected an object whose "
                             f"{_FUNC_EVAL} and {_SURROGATE} are lists)")
        try:
            if isinstance(data.get(_FUNC_EVAL), list) and detect_schema(data) != 1:
                data, _ = normalise_history(data)  # an older GPTune file: read as today's (written so at compaction)
        except InvalidInputError as exc:
            raise StoreError(f"{path} is not a GPTune history file: {exc}") from None
        self._cache[str(path)] = (key, data)
        return data

    @contextmanager
    def _shared_lock(self, problem: str) -> Iterator[None]:
        """Hold off writers while reading, without creating or changing any file."""
        state = self._problems.get(problem)
        if state is not None:
            with state.locked(exclusive=False):
                yield
            return
        try:
            fd = os.open(self.path(problem).with_name(self.path(problem).name + ".lock"), os.O_RDONLY)
        except FileNotFoundError:
            # no writer has opened this problem yet. Without the lock, reading the journal before
            # the file still sees every record stored before the read began: the file is only ever
            # replaced (atomically) by a superset of itself and the journal, and a line still being
            # written has no newline yet and is not read
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def _warn_unreadable(self, journal: Path, lines: list[BadLine]) -> None:
        fresh = [line for line in lines if (str(journal), line.offset, line.data) not in self._warned]
        if not fresh:
            return
        self._warned.update((str(journal), line.offset, line.data) for line in fresh)
        log.warning("%s: skipping %d torn or unreadable journal line(s) at byte offset(s) %s (%s); the next "
                    "compaction keeps them in %s", journal, len(fresh), ", ".join(str(b.offset) for b in fresh),
                    fresh[0].reason, journal.with_name(journal.name.removesuffix(".journal") + ".corrupt"))

    def _snapshot(self, problem: str, journal_entries: list[tuple[str, dict[str, Any]]],
                  main: dict[str, Any]) -> dict[str, Any]:
        """The GPTune document of the file and the journal together, repeated uids dropped."""
        document: dict[str, Any] = {"tuning_problem_name": problem, "tuning_problem_category": None}
        document.update({k: v for k, v in main.items() if k not in (_FUNC_EVAL, _SURROGATE)})
        for kind in (_SURROGATE, _FUNC_EVAL):
            seen: set[str] = set()
            merged = []
            for record in [*main.get(kind, []), *(r for k, r in journal_entries if k == kind)]:
                uid = record.get("uid") if isinstance(record, dict) else None
                if uid not in seen:
                    seen.add(uid)
                    merged.append(record)
            document[kind] = merged
        return document

    def _raw(self, problem: str) -> dict[str, Any]:
        journal_path = self._journal_path(problem)
        with self._shared_lock(problem):
            journal = read_journal(journal_path)  # the journal before the file (see _shared_lock)
            main = self._read_main(self.path(problem))
        self._warn_unreadable(journal_path, journal.bad)
        return self._snapshot(problem, journal.entries, main)

    def _validated(self, problem: str, kind: str, model: Any) -> list[Any]:
        records = self._raw(problem)[kind]
        try:
            return [model.model_validate(r) for r in records]
        except ValidationError as exc:
            err = from_validation_error(exc)
            raise StoreError(f"{self.path(problem)}: a {kind} record is not valid: {err}") from None

    def evaluations(self, problem: str, query: EvaluationQuery | None = None) -> list[FunctionEvaluation]:
        """The problem's evaluations matching ``query``, oldest first."""
        records = self._validated(problem, _FUNC_EVAL, FunctionEvaluation)
        return records if query is None else [r for r in records if query.matches(r)]

    def models(self, problem: str) -> list[SurrogateModelRecord]:
        """The problem's surrogate-model records, oldest first."""
        return self._validated(problem, _SURROGATE, SurrogateModelRecord)

    def problems(self) -> list[str]:
        """Problems with a GPTune file or a non-empty journal in the directory."""
        if not self.directory.is_dir():
            return []
        names = set()
        for path in self.directory.iterdir():
            if path.name.startswith("."):
                continue
            if path.name.endswith(".json"):
                names.add(path.name[: -len(".json")])
            elif path.name.endswith(".json.journal") and path.stat().st_size > 0:
                names.add(path.name[: -len(".json.journal")])
        return sorted(names)

    def ledger(self) -> JsonLedger:
        """The store's trial ledger: JSON-lines logs in ``DIR/.service``, made by their first append."""
        return JsonLedger(self.directory)

    # -- compaction --------------------------------------------------------------------------

    def compact(self, problem: str) -> None:
        """Fold the journal into the GPTune file; safe to interrupt at any point.

        A writer's operation: lines of the journal that cannot be read are first
        copied to :meth:`quarantine_path` (with their byte offsets), so the
        truncated journal drops nothing. A problem with an empty or no journal
        is left as it is (no file is made).

        Args:
            problem: The tuning problem's name.
        """
        journal_path = self._journal_path(problem)
        if problem not in self._problems and not (journal_path.exists() and journal_path.stat().st_size):
            return
        state = self._writer(problem)
        with state.locked(exclusive=True):
            if os.fstat(state.journal_fd).st_size == 0:
                return
            journal = read_journal(journal_path)
            document = self._snapshot(problem, journal.entries, self._read_main(state.main))
            unreadable = [*journal.bad, *([journal.tail] if journal.tail else [])]  # no writer is mid-line now
            if unreadable:
                target = self.quarantine_path(problem)
                quarantine(target, journal_path, unreadable)
                log.warning("%s: moved %d unreadable journal line(s) (byte offset(s) %s) to %s", journal_path,
                            len(unreadable), ", ".join(str(b.offset) for b in unreadable), target)
            write_history_file(state.main, document)
            os.ftruncate(state.journal_fd, 0)
            os.fsync(state.journal_fd)
            self._cache.pop(str(state.main), None)
            count = len(document[_FUNC_EVAL])
            del document
        _release_memory()
        log.debug("compacted %s: %d evaluations", state.main, count)

    def close(self) -> None:
        """Compact every problem this store wrote to and close its files; a store that only read writes nothing."""
        with self._guard:
            problems = list(self._problems)
        for name in problems:
            try:
                self.compact(name)
            except (OSError, StoreError) as exc:  # the journal still holds every record
                log.warning("could not compact %s: %s", name, exc)
        with self._guard:
            for state in self._problems.values():
                state.close()
            self._problems.clear()
