"""The service's sessions: tuning sessions created by remote clients, rebuilt from the logs on restart.

A :class:`SessionManager` owns every session of a server. A session is a
:class:`~raytuner.session.TuningSession` (a strategy wired to the history
store) plus what a remote client needs:

- **durable asks**: a handed-out trial is written to the catalog before
  ``ask`` returns, so a job that asked before a server restart can tell after;
- **idempotent tells**: a trial told twice is one evaluation — a retry with
  the same outputs gets the first record back (``duplicate``), a different
  result is refused (:class:`TrialConflict`);
- **idempotent asks**: a client-chosen trial id that is already pending
  returns that trial;
- **a budget** (``max_evaluations``) and **events** for watchers.

On start, :meth:`SessionManager.load` replays each session's own
evaluations from the store and adopts its trials that were asked and not told.

Example:
    >>> import tempfile
    >>> from raytuner.store import JsonStore
    >>> from raytuner.service.catalog import JsonCatalog
    >>> directory = tempfile.mkdtemp()
    >>> manager = SessionManager(JsonStore(directory), JsonCatalog(directory))
    >>> meta = {"tuning_problem_name": "demo", "problem_space": {
    ...     "parameter_space": [{"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1}],
    ...     "output_space": [{"name": "y"}]}}
    >>> session = manager.create("owner", meta, "random", seed=1, max_evaluations=1)
    >>> status, trial = manager.ask("owner", session.session_id)
    >>> record, duplicate = manager.tell("owner", session.session_id, trial.trial_id, {"y": 0.5})
    >>> manager.tell("owner", session.session_id, trial.trial_id, {"y": 0.5})[1]   # a retry
    True
    >>> manager.ask("owner", session.session_id)[0]
    'FINISHED'
"""

from __future__ import annotations

import inspect
import logging
import re
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator, Literal, Mapping, Sequence

from raytuner.crowd.errors import Unauthenticated
from raytuner.errors import AwaitingResults, InvalidInputError, RaytunerError, TuningFinished
from raytuner.meta import MetaDescription
from raytuner.records import FunctionEvaluation, Provenance, as_number, parse_outputs, task_key
from raytuner.service.catalog import Catalog
from raytuner.session import Trial, TuningSession
from raytuner.store.base import HistoryStore
from raytuner.store.source import StoreSource
from raytuner.strategies.base import Strategy
from raytuner.strategies.registry import STRATEGIES, make_strategy

__all__ = ["SessionManager", "ServiceSession", "SessionSpec", "SessionNotFound", "TrialConflict", "CROWD_OWNER",
           "SERVICE_STRATEGIES", "AskStatus"]

log = logging.getLogger(__name__)

#: Owner prefix of sessions created with a crowd user's key (the rest is the username).
CROWD_OWNER = "crowd:"

#: Strategies a service session can run.
SERVICE_STRATEGIES = tuple(sorted([*STRATEGIES, "tla"]))

AskStatus = Literal["TRIAL", "WAIT", "FINISHED"]

_TRIAL_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class SessionNotFound(RaytunerError):
    """No such session (or trial) for this caller."""

    grpc_status = "NOT_FOUND"


class TrialConflict(RaytunerError):
    """A trial cannot take this request in its state (told before with another result; session over)."""

    grpc_status = "FAILED_PRECONDITION"


@dataclass(frozen=True)
class SessionSpec:
    """What a session was created from; stored once in the catalog's ``sessions`` log."""

    session_id: str
    owner: str
    problem_name: str
    meta: dict[str, Any]
    strategy: str
    options: dict[str, Any]
    tasks: list[dict[str, Any]]
    seed: int
    max_evaluations: int = 0
    created: float = field(default_factory=time.time)
    crowd_user: str = ""             # sync_crowd_repo: the crowd user the session's records are uploaded as


