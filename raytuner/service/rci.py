"""GPTune's reverse-communication interface over a history store: ``raytuner rci next`` / ``rci report``.

A job that can speak neither Python nor gRPC (a batch script on a cluster)
tunes by calling a command between runs, as with GPTune's RCI mode: ``next``
prints the configuration to run, the job runs it, ``report`` records the
result, and so on. Each call is a process of its own: the session is the
service's (:class:`~raytuner.service.sessions.SessionManager`), kept in the
store directory's ledger and rebuilt from it on each call, so everything is
as durable as the service's sessions (the trial is in the ledger before
``next`` prints it, the record in the store before ``report`` returns).

- The session is named (default: the problem's name) and created by the
  first ``next``, from the meta description, the engine, its options, the
  tasks and the seed; later calls may repeat those (they must agree) or
  leave them out.
- **One job at a time**: a call holds an exclusive lock on the store
  directory's ``.rci.lock`` while it runs (a second call waits for it), and
  ``next`` hands out the oldest trial that was asked and not reported, so a
  job that died after ``next`` gets the same trial again.
- The meta description's history-database options apply (``load_func_eval``
  and the load check choose the stored history the session starts from;
  unset, an RCI session replays the store's whole history, as a local
  session does). Its ``historydb_path`` is the store when ``--store`` is not given.

Example:
    >>> import tempfile
    >>> from raytuner.test_problems import DEMO_PROBLEM
    >>> store = tempfile.mkdtemp()
    >>> rci = RciSession(store, meta={"tuning_problem_name": "demo", "problem_space": DEMO_PROBLEM},
    ...                  engine="random", tasks=[{"t": 1.0}], seed=1, max_evaluations=1)
    >>> trial = rci.next()
    >>> RciSession(store, "demo").next().trial_id == trial.trial_id     # not reported: the same trial
    True
    >>> record, duplicate = RciSession(store, "demo").report(trial.trial_id, {"y": 0.5})
    >>> RciSession(store, "demo").next() is None                         # max_evaluations are told
    True
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypedDict

from raytuner.engines.registry import ENGINES
from raytuner.errors import InvalidInputError, RaytunerError, StoreError, shown
from raytuner.problem.meta import MetaDescription
from raytuner.problem.records import FunctionEvaluation
from raytuner.service.sessions import ServiceSession, SessionManager, SessionNotFound
from raytuner.session.tuning_session import Trial
from raytuner.store import JsonStore

__all__ = ["RciSession", "RCI_OWNER"]

log = logging.getLogger(__name__)

#: The owner of the sessions the RCI makes (a server on the same store lists them under it).
RCI_OWNER = "rci"


@contextmanager
def _exclusive(directory: Path, timeout: float, create: bool = True) -> Iterator[None]:
    """Hold ``directory/.rci.lock`` exclusively (waiting up to ``timeout`` seconds for another call).

    Without ``create``, a directory that does not exist is no RCI store (nothing is made).
    """
    if not create and not directory.is_dir():
        raise SessionNotFound(f"store: {directory} is no store directory")
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / ".rci.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise StoreError(f"{directory}: another rci call has held the store for {timeout:g} s") from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # closing releases the lock


class _Creation(TypedDict):
    """What an RCI call gives to create its session (:class:`RciSession`'s arguments)."""

    engine: str | None
    options: dict[str, Any]
    max_evaluations: int
    tasks: list[dict[str, Any]] | None
    seed: int


class RciSession:
    """One named RCI session of a store directory (see the module documentation).

    Args:
        store: The JSON store directory (``None``: the meta description's ``historydb_path``).
        name: The session's name (default: the meta description's problem name).
        meta: The meta description (needed by the first call, which creates the session).
        engine: A registered engine's name (needed by the first call).
        options: The engine's options.
        tasks: The tasks to tune (one task without parameters when ``None``).
        seed: The engine's seed (0: one is drawn and kept).
        max_evaluations: The most trials the session hands out (0: no limit).
        lock_timeout: Seconds to wait for another call holding the store.
    """

    def __init__(
        self,
        store: str | os.PathLike[str] | None,
        name: str | None = None,
        *,
        meta: MetaDescription | Mapping[str, Any] | None = None,
        engine: str | None = None,
        options: Mapping[str, Any] | None = None,
        tasks: Sequence[Mapping[str, Any]] | None = None,
        seed: int = 0,
        max_evaluations: int = 0,
        lock_timeout: float = 600.0,
    ) -> None:
        self.meta = None if meta is None else meta if isinstance(meta, MetaDescription) else MetaDescription.parse(meta)
        location = store if store is not None else self.meta.historydb_path if self.meta is not None else None
        if location is None:
            raise InvalidInputError("store", "give the store directory (or a meta description with historydb_path)")
        self.directory = Path(location)
        self.name = name or (self.meta.tuning_problem_name if self.meta is not None else None)
        self.creation: _Creation = {
            "engine": engine,
            "options": dict(options or {}),
            "max_evaluations": max_evaluations,
            "tasks": [dict(t) for t in tasks] if tasks else None,
            "seed": seed,
        }
        self.lock_timeout = lock_timeout

    @property
    def session_id(self) -> str:
        """The id of the named session (derived from the name, so every call finds it)."""
        if not self.name:
            raise InvalidInputError("name", "give the session's name (or the meta description)")
        return uuid.uuid5(uuid.NAMESPACE_URL, f"raytuner-rci:{self.name}").hex

    def _manager(self) -> SessionManager:
        return SessionManager(JsonStore(self.directory))

    def _session(self, manager: SessionManager) -> ServiceSession:
        """The named session, created now when the store has none of that name."""
        session = manager.open(self.session_id)
        if session is None:
            if self.meta is None or self.creation["engine"] is None:
                raise InvalidInputError(
                    "meta",
                    f"no RCI session {self.name!r} in {self.directory} yet: "
                    "the first call gives the meta description and the engine",
                )
            return manager.create(
                RCI_OWNER,
                self._meta_for_session(),
                str(self.creation["engine"]),
                options=self.creation["options"],
                tasks=self.creation["tasks"],
                seed=int(self.creation["seed"]),
                max_evaluations=int(self.creation["max_evaluations"]),
                session_id=self.session_id,
            )
        self._check_agrees(session)
        return session

    def _check_creation(self) -> None:
        """Refuse what cannot create the session when the store has none of its name (read only)."""
        engine = self.creation["engine"]
        if engine is not None and engine not in ENGINES:
            raise InvalidInputError("engine", f"unknown engine {engine!r}", allowed=sorted(ENGINES))
        session_id = self.session_id
        if self.meta is None or engine is None:
            ledger = JsonStore(self.directory).ledger()
            if next(ledger.read("sessions", session_id=session_id), None) is None:
                raise InvalidInputError(
                    "meta",
                    f"no RCI session {self.name!r} in {self.directory} yet: "
                    "the first call gives the meta description and the engine",
                )

    def _meta_for_session(self) -> dict[str, Any]:
        assert self.meta is not None
        data = self.meta.to_dict()
        data.pop("historydb_path", None)  # the store is the session's; the service refuses a path
        if "load_func_eval" not in data:  # a local face: the store's history, as a TuningSession replays
            data["load_func_eval"] = "yes"
        return data

    def _check_agrees(self, session: ServiceSession) -> None:
        spec = session.spec
        given = {
            "engine": self.creation["engine"],
            "options": self.creation["options"] or None,
            "tasks": self.creation["tasks"],
            "max_evaluations": self.creation["max_evaluations"] or None,
            "seed": self.creation["seed"] or None,
        }
        for field, value in given.items():
            if value is not None and value != getattr(spec, field):
                raise InvalidInputError(
                    field,
                    f"RCI session {self.name!r} was created with "
                    f"{getattr(spec, field)!r}; leave it out, or use another --name",
                )
        if self.meta is not None and self.meta.tuning_problem_name != spec.problem_name:
            raise InvalidInputError(
                "meta", f"RCI session {self.name!r} tunes {spec.problem_name!r}, not {self.meta.tuning_problem_name!r}"
            )

    def next(self) -> Trial | None:
        """The trial to run now: the oldest one asked and not reported, else a new one; ``None`` once finished."""
        self._check_creation()  # bad input is refused before the store directory is touched
        with _exclusive(self.directory, self.lock_timeout):
            manager = self._manager()
            session = self._session(manager)
            pending = session.tuning.pending
            if pending:
                return next(iter(pending.values()))
            status, trial = manager.ask(RCI_OWNER, session.session_id)
            if status == "WAIT":  # an engine waiting on nothing reported: not for one job at a time
                raise RaytunerError("the engine waits for results that no trial in flight will bring")
            return trial

    def report(
        self,
        trial_id: str,
        outputs: Mapping[str, Any] | None = None,
        *,
        failure: str | None = None,
        additional_output: Mapping[str, Any] | None = None,
    ) -> tuple[FunctionEvaluation, bool]:
        """Record a trial's outputs (or its failure); returns the record and whether it was reported before.

        Args:
            trial_id: The trial ``next`` handed out.
            outputs: Output names to values.
            failure: Why the trial failed (the outputs are then ignored).
            additional_output: Extra values kept with the record.
        """
        with _exclusive(self.directory, self.lock_timeout, create=False):
            manager = self._manager()
            session = self._session_of_trial(manager, trial_id)
            return manager.tell(
                RCI_OWNER, session.session_id, trial_id, outputs, failure=failure, additional_output=additional_output
            )

    def _spec_of_trial(self, ledger: Any, trial_id: str) -> dict[str, Any]:
        """The creation spec of the RCI session that handed out ``trial_id`` (a name given must be its)."""
        trial = next(ledger.read("trials", trial_id=trial_id), None)
        spec = None if trial is None else next(ledger.read("sessions", session_id=trial["session_id"]), None)
        if spec is None or spec.get("owner") != RCI_OWNER or (self.name and spec["session_id"] != self.session_id):
            where = f"RCI session {self.name!r}" if self.name else str(self.directory)
            raise SessionNotFound(f"trial_id: no trial {shown(trial_id)} of {where}")
        return spec

    def _session_of_trial(self, manager: SessionManager, trial_id: str) -> ServiceSession:
        session = manager.open(self._spec_of_trial(manager.ledger, trial_id)["session_id"])
        assert session is not None
        self._check_agrees(session)
        return session

    def output_names(self, trial_id: str) -> list[str]:
        """The outputs of the problem whose session handed out ``trial_id`` (read from the ledger, nothing rebuilt).

        Args:
            trial_id: A trial ``next`` handed out.
        """
        spec = self._spec_of_trial(JsonStore(self.directory).ledger(), trial_id)
        return list(MetaDescription.parse(spec["meta"]).problem_space.objectives)
