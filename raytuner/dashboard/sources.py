"""What the dashboard reads: a history store (JSON directory or MongoDB) or a tuning service, as cached views.

A :class:`StoreViews` reads a problem when a page first needs it, into a
:class:`~raytuner.view.HistoryView`, and then reads only what was appended
since (:meth:`HistoryStore.changes_since <raytuner.store.HistoryStore.changes_since>`),
folding it into a new view (:meth:`HistoryView.extended <raytuner.view.HistoryView.extended>`):
for a JSON store at each page (a look at two files' sizes while nothing
changed); for MongoDB at most every ``refresh`` seconds. A rewritten
file (a compaction, a repair) is read whole again, in the background; a
problem gone from the store (deleted, renamed) is no longer shown. While
a problem is being read, pages are served its last complete view, never a
half-folded one. Pages then filter, sort and slice the cached table, so a page of a large
history costs the rows it shows, not the history. Reading never writes.
:class:`ServiceViews` does the same for a running tuning service (its
sessions' problems, read over gRPC at most every ``refresh`` seconds).

Example:
    >>> import tempfile
    >>> from raytuner.problem.records import FunctionEvaluation
    >>> from raytuner.store import JsonStore
    >>> store = JsonStore(tempfile.mkdtemp())
    >>> store.append("demo", FunctionEvaluation.create({"t": 2.0}, {"x": 0.1}, {"y": 1.5}))
    >>> views = StoreViews(store)
    >>> views.problems(), views.view("demo").best_table()["y"].tolist()
    (['demo'], [1.5])
"""

from __future__ import annotations

import logging
import os
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from raytuner.errors import InvalidInputError
from raytuner.problem.records import FunctionEvaluation, HistoryDocument, SurrogateModelRecord
from raytuner.store import HistoryStore, JsonStore, Ledger, StoreChanges, is_mongodb_uri, open_store
from raytuner.store.base import new_records
from raytuner.view import HistoryView, load_history

__all__ = ["HistoryViews", "StoreViews", "ServiceViews", "TableQuery", "PAGE_SIZE", "PAGE_SIZES"]

log = logging.getLogger(__name__)

#: Rows per page of an evaluations table, unless its query says otherwise.
PAGE_SIZE = 50
#: The page sizes an evaluations table offers; more than the largest is refused.
PAGE_SIZES = (20, 50, 100, 200, 500)


