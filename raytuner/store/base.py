"""The history-store interface and the evaluation query both stores share.

A store keeps, per tuning problem, the function evaluations and surrogate
models in GPTune's record format. ``append`` is durable when it returns and
idempotent by ``uid`` (a repeated append does not make a second record).

Example:
    >>> q = EvaluationQuery(task={"t": (0.5, 2.0)}, status={"ok"})
    >>> from raytuner.problem.records import FunctionEvaluation
    >>> q.matches(FunctionEvaluation.create({"t": 1.0}, {"x": 0.1}, {"y": 3.0}))
    True
    >>> q.matches(FunctionEvaluation.create({"t": 4.0}, {"x": 0.1}, {"y": 3.0}))
    False
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator

from raytuner.errors import InvalidInputError, validate
from raytuner.problem.meta import VersionRange
from raytuner.problem.records import (
    PROBLEM_NAME_RULE,
    FunctionEvaluation,
    HistoryDocument,
    Status,
    SurrogateModelRecord,
    check_problem_name,
)
from raytuner.store.ledger import Ledger
from raytuner.store.server_lock import LEASE_TTL, ServerLock

__all__ = [
    "HistoryStore",
    "EvaluationQuery",
    "StoreChanges",
    "new_records",
    "VersionRange",
    "check_problem_name",
    "PROBLEM_NAME_RULE",
]

NumericRange = tuple[float | None, float | None]


def _contains(have: Any, want: Any) -> bool:
    """Nested-mapping containment: every key of ``want`` is in ``have`` with a matching value."""
    if isinstance(want, Mapping):
        return isinstance(have, Mapping) and all(k in have and _contains(have[k], v) for k, v in want.items())
    return have == want


class EvaluationQuery(BaseModel):
    """Which evaluations of a problem to return.

    - ``task``: per task parameter, an inclusive ``(low, high)`` range (either
      end ``None`` for open; ``{"low": a, "high": b}`` in JSON) or a list of
      allowed values;
    - ``machine``: a nested mapping the record's ``machine_configuration`` must
      contain, e.g. ``{"machine_name": "cori", "haswell": {"nodes": 1}}``;
    - ``software``: per package, a :class:`VersionRange` its
      ``version_split`` must lie in;
    - ``status``: the statuses to keep (all when ``None``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    task: dict[str, NumericRange | list[Any]] = Field(default_factory=dict)
    machine: dict[str, Any] = Field(default_factory=dict)
    software: dict[str, VersionRange] = Field(default_factory=dict)
    status: set[Status] | None = None

    @field_validator("task", mode="before")
    @classmethod
    def _json_ranges(cls, v: Any) -> Any:
        # JSON has no tuples: a range travels as {"low": a, "high": b} (see to_json)
        if isinstance(v, Mapping):
            return {
                name: (cond.get("low"), cond.get("high"))
                if isinstance(cond, Mapping) and set(cond) <= {"low", "high"}
                else cond
                for name, cond in v.items()
            }
        return v

    @field_validator("task")
    @classmethod
    def _ranges(cls, v: dict[str, Any]) -> dict[str, Any]:
        for name, cond in v.items():
            if isinstance(cond, tuple):
                lo, hi = cond
                if lo is not None and hi is not None and lo > hi:
                    raise InvalidInputError(f"task.{name}", f"range low {lo} is above high {hi}")
        return v

    @classmethod
    def parse(cls, data: Any) -> EvaluationQuery:
        """Validate a query given as plain data, naming the bad field on error.

        Args:
            data: The query as plain data (JSON).
        """
        return validate(cls, data, "query")

    def to_json(self) -> dict[str, Any]:
        """The query as JSON-ready data that :meth:`parse` reads back (ranges as ``{"low", "high"}``).

        >>> q = EvaluationQuery(task={"t": (0.5, None), "n": [1, 2]})
        >>> q.to_json()["task"]
        {'t': {'low': 0.5, 'high': None}, 'n': [1, 2]}
        >>> EvaluationQuery.parse(q.to_json()) == q
        True
        """
        data = self.model_dump(mode="json", exclude_none=True)
        data["task"] = {
            name: {"low": cond[0], "high": cond[1]} if isinstance(cond, tuple) else cond
            for name, cond in self.task.items()
        }
        return data

    def matches(self, record: FunctionEvaluation) -> bool:
        """Whether ``record`` passes every condition.

        Args:
            record: The evaluation to check.
        """
        if self.status is not None and record.status not in self.status:
            return False
        for name, cond in self.task.items():
            if name not in record.task_parameter:
                return False
            value = record.task_parameter[name]
            if isinstance(cond, tuple):
                lo, hi = cond
                if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
                    return False  # not a number, or NaN, which lies in no range
                if (lo is not None and value < lo) or (hi is not None and value > hi):
                    return False
            elif value not in cond:
                return False
        if self.machine and not _contains(record.machine_configuration, self.machine):
            return False
        for package, versions in self.software.items():
            entry = record.software_configuration.get(package)
            if not isinstance(entry, Mapping) or not isinstance(entry.get("version_split"), list):
                return False
            if not versions.contains(entry["version_split"]):
                return False
        return True


@dataclass(frozen=True)
class StoreChanges:
    """What one read of a problem gave (:meth:`HistoryStore.changes_since`): its records, and where the read ended.

    Args:
        evaluations: the evaluations read, in append order.
        models: the surrogate-model records read, in append order.
        cursor: where this read ended: pass it to the next ``changes_since`` to read only what came after.
        whole: ``True``: these are every record of the problem (a full read: replace what you hold);
            ``False``: only the records appended since the cursor given (add them to what you hold).
            Records appended since may repeat a uid read before (an append is idempotent by uid): keep the
            first, as every read of the store does.

    Example:
        >>> import tempfile
        >>> from raytuner.problem.records import FunctionEvaluation
        >>> from raytuner.store import JsonStore
        >>> store = JsonStore(tempfile.mkdtemp())
        >>> store.append("demo", FunctionEvaluation.create({"t": 1}, {"x": 0.5}, {"y": 2.0}))
        >>> first = store.changes_since("demo")
        >>> store.append("demo", FunctionEvaluation.create({"t": 1}, {"x": 0.7}, {"y": 1.0}))
        >>> later = store.changes_since("demo", first.cursor)
        >>> (len(first.evaluations), first.whole), (later.evaluations[0].evaluation_result, later.whole)
        ((1, True), ({'y': 1.0}, False))
    """

    evaluations: list[FunctionEvaluation]
    models: list[SurrogateModelRecord]
    cursor: Any
    whole: bool


def new_records(records: Sequence[Any], seen: set[str]) -> list[Any]:
    """The records whose uid is neither in ``seen`` nor repeated earlier in ``records``, in order.

    The first record of a uid is kept, as every read of a store keeps it; ``seen`` takes the new uids.

    Args:
        records: records with a ``uid``.
        seen: the uids already held (updated).

    >>> from types import SimpleNamespace as Record
    >>> seen = {"a"}
    >>> [r.uid for r in new_records([Record(uid="a"), Record(uid="b"), Record(uid="b")], seen)], sorted(seen)
    (['b'], ['a', 'b'])
    """
    new = []
    for record in records:
        if record.uid not in seen:
            seen.add(record.uid)
            new.append(record)
    return new


class HistoryStore(ABC):
    """Where evaluations and surrogate models of tuning problems are kept.

    Implementations: :class:`raytuner.store.JsonStore` (GPTune JSON files,
    the embedded default) and :class:`raytuner.store.MongoStore`. Open either
    with :func:`raytuner.store.open_store`.
    """

    @abstractmethod
    def append(self, problem: str, record: FunctionEvaluation) -> None:
        """Persist one evaluation; durable when this returns; idempotent by uid.

        Args:
            problem: The tuning problem's name.
            record: The evaluation.
        """

    @abstractmethod
    def append_batch(
        self, problem: str, evaluations: Sequence[FunctionEvaluation] = (), models: Sequence[SurrogateModelRecord] = ()
    ) -> None:
        """Persist evaluations and surrogate models together: all of them or none.

        Every record is checked first; a record that cannot be stored raises
        :class:`~raytuner.errors.InvalidInputError` naming it before anything
        is written. Durable when this returns; idempotent by uid.

        Args:
            problem: The tuning problem's name.
            evaluations: ``func_eval`` records to add.
            models: ``surrogate_model`` records to add.
        """

    def append_many(self, problem: str, records: Iterable[FunctionEvaluation]) -> int:
        """Persist several evaluations, all or none (see :meth:`append_batch`); returns how many were given.

        Args:
            problem: The tuning problem's name.
            records: The evaluations to add.
        """
        given = list(records)
        self.append_batch(problem, given)
        return len(given)

    @abstractmethod
    def append_model(self, problem: str, record: SurrogateModelRecord) -> None:
        """Persist one surrogate-model record; durable when this returns; idempotent by uid.

        Args:
            problem: The tuning problem's name.
            record: The surrogate-model record.
        """

    @abstractmethod
    def evaluations(self, problem: str, query: EvaluationQuery | None = None) -> list[FunctionEvaluation]:
        """The problem's evaluations that match ``query``, in the order they were appended.

        Args:
            problem: The tuning problem's name.
            query: Which evaluations (all when ``None``).
        """

    @abstractmethod
    def models(self, problem: str) -> list[SurrogateModelRecord]:
        """The problem's surrogate-model records, in the order they were appended.

        Args:
            problem: The tuning problem's name.
        """

    def changes_since(self, problem: str, cursor: Any = None) -> StoreChanges:
        """The problem's records appended since ``cursor`` (an earlier result's), or all of them.

        A reader that keeps a problem's records (the dashboard) reads only what is new
        this way. When the store cannot tell what is new since ``cursor`` (no cursor,
        one of another store, a file rewritten since), it reads every record and says so
        (:attr:`StoreChanges.whole`). This default always reads every record; the JSON
        and MongoDB stores read only what is new. A read never writes.

        Args:
            problem: The tuning problem's name.
            cursor: :attr:`StoreChanges.cursor` of an earlier read of this problem (``None``: read all).
        """
        return StoreChanges(self.evaluations(problem), self.models(problem), None, whole=True)

    def can_read_since(self, problem: str, cursor: Any) -> bool:
        """Whether :meth:`changes_since` can read only what was appended since ``cursor``, asked cheaply.

        ``False``: it would read every record (a reader may do that in the background). This default: never.

        Args:
            problem: The tuning problem's name.
            cursor: :attr:`StoreChanges.cursor` of an earlier read of this problem.
        """
        return False

    def evaluation_count(self, problem: str) -> int:
        """How many evaluations the problem has, read as cheaply as the store allows (for an overview).

        This default reads them; the JSON store counts its files' record lines without parsing them
        (a record repeated in its journal counts twice until the next compaction), MongoDB counts documents.

        Args:
            problem: The tuning problem's name.
        """
        return len(self.evaluations(problem))

    @abstractmethod
    def problems(self) -> list[str]:
        """Names of the problems that have records, sorted."""

    def misnamed(self) -> dict[str, str]:
        """What the store holds that :meth:`problems` leaves out as no problem's, each with why (none here).

        A JSON store names its folder's files whose names are no problem names
        (:meth:`JsonStore.misnamed <raytuner.store.json_store.JsonStore.misnamed>`); a database has no such thing.
        """
        return {}

    @abstractmethod
    def ledger(self) -> Ledger:
        """The trial ledger kept beside the store's records (see :mod:`raytuner.store.ledger`).

        Sessions write their handed-out trials there before handing them out,
        so a restarted session adopts the trials in flight; the service keeps
        its sessions and API keys there too. Getting the ledger writes nothing.
        """

    def close(self) -> None:  # noqa: B027 (an optional hook: nothing by default)
        """Release files or connections; the store is not used afterwards."""

    def server_lock(self, on_lost: Callable[[str], None] | None = None, ttl: float = LEASE_TTL) -> ServerLock | None:
        """The lock a tuning server holds on this store while it runs (one server per store); ``None``: no lock.

        See :mod:`raytuner.store.server_lock`. Making it takes nothing: the server calls ``acquire``.

        Args:
            on_lost: Called with a message when the lock is lost while held (a MongoDB lease taken over).
            ttl: Seconds a lease lasts after a renewal (a MongoDB store's; a lock file has none).
        """
        return None

    def check_writable(self, problem: str) -> None:  # noqa: B027 (an optional hook: nothing by default)
        """Raise :class:`~raytuner.errors.StoreError` when ``problem`` cannot be written as it is stored.

        A writer calls it before it starts, so that it refuses at once rather than at its first
        result. Writes nothing; a store with nothing to check (the default) returns.

        Args:
            problem: The tuning problem's name.
        """

    def stored_uids(self, problem: str) -> tuple[set[str], set[str]]:
        """The uids of the problem's stored evaluations and surrogate models.

        Args:
            problem: The tuning problem's name.
        """
        return {r.uid for r in self.evaluations(problem)}, {m.uid for m in self.models(problem)}

    def import_document(self, document: HistoryDocument) -> tuple[int, int]:
        """Add the records of a GPTune file that are not stored yet, all or none.

        The store is read first (an unreadable store fails before anything is
        written), then every new record is written in one batch.

        Args:
            document: The GPTune file's records.

        Returns:
            How many evaluations and how many surrogate models were new.

        Example:
            >>> import tempfile
            >>> from raytuner.store import JsonStore
            >>> from raytuner.problem.records import FunctionEvaluation
            >>> doc = HistoryDocument(tuning_problem_name="demo",
            ...                       func_eval=[FunctionEvaluation.create({"t": 1}, {"x": 0.5}, {"y": 2.0})])
            >>> store = JsonStore(tempfile.mkdtemp())
            >>> store.import_document(doc), store.import_document(doc)
            ((1, 0), (0, 0))
        """
        problem = check_problem_name(document.tuning_problem_name)
        have_evaluations, have_models = self.stored_uids(problem)
        evaluations = new_records(document.func_eval, have_evaluations)
        models = new_records(document.surrogate_model, have_models)
        if evaluations or models:
            self.append_batch(problem, evaluations, models)
        return len(evaluations), len(models)

    def export_document(self, problem: str) -> HistoryDocument:
        """The problem's records as one GPTune file.

        Args:
            problem: The tuning problem's name.
        """
        return HistoryDocument(
            tuning_problem_name=check_problem_name(problem),
            func_eval=self.evaluations(problem),
            surrogate_model=self.models(problem),
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