class ServiceSession:
    """One live session: its tuning session, lock, told trials and event log."""

    def __init__(self, spec: SessionSpec, tuning: TuningSession) -> None:
        self.spec = spec
        self.tuning = tuning
        self.lock = threading.Lock()
        self.changed = threading.Condition()
        self.events: list[dict[str, Any]] = []
        self.told: dict[str, FunctionEvaluation] = {}
        self.unsaved: set[str] = set()         # asked, but the trials log refused them: never handed out
        self.strategy_finished = False

    @property
    def session_id(self) -> str:
        """The session's id."""
        return self.spec.session_id

    @property
    def finished(self) -> bool:
        """Whether no more trials will be handed out (budget spent or plan done, none pending)."""
        spent = 0 < self.spec.max_evaluations <= len(self.told)
        return (spent or self.strategy_finished) and not self.tuning.pending

    def event(self, kind: str, trial: Trial | None = None, record: FunctionEvaluation | None = None) -> None:
        """Log an event and wake the watchers."""
        item: dict[str, Any] = {"kind": kind, "time": time.time(), "sequence": len(self.events)}
        if trial is not None:
            item.update(trial_id=trial.trial_id, task=trial.task, config=trial.config)
        if record is not None:
            item.update(outputs={k: n for k, v in record.evaluation_result.items() if (n := as_number(v)) is not None},
                        failure=record.raytuner.failure_message if record.raytuner else None)
        with self.changed:
            self.events.append(item)
            self.changed.notify_all()

    def best(self) -> list[tuple[dict[str, Any], FunctionEvaluation]]:
        """The best successful evaluation of each task that has one."""
        found = [(task, self.tuning.best(task)) for task in self.spec.tasks]
        return [(task, record) for task, record in found if record is not None]


def _trial_document(session_id: str, trial: Trial) -> dict[str, Any]:
    return {"session_id": session_id, "trial_id": trial.trial_id, "task": trial.task, "config": trial.config,
            "provenance": trial.provenance.model_dump(by_alias=True, exclude_none=True)}