@dataclass(frozen=True)
class TableQuery:
    """A page of an evaluations table: filters, order and page.

    Args:
        task: only this task label (``""``: every task).
        status: only this status (``""``: any).
        machine: only rows whose machine contains this text (``""``: any).
        software: only rows whose software contains this text (``""``: any).
        ranges: per numeric column (a task or tuning parameter, an output), ``(low, high)`` bounds (either may
            be ``None``).
        sort: the column to order by (``""``: evaluation order).
        descending: order from the largest.
        page: the page, from 1.
        size: rows per page, at most the largest of :data:`PAGE_SIZES`.

    Example:
        >>> query = TableQuery.from_args({"max.y": "2", "size": "20"}, ["x", "y"])
        >>> query.ranges, query.size
        ((('y', None, 2.0),), 20)
    """

    task: str = ""
    status: str = ""
    machine: str = ""
    software: str = ""
    ranges: tuple[tuple[str, float | None, float | None], ...] = ()
    sort: str = ""
    descending: bool = False
    page: int = 1
    size: int = PAGE_SIZE

    @classmethod
    def from_args(cls, args: Mapping[str, str], columns: list[str]) -> TableQuery:
        """Read a query from a page's URL arguments (``min.NAME``/``max.NAME`` bound column NAME).

        Args:
            args: the URL's arguments.
            columns: the table's numeric columns a range may bound.
        """

        def number(key: str) -> float | None:
            text = (args.get(key) or "").strip()
            if not text:
                return None
            try:
                return float(text)
            except ValueError:
                raise InvalidInputError(key, f"{text[:40]!r} is not a number") from None

        try:
            page = max(1, int(args.get("page") or 1))
        except ValueError:
            raise InvalidInputError("page", f"{str(args.get('page'))[:40]!r} is not a page number") from None
        size = (args.get("size") or str(PAGE_SIZE)).strip()
        if not size.isdecimal() or not 1 <= int(size) <= PAGE_SIZES[-1]:  # isdigit() takes "²", int() not
            raise InvalidInputError("size", f"{size[:40]!r} is not a number of rows a page from 1 to {PAGE_SIZES[-1]}")
        ranges = tuple((c, number(f"min.{c}"), number(f"max.{c}")) for c in columns)
        return cls(
            task=args.get("task", ""),
            status=args.get("status", ""),
            machine=args.get("machine", ""),
            software=args.get("software", ""),
            ranges=tuple(r for r in ranges if r[1:] != (None, None)),
            sort=args.get("sort", ""),
            descending=args.get("desc") == "1",
            page=page,
            size=int(size),
        )

    def apply(self, frame: pd.DataFrame) -> tuple[pd.DataFrame, int, int]:
        """The rows of this page, how many rows match in all, and the page shown (the last one when past it).

        Args:
            frame: a history's table.
        """
        rows = self.matching(frame)
        page = min(self.page, self.pages(len(rows)))  # past the end: the last page
        start = (page - 1) * self.size
        return rows.iloc[start : start + self.size], len(rows), page

    def pages(self, rows: int) -> int:
        """How many pages ``rows`` matching rows fill (at least one).

        Args:
            rows: how many rows match.
        """
        return max(1, -(-rows // self.size))

    def matching(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Every row that meets the filters, in the query's order (what a download holds).

        Args:
            frame: a history's table.
        """
        keep = pd.Series(True, index=frame.index)
        if self.task:
            keep &= frame["task"] == self.task
        if self.status:
            keep &= frame["status"] == self.status
        for column, text in (("machine", self.machine), ("software", self.software)):
            if text:
                keep &= frame[column].str.contains(text, case=False, regex=False)
        for column, low, high in self.ranges:
            values = pd.to_numeric(frame[column], errors="coerce")
            if low is not None:
                keep &= values >= low
            if high is not None:
                keep &= values <= high
        rows = frame[keep]
        if self.sort:
            if self.sort not in frame.columns:
                raise InvalidInputError("sort", f"{self.sort[:40]!r} is not a column", allowed=list(frame.columns))
            mixed = rows[self.sort].dtype == object  # numbers and text together sort as text
            rows = rows.sort_values(
                self.sort,
                ascending=not self.descending,
                kind="stable",
                na_position="last",
                key=(lambda column: column.map(str)) if mixed else None,
            )
        return rows


def _continues(view: HistoryView, before: HistoryView) -> bool:
    """Whether ``view`` holds ``before``'s records and models, the same objects, then more (a fold of it)."""
    return all(
        len(now) >= len(then) and (not then or now[len(then) - 1] is then[-1])
        for now, then in ((view.records, before.records), (view.models, before.models))
    )


class HistoryViews(ABC):
    """What the dashboard's history pages read: problems, each as a :class:`~raytuner.view.HistoryView`."""

    #: The JSON store's directory (``None``: MongoDB or a service).
    directory: Path | None
    #: Views of another objective, by (problem, objective), with the view each was built from.
    _objective_views: dict[tuple[str, str], tuple[HistoryView, HistoryView]]

    @abstractmethod
    def problems(self) -> list[str]:
        """The problems there are."""

    @abstractmethod
    def view(self, problem: str) -> HistoryView:
        """The problem's view (cached while nothing changed).

        Args:
            problem: the problem's name.
        """

    def view_of(self, problem: str, objective: str | None = None) -> HistoryView:
        """The problem's view with ``objective`` as the output its best values are of (default: the first).

        Built from the cached view's records, without reading the store again.

        Args:
            problem: the problem's name.
            objective: one of the problem's outputs.
        """
        base = self.view(problem)
        if objective is None or objective == base.objective:
            return base
        outputs = list(base.columns["output"])
        if objective not in outputs:
            raise InvalidInputError("objective", f"{objective[:80]!r} is no output of {problem}", allowed=outputs)
        key = (problem, objective)
        held = self._objective_views.get(key)
        if held is not None and held[0] is base:
            return held[1]
        if held is not None and _continues(base, held[0]) and base.problem_space == held[0].problem_space:
            # the base was folded, in the same problem (a new model may bring another): fold the same records in
            before = held[0]
            view = held[1].extended(base.records[len(before.records) :], base.models[len(before.models) :])
            view.share_table(base)
            self._objective_views[key] = (base, view)
            return view
        document = HistoryDocument(
            tuning_problem_name=base.problem, func_eval=base.records, surrogate_model=base.models
        )
        view = load_history(document, objective=objective, problem_space=base.problem_space)
        view.share_table(base)  # the same records: the same table, built once
        self._objective_views[key] = (base, view)
        return view

    @abstractmethod
    def in_flight(self, problem: str) -> int:
        """How many trials of the problem's sessions were handed out and are not yet told.

        Args:
            problem: the problem's name.
        """

    @abstractmethod
    def close(self) -> None:
        """Let go of the store or the connection."""

    def misnamed(self) -> dict[str, str]:
        """The store's files that :meth:`problems` leaves out as no problem's, each with why (none here)."""
        return {}

    def warn_misnamed(self) -> None:
        """Warn of each misnamed file (the application does this as it starts)."""
        for file, why in self.misnamed().items():
            log.warning("%s: skipped, %s", self.directory / file if self.directory else file, why)

    def warm(self) -> None:
        """Read every problem now, so that the first page of each is as fast as the next."""
        for problem in self.problems():
            self.view(problem)

    def evaluation_count(self, problem: str) -> tuple[int, HistoryView | None]:
        """How many evaluations the problem has, and its view (read here; a store counts a large problem unread).

        Args:
            problem: the problem's name.
        """
        view = self.view(problem)
        return len(view.records), view


@dataclass(frozen=True)
class _Held:
    """A problem's last complete view, where its read ended, and the uids it holds."""

    view: HistoryView
    cursor: Any
    uids: set[str]
    model_uids: set[str]
    read_at: float


class StoreViews(HistoryViews):
    """A history store the dashboard shows: its problems, each as a cached :class:`HistoryView`.

    A problem is read when a page first needs it; afterwards only what was appended since is read
    and folded in (see the module documentation).

    Args:
        location: a store directory or a ``mongodb://`` URI (or an open store).
        refresh: for a store other than a JSON store (MongoDB), the most seconds between two reads of a problem.
    """

    def __init__(self, location: HistoryStore | str | os.PathLike[str], refresh: float = 2.0) -> None:
        if isinstance(location, (str, os.PathLike)) and not is_mongodb_uri(location) and not Path(location).is_dir():
            raise InvalidInputError("location", f"{location} is neither a store directory nor a mongodb:// URI")
        self.store = open_store(location)
        self._ledger: Ledger | None = None
        self._objective_views = {}
        self.directory = None if isinstance(location, HistoryStore) or is_mongodb_uri(location) else Path(location)
        self.refresh = refresh
        self._every_page = isinstance(self.store, JsonStore)  # nothing new costs two stat() calls: look every time
        self._views: dict[str, _Held] = {}
        self._lock = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._readers: dict[str, threading.Thread] = {}

    def __repr__(self) -> str:
        return f"StoreViews({self.directory or type(self.store).__name__})"

    def problems(self) -> list[str]:
        """The problems the store holds."""
        return self.store.problems()

    def misnamed(self) -> dict[str, str]:
        """The store's files whose name is no problem name, each with why (:meth:`HistoryStore.misnamed`)."""
        return self.store.misnamed()

    def evaluation_count(self, problem: str) -> tuple[int, HistoryView | None]:
        """How many evaluations the problem has, and its view when one was read: a problem not read yet is
        counted (:meth:`HistoryStore.evaluation_count`), not read.

        Args:
            problem: the problem's name.
        """
        if problem in self._views:
            view = self.view(problem)
            return len(view.records), view
        return self.store.evaluation_count(problem), None

    def in_flight(self, problem: str) -> int:
        """Trials the ledger says the problem's sessions handed out and no record tells yet.

        Args:
            problem: the problem's name.
        """
        frame = self.view(problem).frame
        sessions = set(frame["session"].unique()) - {""}
        if not sessions:
            return 0
        if self._ledger is None:  # one, kept: a damaged line is warned of once, not at every poll
            self._ledger = self.store.ledger()
        asked = {d.get("trial_id") for d in self._ledger.read("trials") if d.get("session_id") in sessions}
        asked -= {None, ""}
        told = set(frame["trial"][frame["trial"].isin(list(asked))].unique())
        return len(asked - told)

    def view(self, problem: str) -> HistoryView:
        """The problem's view, with what was appended since the last read folded in.

        While another page reads the problem, the last complete view. A problem the store does not hold (any
        more: deleted, renamed) is refused with :class:`~raytuner.errors.InvalidInputError`.

        Args:
            problem: the problem's name.
        """
        held = self._views.get(problem)
        if held is not None and not self._every_page and time.monotonic() - held.read_at < self.refresh:
            return held.view
        with self._lock:
            lock = self._locks.setdefault(problem, threading.Lock())
        if held is None:
            self._check_known(problem)
            lock.acquire()  # nothing to show yet: wait for the read under way
        elif not lock.acquire(blocking=False):
            return held.view  # a read is under way: the last complete view
        handed_over = False
        try:
            held = self._views.get(problem)
            if held is not None and not self.store.can_read_since(problem, held.cursor):
                try:
                    self._check_known(problem)
                except InvalidInputError:  # deleted or renamed: its last view is no longer shown
                    del self._views[problem]
                    raise
                # a rewritten file (a compaction): read whole in the background, the last view meanwhile
                reader = threading.Thread(target=self._read_whole, args=(problem, lock), daemon=True)
                self._readers[problem] = reader
                reader.start()
                handed_over = True
                return held.view
            self._views[problem] = held = self._read(problem, held)
            return held.view
        finally:
            if not handed_over:
                lock.release()

    def _check_known(self, problem: str) -> None:
        """Refuse ``problem`` when the store holds no such problem (InvalidInputError listing those it holds)."""
        known = self.problems()
        if problem not in known:
            raise InvalidInputError("problem", f"no problem {problem[:80]!r} in this store", allowed=known)

    def _read_whole(self, problem: str, lock: threading.Lock) -> None:
        """Read ``problem`` whole and keep its view; then release ``lock`` (held for this read)."""
        try:
            self._views[problem] = self._read(problem, None)
        except Exception as exc:  # the last view stays; the next page tries again
            log.warning("could not read %s again: %s: %s", problem, type(exc).__name__, exc)
        finally:
            lock.release()

    def wait_for_reads(self, timeout: float | None = None) -> None:
        """Wait until the problems being read whole in the background are read (or ``timeout`` seconds pass).

        Args:
            timeout: the most seconds to wait for each (``None``: as long as it takes).
        """
        for reader in list(self._readers.values()):
            reader.join(timeout)

    def _read(self, problem: str, held: _Held | None) -> _Held:
        """What is new of ``problem`` since ``held``, folded in (all of it when there is no ``held``)."""
        started = time.perf_counter()
        changes: StoreChanges = self.store.changes_since(problem, held.cursor if held is not None else None)
        if held is not None and not changes.whole:
            if not changes.evaluations and not changes.models:
                return _Held(held.view, changes.cursor, held.uids, held.model_uids, time.monotonic())
            uids, model_uids = set(held.uids), set(held.model_uids)
            records: list[FunctionEvaluation] = new_records(changes.evaluations, uids)
            models: list[SurrogateModelRecord] = new_records(changes.models, model_uids)
            view = held.view.extended(records, models)
            how = f"{len(records)} new evaluations"
        else:
            uids, model_uids = set(), set()
            document = HistoryDocument(
                tuning_problem_name=problem,
                func_eval=new_records(changes.evaluations, uids),
                surrogate_model=new_records(changes.models, model_uids),
            )
            view = load_history(document)
            how = f"{len(view.records)} evaluations"
        view.best_table()  # the table, the best per task and the columns shown built here, not by the first page
        log.info(
            "read %s: %s in %.2f s (%d empty columns)",
            problem,
            how,
            time.perf_counter() - started,
            len(view.empty_columns),
        )
        return _Held(view, changes.cursor, uids, model_uids, time.monotonic())

    def close(self) -> None:
        """Close the store."""
        self.store.close()


class ServiceViews(HistoryViews):
    """A running tuning service the dashboard shows: the problems of the caller's sessions, as views.

    Args:
        tuner: a :class:`~raytuner.client.RemoteTuner` connected to the service (with the caller's API key).
        refresh: the most seconds a view is kept before it is read again.
    """

    def __init__(self, tuner: Any, refresh: float = 1.0) -> None:
        self.tuner, self.refresh = tuner, refresh
        self._objective_views = {}
        self.directory = None
        self._views: dict[str, tuple[float, HistoryView]] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ServiceViews({self.tuner!r})"

    def sessions(self) -> list[dict[str, Any]]:
        """The caller's sessions on the service, oldest first (as :meth:`RemoteTuner.sessions` gives them)."""
        return self.tuner.sessions()

    def in_flight(self, problem: str) -> int:
        """The pending trials of the caller's sessions of ``problem``, as the service counts them.

        Args:
            problem: the problem's name.
        """
        return sum(int(s["pending"]) for s in self.sessions() if s["problem_name"] == problem)

    def problems(self) -> list[str]:
        """The problems of the caller's sessions."""
        return sorted({s["problem_name"] for s in self.sessions()})

    def view(self, problem: str) -> HistoryView:
        """The problem's stored evaluations on the service, read again after ``refresh`` seconds.

        Args:
            problem: the problem's name.
        """
        with self._lock:
            held = self._views.get(problem)
            if held is not None and time.monotonic() - held[0] < self.refresh:
                return held[1]
        if problem not in self.problems():
            raise InvalidInputError(
                "problem", f"no session of problem {problem[:80]!r} on this service", allowed=self.problems()
            )
        records = self.tuner.query_evaluations(problem)
        view = load_history(HistoryDocument(tuning_problem_name=problem, func_eval=records))
        view.best_table()
        with self._lock:
            self._views[problem] = (time.monotonic(), view)
        return view

    def close(self) -> None:
        """Close the connection."""
        self.tuner.close()
