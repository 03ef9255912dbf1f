"""The MongoDB history store: GPTune records as documents, for many concurrent tuners.

Two collections, ``func_eval`` and ``surrogate_model``, hold one document per
record: the record's GPTune dictionary (``record.to_dict()``) plus

- ``_id``: ``"<problem>:<uid>"``. Problem names cannot contain ``:``, so the
  key is unambiguous; it makes a uid unique *per problem*, as in
  :class:`~raytuner.store.JsonStore`: appending the same uid again to a
  problem is a no-op (the first record stays), while the same record may be
  appended to two problems;
- ``tuning_problem_name``: the problem;
- ``_appended``: the append order. The record is inserted with an empty BSON
  timestamp, which the server replaces with its current cluster time, unique
  and increasing on a server; reads sort on the index
  ``(tuning_problem_name, _appended)``, so records come back in the order
  the server took them (one round trip per append, no counter to keep).

Keys a record carries itself under one of these names (for example a record
downloaded from GPTune's crowd repository with its own
``tuning_problem_name``) are kept under ``_shadowed`` and restored on read, so
a record reads back exactly as it was appended.

Writes use the journaled write concern ``{w: 1, j: true}`` (on a replica
set ``{w: "majority", j: true}``): an append is on disk when it returns. On a
server that supports transactions (a replica set or a sharded cluster) a
batch (:meth:`MongoStore.append_batch`: evaluations with their surrogate
models, :meth:`~raytuner.store.HistoryStore.append_many`, an import) is
written in one transaction: all of it or nothing; on a standalone server it
is written by unordered bulk inserts, which a failure can cut short (repeating
the call completes it). Either way a uid already stored is skipped, and the
driver's retryable writes retry a write cut off by a lost connection once.
A reader that keeps a problem's records reads only what is new
(:meth:`MongoStore.changes_since`): the documents whose ``_appended`` is
after the newest it read, once it has checked that as many documents as it
read are at or before that time (else, a record that became visible late or
a deleted one, it reads all again).
Queries push down to MongoDB what it can filter exactly
(task ranges and value lists, machine containment, status) and then always
apply :meth:`EvaluationQuery.matches`, so the results are exactly those the
JSON store gives; software-version ranges are filtered in Python only.

Example:
    >>> from raytuner.problem.records import FunctionEvaluation
    >>> with MongoStore("mongodb://127.0.0.1:27017/tuning") as store:   # doctest: +SKIP
    ...     store.append("demo", FunctionEvaluation.create({"t": 1}, {"x": 0.5}, {"y": 2.0}))
    ...     [r.evaluation_result for r in store.evaluations("demo")]
    [{'y': 2.0}]
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import bson
import pymongo
from bson.errors import InvalidDocument
from pymongo.client_session import ClientSession
from pymongo.collection import Collection
from pymongo.errors import BulkWriteError, DuplicateKeyError, InvalidName, OperationFailure
from pymongo.write_concern import WriteConcern

from raytuner.errors import InvalidInputError
from raytuner.problem.records import FunctionEvaluation, SurrogateModelRecord
from raytuner.store.base import EvaluationQuery, HistoryStore, StoreChanges, check_problem_name
from raytuner.store.ledger import MONGO_COLLECTIONS, MongoLedger
from raytuner.store.mongo_client import already_stored, mongo_errors, open_client, redact_uri
from raytuner.store.server_lock import LEASE_COLLECTION, LEASE_TTL, MongoServerLease

__all__ = ["MongoStore", "query_filter", "DEFAULT_DATABASE", "FUNC_EVAL", "SURROGATE_MODEL", "DURABLE", "MAJORITY"]

log = logging.getLogger(__name__)

DEFAULT_DATABASE = "raytuner"
FUNC_EVAL = "func_eval"
SURROGATE_MODEL = "surrogate_model"
#: Journaled writes: an acknowledged append survives a crash of the server.
DURABLE = WriteConcern(w=1, j=True)
#: On a replica set: also on a majority of its members, so an acknowledged append survives a failover.
MAJORITY = WriteConcern(w="majority", j=True)

_PROBLEM = "tuning_problem_name"
_ORDER = "_appended"
_SHADOWED = "_shadowed"
_RESERVED = ("_id", _PROBLEM, _ORDER, _SHADOWED)
_UNAUTHORIZED = 13
_INT64 = (-(2**63), 2**63 - 1)
#: MongoDB's limit on one document (BSON), checked before a batch is written.
_MAX_DOCUMENT_BYTES = 16 * 1024 * 1024
_KEY_RULE = "names that do not start with '$' and contain no '.' or NUL"

_ORDER_INDEX = pymongo.IndexModel([(_PROBLEM, pymongo.ASCENDING), (_ORDER, pymongo.ASCENDING)], name="problem_appended")
_FUNC_EVAL_INDEXES = [
    _ORDER_INDEX,
    pymongo.IndexModel([("task_parameter.$**", pymongo.ASCENDING)], name="task_parameter_wildcard"),
    pymongo.IndexModel([("machine_configuration.machine_name", pymongo.ASCENDING)], name="machine_name"),
    pymongo.IndexModel([("raytuner.status", pymongo.ASCENDING)], name="raytuner_status"),
]


# -- query translation -------------------------------------------------------------------------


def _check_key(key: Any, field: str) -> str:
    """A user-supplied name that goes into a MongoDB field path must not be an operator or a path."""
    if not isinstance(key, str) or not key or key.startswith("$") or "." in key or "\x00" in key:
        raise InvalidInputError(
            field, f"{key!r} cannot be used as a field name in a MongoDB query", allowed=[_KEY_RULE]
        )
    return key


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _bound(value: Any) -> bool:
    """Whether a range bound can be pushed down unchanged (``None``/NaN bounds are open in Python)."""
    if not _is_number(value):
        return False
    if isinstance(value, float):
        return not math.isnan(value)
    return _INT64[0] <= value <= _INT64[1]


def _equal_values(values: Iterable[Any]) -> list[Any] | None:
    """Values for ``$in`` matching at least every value Python's ``==`` matches; ``None`` if unsure.

    Python has ``True == 1 == 1.0``, MongoDB does not compare booleans with
    numbers, so each boolean brings its number and each 0 or 1 its boolean.
    Containers (dict equality ignores key order in Python, not in MongoDB)
    and other types are not pushed down.
    """
    out: list[Any] = []
    for value in values:
        if value is None or isinstance(value, str):
            out.append(value)
        elif isinstance(value, bool):
            out += [value, int(value)]
        elif isinstance(value, int) and _INT64[0] <= value <= _INT64[1]:
            out += [value, bool(value)] if value in (0, 1) else [value]
        elif isinstance(value, float):
            out += [value, bool(value)] if value in (0.0, 1.0) else [value]
        else:
            return None
    return out


def _machine_clauses(want: Mapping[str, Any], path: str, field: str, out: list[dict[str, Any]]) -> None:
    for key, value in want.items():
        _check_key(key, f"{field}.{key}")
        if isinstance(value, Mapping):
            _machine_clauses(value, f"{path}.{key}", f"{field}.{key}", out)
        else:
            values = _equal_values([value])
            if values is not None:
                out.append({f"{path}.{key}": {"$in": values}})


def query_filter(problem: str, query: EvaluationQuery | None = None) -> dict[str, Any]:
    """The MongoDB filter that selects (at least) the evaluations of ``problem`` matching ``query``.

    Every record :meth:`EvaluationQuery.matches` accepts passes the filter;
    the store applies ``matches`` to what the filter returns. Names from the
    query that would become MongoDB operators or paths raise
    :class:`InvalidInputError`.

    Args:
        problem: the tuning problem's name.
        query: the conditions on tasks, configurations and outputs (default ``None``: all evaluations).

    >>> query_filter("demo", EvaluationQuery(task={"t": (0, 5), "kind": ["a"]}))
    {'$and': [{'tuning_problem_name': 'demo'}, {'task_parameter.t': {'$gte': 0.0, '$lte': 5.0}}, {'task_parameter.kind': {'$in': ['a']}}]}
    >>> query_filter("demo", EvaluationQuery(task={"$where": ["x"]}))
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: query.task.$where: '$where' cannot be used as a field name in a MongoDB query (allowed: names that do not start with '$' and contain no '.' or NUL)
    """
    clauses: list[dict[str, Any]] = [{_PROBLEM: check_problem_name(problem)}]
    if query is None:
        return clauses[0]
    for name, cond in query.task.items():
        _check_key(name, f"query.task.{name}")
        path = f"task_parameter.{name}"
        if isinstance(cond, tuple):
            bounds = {op: b for op, b in zip(("$gte", "$lte"), cond) if _bound(b)}
            clauses.append({path: bounds} if bounds else {path: {"$type": "number"}})
        else:
            values = _equal_values(cond)
            if values is not None:
                clauses.append({path: {"$in": values}})
    _machine_clauses(query.machine, "machine_configuration", "query.machine", clauses)
    if query.status is not None:
        # GPTune's own records have no "raytuner" key (or a null one): they are "ok";
        # $in with null matches a missing raytuner.status
        statuses: list[Any] = sorted(query.status)
        clauses.append({"raytuner.status": {"$in": statuses + [None] if "ok" in query.status else statuses}})
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


# -- documents ---------------------------------------------------------------------------------


def _document(problem: str, record: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = {"_id": f"{problem}:{record['uid']}", _ORDER: bson.Timestamp(0, 0)}
    shadowed = {k: record.pop(k) for k in _RESERVED if k in record}
    doc.update(record)
    doc[_PROBLEM] = problem
    if shadowed:
        doc[_SHADOWED] = shadowed
    return doc


def _record(doc: dict[str, Any]) -> dict[str, Any]:
    for key in ("_id", _PROBLEM, _ORDER):
        doc.pop(key, None)
    shadowed = doc.pop(_SHADOWED, None)
    if isinstance(shadowed, dict):
        doc.update(shadowed)
    return doc


# -- the store ---------------------------------------------------------------------------------


class MongoStore(HistoryStore):
    """GPTune records in a MongoDB database (see the module documentation for the layout).

    ``database`` defaults to the database named in the URI's path, else
    ``raytuner``. Opening connects (within ``server_selection_timeout_ms``);
    an unreachable server raises :class:`StoreError`. A store that only reads
    writes nothing: the indexes are created, if missing, by the first write.

    Args:
        uri: the MongoDB connection string (``mongodb://...``).
        database: the database (default ``None``: the URI's path, else ``"raytuner"``).
        server_selection_timeout_ms: how long to wait for the server, in ms (default 10000).

    Example:
        >>> store = MongoStore("mongodb://127.0.0.1:27017", database="tuning")  # doctest: +SKIP
        >>> store.problems()                                                   # doctest: +SKIP
        []
        >>> store.close()                                                      # doctest: +SKIP
    """

    def __init__(self, uri: str, database: str | None = None, server_selection_timeout_ms: int = 10000) -> None:
        self.uri = uri
        self._timeout_ms = server_selection_timeout_ms
        self._display = redact_uri(uri)
        self.client: pymongo.MongoClient[dict[str, Any]] = open_client(
            uri, timeout_ms=server_selection_timeout_ms, appname="raytuner", shown_as=self._display
        )
        try:
            try:
                db = (
                    self.client[database]
                    if database is not None
                    else self.client.get_default_database(default=DEFAULT_DATABASE)
                )
            except (InvalidName, TypeError) as exc:
                raise InvalidInputError("database", f"invalid MongoDB database name: {exc}") from None
            self.database = db.name
            with self._errors("open the store"):
                hello = self.client.admin.command("hello")
            #: Whether the server runs transactions (a replica set or a mongos): batches are then atomic.
            self.transactions = bool(hello.get("setName")) or hello.get("msg") == "isdbgrid"
            self._durable = MAJORITY if self.transactions else DURABLE
            self._func_eval: Collection[dict[str, Any]] = db.get_collection(FUNC_EVAL, write_concern=self._durable)
            self._models: Collection[dict[str, Any]] = db.get_collection(SURROGATE_MODEL, write_concern=self._durable)
            self._indexed = False
        except BaseException:
            self.client.close()
            raise
        log.debug("opened %r", self)

    def __repr__(self) -> str:
        return f"MongoStore({self._display!r}, database={self.database!r})"

    def __getstate__(self) -> dict[str, Any]:
        # Ray pickles searchers (Tuner state): a store travels as its location and reconnects
        return {"uri": self.uri, "database": self.database, "timeout_ms": self._timeout_ms}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["uri"], state["database"], state["timeout_ms"])  # type: ignore[misc]  # unpickling: connect anew

    @property
    def func_eval(self) -> Collection[dict[str, Any]]:
        """The ``func_eval`` collection (the store's write concern)."""
        return self._func_eval

    @property
    def surrogate_model(self) -> Collection[dict[str, Any]]:
        """The ``surrogate_model`` collection (the store's write concern)."""
        return self._models

    def _create_indexes(self) -> None:
        """Create the indexes if missing (once per store object, before its first write)."""
        if self._indexed:
            return
        self._indexed = True
        try:
            self._func_eval.create_indexes(_FUNC_EVAL_INDEXES)
            self._models.create_indexes([_ORDER_INDEX])
        except OperationFailure as exc:
            if exc.code != _UNAUTHORIZED:
                raise
            log.warning("%r: not allowed to create indexes (%s); queries may be slow", self, exc)

    def _errors(self, action: str, field: str = "record") -> AbstractContextManager[None]:
        """Driver errors as :class:`StoreError`, unstorable data as InvalidInputError: :func:`mongo_errors`."""
        return mongo_errors(
            action,
            server=f"the MongoDB server {self._display}",
            owner=f"MongoDB server {self._display} (database {self.database!r})",
            field=field,
        )

    # -- writing -------------------------------------------------------------------------------

    def _insert_one(self, collection: Collection[dict[str, Any]], problem: str, record: dict[str, Any]) -> None:
        doc = _document(check_problem_name(problem), record)
        with self._errors(f"append to {problem!r}"):
            self._create_indexes()
            try:
                collection.insert_one(doc)
            except DuplicateKeyError:
                log.debug("%s: uid %s already stored; append ignored", problem, record.get("uid"))

    def append(self, problem: str, record: FunctionEvaluation) -> None:
        """Persist one evaluation; journaled when this returns; a repeated uid is ignored."""
        self._insert_one(self._func_eval, problem, record.to_dict())

    def append_batch(
        self, problem: str, evaluations: Sequence[FunctionEvaluation] = (), models: Sequence[SurrogateModelRecord] = ()
    ) -> None:
        """Persist evaluations and surrogate models in one transaction (a standalone server: bulk inserts).

        A record MongoDB cannot store (a key it refuses, a document over its
        size limit, an integer beyond 64 bits) raises
        :class:`InvalidInputError` naming it before anything is written.
        Records whose uid is already stored are skipped. With
        :attr:`transactions`, the batch is written whole or not at all (the
        driver retries a transaction cut off by a lost connection or a write
        conflict for up to two minutes). On a standalone server, a server lost in
        the middle of the inserts raises :class:`StoreError` with part of the
        batch written; appends are idempotent by uid, so repeating the call
        completes it.

        Args:
            problem: The tuning problem's name.
            evaluations: ``func_eval`` records to add.
            models: ``surrogate_model`` records to add.
        """
        problem = check_problem_name(problem)
        batches = [
            (self._models, [_document(problem, m.to_dict()) for m in models]),
            (self._func_eval, [_document(problem, e.to_dict()) for e in evaluations]),
        ]
        for name, (_, docs) in zip(("models", "evaluations"), batches):
            for i, doc in enumerate(docs):
                try:
                    size = len(bson.encode(doc))
                except (InvalidDocument, OverflowError) as exc:
                    raise InvalidInputError(f"{name}[{i}]", f"cannot be stored in MongoDB: {exc}") from None
                if size > _MAX_DOCUMENT_BYTES:
                    raise InvalidInputError(
                        f"{name}[{i}]",
                        f"is {size} bytes, over MongoDB's limit of {_MAX_DOCUMENT_BYTES} bytes per record",
                    )
        if not self.transactions:
            for collection, docs in batches:
                if docs:
                    self._insert_many(collection, problem, docs)
            return
        with self._errors(f"append to {problem!r}"):
            self._create_indexes()  # outside the transaction, which cannot create them
            with self.client.start_session() as session:
                session.with_transaction(lambda s: self._insert_new(s, batches), write_concern=self._durable)

    @staticmethod
    def _insert_new(
        session: ClientSession, batches: list[tuple[Collection[dict[str, Any]], list[dict[str, Any]]]]
    ) -> None:
        """Insert, within ``session``'s transaction, the documents whose key is not stored (a key given twice: once)."""
        for collection, docs in batches:
            new = {doc["_id"]: doc for doc in reversed(docs)}  # a key given twice: its first document
            stored = collection.find({"_id": {"$in": list(new)}}, projection={"_id": 1}, session=session)
            for doc in stored:
                del new[doc["_id"]]
            if new:
                collection.insert_many([doc for doc in docs if new.get(doc["_id"]) is doc], session=session)

    def _insert_many(self, collection: Collection[dict[str, Any]], problem: str, docs: list[dict[str, Any]]) -> None:
        with self._errors(f"append to {problem!r}"):
            self._create_indexes()
            try:
                collection.insert_many(docs, ordered=False)
            except BulkWriteError as exc:
                stored = already_stored(
                    exc, f"MongoDB server {self._display} (database {self.database!r}) failed to append to {problem!r}"
                )
                log.debug("%s: %d of %d uids already stored; skipped", problem, len(stored), len(docs))

    def stored_uids(self, problem: str) -> tuple[set[str], set[str]]:
        """The uids of the problem's stored evaluations and surrogate models (read from their keys only).

        Args:
            problem: The tuning problem's name.
        """
        prefix = f"{check_problem_name(problem)}:"
        with self._errors(f"read {problem!r}"):
            evaluations, models = (
                {doc["_id"][len(prefix) :] for doc in collection.find({_PROBLEM: problem}, projection={"_id": 1})}
                for collection in (self._func_eval, self._models)
            )
            return evaluations, models

    def append_model(self, problem: str, record: SurrogateModelRecord) -> None:
        """Persist one surrogate-model record; journaled when this returns; a repeated uid is ignored."""
        self._insert_one(self._models, problem, record.to_dict())

    # -- reading -------------------------------------------------------------------------------

    def evaluations(self, problem: str, query: EvaluationQuery | None = None) -> list[FunctionEvaluation]:
        """The problem's evaluations matching ``query``, in append order."""
        with self._errors(f"read {problem!r}", field="query"):
            mongo_filter = query_filter(problem, query)
            docs = list(self._func_eval.find(mongo_filter, sort=[(_ORDER, pymongo.ASCENDING)]))
        records = [FunctionEvaluation.model_validate(_record(d)) for d in docs]
        return records if query is None else [r for r in records if query.matches(r)]

    def models(self, problem: str) -> list[SurrogateModelRecord]:
        """The problem's surrogate-model records, in append order."""
        mongo_filter = {_PROBLEM: check_problem_name(problem)}
        with self._errors(f"read {problem!r}"):
            docs = list(self._models.find(mongo_filter, sort=[(_ORDER, pymongo.ASCENDING)]))
        return [SurrogateModelRecord.model_validate(_record(d)) for d in docs]

    def changes_since(self, problem: str, cursor: Any = None) -> StoreChanges:
        """The problem's records appended since ``cursor``, or all of them (see the module documentation).

        The cursor holds, per collection, the newest ``_appended`` read and how many documents were read up
        to it; when the count of documents up to it differs now, every record is read again
        (:attr:`StoreChanges.whole`). See :meth:`HistoryStore.changes_since
        <raytuner.store.HistoryStore.changes_since>`.

        Args:
            problem: The tuning problem's name.
            cursor: :attr:`StoreChanges.cursor` of an earlier read of this problem (``None``: read all).
        """
        check_problem_name(problem)
        collections = (self._func_eval, self._models)
        with self._errors(f"read {problem!r}"):
            if self.can_read_since(problem, cursor):
                found = [
                    list(
                        collection.find(
                            {_PROBLEM: problem, _ORDER: {"$gt": last}} if last is not None else {_PROBLEM: problem},
                            sort=[(_ORDER, pymongo.ASCENDING)],
                        )
                    )
                    for collection, (last, _) in zip(collections, cursor)
                ]
                return self._changes(found, cursor, whole=False)
            found = [list(c.find({_PROBLEM: problem}, sort=[(_ORDER, pymongo.ASCENDING)])) for c in collections]
        return self._changes(found, ((None, 0), (None, 0)), whole=True)

    def can_read_since(self, problem: str, cursor: Any) -> bool:
        """Whether :meth:`changes_since` can read only what is new: as many documents as were read are still at
        or before the newest one read (one count per collection).

        Args:
            problem: The tuning problem's name.
            cursor: :attr:`StoreChanges.cursor` of an earlier read of this problem.
        """
        if not (isinstance(cursor, tuple) and len(cursor) == 2 and all(isinstance(c, tuple) for c in cursor)):
            return False
        with self._errors(f"read {problem!r}"):
            held = [
                collection.count_documents({_PROBLEM: problem, _ORDER: {"$lte": last}}) if last is not None else 0
                for collection, (last, _) in zip((self._func_eval, self._models), cursor)
            ]
        return held == [count for _, count in cursor]

    @staticmethod
    def _changes(found: list[list[dict[str, Any]]], cursor: Any, whole: bool) -> StoreChanges:
        """The records of ``found`` (evaluations' and models' documents), with the cursor after them."""
        after = tuple(
            (docs[-1].get(_ORDER), count + len(docs)) if docs else (last, count)
            for docs, (last, count) in zip(found, cursor)
        )
        return StoreChanges(
            [FunctionEvaluation.model_validate(_record(d)) for d in found[0]],
            [SurrogateModelRecord.model_validate(_record(d)) for d in found[1]],
            after,
            whole,
        )

    def evaluation_count(self, problem: str) -> int:
        """How many evaluations the problem has (MongoDB counts its documents).

        Args:
            problem: The tuning problem's name.
        """
        with self._errors(f"read {problem!r}"):
            return self._func_eval.count_documents({_PROBLEM: check_problem_name(problem)})

    def problems(self) -> list[str]:
        """Names of the problems with evaluations or surrogate models, sorted."""
        with self._errors("list problems"):
            names = set(self._func_eval.distinct(_PROBLEM)) | set(self._models.distinct(_PROBLEM))
        return sorted(n for n in names if isinstance(n, str))

    def ledger(self) -> MongoLedger:
        """The store's trial ledger: a collection ``service_<log>`` per log (:data:`~raytuner.store.ledger.LOGS`).

        They live in the store's database, with its write concern and its error mapping.
        """
        database = self._func_eval.database
        return MongoLedger(
            {
                name: database.get_collection(collection, write_concern=self._durable)
                for name, collection in MONGO_COLLECTIONS.items()
            },
            self._errors,
        )

    def server_lock(self, on_lost: Callable[[str], None] | None = None, ttl: float = LEASE_TTL) -> MongoServerLease:
        """The store's server lease: the document ``service_server`` of its database, renewed while held.

        Args:
            on_lost: Called with a message when another server took the lease (this one could not renew it).
            ttl: Seconds the lease lasts after a renewal.
        """
        collection = self._func_eval.database.get_collection(LEASE_COLLECTION, write_concern=self._durable)
        return MongoServerLease(collection, f"{self._display} (database {self.database})", self._errors, on_lost, ttl)

    def close(self) -> None:
        """Close the connection pool; the store is not used afterwards."""
        self.client.close()
