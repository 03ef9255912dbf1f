"""The crowd repository on MongoDB: users, API keys, catalogs, uploads and queries (server side).

Collections of the database (``raytuner_crowd`` unless told otherwise); every
write uses the journaled write concern ``{w: 1, j: true}``:

- ``users``: ``{_id: username, email, groups: [...], created}``; unique index on ``email``;
- ``api_keys``: ``{_id: key id, username, salt, hash, created, revoked, revoked_at}``
  (only ``sha256(salt + secret)`` is kept; see :mod:`raytuner.crowd.keys`), or a public key
  ``{_id: key id, username, kind: "ed25519", public_key, ...}``; index on ``username``;
- ``signatures``: the nonces of accepted signed credentials, expiring (:mod:`raytuner.crowd.accounts`);
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

  ``_id`` makes a uid unique per problem and uploader: uploading it again is
  not a second record and leaves the first as it was; a uid another user stored
  is stored beside theirs, so an upload never tells whether another user's
  record exists (:mod:`raytuner.crowd.inserts`). Indexes:
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

import inspect
import logging
import re
import warnings
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeVar

import pymongo
from pymongo.collection import Collection

from raytuner.crowd.access import AccessSpec, User, visibility_filter
from raytuner.crowd.accounts import KeyInfo, UserAccounts
from raytuner.crowd.catalog import AliasCatalog, match_key
from raytuner.crowd.documents import (
    TASK_INDEX,
    evaluation_document,
    iterate_records,
    json_text,
    record_dict,
    record_document,
    task_hint,
)
from raytuner.crowd.inserts import insert_documents
from raytuner.crowd.query import ConfigurationSpaceQuery, ProblemSpaceQuery
from raytuner.errors import InvalidInputError
from raytuner.problem.records import (
    EVALUATION_LIST,
    MODEL_LIST,
    FunctionEvaluation,
    SurrogateModelRecord,
    check_problem_name,
)
from raytuner.store.mongo_client import mongo_errors, open_client
from raytuner.store.mongo_store import DURABLE

__all__ = ["CrowdRepository", "UploadResult", "KeyInfo", "DEFAULT_DATABASE", "RECORD_KINDS", "UPLOAD_ACTIONS"]

#: The kinds of record the repository keeps (the ``kind`` of an upload).
RECORD_KINDS = ("function_evaluation", "surrogate_model")
#: The action a signed credential is signed for to upload records of each kind (:mod:`raytuner.signing`).
UPLOAD_ACTIONS = {"function_evaluation": "upload", "surrogate_model": "upload_surrogate_models"}
Record = FunctionEvaluation | SurrogateModelRecord
P = ParamSpec("P")
R = TypeVar("R")
Repository = TypeVar("Repository", bound=UserAccounts)

log = logging.getLogger(__name__)

DEFAULT_DATABASE = "raytuner_crowd"
_MAX_LIMIT = 10_000_000

_ACCESS_INDEX = pymongo.IndexModel([("problem", 1), ("access", 1), ("owner", 1)], name="problem_access_owner")
_FUNC_EVAL_INDEXES = [
    _ACCESS_INDEX,
    pymongo.IndexModel([("problem", 1), ("machine", 1)], name="problem_machine"),
    pymongo.IndexModel([("problem", 1), ("software.name", 1), ("software.vkey", 1)], name="problem_software"),
    pymongo.IndexModel([("record.task_parameter.$**", 1)], name=TASK_INDEX),
]


def _with_key(
    method: Callable[Concatenate[Repository, Any, P], R],
    name: str,
    action: Callable[[Mapping[str, Any]], str],
    summary: str,
    api_key: str,
) -> Callable[Concatenate[Repository, str, P], R]:
    """The method for a caller's key of ``method``, which takes a user already authenticated.

    It authenticates the key (:meth:`~raytuner.crowd.accounts.UserAccounts.authenticate`, for the action
    ``action`` names from the keywords), before anything else: a missing, malformed, wrong or revoked key
    is :class:`~raytuner.crowd.accounts.Unauthenticated` whatever the other arguments; then it calls
    ``method`` as that user. Its signature and docstring are ``method``'s, with ``api_key`` for the
    user and ``summary`` for the first line.

    Args:
        method: a :class:`CrowdRepository` method whose first argument is the user, documented on one
            ``user:`` line of its ``Args:``.
        name: the new method's name.
        action: the action a signed credential must be signed for, from the call's keywords.
        summary: the docstring's first line.
        api_key: what the ``Args:`` says of ``api_key``.
    """

    def keyed(self: Repository, api_key: str, *args: P.args, **kwargs: P.kwargs) -> R:
        return method(self, self.authenticate(api_key, action(kwargs)), *args, **kwargs)

    signature = inspect.signature(method)
    self_, _user, *rest = signature.parameters.values()
    keyed.__signature__ = signature.replace(  # type: ignore[attr-defined]  # what help() and inspect show
        parameters=[
            self_,
            inspect.Parameter("api_key", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation="str"),
            *rest,
        ]
    )
    body = (method.__doc__ or "").split("\n", 1)[1]
    body, found = re.subn(r"(?m)^(\s+)user: .*$", lambda m: f"{m.group(1)}api_key: {api_key}", body, count=1)
    if not found:  # a slip in this module, not a caller's
        raise TypeError(f"{method.__name__}'s Args: has no user: line")
    keyed.__doc__ = f"{summary}\n{body}"
    keyed.__name__ = name
    keyed.__qualname__ = f"{method.__qualname__.rsplit('.', 1)[0]}.{name}"
    return keyed


@dataclass(frozen=True)
class UploadResult:
    """What an upload did: records given, newly stored, and already there (same uid)."""

    given: int
    inserted: int

    @property
    def duplicates(self) -> int:
        """Records not stored because their uid was already there (or repeated in the upload)."""
        return self.given - self.inserted


class CrowdRepository(UserAccounts):
    """The shared repository of tuning data (see the module documentation).

    Users and API keys are :class:`~raytuner.crowd.accounts.UserAccounts`'
    methods; the alias catalogs, uploads and queries are here. Opening
    creates the indexes if missing (unless ``create_indexes`` is false); an
    unreachable server raises :class:`StoreError`.

    Args:
        uri_or_client: a ``mongodb://`` URI (the repository owns and closes
            the client) or a :class:`pymongo.MongoClient` (the caller owns it).
        database: the database's name.
        server_selection_timeout_ms: how long a command waits for the server (a URI only).
        create_indexes: create the indexes when missing (``False`` for a reader that must not write).
    """

    def __init__(
        self,
        uri_or_client: str | pymongo.MongoClient[dict[str, Any]],
        database: str = DEFAULT_DATABASE,
        server_selection_timeout_ms: int = 10000,
        create_indexes: bool = True,
    ) -> None:
        if isinstance(uri_or_client, str):
            self.client: pymongo.MongoClient[dict[str, Any]] = open_client(
                uri_or_client, timeout_ms=server_selection_timeout_ms, appname="raytuner-crowd", field="uri_or_client"
            )
            self._owns_client = True
        else:
            self.client = uri_or_client
            self._owns_client = False
        db = self.client.get_database(database, write_concern=DURABLE)
        self.database = db.name
        self.users: Collection[dict[str, Any]] = db["users"]
        self.api_keys: Collection[dict[str, Any]] = db["api_keys"]
        self.signatures: Collection[dict[str, Any]] = db["signatures"]
        self.func_eval: Collection[dict[str, Any]] = db["func_eval"]
        self.surrogate_model: Collection[dict[str, Any]] = db["surrogate_model"]
        self.machines = AliasCatalog(db["machines"], "machine")
        self.software = AliasCatalog(db["software"], "software")
        if not create_indexes:  # a reader (the dashboard) leaves the database as it is
            return
        try:
            with self._errors("create the indexes"):
                self._create_account_indexes()
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

    def __enter__(self) -> CrowdRepository:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _errors(self, action: str, field: str = "records") -> AbstractContextManager[None]:
        """Driver errors as :class:`StoreError`, unstorable data as InvalidInputError: :func:`mongo_errors`."""
        return mongo_errors(
            action,
            server="the crowd repository's MongoDB server",
            owner=f"crowd repository (database {self.database!r})",
            field=field,
        )

    # -- catalogs ------------------------------------------------------------------------------

    def add_machine(self, name: str, aliases: Iterable[str] = ()) -> str:
        """Register machine ``name`` (canonical) and other names for it; returns ``name``.

        Args:
            name: the machine's canonical name (letters, digits, ``_ . + -`` and spaces).
            aliases: its other names, say host names (default none).

        >>> repo.add_machine("Cori", aliases=["cori", "cori.nersc.gov"])   # doctest: +SKIP
        'Cori'
        """
        with self._errors("add a machine", "name"):
            return self.machines.add(name, aliases)

    def add_software(self, name: str, aliases: Iterable[str] = ()) -> str:
        """Register package ``name`` (canonical) and other names for it; returns ``name``.

        Args:
            name: the package's canonical name, as :meth:`canonical_software` will answer it.
            aliases: other spellings of it that uploads may use (default none).

        >>> repo.add_software("openmpi", aliases=["OpenMPI", "open-mpi"])  # doctest: +SKIP
        'openmpi'
        """
        with self._errors("add a package", "name"):
            return self.software.add(name, aliases)

    def canonical_machine(self, name: str) -> str:
        """The canonical name of machine ``name`` (itself when unknown).

        Args:
            name: a machine name or alias.
        """
        with self._errors("read the machine catalog", "name"):
            return self.machines.canonical(name)

    def canonical_software(self, name: str) -> str:
        """The canonical name of package ``name`` (itself when unknown).

        Args:
            name: a package name or alias.
        """
        with self._errors("read the software catalog", "name"):
            return self.software.canonical(name)

    # -- upload --------------------------------------------------------------------------------

    def upload_as(
        self,
        user: User,
        problem_name: str,
        records: Record | Mapping[str, Any] | Iterable[Record | Mapping[str, Any]],
        access: str = "public",
        shared_with_users: Iterable[str] = (),
        shared_with_groups: Iterable[str] = (),
        *,
        kind: str = "function_evaluation",
    ) -> UploadResult:
        """Store records of ``problem_name`` as ``user``, whom the caller has authenticated, with the given access.

        ``records`` is one record or many, as :class:`FunctionEvaluation` (or,
        of ``kind`` ``"surrogate_model"``, :class:`SurrogateModelRecord`) or
        GPTune dictionaries. Machine and package names are replaced by their
        canonical names. A uid already stored for the problem is skipped
        (``UploadResult.duplicates``). ``shared_with_users`` must be registered users.

        Args:
            user: the authenticated uploader.
            problem_name: the tuning problem the records belong to.
            records: one record or many.
            access: who may read them: ``"public"``, ``"registered"``, ``"private"`` or ``"shared"`` (default
                ``"public"``).
            shared_with_users: with ``"shared"``, the registered users who may read them (default none).
            shared_with_groups: with ``"shared"``, the groups who may read them (default none).
            kind: ``"function_evaluation"`` (default) or ``"surrogate_model"``.

        With the uploader's key (:meth:`upload`):

        >>> repo.upload(key, "demo", records, access="shared", shared_with_groups=["hpc"])  # doctest: +SKIP
        UploadResult(given=3, inserted=3)
        """
        if kind not in RECORD_KINDS:
            raise InvalidInputError("kind", f"{kind!r} is not a record kind", allowed=list(RECORD_KINDS))
        problem = check_problem_name(problem_name, "problem_name")
        spec = self._access(access, shared_with_users, shared_with_groups)
        base = {"problem": problem, "owner": user.username, **spec.to_fields()}
        if kind == "surrogate_model":
            docs = (
                record_document(base, record_dict(SurrogateModelRecord, r, f"records[{i}]"), f"records[{i}]")
                for i, r in enumerate(iterate_records(records, SurrogateModelRecord))
            )
            result = self._insert(self.surrogate_model, docs, problem)
        else:
            with self._errors("read the catalogs", "records"):
                machines, packages = self.machines.mapping(), self.software.mapping()
            docs = (
                evaluation_document(
                    base, record_dict(FunctionEvaluation, r, f"records[{i}]"), machines, packages, f"records[{i}]"
                )
                for i, r in enumerate(iterate_records(records, FunctionEvaluation))
            )
            result = self._insert(self.func_eval, docs, problem)
        log.info(
            "%s uploaded %d %s records of %s (%d new, access %s)",
            user.username,
            result.given,
            kind,
            problem,
            result.inserted,
            spec.access,
        )
        return result

    upload = _with_key(
        upload_as,
        "upload",
        # a signed credential is signed for the kind's action; upload_as then refuses a bad kind
        lambda options: UPLOAD_ACTIONS.get(options.get("kind", "function_evaluation"), "upload"),
        "Store records of ``problem_name`` as the key's user, with the given access.",
        "the uploader's API key, or a credential signed for the action :data:`UPLOAD_ACTIONS` names for ``kind``.",
    )

    def upload_surrogate_models(self, api_key: str, *args: Any, **kwargs: Any) -> UploadResult:
        """Deprecated: :meth:`upload` with ``kind="surrogate_model"`` (the same arguments).

        Args:
            api_key: the uploader's API key.
            *args: :meth:`upload`'s other arguments.
            **kwargs: :meth:`upload`'s keywords.
        """
        warnings.warn(
            'CrowdRepository.upload_surrogate_models is deprecated: use upload(..., kind="surrogate_model")',
            DeprecationWarning,
            stacklevel=2,
        )
        return self.upload(api_key, *args, kind="surrogate_model", **kwargs)

    def _access(self, access: Any, users: Iterable[Any], groups: Iterable[Any]) -> AccessSpec:
        spec = AccessSpec.build(access, users, groups)
        if spec.users:
            unknown = self._unknown_users(spec.users, "shared_with_users")
            if unknown:
                raise InvalidInputError("shared_with_users", f"no registered user {unknown[0]!r}")
        return spec

    def _insert(
        self, collection: Collection[dict[str, Any]], docs: Iterable[dict[str, Any]], problem: str
    ) -> UploadResult:
        """Insert ``docs`` (:func:`~raytuner.crowd.inserts.insert_documents`: another user's uid stays unseen)."""
        validated = list(docs)  # every record is checked before the first is written
        for doc in validated:  # the record as a query answers it: JSON text made once, here
            doc["json"] = json_text(doc["record"])
        return UploadResult(len(validated), insert_documents(collection, validated, problem, self._errors))

    # -- queries -------------------------------------------------------------------------------

    def evaluations_for(
        self,
        user: User | None,
        tuning_problem_name: str,
        problem_space: Mapping[str, Any] | None = None,
        configuration_space: Mapping[str, Any] | None = None,
        limit: int | None = None,
        raw: bool = False,
    ) -> list[Any]:
        """The evaluations of ``tuning_problem_name`` that ``user`` may see (``None``: public only) and both spaces match.

        See :mod:`raytuner.crowd.query` for the shapes and their meaning (GPTuneCrowd IV-A).
        With ``raw``, the records' stored JSON texts (validated when uploaded)
        instead of :class:`FunctionEvaluation` objects: what a server passes on.

        Args:
            user: the caller (from :meth:`authenticate`), or ``None`` for anonymous.
            tuning_problem_name: the tuning problem.
            problem_space: the ranges of task, parameter and output values to match (default ``None``: any).
            configuration_space: the machines, software versions and users to match (default ``None``: any).
            limit: the most records to return (default ``None``: all).
            raw: return the stored JSON texts instead of records (default ``False``).

        With the caller's key (:meth:`query_function_evaluations`):

        >>> repo.query_function_evaluations(key, "demo",                                    # doctest: +SKIP
        ...     problem_space={"input_space": [{"name": "t", "lower_bound": 1, "upper_bound": 10}]},
        ...     configuration_space={"software_configurations": [
        ...         {"gcc": {"version_from": [8, 0, 0], "version_to": [9, 0, 0]}}]})
        [FunctionEvaluation(...), ...]
        """
        query = self._filter(user, tuning_problem_name, problem_space, configuration_space)
        texts = self._find_json(self.func_eval, query, limit, task_hint(problem_space))
        return texts if raw else EVALUATION_LIST.validate_json("[" + ",".join(texts) + "]")

    query_function_evaluations = _with_key(
        evaluations_for,
        "query_function_evaluations",
        lambda _: "query_function_evaluations",
        "The evaluations of ``tuning_problem_name`` the caller may see that match both spaces.",
        "the caller's API key, or a credential signed for this method.",
    )

    def problems_for(self, user: User | None) -> dict[str, int]:
        """The problems with evaluations ``user`` may see (``None``: anonymous), and how many of each.

        Args:
            user: the caller (from :meth:`authenticate`), or ``None`` for anonymous.
        """
        with self._errors("list the problems", "user"):
            rows = self.func_eval.aggregate(
                [
                    {"$match": visibility_filter(user)},
                    {"$group": {"_id": "$problem", "n": {"$sum": 1}}},
                    {"$sort": {"_id": 1}},
                ]
            )
            return {row["_id"]: int(row["n"]) for row in rows}

    def query_surrogate_models(
        self,
        api_key: str,
        tuning_problem_name: str,
        configuration_space: Mapping[str, Any] | None = None,
        limit: int | None = None,
        raw: bool = False,
    ) -> list[Any]:
        """The surrogate-model records of ``tuning_problem_name`` the caller may see (``raw``: JSON texts).

        ``configuration_space`` may hold ``user_configurations`` only (a model
        record carries no machine or software configuration).

        Args:
            api_key: the caller's API key, or a credential signed for this method.
            tuning_problem_name: the tuning problem.
            configuration_space: ``user_configurations`` to match (default ``None``: any).
            limit: the most records to return (default ``None``: all).
            raw: return the stored JSON texts instead of records (default ``False``).
        """
        user = self.authenticate(api_key, "query_surrogate_models")
        config = ConfigurationSpaceQuery.parse(configuration_space)
        if config.machines or config.software:
            raise InvalidInputError(
                "configuration_space", "surrogate models are filtered by users only", allowed=["user_configurations"]
            )
        query = self._filter(user, tuning_problem_name, None, configuration_space)
        texts = self._find_json(self.surrogate_model, query, limit)
        return texts if raw else MODEL_LIST.validate_json("[" + ",".join(texts) + "]")

    def _filter(
        self, user: User | None, problem_name: Any, problem_space: Any, configuration_space: Any
    ) -> dict[str, Any]:
        problem = check_problem_name(problem_name)
        space = ProblemSpaceQuery.parse(problem_space)
        config = ConfigurationSpaceQuery.parse(configuration_space)
        with self._errors("read the catalogs", "configuration_space"):
            machines = self.machines.mapping() if config.machines else {}
            packages = self.software.mapping() if config.software else {}
        clauses: list[dict[str, Any]] = [
            {"problem": problem},
            visibility_filter(user),
            *space.clauses(),
            *config.clauses(
                lambda n: match_key(machines.get(match_key(n), n)),
                lambda n: match_key(packages.get(match_key(n), n)),
                self._usernames,
            ),
        ]
        return {"$and": clauses}

    def _find_json(
        self, collection: Collection[dict[str, Any]], query: dict[str, Any], limit: int | None, hint: str | None = None
    ) -> list[str]:
        """The matching records' stored JSON texts (made at upload; a record stored without one gets it now)."""
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= _MAX_LIMIT
        ):
            raise InvalidInputError("limit", f"{limit!r} is not a positive integer", allowed=[f"1..{_MAX_LIMIT}"])
        with self._errors("query", "query"):
            cursor = collection.find(query, {"json": 1})
            if hint is not None:
                cursor = cursor.hint(hint)
            if limit is not None:
                cursor = cursor.limit(limit)
            docs = list(cursor)
            missing = [d["_id"] for d in docs if "json" not in d]
            records = (
                {d["_id"]: d["record"] for d in collection.find({"_id": {"$in": missing}}, {"record": 1})}
                if missing
                else {}
            )
        return [d["json"] if "json" in d else json_text(records[d["_id"]]) for d in docs]
