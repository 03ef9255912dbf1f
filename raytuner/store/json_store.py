"""The embedded history store: one GPTune JSON file per tuning problem.

Layout of a store directory::

    DIR/<problem>.json          the GPTune history file users see and share
    DIR/<problem>.json.journal  append-only JSON lines not yet compacted into it
    DIR/<problem>.json.lock     the lock file (fcntl.flock)
    DIR/<problem>.json.corrupt  lines that could not be read, with file and offset (only if any)

An append writes one line to the journal under an exclusive lock and fsyncs
it before returning, so an acknowledged record survives a ``kill -9`` the next
instant; records written together (:meth:`JsonStore.append_batch`, an
import) share one line, so they are stored all or none. Rewriting the whole
growing GPTune file on every append would cost O(n²); instead the journal is
*compacted* into the GPTune file (write a temporary file, fsync, atomic
rename, fsync the directory, then truncate the journal) when it outgrows the
file, on :meth:`JsonStore.compact` and on :meth:`JsonStore.close` of a store
that wrote. A store that wrote and was never closed is closed when the
interpreter exits. The last writer to close removes the (then empty) journal
and the lock file: whenever no writer is open, the directory holds the GPTune
file alone, with every record. Each step leaves a readable pair of files: readers take the union
of both and drop repeated uids, so a crash between the rename and the
truncation loses and duplicates nothing. A write that fails (a full disk) is
cut back and raises :class:`~raytuner.errors.StoreError`; once the line is
fsync'd the append has succeeded: a compaction that fails then is logged and
tried again later, never reported as a failed append.

Reading never writes: a store that only reads creates no file, takes only a
shared lock (when a writer made the lock file), and compacts nothing. A
journal line that cannot be read (a torn write after a power loss, a flipped
byte) is skipped by readers with a warning; the writer's next compaction
copies it whole, with its byte offset, into ``<problem>.json.corrupt`` before
it truncates the journal, so nothing is ever dropped. The next append after a
torn line starts on a new line.

A reader that keeps a problem's records reads only what was appended since
its last read (:meth:`JsonStore.changes_since`): the journal's lines after the
offset it read to, while the GPTune file is the one it read (same inode, size
and time) and the journal the same file, no shorter. A compaction, a repair,
a quarantined line or a replaced file change the GPTune file or cut the
journal: the next read is a full one.

A damaged GPTune file (a flipped byte, bytes that are not UTF-8, a torn end)
is read around (:mod:`raytuner.store.salvage`), with one warning naming the
damaged lines' offsets; writers refuse it with a StoreError saying how to
repair it: :meth:`JsonStore.repair` (``raytuner history repair DIR PROBLEM``)
moves those lines, whole, to ``<problem>.json.corrupt`` and rewrites the file.
An emptied GPTune file is damaged the same way (one damaged line of no
bytes): the journal's records stay readable and repair rewrites the file
from them. A writer that read the file whole and then finds it shrunk into
damage (emptied or cut while it runs, as a server may find it) rewrites it at
its next append from the copy it read, the file's intact lines and the
journal, so its records are not lost with the file.

Several processes may append to the same problem at once: writes are
serialised by the lock, fsyncs run outside it. A whole GPTune file is read
and written (atomically) by :mod:`raytuner.store.gptune_file`.

Example:
    >>> import tempfile
    >>> from raytuner.problem.records import FunctionEvaluation
    >>> with JsonStore(tempfile.mkdtemp()) as store:
    ...     store.append("demo", FunctionEvaluation.create({"t": 1}, {"x": 0.5}, {"y": 2.0}))
    ...     [r.evaluation_result for r in store.evaluations("demo")]
    [{'y': 2.0}]
"""

from __future__ import annotations

import atexit
import fcntl
import logging
import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from raytuner.errors import InvalidInputError, StoreError, from_validation_error
from raytuner.problem.records import FunctionEvaluation, SurrogateModelRecord, is_problem_name, suggest_problem_name
from raytuner.store.base import PROBLEM_NAME_RULE, EvaluationQuery, HistoryStore, StoreChanges, check_problem_name
from raytuner.store.gptune_file import write_history_file
from raytuner.store.gptune_schemas import detect_schema, normalise_history
from raytuner.store.journal import FUNC_EVAL as _FUNC_EVAL
from raytuner.store.journal import SURROGATE_MODEL as _SURROGATE
from raytuner.store.journal import BadLine, encode_entries, quarantine, read_journal
from raytuner.store.ledger import JsonLedger
from raytuner.store.problem_files import ProblemFiles, release_memory
from raytuner.store.salvage import drop_invalid_records, read_store_file
from raytuner.store.server_lock import LEASE_TTL, FileServerLock