class SessionManager:
    """Every session of a server, over one history store and its catalog (see the module docs).

    ``executor`` runs model fits (a :class:`~raytuner.executors.RayExecutor`
    when the server has a Ray cluster); it goes to the strategies that take one.
    """

    def __init__(self, store: HistoryStore, catalog: Catalog, executor: Any = None, crowd: Any = None) -> None:
        self.store = store
        self.catalog = catalog
        self.executor = executor
        self.crowd = crowd
        self._sessions: dict[str, ServiceSession] = {}
        self._lock = threading.Lock()

    # -- building ---------------------------------------------------------------------------

    def _strategy(self, spec: SessionSpec, problem: Any) -> Strategy:
        options = dict(spec.options)
        name = spec.strategy
        if self.executor is not None and name in STRATEGIES and \
                "executor" in inspect.signature(STRATEGIES[name]).parameters:
            options.setdefault("executor", self.executor)
        if name == "tla":
            return self._tla(spec, problem, options)
        return make_strategy(name, problem, spec.tasks, seed=spec.seed, **options)

    def _tla(self, spec: SessionSpec, problem: Any, options: dict[str, Any]) -> Strategy:
        from raytuner.strategies.transfer import TransferLearning  # noqa: PLC0415 - heavy, only for tla

        if len(spec.tasks) != 1:
            raise InvalidInputError("tasks_json", f"strategy tla tunes one target task, not {len(spec.tasks)}")
        source_problem = options.pop("source_problem", None)
        if not isinstance(source_problem, str):
            raise InvalidInputError("options.source_problem", "tla needs the name of the source problem in the store")
        source = StoreSource(self.store, source_problem, options.pop("source_query", None))
        if self.executor is not None:
            options.setdefault("executor", self.executor)
        try:
            return TransferLearning(problem, spec.tasks[0], source, seed=spec.seed, **options)
        except TypeError as exc:
            raise InvalidInputError("options", f"tla: {exc}") from None

    def _open(self, spec: SessionSpec) -> ServiceSession:
        meta = MetaDescription.parse(spec.meta)
        problem = meta.problem_space
        tasks = [problem.input_space.check(t, f"tasks[{i}]") for i, t in enumerate(spec.tasks)]
        spec = SessionSpec(**{**asdict(spec), "tasks": tasks})
        strategy = self._strategy(spec, problem)
        tuning = TuningSession.resume(spec.problem_name, problem, strategy, self._store_of(spec),
                                      session_only=True,
                                      session_id=spec.session_id, machine=meta.machine_configuration,
                                      software=meta.software_configuration)
        return ServiceSession(spec, tuning)

    def _store_of(self, spec: SessionSpec) -> HistoryStore:
        """The server's store, synced to the crowd repository as ``spec.crowd_user`` when the session asked."""
        if not spec.crowd_user:
            return self.store
        from raytuner.crowd.sync import CrowdSyncStore  # noqa: PLC0415 - the crowd only when asked for

        try:
            user = self._crowd().get_user(spec.crowd_user)
        except RaytunerError as exc:   # restarted without the crowd, or the user is gone: tune, sync later
            log.warning("session %s is not synced to the crowd repository: %s", spec.session_id, exc)
            return self.store
        sid = spec.session_id
        return CrowdSyncStore(self.store, lambda problem, records: self.crowd.upload_as(user, problem, records),
                              owns=lambda r: r.raytuner is not None and r.raytuner.session_id == sid)

    def crowd_user_of(self, key: str) -> str | None:
        """The crowd user whose API key ``key`` is, or ``None`` (no crowd repository, or not such a key)."""
        if self.crowd is None:
            return None
        try:
            return str(self.crowd.authenticate(key).username)
        except Unauthenticated:
            return None

    def _crowd_user(self, meta: MetaDescription, owner: str) -> str:
        """The crowd user a ``sync_crowd_repo`` session uploads as (its key checked now); '' without sync.

        The meta description's ``api_key`` names the user; without one, a
        caller who signed in with a crowd key is that user.
        """
        if not meta.sync_crowd_repo:
            return ""
        crowd = self._crowd()
        if meta.api_key is not None:
            return str(crowd.authenticate(meta.api_key.get_secret_value()).username)
        if owner.startswith(CROWD_OWNER):
            return owner[len(CROWD_OWNER):]
        raise InvalidInputError("api_key", "sync_crowd_repo is yes: give the crowd user's API key "
                                "(or call with it)")

    def _crowd(self) -> Any:
        if self.crowd is None:
            raise InvalidInputError("sync_crowd_repo", "this server keeps no crowd repository "
                                    "(start it with `raytuner serve --crowd mongodb://...`)")
        return self.crowd

    def create(self, owner: str, meta: Mapping[str, Any] | MetaDescription, strategy: str, *,
               options: Mapping[str, Any] | None = None, tasks: Sequence[Mapping[str, Any]] | None = None,
               seed: int = 0, max_evaluations: int = 0) -> ServiceSession:
        """A new session of ``owner``; durable (in the catalog) when this returns."""
        parsed = meta if isinstance(meta, MetaDescription) else MetaDescription.parse(meta)
        if strategy not in SERVICE_STRATEGIES:
            raise InvalidInputError("strategy", f"unknown strategy {strategy!r}", allowed=SERVICE_STRATEGIES)
        if not isinstance(max_evaluations, int) or max_evaluations < 0:
            raise InvalidInputError("max_evaluations", f"{max_evaluations!r} is not a count (0 = no limit)")
        tasks = list(tasks) if tasks else [{}]
        for i, task in enumerate(tasks):
            if not isinstance(task, Mapping):
                raise InvalidInputError(f"tasks[{i}]", f"{task!r} is not an object of task parameters")
        tasks = [dict(t) for t in tasks]
        data = parsed.to_dict()
        data.pop("api_key", None)                       # a secret never goes into the catalog
        spec = SessionSpec(session_id=uuid.uuid4().hex, owner=owner, problem_name=parsed.tuning_problem_name,
                           meta=data, strategy=strategy, options=dict(options or {}), tasks=tasks,
                           seed=seed if seed else int.from_bytes(uuid.uuid4().bytes[:4], "big"),
                           max_evaluations=max_evaluations, crowd_user=self._crowd_user(parsed, owner))
        session = self._open(spec)                      # validates everything before anything is stored
        self.catalog.append("sessions", asdict(session.spec))
        with self._lock:
            self._sessions[spec.session_id] = session
        log.info("created session %s (%s, %s, %d task(s))", spec.session_id, spec.problem_name, strategy,
                 len(tasks))
        return session

    def load(self) -> int:
        """Rebuild every session from the catalog and the store (server start); returns how many."""
        for document in self.catalog.read("sessions"):
            spec = SessionSpec(**document)
            try:
                session = self._open(spec)
            except Exception:                          # one broken session must not stop the server
                log.exception("cannot rebuild session %s", spec.session_id)
                continue
            self._restore_trials(session)
            with self._lock:
                self._sessions[spec.session_id] = session
        log.info("loaded %d session(s)", len(self._sessions))
        return len(self._sessions)

    def _restore_trials(self, session: ServiceSession) -> None:
        for record in session.tuning.records:
            trial_id = record.raytuner.trial_id if record.raytuner else None
            if trial_id:
                session.told[trial_id] = record
        for document in self.catalog.read("trials", session_id=session.session_id):
            trial = Trial(task=document["task"], config=document["config"],
                          provenance=Provenance.model_validate(document["provenance"]),
                          trial_id=document["trial_id"])
            session.event("ASKED", trial)
            if trial.trial_id in session.told:
                session.event("TOLD", trial, session.told[trial.trial_id])
            else:
                session.tuning.adopt(trial)

    # -- access -----------------------------------------------------------------------------

    def get(self, owner: str, session_id: str) -> ServiceSession:
        """The session ``session_id`` if ``owner`` owns it (another owner's session is not found)."""
        session = self._sessions.get(session_id) if isinstance(session_id, str) else None
        if session is None or session.spec.owner != owner:
            raise SessionNotFound(f"session_id: no session {session_id!r}")
        return session

    def session_ids(self) -> set[str]:
        """The ids of every session (of every owner)."""
        with self._lock:
            return set(self._sessions)

    def list(self, owner: str, problem_name: str | None = None) -> list[ServiceSession]:
        """``owner``'s sessions (of ``problem_name`` when given), oldest first."""
        with self._lock:
            sessions = list(self._sessions.values())
        return [s for s in sessions if s.spec.owner == owner and problem_name in (None, s.spec.problem_name)]

    # -- ask and tell ---------------------------------------------------------------------------

    def ask(self, owner: str, session_id: str, task: Mapping[str, Any] | None = None,
            trial_id: str | None = None) -> tuple[AskStatus, Trial | None]:
        """The next trial of a session, or ``("WAIT", None)`` / ``("FINISHED", None)``."""
        session = self.get(owner, session_id)
        if trial_id is not None and not _TRIAL_ID.match(trial_id):
            raise InvalidInputError("trial_id", f"{trial_id[:80]!r} is not 1-64 of letters, digits, _ . -")
        if task is not None:
            task = session.tuning.problem.input_space.check(task, "task_json")
            if task_key(task) not in {task_key(t) for t in session.spec.tasks}:
                raise InvalidInputError("task_json", f"{task} is not a task of this session",
                                        allowed=session.spec.tasks)
        with session.lock:
            if trial_id is not None:
                if trial_id in session.tuning.pending:
                    trial = session.tuning.pending[trial_id]
                    if trial_id in session.unsaved:      # a retry after the log failed: save it now
                        self.catalog.append("trials", _trial_document(session_id, trial))
                        session.unsaved.discard(trial_id)
                    return "TRIAL", trial
                if trial_id in session.told:
                    raise TrialConflict(f"trial_id: trial {trial_id!r} was told already")
            if session.finished:
                return "FINISHED", None
            budget = session.spec.max_evaluations
            if session.strategy_finished or (budget and len(session.told) + len(session.tuning.pending) >= budget):
                return "WAIT", None
            try:
                trial = session.tuning.ask(task, trial_id=trial_id)
            except AwaitingResults:
                return "WAIT", None
            except TuningFinished:
                session.strategy_finished = True
                return ("FINISHED", None) if session.finished else ("WAIT", None)
            try:
                self.catalog.append("trials", _trial_document(session_id, trial))  # durable before handed out
            except Exception:
                session.unsaved.add(trial.trial_id)   # asking again with this trial id saves and hands it out
                raise
        session.event("ASKED", trial)
        return "TRIAL", trial

    def tell(self, owner: str, session_id: str, trial_id: str, outputs: Mapping[str, Any] | None = None, *,
             failure: str | None = None, machine: Mapping[str, Any] | None = None,
             software: Mapping[str, Any] | None = None,
             additional_output: Mapping[str, Any] | None = None) -> tuple[FunctionEvaluation, bool]:
        """Record a trial's result; returns the record and whether it was told before (a retry).

        Every output of the problem must be told (or a failure), and nothing
        else: a wrong name is an input error. A value that is not a finite
        number (NaN, infinity, or no number at all) is a result too: it makes
        a failed record that says why.

        Args:
            owner: Who calls (the session's owner).
            session_id: The session.
            trial_id: The pending (or, for a retry, told) trial.
            outputs: Output names to values.
            failure: Why the trial failed (the outputs are then ignored).
            machine: Where the trial ran (replaces the session's).
            software: With what software (replaces the session's).
            additional_output: Extra values kept with the record.
        """
        session = self.get(owner, session_id)
        problem = session.tuning.problem
        outputs = dict(outputs or {})
        if not failure:
            for name in outputs:
                if name not in problem.objectives:
                    raise InvalidInputError(f"outputs[{name!r}]", "not an output of the problem",
                                            allowed=problem.objectives)
            missing = [o for o in problem.objectives if o not in outputs]
            if missing:
                raise InvalidInputError(f"outputs[{missing[0]!r}]", "missing; tell every output or a failure",
                                        allowed=problem.objectives)
            _, failure = parse_outputs(outputs)
        with session.lock:
            if trial_id in session.told:
                return self._retold(session, trial_id, outputs, failure), True
            if trial_id not in session.tuning.pending:
                raise SessionNotFound(f"trial_id: no pending trial {str(trial_id)[:80]!r} in this session")
            trial = session.tuning.pending[trial_id]
            record = session.tuning.tell(trial_id, None if failure else outputs, failure=failure,
                                         additional_output=additional_output, machine=machine, software=software)
            session.told[trial_id] = record
        session.event("TOLD", trial, record)
        if session.finished:
            session.event("FINISHED")
        return record, False

    @staticmethod
    def _retold(session: ServiceSession, trial_id: str, outputs: Mapping[str, float],
                failure: str | None) -> FunctionEvaluation:
        record = session.told[trial_id]
        same = (failure is not None) == (record.status != "ok") and (
            failure is not None or all(record.value(k) == v for k, v in outputs.items()))
        if not same:
            raise TrialConflict(f"trial_id: trial {trial_id!r} was told before with another result "
                                f"(record {record.uid})")
        return record

    def watch(self, owner: str, session_id: str, from_start: bool = False,
              active: Any = lambda: True, poll: float = 0.5) -> Iterator[dict[str, Any]]:
        """A session's events as they come, while ``active()``; the already logged ones first if ``from_start``."""
        session = self.get(owner, session_id)
        with session.changed:
            position = 0 if from_start else len(session.events)
        while active():
            with session.changed:
                if position >= len(session.events):
                    session.changed.wait(poll)
                new = session.events[position:]
            for item in new:
                position += 1
                yield item
                if item["kind"] == "FINISHED":
                    return
