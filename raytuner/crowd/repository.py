"""The crowd repository on MongoDB: users, API keys, catalogs, uploads and queries (server side).

Collections of the database (``raytuner_crowd`` unless told otherwise); every
write uses the journaled write concern ``{w: 1, j: true}``:

- ``users``: ``{_id: username, email, groups: [...], created}``; unique index on ``email``;
- ``api_keys``: ``{_id: key id, username, salt, hash, created, revoked, revoked_at}``
  (only ``sha256(salt + secret)`` is kept; see :mod:`raytuner.crowd.keys`); index on ``username``;
- ``machines`` / ``software``: the alias catalogs (:mod:`raytuner.crowd.catalog`);
- ``func_eval`` / ``surrogate_model``: one document per record::

      {_id: "<problem>:<uid>", problem, uid,
       record: {...the GPTune record, machine and package names canonical...},
       json: "the record as compact JSON text (what a query answers with, made once at upload)",
       owner: username, access: "public"|"registered"|"private"|"shared",
       shared_users: [...], shared_groups: [...],
       machine: lower-cased canonical machine name (func_eval only),
       software: [{name: lower-cased canonical package, vkey: sortable version key}] (func_eval only),
       uploaded: datetime}

  ``_id`` makes a uid unique per problem: uploading it again (by anyone) is
  not a second record and leaves the first as it was. Indexes:
  ``(problem, access, owner)``, ``(problem, machine)``,
  ``(problem, software.name, software.vkey)`` and a wildcard index on
  ``record.task_parameter``.

Example:
    >>> repo = CrowdRepository("mongodb://127.0.0.1:27017")              # doctest: +SKIP
    >>> repo.add_user("alice", "alice@example.org", groups=["hpc"])       # doctest: +SKIP
    >>> key = repo.create_key("alice")                                    # doctest: +SKIP
    >>> repo.add_machine("Cori", aliases=["cori.nersc.gov"])              # doctest: +SKIP
    >>> rec = FunctionEvaluation.create({"t": 1}, {"x": 0.5}, {"y": 2.0},
    ...                                 machine_configuration={"machine_name": "cori.nersc.gov"})
    >>> repo.upload(key, "demo", [rec], access="registered").inserted     # doctest: +SKIP
    1
    >>> [r.machine_configuration["machine_name"] for r in repo.query_function_evaluations(
    ...     key, "demo", configuration_space={"machine_configurations": [{"CORI": {}}]})]  # doctest: +SKIP
    ['Cori']
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping, Sequence, TypeVar

import pymongo
from pymongo.collection import Collection
from pymongo.errors import (
    BulkWriteError,
    ConfigurationError,
    ConnectionFailure,
    DuplicateKeyError,
    PyMongoError,
)
from bson.errors import InvalidDocument
from pydantic import BaseModel

from raytuner.crowd.access import AccessSpec, User, visibility_filter
from raytuner.crowd.catalog import AliasCatalog, match_key
from raytuner.crowd.errors import AccessDenied, Unauthenticated
from raytuner.crowd.keys import matches, new_key, parse_key
from raytuner.crowd.names import check_email, check_field_name, check_group, check_username
from raytuner.crowd.query import ConfigurationSpaceQuery, ProblemSpaceQuery
from raytuner.crowd.versions import version_key, version_parts
from raytuner.errors import InvalidInputError, StoreError, validate
from raytuner.records import (
    EVALUATION_LIST,
    MODEL_LIST,
    FunctionEvaluation,
    SurrogateModelRecord,
    check_problem_name,
)
from raytuner.store.mongo_store import DURABLE

__all__ = ["CrowdRepository", "UploadResult", "KeyInfo", "DEFAULT_DATABASE"]

log = logging.getLogger(__name__)

DEFAULT_DATABASE = "raytuner_crowd"
_DUPLICATE_KEY = 11000
_CHUNK = 10_000
_MAX_LIMIT = 10_000_000

RecordT = TypeVar("RecordT", FunctionEvaluation, SurrogateModelRecord)

_ACCESS_INDEX = pymongo.IndexModel([("problem", 1), ("access", 1), ("owner", 1)], name="problem_access_owner")
_TASK_INDEX = "task_parameter_wildcard"
_FUNC_EVAL_INDEXES = [
    _ACCESS_INDEX,
    pymongo.IndexModel([("problem", 1), ("machine", 1)], name="problem_machine"),
    pymongo.IndexModel([("problem", 1), ("software.name", 1), ("software.vkey", 1)], name="problem_software"),
    pymongo.IndexModel([("record.task_parameter.$**", 1)], name=_TASK_INDEX),
]


@dataclass(frozen=True)
class UploadResult:
    """What an upload did: records given, newly stored, and already there (same uid)."""

    given: int
    inserted: int

    @property
    def duplicates(self) -> int:
        """Records not stored because their uid was already there (or repeated in the upload)."""
        return self.given - self.inserted


@dataclass(frozen=True)
class KeyInfo:
    """A stored key's public part (never the secret)."""

    key_id: str
    username: str
    created: _dt.datetime
    revoked: bool


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


