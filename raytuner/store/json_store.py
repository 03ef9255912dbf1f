"""The embedded history store: one GPTune JSON file per tuning problem.

Layout of a store directory::

    DIR/<problem>.json          the GPTune history file users see and share
    DIR/<problem>.json.journal  append-only JSON lines not yet compacted into it
    DIR/<problem>.json.lock     the lock file (fcntl.flock)

An append writes one line to the journal under an exclusive lock and fsyncs
it before returning, so an acknowledged record survives a ``kill -9`` the next
instant. Rewriting the whole growing GPTune file on every append would cost
O(n²); instead the journal is *compacted* into the GPTune file (write a
temporary file, fsync, atomic rename, fsync the directory, then truncate the
journal) when it outgrows the file, on :meth:`JsonStore.compact` and on
:meth:`JsonStore.close`. Each step leaves a readable pair of files: readers
take the union of both and drop repeated uids, so a crash between the rename
and the truncation loses and duplicates nothing. A torn journal line (power
loss mid-write) is skipped on read, and the next append starts on a new line.

Several processes may append to the same problem at once: writes are
serialised by the lock, fsyncs run outside it.

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
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator

from raytuner.errors import StoreError
from raytuner.records import FunctionEvaluation, HistoryDocument, SurrogateModelRecord
from raytuner.store.base import EvaluationQuery, HistoryStore, check_problem_name

__all__ = ["JsonStore", "read_history_file", "write_history_file"]

log = logging.getLogger(__name__)

_FUNC_EVAL = "func_eval"
_SURROGATE = "surrogate_model"
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


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_history_file(path: str | os.PathLike[str]) -> HistoryDocument:
    """Read a GPTune history file (for example one GPTune itself wrote).

    >>> doc = read_history_file("../shared/data/gptune/GPTune-Demo.json")  # doctest: +SKIP
    >>> len(doc.func_eval), len(doc.surrogate_model)                        # doctest: +SKIP
    (70, 35)
    """
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, json.JSONDecodeError) as exc:
        raise StoreError(f"cannot read GPTune history file {path}: {exc}") from None
    return HistoryDocument.model_validate(data)


def _dump_one_record_per_line(data: dict[str, Any], fh: Any) -> None:
    """Write a GPTune document with one record per line.

    Plain JSON that GPTune's readers (``json.load``) take as they take an
    indented file, but about five times faster to write than ``indent=2``
    and written record by record, so a compaction holds no second copy of
    the history as one big string.
    """
    lists = [k for k in (_SURROGATE, _FUNC_EVAL) if isinstance(data.get(k), list)]
    header = {k: v for k, v in data.items() if k not in lists}
    fh.write(json.dumps(header)[:-1])  # the header object without its closing brace
    for i, kind in enumerate(lists):
        sep = ", " if header or i else ""
        fh.write(f'{sep}"{kind}": [')
        for j, record in enumerate(data[kind]):
            fh.write(("\n" if j == 0 else ",\n") + json.dumps(record))
        fh.write("\n]" if data[kind] else "]")
    fh.write("}\n")


def write_history_file(path: str | os.PathLike[str], document: HistoryDocument | dict[str, Any]) -> None:
    """Write a GPTune history file atomically and durably (temp file, fsync, rename)."""
    target = Path(path)
    data = document.to_dict() if isinstance(document, HistoryDocument) else document
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            _dump_one_record_per_line(data, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(target.parent)


class _Problem:
    """Open file descriptors of one problem's journal and lock file."""

    def __init__(self, base: Path) -> None:
        self.main = base
        self.journal = base.with_name(base.name + ".journal")
        self.lock_path = base.with_name(base.name + ".lock")
        self.lock_fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.journal_fd = os.open(self.journal, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        _fsync_dir(base.parent)  # a new journal's directory entry must be durable too
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

    ``compact_min_bytes`` sets the smallest journal that triggers a compaction
    during appends (mostly for tests).
    """

    def __init__(self, directory: str | os.PathLike[str], compact_min_bytes: int = COMPACT_MIN_BYTES) -> None:
        self.directory = Path(directory)
        if self.directory.exists() and not self.directory.is_dir():
            raise StoreError(f"{self.directory} is a file, not a store directory; read a single GPTune "
                             f"file with raytuner.store.read_history_file")
        self.directory.mkdir(parents=True, exist_ok=True)
        self.compact_min_bytes = compact_min_bytes
        self._problems: dict[str, _Problem] = {}
        self._guard = threading.Lock()
        self._cache: dict[str, tuple[tuple[int, int, int], dict[str, Any]]] = {}

    def __repr__(self) -> str:
        return f"JsonStore({str(self.directory)!r})"

    def __getstate__(self) -> dict[str, Any]:
        # Ray pickles searchers (Tuner state): a store travels as its location and reopens lazily
        return {"directory": str(self.directory), "compact_min_bytes": self.compact_min_bytes}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["directory"], state["compact_min_bytes"])  # type: ignore[misc]

    def path(self, problem: str) -> Path:
        """The GPTune file of ``problem``."""
        return self.directory / f"{check_problem_name(problem)}.json"

    def _problem(self, problem: str) -> _Problem:
        with self._guard:
            state = self._problems.get(problem)
            if state is None:
                state = self._problems[problem] = _Problem(self.path(problem))
            return state

    # -- writing -----------------------------------------------------------------------------

    def _write_lines(self, problem: str, entries: Iterable[tuple[str, dict[str, Any]]]) -> None:
        payload = b"".join(
            json.dumps({"kind": kind, "record": record}, separators=(",", ":")).encode() + b"\n"
            for kind, record in entries)
        if not payload:
            return
        state = self._problem(problem)
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

    def append(self, problem: str, record: FunctionEvaluation) -> None:
        """Persist one evaluation; it is on disk (fsync'd) when this returns."""
        self._write_lines(problem, [(_FUNC_EVAL, record.to_dict())])

    def append_many(self, problem: str, records: Iterable[FunctionEvaluation]) -> int:
        """Persist several evaluations with one write and one fsync."""
        entries = [(_FUNC_EVAL, r.to_dict()) for r in records]
        self._write_lines(problem, entries)
        return len(entries)

    def append_model(self, problem: str, record: SurrogateModelRecord) -> None:
        """Persist one surrogate-model record; fsync'd when this returns."""
        self._write_lines(problem, [(_SURROGATE, record.to_dict())])

    # -- reading -----------------------------------------------------------------------------

    def _read_main(self, path: Path) -> dict[str, Any]:
        try:
            st = path.stat()
        except FileNotFoundError:
            return {}
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        cached = self._cache.get(str(path))
        if cached and cached[0] == key:
            return cached[1]
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except json.JSONDecodeError as exc:
            raise StoreError(f"{path} is not valid JSON ({exc}); it was not written by raytuner's "
                             f"atomic writer") from None
        self._cache[str(path)] = (key, data)
        return data

    def _read_journal(self, path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
        try:
            with open(path, "rb") as fh:
                raw = fh.read()
        except FileNotFoundError:
            return
        lines = raw.split(b"\n")
        for number, line in enumerate(lines[:-1], start=1):  # the last piece has no newline yet
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                yield entry["kind"], entry["record"]
            except (json.JSONDecodeError, KeyError, TypeError):
                log.warning("%s:%d: skipping a torn or invalid journal line", path, number)

    def _snapshot(self, state: _Problem, problem: str) -> dict[str, Any]:
        """The GPTune document of the file and the journal together, repeated uids dropped.

        The caller holds the problem's lock.
        """
        main = self._read_main(state.main)
        journal = list(self._read_journal(state.journal))
        document: dict[str, Any] = {"tuning_problem_name": problem, "tuning_problem_category": None}
        document.update({k: v for k, v in main.items() if k not in (_FUNC_EVAL, _SURROGATE)})
        for kind in (_SURROGATE, _FUNC_EVAL):
            seen: set[str] = set()
            merged = []
            for record in [*main.get(kind, []), *(r for k, r in journal if k == kind)]:
                uid = record.get("uid")
                if uid not in seen:
                    seen.add(uid)
                    merged.append(record)
            document[kind] = merged
        return document

    def _raw(self, problem: str) -> dict[str, Any]:
        state = self._problem(problem)
        with state.locked(exclusive=False):
            return self._snapshot(state, problem)

    def evaluations(self, problem: str, query: EvaluationQuery | None = None) -> list[FunctionEvaluation]:
        """The problem's evaluations matching ``query``, oldest first."""
        records = [FunctionEvaluation.model_validate(r) for r in self._raw(problem)[_FUNC_EVAL]]
        return records if query is None else [r for r in records if query.matches(r)]

    def models(self, problem: str) -> list[SurrogateModelRecord]:
        """The problem's surrogate-model records, oldest first."""
        return [SurrogateModelRecord.model_validate(r) for r in self._raw(problem)[_SURROGATE]]

    def problems(self) -> list[str]:
        """Problems with a GPTune file or a journal in the directory."""
        names = set()
        for path in self.directory.iterdir():
            if path.name.startswith("."):
                continue
            if path.name.endswith(".json"):
                names.add(path.name[: -len(".json")])
            elif path.name.endswith(".json.journal") and path.stat().st_size > 0:
                names.add(path.name[: -len(".json.journal")])
        return sorted(names)

    # -- compaction --------------------------------------------------------------------------

    def compact(self, problem: str) -> None:
        """Fold the journal into the GPTune file; safe to interrupt at any point."""
        state = self._problem(problem)
        with state.locked(exclusive=True):
            if os.fstat(state.journal_fd).st_size == 0 and state.main.exists():
                return
            document = self._snapshot(state, problem)
            write_history_file(state.main, document)
            os.ftruncate(state.journal_fd, 0)
            os.fsync(state.journal_fd)
            self._cache.pop(str(state.main), None)
            count = len(document[_FUNC_EVAL])
            del document
        _release_memory()
        log.debug("compacted %s: %d evaluations", state.main, count)

    def close(self) -> None:
        """Compact every problem this store touched and close its files."""
        with self._guard:
            problems = list(self._problems)
        for name in problems:
            try:
                self.compact(name)
            except OSError as exc:  # the journal still holds every record
                log.warning("could not compact %s: %s", name, exc)
        with self._guard:
            for state in self._problems.values():
                state.close()
            self._problems.clear()