__all__ = ["JsonStore", "JsonCursor"]

log = logging.getLogger(__name__)

#: Stores with a problem open for writing, closed at exit (a script that never closes its store still
#: leaves the GPTune file whole); a store leaves the set when it closes.
_OPEN_WRITERS: set[JsonStore] = set()
_PID = os.getpid()


@atexit.register
def _close_open_writers() -> None:
    if os.getpid() != _PID:  # a forked child that exits normally closes nothing it inherited
        return
    for store in list(_OPEN_WRITERS):
        try:
            store.close()
        except Exception as exc:  # at exit: the journal keeps every record, the next writer compacts
            log.warning("could not close %r at exit: %s", store, exc)


_MODELS: dict[str, Any] = {_FUNC_EVAL: FunctionEvaluation, _SURROGATE: SurrogateModelRecord}
#: Where a GPTune file written one record per line begins its ``func_eval`` list (in its first line, or
#: on the line that closes its ``surrogate_model`` list).
_FUNC_EVAL_START = re.compile(rb'(?:\A[^\n]*|\n\]), "func_eval": \[')
#: How a journal line (or a batch's entry) that holds an evaluation begins.
_JOURNAL_EVALUATION = b'{"kind":"func_eval","record":'

FileIdentity = tuple[int, int, int, int]  # device, inode, size, modification time (ns)


def _identity(path: Path) -> FileIdentity | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


@dataclass(frozen=True)
class JsonCursor:
    """Where a read of a JSON store's problem ended (:attr:`StoreChanges.cursor`).

    Args:
        main: the GPTune file read (device, inode, size, time; ``None``: there was none).
        journal: the journal's inode (``None``: there was none).
        offset: the journal's byte offset after the last whole line read.
        complete: ``False``: the GPTune file changed during the read, which makes the next read a full one.
    """

    main: FileIdentity | None
    journal: int | None
    offset: int
    complete: bool = True


