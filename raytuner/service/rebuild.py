"""Rebuilding a server's sessions from the logs: in the background after start, or on first use.

:class:`SessionRebuilder` is the part of :class:`~raytuner.service.sessions.SessionManager`
that brings back the sessions of an earlier run, so that a restarted server
listens at once whatever the size of its history:

- :meth:`SessionRebuilder.load` reads only the ledger's ``sessions`` log (one
  line per session) and knows every session from then on, then a background
  thread rebuilds them one problem at a time: the ledger's ``trials`` log is read
  once for all sessions, each problem's records and models once for all its
  sessions (:meth:`~raytuner.session.tuning_session.TuningSession.resume` takes them as given,
  so nothing is read or validated twice);
- a call to a session not rebuilt yet rebuilds it in the caller's thread (or waits
  for the thread that is rebuilding it) and then answers as usual;
- a session that cannot be rebuilt is logged and skipped (its calls answer
  ``NOT_FOUND``), and never stops the server; one whose store could not be read
  (:class:`~raytuner.errors.StoreError`, ``UNAVAILABLE``) is tried again by its
  next call.

Example:
    >>> import tempfile
    >>> from raytuner.store import JsonStore
    >>> from raytuner.service.sessions import SessionManager
    >>> from raytuner.test_problems import DEMO_PROBLEM
    >>> directory = tempfile.mkdtemp()
    >>> meta = {"tuning_problem_name": "demo", "problem_space": DEMO_PROBLEM}
    >>> made = SessionManager(JsonStore(directory)).create("owner", meta, "random", tasks=[{"t": 1.0}], seed=1)
    >>> restarted = SessionManager(JsonStore(directory))
    >>> restarted.load()                       # known at once, rebuilt in the background
    1
    >>> restarted.get("owner", made.session_id).session_id == made.session_id   # waits for its rebuild
    True
    >>> restarted.close()
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from typing import Any

from raytuner.errors import RaytunerError, StoreError
from raytuner.problem.records import FunctionEvaluation, SurrogateModelRecord
from raytuner.session.trial import Trial, read_trials
from raytuner.store.base import HistoryStore
from raytuner.store.ledger import Ledger

__all__ = ["SessionRebuilder", "ProblemRecords", "NotRebuilt"]

log = logging.getLogger(__name__)

#: A live session (:class:`~raytuner.service.sessions.ServiceSession`; not imported here: that module uses this one).
ServiceSession = Any

#: A problem's evaluations and surrogate models, read once for all its sessions.
ProblemRecords = tuple[Sequence[FunctionEvaluation], Sequence[SurrogateModelRecord]]


class NotRebuilt(RaytunerError):
    """A session of the ledger that could not be rebuilt (the server's log says why)."""

    grpc_status = "NOT_FOUND"


class SessionRebuilder:
    """Sessions known from the ``sessions`` log, rebuilt in the background or on first use (a mixin).

    The manager sets ``store``, ``ledger``, ``_sessions`` (the live sessions) and ``_lock``, calls
    :meth:`_init_rebuilder` and provides ``_rebuild(document, trials, records)``.
    """

    store: HistoryStore
    ledger: Ledger
    _sessions: dict[str, ServiceSession]
    _lock: threading.Lock

    def _init_rebuilder(self) -> None:
        self._specs: dict[str, dict[str, Any]] = {}  # known, not rebuilt yet: the sessions-log document
        self._building: dict[str, Future[ServiceSession]] = {}
        self._trials: dict[str, list[Trial]] | None = None  # the trials log by session id, while loading
        self._problems: dict[str, ProblemRecords] = {}  # the problem being rebuilt: its records
        self._stopping = threading.Event()
        self._loader: threading.Thread | None = None

    def _rebuild(
        self, document: Mapping[str, Any], trials: Sequence[Trial] | None, records: ProblemRecords | None
    ) -> ServiceSession:
        raise NotImplementedError

    def load(self, background: bool = True) -> int:
        """Know every session of the ledger and rebuild them (server start); returns how many are known.

        Args:
            background: Rebuild them in a background thread and return at once (``False``: rebuild
                them before returning). A call to a session not rebuilt yet rebuilds it first.
        """
        documents = [d for d in self.ledger.read("sessions") if isinstance(d.get("session_id"), str)]
        with self._lock:
            for document in documents:
                if document["session_id"] not in self._sessions:  # the first spec of an id, as open() reads
                    self._specs.setdefault(document["session_id"], document)
            known = len(self._specs) + len(self._sessions)
        if background:
            self._loader = threading.Thread(target=self._load_all, name="raytuner-rebuild", daemon=True)
            self._loader.start()
        else:
            self._load_all()
        return known

    def close(self) -> None:
        """Stop the background rebuilding (the session being rebuilt is finished first)."""
        self._stopping.set()
        if self._loader is not None and self._loader is not threading.current_thread():
            self._loader.join()

    def known(self, session_id: str) -> bool:
        """Whether ``session_id`` is a session of this server (live, or known and not rebuilt yet).

        Args:
            session_id: The session.
        """
        with self._lock:
            return session_id in self._sessions or session_id in self._specs

    def owns(self, owner: str, session_id: Any) -> bool:
        """Whether ``session_id`` is a session of ``owner`` (live, or known and not rebuilt yet).

        Args:
            owner: Who calls.
            session_id: The session.
        """
        return isinstance(session_id, str) and self._spec_owner(session_id) == owner

    def _spec_owner(self, session_id: str) -> str | None:
        """The owner of a session, live or not rebuilt yet (``None``: no such session)."""
        with self._lock:
            live = self._sessions.get(session_id)
            document = self._specs.get(session_id)
        return live.spec.owner if live is not None else document.get("owner") if document is not None else None

    def _load_all(self) -> None:
        started = time.monotonic()
        with self._lock:
            pending = dict(self._specs)
        if not pending:
            return
        by_problem: dict[str, list[str]] = defaultdict(list)
        for session_id, document in pending.items():
            by_problem[str(document.get("problem_name"))].append(session_id)
        try:
            trials: dict[str, list[Trial]] = defaultdict(list)
            for document in self.ledger.read("trials"):  # once, for every session
                if document.get("session_id") in pending:
                    for trial in read_trials([document]):
                        trials[document["session_id"]].append(trial)
            self._trials = trials
        except Exception:  # each session then reads its own trials
            log.exception("cannot read the ledger's trials log; each session reads its own")
        rebuilt = failed = 0
        for problem, session_ids in by_problem.items():
            if self._stopping.is_set():
                break
            try:
                self._problems[problem] = (self.store.evaluations(problem), self.store.models(problem))
            except Exception:  # its sessions say why, one by one
                log.warning("cannot read problem %s; its sessions are rebuilt when they are called", problem)
                continue
            for session_id in session_ids:
                if self._stopping.is_set():
                    break
                try:
                    self._rebuild_once(session_id)
                    rebuilt += 1
                except Exception:  # logged where it failed
                    failed += 1
            self._problems.pop(problem, None)
        self._trials = None
        log.info(
            "rebuilt %d session(s) in %.1f s (%d could not be rebuilt)", rebuilt, time.monotonic() - started, failed
        )

    def _live(self, session_id: str) -> ServiceSession | None:
        """The live session ``session_id``, rebuilt first when it is not yet (``None``: no such session).

        Raises:
            StoreError: Its records cannot be read now (the next call tries again).
            NotRebuilt: It cannot be rebuilt.
        """
        try:
            return self._rebuild_once(session_id)
        except StoreError:
            raise
        except Exception:  # logged where it failed
            raise NotRebuilt(
                f"session_id: session {session_id!r} could not be rebuilt after the server's restart (its log says why)"
            ) from None

    def _rebuild_once(self, session_id: str) -> ServiceSession | None:
        """Rebuild a known session unless another thread does (then wait for it); a live one as it is."""
        with self._lock:
            live = self._sessions.get(session_id)
            if live is not None:
                return live
            future = self._building.get(session_id)
            document = self._specs.get(session_id)
            mine = future is None
            if future is None:
                if document is None:
                    return None
                future = self._building[session_id] = Future()
        if not mine:
            return future.result()
        assert document is not None
        try:
            grouped = self._trials
            session = self._rebuild(
                document,
                None if grouped is None else grouped.get(session_id, []),
                self._problems.get(str(document.get("problem_name"))),
            )
        except BaseException as exc:
            with self._lock:
                del self._building[session_id]
                if not isinstance(exc, StoreError):  # a store that cannot be read now: tried again
                    self._specs.pop(session_id, None)
            log.exception("cannot rebuild session %s", session_id)
            future.set_exception(exc)
            raise
        with self._lock:
            self._sessions[session_id] = session
            self._specs.pop(session_id, None)
            del self._building[session_id]
        future.set_result(session)
        return session