class CrowdRepository:
    """The shared repository of tuning data (see the module documentation).

    ``uri_or_client`` is a ``mongodb://`` URI (the repository owns and closes
    the client) or a :class:`pymongo.MongoClient` (the caller owns it).
    Opening creates the indexes if missing; an unreachable server raises
    :class:`StoreError`.
    """

    def __init__(self, uri_or_client: str | pymongo.MongoClient[dict[str, Any]],
                 database: str = DEFAULT_DATABASE, server_selection_timeout_ms: int = 10000) -> None:
        if isinstance(uri_or_client, str):
            try:
                self.client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(
                    uri_or_client, serverSelectionTimeoutMS=server_selection_timeout_ms, appname="raytuner-crowd")
            except (ConfigurationError, ValueError, TypeError) as exc:
                raise InvalidInputError("uri_or_client", f"invalid MongoDB URI: {exc}") from None
            self._owns_client = True
        else:
            self.client = uri_or_client
            self._owns_client = False
        db = self.client.get_database(database, write_concern=DURABLE)
        self.database = db.name
        self.users: Collection[dict[str, Any]] = db["users"]
        self.api_keys: Collection[dict[str, Any]] = db["api_keys"]
        self.func_eval: Collection[dict[str, Any]] = db["func_eval"]
        self.surrogate_model: Collection[dict[str, Any]] = db["surrogate_model"]
        self.machines = AliasCatalog(db["machines"], "machine")
        self.software = AliasCatalog(db["software"], "software")
        try:
            with self._errors("create the indexes"):
                self.users.create_indexes([pymongo.IndexModel([("email", 1)], unique=True, name="email_unique")])
                self.api_keys.create_indexes([pymongo.IndexModel([("username", 1)], name="username")])
                self.func_eval.create_indexes(_FUNC_EVAL_INDEXES)
                self.surrogate_model.create_indexes([_ACCESS_INDEX])
                self.machines.create_indexes()
                self.software.create_indexes()
        except BaseException:
            self.close()
            raise
        log.debug("opened crowd repository %r", self.database)

    def __repr__(self) -> str:
        return f"CrowdRepository(database={self.database!r})"

    def close(self) -> None:
        """Close the client if the repository opened it."""
        if self._owns_client:
            self.client.close()

    def __enter__(self) -> "CrowdRepository":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _errors(self, action: str, field: str = "records") -> Iterator[None]:
        """Driver errors as :class:`StoreError` (unstorable data as :class:`InvalidInputError`)."""
        try:
            yield
        except (InvalidDocument, OverflowError) as exc:
            raise InvalidInputError(field, f"cannot be stored in MongoDB: {exc}") from None
        except ConnectionFailure as exc:
            reason = str(exc).split(", Topology Description:", 1)[0]
            raise StoreError(f"cannot reach the crowd repository's MongoDB server to {action}: {reason}") from None
        except PyMongoError as exc:
            raise StoreError(f"crowd repository (database {self.database!r}) failed to {action}: {exc}") from None

    # -- users and keys ------------------------------------------------------------------------

    def add_user(self, username: str, email: str, groups: Iterable[str] = ()) -> User:
        """Register a user; a taken username or e-mail address raises :class:`InvalidInputError`.

        >>> repo.add_user("alice", "Alice@Example.org", ["hpc"])       # doctest: +SKIP
        User(username='alice', email='alice@example.org', groups=('hpc',))
        """
        username = check_username(username)
        email = check_email(email)
        if isinstance(groups, str):
            raise InvalidInputError("groups", "must be a list of group names, not one string")
        group_list = tuple(sorted({check_group(g, f"groups[{i}]") for i, g in enumerate(groups)}))
        with self._errors("add a user", "username"):
            try:
                self.users.insert_one({"_id": username, "email": email, "groups": list(group_list),
                                       "created": _now()})
            except DuplicateKeyError as exc:
                field = "email" if "email" in (exc.details or {}).get("keyPattern", {}) else "username"
                raise InvalidInputError(field, f"{email if field == 'email' else username!r} is already registered") \
                    from None
        log.info("added crowd user %s (groups %s)", username, list(group_list))
        return User(username, email, group_list)

    def set_groups(self, username: str, groups: Iterable[str]) -> User:
        """Replace a user's groups (takes effect on their next call)."""
        username = check_username(username)
        group_list = sorted({check_group(g, f"groups[{i}]") for i, g in enumerate(groups)})
        with self._errors("set groups", "username"):
            doc = self.users.find_one_and_update({"_id": username}, {"$set": {"groups": group_list}},
                                                 return_document=pymongo.ReturnDocument.AFTER)
        if doc is None:
            raise InvalidInputError("username", f"no user {username!r}")
        return User(doc["_id"], doc["email"], tuple(doc["groups"]))

    def get_user(self, username: str) -> User:
        """The registered user ``username``."""
        username = check_username(username)
        with self._errors("read a user", "username"):
            doc = self.users.find_one({"_id": username})
        if doc is None:
            raise InvalidInputError("username", f"no user {username!r}")
        return User(doc["_id"], doc["email"], tuple(doc.get("groups", ())))

    def create_key(self, username: str) -> str:
        """A new API key for ``username``, returned once: only its salted hash is kept.

        A user may hold several keys. The key is never logged; its id is.
        """
        username = self.get_user(username).username
        key, key_id, salt, hashed = new_key()
        with self._errors("create an API key", "username"):
            self.api_keys.insert_one({"_id": key_id, "username": username, "salt": salt, "hash": hashed,
                                      "created": _now(), "revoked": False})
        log.info("created crowd API key %s for %s", key_id, username)
        return key

    def revoke_key(self, key_id: str, *, api_key: str | None = None) -> None:
        """Revoke the key ``key_id`` (the part after ``rt_``); it no longer authenticates.

        With ``api_key`` the caller must own the key (else :class:`AccessDenied`);
        without it, this is the administrator's call.
        """
        if not isinstance(key_id, str) or len(key_id) != 16 or any(c not in "0123456789abcdef" for c in key_id):
            raise InvalidInputError("key_id", f"{key_id!r} is not a key id", allowed=["16 lower-case hex digits"])
        caller = self.authenticate(api_key) if api_key is not None else None
        with self._errors("revoke an API key", "key_id"):
            doc = self.api_keys.find_one({"_id": key_id}, {"username": 1})
            if doc is None:
                raise InvalidInputError("key_id", f"no key with id {key_id!r}")
            if caller is not None and doc["username"] != caller.username:
                raise AccessDenied(f"key {key_id} is not a key of {caller.username}")
            self.api_keys.update_one({"_id": key_id}, {"$set": {"revoked": True, "revoked_at": _now()}})
        log.info("revoked crowd API key %s", key_id)

    def list_keys(self, username: str) -> list[KeyInfo]:
        """The public part of ``username``'s keys, oldest first."""
        username = check_username(username)
        with self._errors("list API keys", "username"):
            docs = list(self.api_keys.find({"username": username}, {"salt": 0, "hash": 0}).sort("created", 1))
        return [KeyInfo(d["_id"], d["username"], d["created"], bool(d.get("revoked"))) for d in docs]

    def authenticate(self, api_key: Any) -> User:
        """The user ``api_key`` belongs to; :class:`Unauthenticated` when it is malformed, unknown, wrong or revoked.

        The secret is compared in constant time; neither the key nor the
        reason it failed reaches the message or the log (the key id may).
        """
        parsed = parse_key(api_key)
        if parsed is None:
            log.info("rejected a malformed API key")
            raise Unauthenticated()
        key_id, secret = parsed
        with self._errors("check an API key", "api_key"):
            entry = self.api_keys.find_one({"_id": key_id})
            if entry is None or entry.get("revoked") or not matches(entry["salt"], entry["hash"], secret):
                log.info("rejected API key id %s", key_id)
                raise Unauthenticated()
            doc = self.users.find_one({"_id": entry["username"]})
        if doc is None:
            log.info("rejected API key id %s: its user is gone", key_id)
            raise Unauthenticated()
        return User(doc["_id"], doc["email"], tuple(doc.get("groups", ())))

    # -- catalogs ------------------------------------------------------------------------------

    def add_machine(self, name: str, aliases: Iterable[str] = ()) -> str:
        """Register machine ``name`` (canonical) and other names for it; returns ``name``.

        >>> repo.add_machine("Cori", aliases=["cori", "cori.nersc.gov"])   # doctest: +SKIP
        'Cori'
        """
        with self._errors("add a machine", "name"):
            return self.machines.add(name, aliases)

    def add_software(self, name: str, aliases: Iterable[str] = ()) -> str:
        """Register package ``name`` (canonical) and other names for it; returns ``name``.

        >>> repo.add_software("openmpi", aliases=["OpenMPI", "open-mpi"])  # doctest: +SKIP
        'openmpi'
        """
        with self._errors("add a package", "name"):
            return self.software.add(name, aliases)

    def canonical_machine(self, name: str) -> str:
        """The canonical name of machine ``name`` (itself when unknown)."""
        with self._errors("read the machine catalog", "name"):
            return self.machines.canonical(name)

    def canonical_software(self, name: str) -> str:
        """The canonical name of package ``name`` (itself when unknown)."""
        with self._errors("read the software catalog", "name"):
            return self.software.canonical(name)

    # -- upload --------------------------------------------------------------------------------

    def upload(self, api_key: str, problem_name: str,
               records: FunctionEvaluation | Mapping[str, Any] | Iterable[FunctionEvaluation | Mapping[str, Any]],
               access: str = "public", shared_with_users: Iterable[str] = (),
               shared_with_groups: Iterable[str] = ()) -> UploadResult:
        """Store function evaluations of ``problem_name`` as the key's user, with the given access.

        ``records`` is one record or many, as :class:`FunctionEvaluation` or
        GPTune dictionaries. Machine and package names are replaced by their
        canonical names. A uid already stored for the problem is skipped
        (``UploadResult.duplicates``). ``shared_with_users`` must be registered users.

        >>> repo.upload(key, "demo", records, access="shared", shared_with_groups=["hpc"])  # doctest: +SKIP
        UploadResult(given=3, inserted=3)
        """
        return self.upload_as(self.authenticate(api_key), problem_name, records, access, shared_with_users,
                              shared_with_groups)

    def upload_as(self, user: User, problem_name: str,
                  records: FunctionEvaluation | Mapping[str, Any] | Iterable[FunctionEvaluation | Mapping[str, Any]],
                  access: str = "public", shared_with_users: Iterable[str] = (),
                  shared_with_groups: Iterable[str] = ()) -> UploadResult:
        """:meth:`upload` for a user the caller has already authenticated (the tuning service's sessions)."""
        problem = check_problem_name(problem_name, "problem_name")
        spec = self._access(access, shared_with_users, shared_with_groups)
        with self._errors("read the catalogs", "records"):
            machines, packages = self.machines.mapping(), self.software.mapping()
        base = {"problem": problem, "owner": user.username, **spec.to_fields()}
        docs = (self._evaluation_document(base, _as_dict(FunctionEvaluation, r, f"records[{i}]"),
                                          machines, packages, f"records[{i}]")
                for i, r in enumerate(_iterate(records, FunctionEvaluation)))
        result = self._insert(self.func_eval, docs, problem)
        log.info("%s uploaded %d evaluations of %s (%d new, access %s)", user.username, result.given, problem,
                 result.inserted, spec.access)
        return result

    def upload_surrogate_models(self, api_key: str, problem_name: str,
                                records: SurrogateModelRecord | Mapping[str, Any]
                                | Iterable[SurrogateModelRecord | Mapping[str, Any]],
                                access: str = "public", shared_with_users: Iterable[str] = (),
                                shared_with_groups: Iterable[str] = ()) -> UploadResult:
        """Store surrogate-model records of ``problem_name``; the same rules as :meth:`upload`."""
        user = self.authenticate(api_key)
        problem = check_problem_name(problem_name, "problem_name")
        spec = self._access(access, shared_with_users, shared_with_groups)
        base = {"problem": problem, "owner": user.username, **spec.to_fields()}
        docs = (self._document(base, _as_dict(SurrogateModelRecord, r, f"records[{i}]"), f"records[{i}]")
                for i, r in enumerate(_iterate(records, SurrogateModelRecord)))
        result = self._insert(self.surrogate_model, docs, problem)
        log.info("%s uploaded %d surrogate models of %s (%d new)", user.username, result.given, problem,
                 result.inserted)
        return result

    def _access(self, access: Any, users: Iterable[Any], groups: Iterable[Any]) -> AccessSpec:
        spec = AccessSpec.build(access, users, groups)
        if spec.users:
            with self._errors("check the shared-with users", "shared_with_users"):
                known = {d["_id"] for d in self.users.find({"_id": {"$in": list(spec.users)}}, {"_id": 1})}
            unknown = [u for u in spec.users if u not in known]
            if unknown:
                raise InvalidInputError("shared_with_users", f"no registered user {unknown[0]!r}")
        return spec

    @staticmethod
    def _document(base: dict[str, Any], record: dict[str, Any], field: str) -> dict[str, Any]:
        for key in record:
            check_field_name(key, f"{field}.<key>")
        uid = record["uid"]
        return {"_id": f"{base['problem']}:{uid}", "uid": uid, **base, "record": record, "uploaded": _now()}

    def _evaluation_document(self, base: dict[str, Any], record: dict[str, Any], machines: dict[str, str],
                             packages: dict[str, str], field: str) -> dict[str, Any]:
        for part in ("task_parameter", "tuning_parameter", "evaluation_result", "machine_configuration"):
            for key in record[part]:
                check_field_name(key, f"{field}.{part}.<name>")
        doc = self._document(base, record, field)
        machine_conf = record["machine_configuration"]
        name = machine_conf.get("machine_name")
        if isinstance(name, str) and name.strip():
            canonical = machines.get(match_key(name), name.strip())
            machine_conf["machine_name"] = canonical
            doc["machine"] = match_key(canonical)
        else:
            doc["machine"] = None
        software: dict[str, Any] = {}
        entries = []
        for package, entry in record["software_configuration"].items():
            check_field_name(package, f"{field}.software_configuration.<name>")
            canonical = packages.get(match_key(package), package.strip())
            if canonical in software:
                raise InvalidInputError(f"{field}.software_configuration.{package}",
                                        f"names the same package as {canonical!r}")
            software[canonical] = entry
            entries.append({"name": match_key(canonical), "vkey": _version_key(entry)})
        record["software_configuration"] = software
        doc["software"] = entries
        return doc

    def _insert(self, collection: Collection[dict[str, Any]], docs: Iterable[dict[str, Any]],
                problem: str) -> UploadResult:
        """Insert ``docs`` in unordered bulk writes; a duplicate ``_id`` is "already there", not an error."""
        validated = list(docs)   # every record is checked before the first is written
        for doc in validated:    # the record as a query answers it: JSON text made once, here
            doc["json"] = _json_text(doc["record"])
        inserted = 0
        for start in range(0, len(validated), _CHUNK):
            inserted += self._insert_chunk(collection, validated[start:start + _CHUNK], problem)
        return UploadResult(len(validated), inserted)

    def _insert_chunk(self, collection: Collection[dict[str, Any]], chunk: list[dict[str, Any]],
                      problem: str) -> int:
        with self._errors(f"upload to {problem!r}"):
            try:
                return len(collection.insert_many(chunk, ordered=False).inserted_ids)
            except BulkWriteError as exc:
                details = exc.details
                others = [e for e in details.get("writeErrors", []) if e.get("code") != _DUPLICATE_KEY]
                if others or details.get("writeConcernErrors"):
                    first = (others or details["writeConcernErrors"])[0]
                    raise StoreError(f"crowd repository failed to upload to {problem!r}: "
                                     f"{len(others)} records not written, first error: "
                                     f"{first.get('errmsg', first)}") from None
                return int(details.get("nInserted", 0))

    # -- queries -------------------------------------------------------------------------------

    def query_function_evaluations(self, api_key: str, tuning_problem_name: str,
                                   problem_space: Mapping[str, Any] | None = None,
                                   configuration_space: Mapping[str, Any] | None = None,
                                   limit: int | None = None, raw: bool = False) -> list[Any]:
        """The evaluations of ``tuning_problem_name`` the caller may see that match both spaces.

        See :mod:`raytuner.crowd.query` for the shapes and their meaning (GPTuneCrowd IV-A).
        With ``raw``, the records' stored JSON texts (validated when uploaded)
        instead of :class:`FunctionEvaluation` objects: what a server passes on.

        >>> repo.query_function_evaluations(key, "demo",                                    # doctest: +SKIP
        ...     problem_space={"input_space": [{"name": "t", "lower_bound": 1, "upper_bound": 10}]},
        ...     configuration_space={"software_configurations": [
        ...         {"gcc": {"version_from": [8, 0, 0], "version_to": [9, 0, 0]}}]})
        [FunctionEvaluation(...), ...]
        """
        user = self.authenticate(api_key)
        query = self._filter(user, tuning_problem_name, problem_space, configuration_space)
        texts = self._find_json(self.func_eval, query, limit, _task_hint(problem_space))
        return texts if raw else EVALUATION_LIST.validate_json("[" + ",".join(texts) + "]")

    def query_surrogate_models(self, api_key: str, tuning_problem_name: str,
                               configuration_space: Mapping[str, Any] | None = None,
                               limit: int | None = None, raw: bool = False) -> list[Any]:
        """The surrogate-model records of ``tuning_problem_name`` the caller may see (``raw``: JSON texts).

        ``configuration_space`` may hold ``user_configurations`` only (a model
        record carries no machine or software configuration).
        """
        user = self.authenticate(api_key)
        config = ConfigurationSpaceQuery.parse(configuration_space)
        if config.machines or config.software:
            raise InvalidInputError("configuration_space", "surrogate models are filtered by users only",
                                    allowed=["user_configurations"])
        query = self._filter(user, tuning_problem_name, None, configuration_space)
        texts = self._find_json(self.surrogate_model, query, limit)
        return texts if raw else MODEL_LIST.validate_json("[" + ",".join(texts) + "]")

    def _filter(self, user: User, problem_name: Any, problem_space: Any, configuration_space: Any) -> dict[str, Any]:
        problem = check_problem_name(problem_name)
        space = ProblemSpaceQuery.parse(problem_space)
        config = ConfigurationSpaceQuery.parse(configuration_space)
        with self._errors("read the catalogs", "configuration_space"):
            machines = self.machines.mapping() if config.machines else {}
            packages = self.software.mapping() if config.software else {}
        clauses: list[dict[str, Any]] = [{"problem": problem}, visibility_filter(user), *space.clauses(),
                                         *config.clauses(lambda n: match_key(machines.get(match_key(n), n)),
                                                         lambda n: match_key(packages.get(match_key(n), n)),
                                                         self._usernames)]
        return {"$and": clauses}

    def _usernames(self, names: Sequence[str]) -> list[str]:
        emails = [n for n in names if "@" in n]
        out = {n for n in names if "@" not in n}
        if emails:
            with self._errors("resolve user e-mail addresses", "configuration_space.user_configurations"):
                out |= {d["_id"] for d in self.users.find({"email": {"$in": emails}}, {"_id": 1})}
        return sorted(out)

    def _find_json(self, collection: Collection[dict[str, Any]], query: dict[str, Any],
                   limit: int | None, hint: str | None = None) -> list[str]:
        """The matching records' stored JSON texts (made at upload; a record stored without one gets it now)."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                                  or not 1 <= limit <= _MAX_LIMIT):
            raise InvalidInputError("limit", f"{limit!r} is not a positive integer", allowed=[f"1..{_MAX_LIMIT}"])
        with self._errors("query", "query"):
            cursor = collection.find(query, {"json": 1})
            if hint is not None:
                cursor = cursor.hint(hint)
            if limit is not None:
                cursor = cursor.limit(limit)
            docs = list(cursor)
            missing = [d["_id"] for d in docs if "json" not in d]
            records = {d["_id"]: d["record"] for d in collection.find({"_id": {"$in": missing}}, {"record": 1})} \
                if missing else {}
        return [d["json"] if "json" in d else _json_text(records[d["_id"]]) for d in docs]


def _json_text(record: Mapping[str, Any]) -> str:
    """Compact JSON text of a stored record."""
    return json.dumps(record, separators=(",", ":"), default=str)


def _task_hint(problem_space: Any) -> str | None:
    """The task-parameter index when the query narrows a task parameter (the selective part of a crowd query).

    MongoDB's planner otherwise races the candidate indexes on a new query
    shape, which cost up to 0.8 s on 100,000 records (measured).
    """
    conditions = ProblemSpaceQuery.parse(problem_space).conditions
    narrowed = any(c.space == "input_space" and (c.lower_bound is not None or c.upper_bound is not None
                                                 or c.categories is not None) for c in conditions)
    return _TASK_INDEX if narrowed else None


def _iterate(records: Any, model: type[BaseModel]) -> Iterable[Any]:
    if isinstance(records, (model, Mapping)):
        return [records]
    if isinstance(records, (str, bytes)) or not isinstance(records, Iterable):
        raise InvalidInputError("records", f"must be a record or a list of records, not {type(records).__name__}")
    return records


def _as_dict(model: type[RecordT], record: Any, field: str) -> dict[str, Any]:
    if isinstance(record, model):
        return record.to_dict()
    if not isinstance(record, Mapping):
        raise InvalidInputError(field, f"must be a {model.__name__} or a GPTune record dictionary, "
                                       f"not {type(record).__name__}")
    return validate(model, record, field).to_dict()


def _version_key(entry: Any) -> str | None:
    """The sortable key of a GPTune software entry (``version_split``, ``version_str`` or a string)."""
    if isinstance(entry, Mapping):
        version = entry.get("version_split") or entry.get("version_str")
    else:
        version = entry
    try:
        return version_key(version_parts(version)) if version is not None else None
    except InvalidInputError:
        return None