#: The journal is compacted once it is larger than this and than half the GPTune file,
#: so compaction work stays proportional to the records appended (amortised O(1)).
COMPACT_MIN_BYTES = 4 * 1024 * 1024


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
            raise StoreError(
                f"{self.directory} is a file, not a store directory; read a single GPTune "
                f"file with raytuner.store.read_history_file"
            )
        self.compact_min_bytes = compact_min_bytes
        self._problems: dict[str, ProblemFiles] = {}
        self._guard = threading.Lock()
        self._cache: dict[str, tuple[tuple[int, int, int], dict[str, Any], bool]] = {}  # bool: records validated
        self._warned: set[tuple[str, int, bytes]] = set()
        self._damage: dict[str, list[BadLine]] = {}  # per GPTune file: its damaged lines
        self._writable: set[str] = set()  # problems whose file was found intact
        self._compact_after: dict[str, int] = {}  # the journal size at which a failed compaction is retried
        self._intact: dict[str, dict[str, Any]] = {}  # per GPTune file: its whole copy, read before it was damaged
        self._counted: dict[str, tuple[FileIdentity, int]] = {}  # per GPTune file: its evaluations, counted

    def __repr__(self) -> str:
        return f"JsonStore({str(self.directory)!r})"

    def __getstate__(self) -> dict[str, Any]:
        # Ray pickles searchers (Tuner state): a store travels as its location and reopens lazily
        return {"directory": str(self.directory), "compact_min_bytes": self.compact_min_bytes}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["directory"], state["compact_min_bytes"])  # type: ignore[misc]  # unpickling: open anew

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

    def _writer(self, problem: str) -> ProblemFiles:
        """The problem's open journal and lock file, made on the first write."""
        with self._guard:
            state = self._problems.get(problem)
            if state is None:
                path = self.path(problem)
                self.directory.mkdir(parents=True, exist_ok=True)
                state = self._problems[problem] = ProblemFiles(path)
                _OPEN_WRITERS.add(self)
            return state

    # -- writing -----------------------------------------------------------------------------

    def append(self, problem: str, record: FunctionEvaluation) -> None:
        """Persist one evaluation; it is on disk (fsync'd) when this returns."""
        self._write(problem, [(_FUNC_EVAL, record)])

    def append_model(self, problem: str, record: SurrogateModelRecord) -> None:
        """Persist one surrogate-model record; fsync'd when this returns."""
        self._write(problem, [(_SURROGATE, record)])

    def append_batch(
        self, problem: str, evaluations: Sequence[FunctionEvaluation] = (), models: Sequence[SurrogateModelRecord] = ()
    ) -> None:
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
        entries = [(kind, record.to_file()) for kind, record in records]
        try:
            payload = encode_entries(entries)
        except (TypeError, ValueError):
            for i, entry in enumerate(entries):  # name the first record that is not JSON data
                try:
                    encode_entries([entry])
                except (TypeError, ValueError) as exc:
                    raise InvalidInputError(f"records[{i}]", f"cannot be stored as JSON: {exc}") from None
            raise
        if problem not in self._writable:
            self.check_writable(problem)
        state = self._writer(problem)
        journal_size = state.append(payload)  # durable: from here on nothing may fail the write
        if self._restore(problem):
            return
        if (
            journal_size > max(self.compact_min_bytes, self._compact_after.get(problem, 0))
            and journal_size > state.main_size() // 2
        ):
            try:
                self.compact(problem)
            except Exception as exc:  # the record is durable in the journal; compact later
                self._compact_after[problem] = journal_size + self.compact_min_bytes
                log.warning(
                    "could not compact %s (%s: %s); the journal keeps every record, compaction is tried again later",
                    self.path(problem),
                    type(exc).__name__,
                    exc,
                )

    def _restore(self, problem: str) -> bool:
        """Rewrite ``problem``'s GPTune file when it shrank into damage (emptied, cut) since this store read it whole.

        The store's copy of the file read before (its records), the file's intact lines and the journal are
        written back, the damaged lines kept in :meth:`quarantine_path`. True when it was rewritten. A file
        that grew (another writer's compaction) or shrank whole (a repair) is left as it is; a failure is
        logged: the journal keeps every record.
        """
        path = self.path(problem)
        cached = self._cache.get(str(path))
        if cached is None or self._damage.get(str(path)):
            return False  # not read since this store compacted it, or damaged when read (writers refuse it)
        try:
            if os.stat(path).st_size >= cached[0][1]:
                return False
        except FileNotFoundError:
            return False  # removed: the next compaction writes the journal's records
        with self._shared_lock(problem):
            self._read_main(path)
        if not self._damage.get(str(path)):
            return False
        log.warning(
            "%s was emptied or damaged while this store was writing to it; rewriting it from the %d evaluations "
            "this store read from it before, its intact lines and the journal",
            path,
            len(self._intact.get(str(path), {}).get(_FUNC_EVAL, [])),
        )
        try:
            self._compact(problem, repair=True)  # also with nothing in the journal
        except Exception as exc:  # the record is durable in the journal
            log.warning("could not rewrite %s (%s: %s); the journal keeps every record", path, type(exc).__name__, exc)
            return False
        return True

    def check_writable(self, problem: str) -> None:
        """Raise :class:`~raytuner.errors.StoreError` (saying how to repair it) when ``problem``'s file is damaged.

        Every write checks this once; a writer may call it before it starts. Writes nothing.

        Args:
            problem: The tuning problem's name.
        """
        path = self.path(problem)
        with self._shared_lock(problem):
            self._read_main(path)
        damage = self._damage.get(str(path))
        if damage:
            raise StoreError(
                f"{path} is damaged at byte offset(s) {', '.join(str(b.offset) for b in damage)}; "
                f"repair it with `{self._repair_hint(problem)}` before writing to it"
            )
        self._writable.add(problem)

    # -- reading -----------------------------------------------------------------------------

    def _read_main(self, path: Path, salvage: bool = False) -> dict[str, Any]:
        """The GPTune file's object; a damaged file's intact records (its damage in ``_damage``).

        ``salvage``: validate every record, keeping only the valid ones (one did not validate).
        """
        try:
            fh = open(path, "rb")
        except FileNotFoundError:
            return {}
        with fh:
            st = os.fstat(fh.fileno())
            key = (st.st_ino, st.st_size, st.st_mtime_ns)
            cached = self._cache.get(str(path))
            if cached and cached[0] == key and (cached[2] or not salvage):
                return cached[1]
            raw = fh.read()
        read = read_store_file(raw)
        data, damage = read.data, read.bad
        if damage and isinstance(data, dict) and "tuning_problem_name" not in data and "name" not in data:
            data["tuning_problem_name"] = path.name.removesuffix(".json")  # its header was lost (an emptied file)
        if not isinstance(data, dict) or not all(isinstance(data.get(k, []), list) for k in (_FUNC_EVAL, _SURROGATE)):
            raise StoreError(
                f"{path} is not a GPTune history file (expected an object whose "
                f"{_FUNC_EVAL} and {_SURROGATE} are lists)"
            )
        try:
            if isinstance(data.get(_FUNC_EVAL), list) and detect_schema(data) != 1:
                data, _ = normalise_history(data)  # an older GPTune file: read as today's (written so at compaction)
        except InvalidInputError as exc:
            raise StoreError(f"{path} is not a GPTune history file: {exc}") from None
        if salvage and not read.checked:
            damage = drop_invalid_records(data, raw)
        del raw
        if damage and cached is not None and cached[0] != key and not self._damage.get(str(path)):
            self._intact.setdefault(str(path), cached[1])  # damaged since it was read whole: keep that copy
        self._warn_damaged(path, damage, data)
        self._cache[str(path)] = (key, data, read.checked or salvage)
        self._damage[str(path)] = damage
        return data

    def _repair_hint(self, problem: str) -> str:
        return f"raytuner history repair {self.directory} {problem}"

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

    def _fresh(self, path: Path, lines: list[BadLine]) -> list[BadLine]:
        """The damaged lines of ``path`` not warned about yet (each is named in one warning only)."""
        fresh = [b for b in lines if (str(path), b.offset, b.data) not in self._warned]
        self._warned.update((str(path), b.offset, b.data) for b in fresh)
        return fresh

    def _warn_unreadable(self, journal: Path, lines: list[BadLine]) -> None:
        if fresh := self._fresh(journal, lines):
            log.warning(
                "%s: skipping %d torn or unreadable journal line(s) at byte offset(s) %s (%s); the next "
                "compaction keeps them in %s",
                journal,
                len(fresh),
                ", ".join(str(b.offset) for b in fresh),
                fresh[0].reason,
                journal.with_name(journal.name.removesuffix(".journal") + ".corrupt"),
            )

    def _warn_damaged(self, path: Path, damage: list[BadLine], data: dict[str, Any]) -> None:
        if fresh := self._fresh(path, damage):
            problem = path.name.removesuffix(".json")
            log.warning(
                "%s is damaged: %d line(s) at byte offset(s) %s cannot be read (%s); read around them: "
                "%d evaluations and %d models. Writers refuse this problem until `%s` moves the damaged "
                "lines to %s",
                path,
                len(fresh),
                ", ".join(str(b.offset) for b in fresh),
                fresh[0].reason,
                len(data.get(_FUNC_EVAL, [])),
                len(data.get(_SURROGATE, [])),
                self._repair_hint(problem),
                self.quarantine_path(problem),
            )

    def _snapshot(
        self, problem: str, journal_entries: list[tuple[str, dict[str, Any]]], main: dict[str, Any]
    ) -> dict[str, Any]:
        """The GPTune document of the file and the journal together, repeated uids dropped."""
        document: dict[str, Any] = {"tuning_problem_name": problem, "tuning_problem_category": None}
        document.update({k: v for k, v in main.items() if k not in (_FUNC_EVAL, _SURROGATE)})
        for kind in (_SURROGATE, _FUNC_EVAL):
            seen: set[str | None] = set()  # a record without a uid (None) is kept once, as before
            merged = []
            for record in [*main.get(kind, []), *(r for k, r in journal_entries if k == kind)]:
                uid = record.get("uid") if isinstance(record, dict) else None
                if uid not in seen:
                    seen.add(uid)
                    merged.append(record)
            document[kind] = merged
        return document

    def _raw(self, problem: str) -> tuple[dict[str, Any], JsonCursor]:
        """The problem's GPTune document (the file and the journal), and where this read ended."""
        journal_path, main_path = self._journal_path(problem), self.path(problem)
        with self._shared_lock(problem):
            before = _identity(main_path)
            journal = read_journal(journal_path)  # the journal before the file (see _shared_lock)
            main = self._read_main(main_path)
            after = _identity(main_path)
        self._warn_unreadable(journal_path, journal.bad)
        cursor = JsonCursor(after, journal.inode, journal.end, complete=before == after)
        return self._snapshot(problem, journal.entries, main), cursor

    def _validated(self, problem: str, kinds: tuple[str, ...]) -> tuple[list[list[Any]], JsonCursor]:
        """The records of each of ``kinds``, validated (a damaged record left out, with a warning), and the cursor."""
        kind = kinds[0]
        try:
            for salvage in (False, True):
                try:
                    document, cursor = self._raw(problem)
                    found = []
                    for kind in kinds:
                        found.append([_MODELS[kind].model_validate(r) for r in document[kind]])
                    return found, cursor
                except ValidationError:  # a damaged record: keep the others
                    if salvage:
                        raise
                    with self._shared_lock(problem):
                        self._read_main(self.path(problem), salvage=True)
            raise AssertionError("unreachable")
        except ValidationError as exc:
            err = from_validation_error(exc)
            raise StoreError(f"{self.path(problem)}: a {kind} record is not valid: {err}") from None

    def evaluations(self, problem: str, query: EvaluationQuery | None = None) -> list[FunctionEvaluation]:
        """The problem's evaluations matching ``query``, oldest first."""
        records = self._validated(problem, (_FUNC_EVAL,))[0][0]
        return records if query is None else [r for r in records if query.matches(r)]

    def models(self, problem: str) -> list[SurrogateModelRecord]:
        """The problem's surrogate-model records, oldest first."""
        return self._validated(problem, (_SURROGATE,))[0][0]

    def changes_since(self, problem: str, cursor: Any = None) -> StoreChanges:
        """The problem's records appended since ``cursor`` (a :class:`JsonCursor`), or all of them.

        While the GPTune file is the one the cursor's read saw and the journal
        the same file, no shorter, only the journal's lines after the cursor's
        offset are read (a line still being written waits for the next read);
        otherwise (a compaction, a repair, a replaced file) every record is read
        (:attr:`StoreChanges.whole`). Reading never writes. See
        :meth:`HistoryStore.changes_since <raytuner.store.HistoryStore.changes_since>`.

        Args:
            problem: The tuning problem's name.
            cursor: :attr:`StoreChanges.cursor` of an earlier read of this problem (``None``: read all).
        """
        main_path, journal_path = self.path(problem), self._journal_path(problem)
        start = self._since(problem, cursor)
        if isinstance(cursor, JsonCursor) and start is not None:
            try:
                journal_stat: os.stat_result | None = os.stat(journal_path)
            except FileNotFoundError:
                journal_stat = None
            if journal_stat is None or (journal_stat.st_ino == cursor.journal and journal_stat.st_size == start):
                return StoreChanges([], [], cursor, whole=False)  # nothing new
            with self._shared_lock(problem):
                journal = read_journal(journal_path, start)
                unchanged = _identity(main_path) == cursor.main and journal.inode == journal_stat.st_ino
            if unchanged:
                self._warn_unreadable(journal_path, journal.bad)
                return StoreChanges(
                    [FunctionEvaluation.model_validate(r) for k, r in journal.entries if k == _FUNC_EVAL],
                    [SurrogateModelRecord.model_validate(r) for k, r in journal.entries if k == _SURROGATE],
                    JsonCursor(cursor.main, journal.inode, journal.end),
                    whole=False,
                )
        (evaluations, models), read = self._validated(problem, (_FUNC_EVAL, _SURROGATE))
        return StoreChanges(evaluations, models, read, whole=True)

    def can_read_since(self, problem: str, cursor: Any) -> bool:
        """Whether :meth:`changes_since` can read only what was appended since ``cursor`` (two ``stat`` calls).

        Args:
            problem: The tuning problem's name.
            cursor: :attr:`StoreChanges.cursor` of an earlier read of this problem.
        """
        return self._since(problem, cursor) is not None

    def _since(self, problem: str, cursor: Any) -> int | None:
        """Where in the journal what was appended since ``cursor`` begins; ``None``: every record must be read."""
        if not isinstance(cursor, JsonCursor) or not cursor.complete or _identity(self.path(problem)) != cursor.main:
            return None  # no cursor of this store, or the GPTune file was rewritten or replaced since
        try:
            journal = os.stat(self._journal_path(problem))
        except FileNotFoundError:
            return cursor.offset if cursor.journal is None else None  # none then and none now: nothing new
        if cursor.journal is None:
            return 0  # a journal begun since
        return cursor.offset if journal.st_ino == cursor.journal and journal.st_size >= cursor.offset else None

    def evaluation_count(self, problem: str) -> int:
        """How many evaluations the problem has, counted from its files' record lines without parsing them.

        A record written twice to the journal (an append repeated by uid)
        counts twice until the next compaction; a GPTune file not written one
        record per line (not by raytuner) is parsed. The GPTune file is counted
        once while it is unchanged, the journal at each call. Writes nothing.

        Args:
            problem: The tuning problem's name.

        >>> import tempfile
        >>> from raytuner.problem.records import FunctionEvaluation
        >>> with JsonStore(tempfile.mkdtemp()) as store:
        ...     _ = store.append_many("demo", [FunctionEvaluation.create({"t": 1}, {"x": x}, {"y": x}) for x in (1, 2)])
        ...     store.compact("demo")
        ...     store.append("demo", FunctionEvaluation.create({"t": 1}, {"x": 3}, {"y": 3}))
        ...     store.evaluation_count("demo")
        3
        """
        main_path = self.path(problem)
        identity = _identity(main_path)  # before the read: a file replaced meanwhile is counted again next time
        held = self._counted.get(str(main_path))
        if identity is None:
            counted = 0
        elif held is not None and held[0] == identity:
            counted = held[1]
        else:
            counted = self._count_main(problem)
            self._counted[str(main_path)] = (identity, counted)
        try:
            counted += self._journal_path(problem).read_bytes().count(_JOURNAL_EVALUATION)
        except FileNotFoundError:
            pass
        return counted

    def _count_main(self, problem: str) -> int:
        """How many evaluations the problem's GPTune file holds (its record lines, or its parsed records)."""
        main_path = self.path(problem)
        try:
            raw = main_path.read_bytes()
        except FileNotFoundError:
            return 0
        if not raw:
            return 0
        start = _FUNC_EVAL_START.search(raw)
        if start is not None and raw.rstrip().endswith((b"\n]}", b"[]}")):
            return raw.count(b"\n{", start.end())
        del raw
        with self._shared_lock(problem):
            return len(self._read_main(main_path).get(_FUNC_EVAL, []))

    def _problem_files(self) -> dict[str, list[str]]:
        """Per name, the files that hold a problem of that name: ``NAME.json``, a non-empty ``NAME.json.journal``."""
        if not self.directory.is_dir():
            return {}
        found: dict[str, list[str]] = {}
        for path in self.directory.iterdir():
            if path.name.startswith("."):
                continue
            for suffix in (".json", ".json.journal"):
                if path.name.endswith(suffix) and (suffix == ".json" or path.stat().st_size > 0):
                    found.setdefault(path.name.removesuffix(suffix), []).append(path.name)
        return found

    def problems(self) -> list[str]:
        """Problems with a GPTune file or a non-empty journal in the directory (:meth:`misnamed` files left out)."""
        return sorted(n for n in self._problem_files() if is_problem_name(n))

    def misnamed(self) -> dict[str, str]:
        """The directory's JSON files whose name is no problem name, each with why and what to rename it to.

        A file a browser or a copy named (``GPTune-Demo (1).json``) is no
        problem of the store: :meth:`problems` leaves it out, and this says so.

        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = (folder / "GPTune-Demo (1).json").write_text("{}")
        >>> JsonStore(folder).misnamed()["GPTune-Demo (1).json"]  # doctest: +ELLIPSIS
        "not a problem name: 1-128 characters of ...; rename it to 'GPTune-Demo-1.json'"
        """
        found = self._problem_files()
        out = {}
        for name, files in found.items():
            if not is_problem_name(name):
                rename = suggest_problem_name(name, taken=list(found))
                for file in files:
                    out[file] = (
                        f"not a problem name: {PROBLEM_NAME_RULE}; rename it to {file.replace(name, rename, 1)!r}"
                    )
        return dict(sorted(out.items()))

    def server_lock(self, on_lost: Callable[[str], None] | None = None, ttl: float = LEASE_TTL) -> FileServerLock:
        """The store's server lock: a ``flock`` on ``DIR/.service/server.lock`` (never lost while held).

        Args:
            on_lost: Not used (a ``flock`` is held until released or the process ends).
            ttl: Not used (a ``flock`` never runs out).
        """
        return FileServerLock(self.directory)

    def ledger(self) -> JsonLedger:
        """The store's trial ledger: JSON-lines logs in ``DIR/.service``, made by their first append."""
        return JsonLedger(self.directory)

    # -- compaction --------------------------------------------------------------------------

    def compact(self, problem: str) -> None:
        """Fold the journal into the GPTune file; safe to interrupt at any point.

        A writer's operation: lines of the journal (and of a damaged GPTune
        file) that cannot be read are first copied to :meth:`quarantine_path`
        (with their byte offsets), so the rewritten files drop nothing. A
        problem with an empty or no journal is left as it is (no file is made).

        Args:
            problem: The tuning problem's name.
        """
        journal_path = self._journal_path(problem)
        if problem not in self._problems and not (journal_path.exists() and journal_path.stat().st_size):
            return
        self._compact(problem)

    def repair(self, problem: str) -> tuple[int, int]:
        """Salvage a damaged problem in place; returns (lines moved to :meth:`quarantine_path`, evaluations kept).

        The unreadable lines of its GPTune file and journal go, whole and with
        their byte offsets, to the quarantine file; the GPTune file is rewritten
        from every intact record; writers may append again. What
        ``raytuner history repair`` runs.

        Args:
            problem: The tuning problem's name.
        """
        if not self.path(problem).exists() and not self._journal_path(problem).exists():
            raise StoreError(f"no problem {problem!r} in {self.directory}")
        moved, kept = self._compact(problem, repair=True)
        self._writable.add(problem)
        return moved, kept

    def _compact(self, problem: str, repair: bool = False) -> tuple[int, int]:
        journal_path = self._journal_path(problem)
        state = self._writer(problem)
        with state.locked(exclusive=True):
            if os.fstat(state.journal_fd).st_size == 0 and not repair:
                return 0, 0
            journal = read_journal(journal_path)
            main = self._read_main(state.main, salvage=repair)
            held = self._intact.get(str(state.main))
            if held is not None:  # what the file held when this store read it whole, then what is left of it
                main = self._snapshot(
                    problem, [(k, r) for k in (_SURROGATE, _FUNC_EVAL) for r in main.get(k, [])], held
                )
            document = self._snapshot(problem, journal.entries, main)
            target = self.quarantine_path(problem)
            moved = 0
            for path, lines in (
                (state.main, self._damage.get(str(state.main), [])),
                (journal_path, [*journal.bad, *([journal.tail] if journal.tail else [])]),
            ):
                if lines:  # no writer is mid-line now
                    quarantine(target, path, lines)
                    moved += len(lines)
                    log.warning(
                        "%s: moved %d unreadable line(s) (byte offset(s) %s) to %s",
                        path,
                        len(lines),
                        ", ".join(str(b.offset) for b in lines),
                        target,
                    )
            if repair and not moved and state.main.exists():
                return 0, len(document[_FUNC_EVAL])  # nothing damaged: the file stays as it is
            write_history_file(state.main, document)
            os.ftruncate(state.journal_fd, 0)
            os.fsync(state.journal_fd)
            self._cache.pop(str(state.main), None)
            self._intact.pop(str(state.main), None)
            count = len(document[_FUNC_EVAL])
            del document
        release_memory()
        log.debug("compacted %s: %d evaluations", state.main, count)
        return moved, count

    def close(self) -> None:
        """Compact every problem this store wrote to and close its files; a store that only read writes nothing."""
        with self._guard:
            problems = list(self._problems)
        for name in problems:
            if self._restore(name):  # emptied since this store read it: rewritten whole, journal folded in
                continue
            try:
                self.compact(name)
            except (OSError, StoreError) as exc:  # the journal still holds every record
                log.warning("could not compact %s: %s", name, exc)
        with self._guard:
            for state in self._problems.values():
                state.close()
            self._problems.clear()
        _OPEN_WRITERS.discard(self)
