"""Who may read and append to each problem of a tuning service's store.

The tuning service checks every problem a call names against :class:`ProblemAccess`.
A caller is a *principal*: a service API key's id, or ``crowd:<username>`` for a
crowd user (see :meth:`raytuner.service.server`'s authentication). The rules:

- **Owners** of a problem are the owners of its sessions (the ledger's ``sessions``
  log) and its claimant: the first caller who uploads evaluations
  (``UploadEvaluations``) to a problem that nobody owns and that holds no records
  claims it; the claim is in the ledger's ``grants`` log before the records are stored.
- **Grantees**: an owner grants another principal read and append access with
  ``GrantAccess`` (and revokes it with ``revoke``); the ``grants`` log keeps it. The
  store's operator grants, or makes an owner, with ``raytuner keys grant`` (:meth:`ProblemAccess.admit`):
  the way to hand out a problem whose records were imported into the store directly.
- **Read** (``QueryEvaluations``, a session's ``options.source_problem``) and
  **append** (``UploadEvaluations``) are for owners and grantees. A session on the
  problem (``CreateSession``: its records are appended, and GPTune's ``load_func_eval``
  replays the problem's records) is for owners only, since its creator becomes an
  owner; a new session may also start a problem that nobody owns and that holds no records.
- A **crowd cache** (``<problem>.crowd.<user>``, :mod:`raytuner.crowd.cache`) is
  not addressable at all through these calls: the session it was made for reads
  it inside the server; a call that names it is answered as for a problem that
  does not exist.
- A refused problem and one that does not exist get the same answer,
  ``NOT_FOUND`` with the same message (:class:`ProblemNotFound`): a caller learns
  nothing of another owner's problem. (A problem's *name* is one namespace for the
  whole store: a new session or a first upload on a taken name is refused, which
  says the name is taken and nothing more.)
- A server without authentication (``auth=False``, one owner on a laptop) checks nothing.

The logs are re-read at most every :data:`REFRESH_SECONDS`, and before any refusal (a
grant the operator made a moment ago counts); a session created or a grant made in this
process is seen at once (:meth:`ProblemAccess.note_owner`, :meth:`ProblemAccess.grant`).

Example:
    >>> import tempfile
    >>> from raytuner.store import JsonStore
    >>> store = JsonStore(tempfile.mkdtemp())
    >>> access = ProblemAccess(store.ledger(), store)
    >>> access.check_append("key1", "demo", claim=True)           # nobody owns it: key1 claims it
    'demo'
    >>> access.may_read("key1", "demo"), access.may_read("key2", "demo")
    (True, False)
    >>> access.grant("key1", "demo", "key2"), access.may_read("key2", "demo")
    (['key2'], True)
    >>> access.check_read("key3", "demo")
    Traceback (most recent call last):
    ...
    raytuner.service.access.ProblemNotFound: problem_name: no problem 'demo' that this key may read
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import defaultdict
from typing import Any

from raytuner.crowd.cache import is_cache_name
from raytuner.crowd.names import check_username
from raytuner.errors import InvalidInputError, RaytunerError, shown
from raytuner.problem.records import check_problem_name
from raytuner.store.base import HistoryStore
from raytuner.store.ledger import Ledger

__all__ = ["ProblemAccess", "ProblemNotFound", "GRANTS", "REFRESH_SECONDS", "check_principal"]

log = logging.getLogger(__name__)

#: The ledger's log of claims and grants.
GRANTS = "grants"
#: How often (at most) the ledger's logs are read again.
REFRESH_SECONDS = 1.0
#: The owner of a crowd user's sessions: ``crowd:<username>`` (as :data:`raytuner.service.session_crowd.CROWD_OWNER`).
_CROWD = "crowd:"
_KEY_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


class ProblemNotFound(RaytunerError):
    """No problem of that name that the caller may use: the same answer whether it exists or not."""

    grpc_status = "NOT_FOUND"


def check_principal(value: Any, field: str = "grantee") -> str:
    """A principal to grant to: a service API key's id (``raytuner keys list``) or ``crowd:<username>``.

    Args:
        value: The value to check.
        field: The field named in the error.

    >>> check_principal("crowd:alice"), check_principal("3fa9c1d2e4b5a6f7")
    ('crowd:alice', '3fa9c1d2e4b5a6f7')
    """
    if isinstance(value, str) and value.startswith(_CROWD):
        return _CROWD + check_username(value[len(_CROWD) :], field)
    if not isinstance(value, str) or not _KEY_ID.fullmatch(value):
        raise InvalidInputError(field, f"{shown(value)} is not a principal: an API key's id or crowd:<username>")
    return value


class ProblemAccess:
    """Owners and grantees of every problem, from a service ledger (see the module documentation).

    Args:
        ledger: The service's ledger (``sessions`` and ``grants`` logs).
        store: The service's history store (whether a problem holds records).
    """

    def __init__(self, ledger: Ledger, store: HistoryStore) -> None:
        self.ledger, self.store = ledger, store
        self._lock = threading.Lock()
        self._claims = threading.Lock()  # one claim at a time: two first writers cannot both own a problem
        self._owners: dict[str, set[str]] = defaultdict(set)
        self._grantees: dict[str, set[str]] = defaultdict(set)
        self._loaded = -REFRESH_SECONDS

    def _refresh(self, force: bool = False) -> None:
        """Read the logs again when they are older than :data:`REFRESH_SECONDS` (``force``: now)."""
        if not force and time.monotonic() - self._loaded < REFRESH_SECONDS:
            return
        owners: dict[str, set[str]] = defaultdict(set)
        grantees: dict[str, set[str]] = defaultdict(set)
        for session in self.ledger.read("sessions"):
            if isinstance(session.get("problem_name"), str) and isinstance(session.get("owner"), str):
                owners[session["problem_name"]].add(session["owner"])
        for entry in self.ledger.read(GRANTS):
            _apply(owners, grantees, entry)
        with self._lock:
            self._owners, self._grantees, self._loaded = owners, grantees, time.monotonic()

    def owners(self, problem: str) -> set[str]:
        """The principals who own ``problem`` (its sessions' owners and its claimant).

        Args:
            problem: The problem's name.
        """
        self._refresh()
        with self._lock:
            return set(self._owners.get(problem, ()))

    def may_read(self, principal: str, problem: str) -> bool:
        """Whether ``principal`` may read and append to ``problem`` (an owner or a grantee; never a cache).

        Args:
            principal: Who calls.
            problem: The problem's name.
        """
        if is_cache_name(problem):
            return False
        self._refresh()
        with self._lock:
            return principal in self._owners.get(problem, ()) or principal in self._grantees.get(problem, ())

    def _free(self, problem: str) -> bool:
        """Whether nobody owns ``problem`` and it holds no records (a new problem), read afresh."""
        self._refresh(force=True)
        with self._lock:
            owned = bool(self._owners.get(problem))
        return not owned and not is_cache_name(problem) and problem not in self.store.problems()

    def check_read(self, principal: str, problem: str, field: str = "problem_name") -> str:
        """``problem`` (checked) when ``principal`` may read it; else :class:`ProblemNotFound`.

        Args:
            principal: Who calls.
            problem: The problem's name.
            field: The request field that names it.
        """
        problem = check_problem_name(problem, field=field)
        if not self._allowed(principal, problem):
            raise ProblemNotFound(f"{field}: no problem {problem!r} that this key may read")
        return problem

    def _allowed(self, principal: str, problem: str) -> bool:
        """:meth:`may_read`, with the logs read again before a refusal (a grant made a moment ago counts)."""
        if self.may_read(principal, problem):
            return True
        if is_cache_name(problem):
            return False
        self._refresh(force=True)
        return self.may_read(principal, problem)

    def check_append(
        self, principal: str, problem: str, *, claim: bool = False, owner: bool = False, field: str = "problem_name"
    ) -> str:
        """``problem`` (checked) when ``principal`` may append to it, or it is new (claimed when ``claim``).

        Args:
            principal: Who calls.
            problem: The problem's name.
            claim: Record ``principal`` as the owner of a new problem (durable before this returns).
            owner: Only an owner may (a new session, which makes its creator an owner: a grantee
                would outlive the grant's revocation).
            field: The request field that names it.
        """
        problem = check_problem_name(problem, field=field)
        if principal in self.owners(problem) if owner else self._allowed(principal, problem):
            return problem
        with self._claims:
            if not self._free(problem):  # (the logs read again: an owner made a moment ago counts)
                if owner and principal in self.owners(problem):
                    return problem
                raise ProblemNotFound(f"{field}: no problem {problem!r} that this key may write")
            if claim:
                self._append({"problem": problem, "principal": principal, "role": "owner", "time": time.time()})
                log.info("%s claimed problem %s", principal, problem)
        return problem

    def note_owner(self, principal: str, problem: str) -> None:
        """Note at once that ``principal`` owns ``problem`` (a session it just created; the ledger has it).

        Args:
            principal: The session's owner.
            problem: The session's problem.
        """
        with self._lock:
            self._owners[problem].add(principal)

    def grant(self, owner: str, problem: str, grantee: str, revoke: bool = False) -> list[str]:
        """Let ``grantee`` read and append to ``owner``'s ``problem`` (``revoke``: no longer); the grantees now.

        Args:
            owner: Who grants: an owner of the problem (anyone else gets :class:`ProblemNotFound`).
            problem: The problem's name.
            grantee: Whom: a service API key's id or ``crowd:<username>``.
            revoke: End the grant instead.
        """
        problem = check_problem_name(problem)
        if is_cache_name(problem) or owner not in self.owners(problem):
            raise ProblemNotFound(f"problem_name: no problem {problem!r} that this key owns")
        grantee = check_principal(grantee)
        self._append(
            {
                "problem": problem,
                "principal": grantee,
                "role": "revoke" if revoke else "grant",
                "by": owner,
                "time": time.time(),
            }
        )
        log.info("%s %s %s on problem %s", owner, "revoked" if revoke else "granted", grantee, problem)
        with self._lock:
            return sorted(self._grantees.get(problem, ()))

    def admit(self, problem: str, principal: str, role: str = "grant") -> None:
        """The store operator's grant (``raytuner keys grant``): no owner needed, for a problem nobody owns.

        Args:
            problem: The problem's name (not a crowd cache).
            principal: A service API key's id or ``crowd:<username>``.
            role: ``owner`` (may grant others too), ``grant`` (reads and appends) or ``revoke`` (ends a grant).
        """
        problem = check_problem_name(problem)
        if is_cache_name(problem):
            raise InvalidInputError(
                "problem", f"{problem!r} is a crowd cache: only the session it was made for reads it"
            )
        if role not in ("owner", "grant", "revoke"):
            raise InvalidInputError("role", f"{role!r} is not a role", allowed=["owner", "grant", "revoke"])
        self._append(
            {
                "problem": problem,
                "principal": check_principal(principal, "principal"),
                "role": role,
                "by": "operator",
                "time": time.time(),
            }
        )

    def _append(self, entry: dict[str, Any]) -> None:
        self.ledger.append(GRANTS, entry)
        with self._lock:
            _apply(self._owners, self._grantees, entry)


def _apply(owners: dict[str, set[str]], grantees: dict[str, set[str]], entry: dict[str, Any]) -> None:
    problem, principal, role = str(entry.get("problem")), str(entry.get("principal")), entry.get("role")
    if role == "owner":
        owners[problem].add(principal)
    elif role == "grant":
        grantees[problem].add(principal)
    elif role == "revoke":
        grantees[problem].discard(principal)
