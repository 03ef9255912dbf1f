"""The service's sessions: tuning sessions created by remote clients, rebuilt from the logs on restart.

A :class:`SessionManager` owns every session of a server. A session is a
:class:`~raytuner.session.tuning_session.TuningSession`, which owns the trial lifecycle —
durable asks (a trial is in the store's ledger before ``Ask`` answers),
idempotent asks and tells by trial id (a retried tell gets the first record
back, ``duplicate``; another result is :class:`~raytuner.errors.TrialConflict`),
the ``max_evaluations`` budget, what a result becomes (a value that is not a
finite number, or a missing output, is stored as a failed record that says
why; a name that is not an output is refused) and adopting the trials in
flight after a restart — plus what is the service's own:

- **owners**: a session is its creator's; another caller's request finds nothing;
- **trial leases**: a session's ``lease_seconds`` (:data:`~raytuner.session.leases.DEFAULT_LEASE_SECONDS`
  unless given; kept in its spec, so a restarted server keeps it), renewed by :meth:`SessionManager.heartbeat`
  or a retried ask; an expired trial is handed out again (an ``EXPIRED`` event), and its late tell is kept;
- **creation specs** in the ledger's ``sessions`` log, from which
  :meth:`SessionManager.load` rebuilds every session on start, in the background
  (:mod:`raytuner.service.rebuild`: a call to a session not rebuilt yet waits for it);
- **crowd sync** of a session's records (``sync_crowd_repo``);
- **requests**: a trial id of the allowed characters, a task of the session,
  a Tell that carries outputs or a failure;
- **locks** and **events** for watchers;
- **limits** on what a session may ask for, and the time budget of an Ask's model fits
  (:mod:`raytuner.service.bounds`).

Example:
    >>> import tempfile
    >>> from raytuner.store import JsonStore
    >>> from raytuner.test_problems import DEMO_PROBLEM
    >>> manager = SessionManager(JsonStore(tempfile.mkdtemp()))
    >>> meta = {"tuning_problem_name": "demo", "problem_space": DEMO_PROBLEM}
    >>> session = manager.create("owner", meta, "random", tasks=[{"t": 1.0}], seed=1, max_evaluations=1)
    >>> status, trial = manager.ask("owner", session.session_id)
    >>> record, duplicate = manager.tell("owner", session.session_id, trial.trial_id, {"y": 0.5})
    >>> manager.tell("owner", session.session_id, trial.trial_id, {"y": 0.5})[1]   # a retry
    True
    >>> manager.ask("owner", session.session_id)[0]
    'FINISHED'
"""

from __future__ import annotations

import logging
import re
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from raytuner.crowd.cache import fill_cache, uncached
from raytuner.engines.base import Engine
from raytuner.engines.registry import ENGINES, build_engine
from raytuner.engines.spec import EngineSpec
from raytuner.errors import AwaitingResults, InvalidInputError, RaytunerError, TrialConflict, TuningFinished, shown
from raytuner.models.budget import fit_budget
from raytuner.problem.meta import MetaDescription
from raytuner.problem.records import FunctionEvaluation, as_number, task_key
from raytuner.service.bounds import SessionLimits
from raytuner.service.rebuild import NotRebuilt, ProblemRecords, SessionRebuilder
from raytuner.service.session_crowd import CrowdSessions
from raytuner.session.leases import DEFAULT_LEASE_SECONDS, check_lease_seconds
from raytuner.session.trial import read_trials
from raytuner.session.tuning_session import Trial, TuningSession
from raytuner.store.base import HistoryStore
from raytuner.store.ledger import Ledger
from raytuner.store.source import StoreSource

__all__ = [
    "SessionManager",
    "ServiceSession",
    "SessionSpec",
    "SessionNotFound",
    "TrialConflict",
    "AskStatus",
    "Lease",
]

log = logging.getLogger(__name__)

AskStatus = Literal["TRIAL", "WAIT", "FINISHED"]


@dataclass(frozen=True)
class Lease:
    """A trial's lease as a heartbeat answers it.

    ``status``: ``LEASED`` (the caller's until ``ends``), ``TOLD`` or ``EXPIRED`` (handed out again; a tell
    of it is still kept). ``ends``: when the lease ends, seconds since the epoch by the server's clock (0: never,
    or not leased). ``seconds``: the session's lease time (0: trials never expire).
    """

    status: Literal["LEASED", "TOLD", "EXPIRED"]
    ends: float
    seconds: float


_TRIAL_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
#: The longest session or trial id a call may name (the ids made here have 32 characters): a longer one is
#: refused as bad input, echoed in part (:func:`~raytuner.errors.shown`), never looked up.
MAX_ID_CHARACTERS = 128


def _check_id_length(value: Any, field: str) -> None:
    """Refuse an id longer than :data:`MAX_ID_CHARACTERS` (``INVALID_ARGUMENT``: retrying cannot help)."""
    if isinstance(value, str) and len(value) > MAX_ID_CHARACTERS:
        raise InvalidInputError(field, f"{shown(value)} is not an id: longer than {MAX_ID_CHARACTERS} characters")


class SessionNotFound(RaytunerError):
    """No such session (or trial) for this caller."""

    grpc_status = "NOT_FOUND"


@dataclass(frozen=True)
class SessionSpec:
    """What a session was created from; stored once in the ledger's ``sessions`` log."""

    session_id: str
    owner: str
    problem_name: str
    meta: dict[str, Any]
    engine: str
    options: dict[str, Any]
    tasks: list[dict[str, Any]]
    seed: int
    max_evaluations: int = 0
    created: float = field(default_factory=time.time)
    crowd_user: str = ""  # sync_crowd_repo: the crowd user the session's records are uploaded as
    crowd_access: str = "private"  # sync_crowd_repo: the access level they get (options.crowd_access)
    lease_seconds: float = DEFAULT_LEASE_SECONDS  # a trial's lease without a renewal (0: never expires)
    uid_salt: str = ""  # a secret in its tells' uids, so that no upload can take one first ("": made before it)

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> SessionSpec:
        """The spec a ``sessions`` log document holds; one written before the engine was so named says ``strategy``,
        one written before leases has none (its trials never expire: its jobs send no heartbeats).

        Args:
            document: The ledger's document.
        """
        data = dict(document)
        if "engine" not in data and "strategy" in data:
            data["engine"] = data.pop("strategy")
        # a session created before leases: its jobs send no heartbeats, so its trials never expire
        data.setdefault("lease_seconds", 0.0)
        return cls(**data)


class ServiceSession:
    """One live session: its spec, its tuning session (the trial lifecycle), a lock and the event log.

    Args:
        spec: What the session was created from.
        tuning: The tuning session.
    """

    def __init__(self, spec: SessionSpec, tuning: TuningSession) -> None:
        self.spec = spec
        self.tuning = tuning
        self.lock = threading.Lock()
        self.changed = threading.Condition()
        self.events: list[dict[str, Any]] = []

    @property
    def session_id(self) -> str:
        """The session's id."""
        return self.spec.session_id

    @property
    def finished(self) -> bool:
        """Whether no more trials will be handed out (budget spent or plan done, none pending)."""
        return self.tuning.finished

    def event(self, kind: str, trial: Trial | None = None, record: FunctionEvaluation | None = None) -> None:
        """Log an event and wake the watchers.

        Args:
            kind: ``ASKED``, ``TOLD``, ``EXPIRED`` or ``FINISHED``.
            trial: The trial it concerns.
            record: The record a tell made.
        """
        item: dict[str, Any] = {"kind": kind, "time": time.time(), "sequence": len(self.events)}
        if trial is not None:
            item.update(trial_id=trial.trial_id, task=trial.task, config=trial.config)
        if record is not None:
            item.update(
                outputs={k: n for k, v in record.evaluation_result.items() if (n := as_number(v)) is not None},
                failure=record.raytuner.failure_message if record.raytuner else None,
            )
        with self.changed:
            self.events.append(item)
            self.changed.notify_all()

    def best(self) -> list[tuple[dict[str, Any], FunctionEvaluation]]:
        """Per task, its best evaluation, or with several objectives its Pareto front (output constraints met)."""
        return [(task, record) for task in self.spec.tasks for record in self.tuning.pareto_front(task)]


class SessionManager(CrowdSessions, SessionRebuilder):
    """Every session of a server, over one history store and its ledger (see the module docs).

    Args:
        store: The history store.
        ledger: Where sessions and handed-out trials are logged (default: ``store.ledger()``).
        executor: Runs model fits (the server's: a :class:`~raytuner.models.executors.RayExecutor` when it
            has a Ray cluster, else the process pool); it goes to the engines that take one.
        crowd: The crowd repository (:class:`~raytuner.crowd.CrowdRepository`), for synced sessions and
            crowd sources (:mod:`raytuner.service.session_crowd`).
        limits: What a new session may ask for, and the model-fit time of an Ask (default:
            :class:`~raytuner.service.bounds.SessionLimits`' defaults).
    """

    def __init__(
        self,
        store: HistoryStore,
        ledger: Ledger | None = None,
        executor: Any = None,
        crowd: Any = None,
        limits: SessionLimits | None = None,
    ) -> None:
        self.store = store
        self.limits = limits or SessionLimits()
        self.ledger = ledger if ledger is not None else store.ledger()
        self.executor = executor
        self.crowd = crowd
        self._sessions: dict[str, ServiceSession] = {}
        self._lock = threading.Lock()
        self._init_rebuilder()

    # -- building ---------------------------------------------------------------------------

    def _engine(self, spec: SessionSpec, problem: Any, fresh: Sequence[FunctionEvaluation] | None = None) -> Engine:
        """The session's engine, built from its ``(name, options)`` spec; a transferring one reads the store.

        ``fresh``: the records of its source problem, given while they are not stored yet (crowd sources
        downloaded at creation).
        """
        options = dict(spec.options)
        source: StoreSource | list[FunctionEvaluation] | None = None
        if spec.engine in ENGINES and ENGINES[spec.engine].learns_from_sources:
            source_problem, query = options.pop("source_problem", None), options.pop("source_query", None)
            needed = "source" in ENGINES[spec.engine].needs and len(spec.tasks) == 1
            if (needed or source_problem is not None or query is not None) and not isinstance(source_problem, str):
                raise InvalidInputError(
                    "options.source_problem",
                    f"{spec.engine} needs the name of a source problem in the store, other than the session's own",
                )
            if isinstance(source_problem, str):
                source = StoreSource(self.store, source_problem, query)
                if fresh is not None:  # what source.evaluations() will read once they are stored
                    source = [r for r in fresh if source.query is None or source.query.matches(r)]
        return build_engine(
            EngineSpec(spec.engine, options), problem, spec.tasks, spec.seed, executor=self.executor, source=source
        )

    def _open(
        self,
        spec: SessionSpec,
        fresh: Sequence[FunctionEvaluation] | None = None,
        trials: Sequence[Trial] | None = None,
        records: ProblemRecords | None = None,
    ) -> ServiceSession:
        meta = MetaDescription.parse(spec.meta)
        problem = meta.problem_space
        tasks = [problem.input_space.check(t, f"tasks[{i}]") for i, t in enumerate(spec.tasks)]
        spec = SessionSpec(**{**asdict(spec), "tasks": tasks})
        engine = self._engine(spec, problem, fresh)
        tuning = TuningSession.resume(
            problem,
            engine,
            self._store_of(spec.session_id, spec.crowd_user, spec.crowd_access),
            spec.problem_name,
            session_only=True,
            ledger=self.ledger,
            max_evaluations=spec.max_evaluations,
            session_id=spec.session_id,
            machine=meta.machine_configuration,
            software=meta.software_configuration,
            history=meta.history,
            asked=trials,
            lease_seconds=spec.lease_seconds,
            uid_salt=spec.uid_salt,
            stored=None if records is None else records[0],
            models=None if records is None else records[1],
        )
        return ServiceSession(spec, tuning)

    def create(
        self,
        owner: str,
        meta: Mapping[str, Any] | MetaDescription,
        engine: str,
        *,
        options: Mapping[str, Any] | None = None,
        tasks: Sequence[Mapping[str, Any]] | None = None,
        seed: int = 0,
        max_evaluations: int = 0,
        session_id: str | None = None,
        claim: Callable[[str], object] | None = None,
        lease_seconds: float | None = None,
    ) -> ServiceSession:
        """A new session of ``owner``; durable (in the ledger) when this returns.

        Args:
            owner: Who creates it (a key id, or ``crowd:<username>``).
            meta: The meta description (problem, spaces, configurations, GPTune's history options: only the
                session's own records are replayed unless ``load_func_eval`` is yes; no ``historydb_path``).
            engine: A registered engine's name (:data:`raytuner.engines.ENGINES`).
            options: The engine's options.
            tasks: The tasks to tune (one task without parameters when ``None``).
            seed: The engine's seed (a random one when 0).
            max_evaluations: The most trials to hand out (0: no limit).
            session_id: The session's id (a new one when ``None``; one the ledger holds is a conflict).
            claim: Called with the problem's name once the session is validated, before anything is stored;
                it raises to refuse (the server claims the problem for ``owner`` there, atomically).
            lease_seconds: How long a handed-out trial stays leased without a renewal (``None``:
                :data:`~raytuner.session.leases.DEFAULT_LEASE_SECONDS`; 0: trials never expire).
        """
        if session_id is not None and (
            self.known(session_id) or next(self.ledger.read("sessions", session_id=session_id), None)
        ):
            raise TrialConflict(f"session_id: a session {session_id!r} exists already")
        parsed = meta if isinstance(meta, MetaDescription) else MetaDescription.parse(meta)
        if parsed.historydb_path is not None:
            raise InvalidInputError(
                "historydb_path",
                "the service keeps its history in its own store; leave historydb_path out of the meta description",
            )
        if engine not in ENGINES:
            raise InvalidInputError("engine", f"unknown engine {engine!r}", allowed=sorted(ENGINES))
        lease = DEFAULT_LEASE_SECONDS if lease_seconds is None else check_lease_seconds(lease_seconds)
        given = list(tasks) if tasks else [{}]
        for i, task in enumerate(given):
            if not isinstance(task, Mapping):
                raise InvalidInputError(f"tasks[{i}]", f"{task!r} is not an object of task parameters")
        task_list = [dict(t) for t in given]
        self.limits.check(options or {}, len(task_list))
        if (options or {}).get("source_problem") == parsed.tuning_problem_name:
            raise InvalidInputError(
                "options.source_problem",
                f"{engine} needs the name of a source problem in the store, other than the session's own",
            )
        data = parsed.to_dict()
        data.pop("api_key", None)  # a secret never goes into the ledger
        options = dict(options or {})
        access = self._sync_access(parsed, options)  # takes options.crowd_access out
        chosen, fresh = self._with_crowd_sources(parsed, owner, engine, options)
        spec = SessionSpec(
            session_id=session_id or uuid.uuid4().hex,
            owner=owner,
            problem_name=parsed.tuning_problem_name,
            meta=data,
            engine=engine,
            options=chosen,
            tasks=task_list,
            seed=seed if seed else int.from_bytes(uuid.uuid4().bytes[:4], "big"),
            max_evaluations=max_evaluations,
            crowd_user=self._crowd_user(parsed, owner),
            crowd_access=access,
            lease_seconds=lease,
            uid_salt="#" + secrets.token_hex(16),
        )
        fresh = None if fresh is None else uncached(self.store, spec.problem_name, chosen["source_problem"], fresh)
        session = self._open(spec, fresh)  # validates everything before anything is stored
        if claim is not None:
            claim(spec.problem_name)
        if fresh is not None:  # the crowd's records, cached as the engine took them
            fill_cache(self.store, spec.problem_name, chosen["source_problem"], fresh)
        self.ledger.append("sessions", asdict(session.spec))
        with self._lock:
            self._sessions[spec.session_id] = session
        log.info("created session %s (%s, %s, %d task(s))", spec.session_id, spec.problem_name, engine, len(task_list))
        return session

    def open(self, session_id: str) -> ServiceSession | None:
        """The session ``session_id`` (rebuilt from the ledger and the store when not live), or ``None``.

        Args:
            session_id: The session.
        """
        if not self.known(session_id):
            document = next(self.ledger.read("sessions", session_id=session_id), None)
            if document is None:
                return None
            with self._lock:
                if session_id not in self._sessions:
                    self._specs.setdefault(session_id, document)
        return self._live(session_id)

    def _rebuild(
        self, document: Mapping[str, Any], trials: Sequence[Trial] | None, records: ProblemRecords | None
    ) -> ServiceSession:
        """A session of the ``sessions`` log, its trials and records as given (read here when ``None``)."""
        spec = SessionSpec.from_document(document)
        if trials is None:
            trials = list(read_trials(self.ledger.read("trials", session_id=spec.session_id)))
        session = self._open(spec, trials=trials, records=records)
        for trial in trials:  # the events of its trials (its tuning session adopted the ones in flight)
            session.event("ASKED", trial)
            record = session.tuning.told_record(trial.trial_id)
            if record is not None:
                session.event("TOLD", trial, record)
        return session

    # -- access -----------------------------------------------------------------------------

    def get(self, owner: str, session_id: str) -> ServiceSession:
        """The session ``session_id`` if ``owner`` owns it (another owner's session is not found).

        Args:
            owner: Who calls.
            session_id: The session.
        """
        _check_id_length(session_id, "session_id")
        session = None
        if isinstance(session_id, str) and self._spec_owner(session_id) == owner:
            session = self._live(session_id)  # rebuilt first after a restart
        if session is None:
            raise SessionNotFound(f"session_id: no session {shown(session_id)}")
        return session

    def session_ids(self) -> set[str]:
        """The ids of every session (of every owner; those not rebuilt yet after a restart included)."""
        with self._lock:
            return set(self._sessions) | set(self._specs)

    def list(self, owner: str, problem_name: str | None = None) -> list[ServiceSession]:
        """``owner``'s sessions (of ``problem_name`` when given), oldest first.

        Args:
            owner: Who calls.
            problem_name: Only this problem's sessions (all when ``None``).
        """
        with self._lock:
            waiting = [i for i, d in self._specs.items() if d.get("owner") == owner]
        for session_id in waiting:  # rebuilt first after a restart
            try:
                self._live(session_id)
            except NotRebuilt:
                pass
        with self._lock:
            sessions = sorted(self._sessions.values(), key=lambda s: s.spec.created)
        return [s for s in sessions if s.spec.owner == owner and problem_name in (None, s.spec.problem_name)]

    # -- ask and tell ---------------------------------------------------------------------------

    def ask(
        self, owner: str, session_id: str, task: Mapping[str, Any] | None = None, trial_id: str | None = None
    ) -> tuple[AskStatus, Trial | None]:
        """The next trial of a session, or ``("WAIT", None)`` / ``("FINISHED", None)``.

        Args:
            owner: Who calls (the session's owner).
            session_id: The session.
            task: The task to ask for (any task of the session when ``None``).
            trial_id: The client's id for the trial; asking again with it returns the same trial.
        """
        session = self.get(owner, session_id)
        if trial_id is not None and not _TRIAL_ID.fullmatch(trial_id):
            raise InvalidInputError("trial_id", f"{shown(trial_id)} is not 1-64 of letters, digits, _ . -")
        if task is not None:
            task = session.tuning.problem.input_space.check(task, "task_json")
            if task_key(task) not in {task_key(t) for t in session.spec.tasks}:
                raise InvalidInputError(
                    "task_json", f"{task} is not a task of this session", allowed=session.spec.tasks
                )
        with session.lock, fit_budget(self.limits.fit_seconds):
            self.expire(session)
            known = trial_id is not None and trial_id in session.tuning.pending
            try:
                trial = session.tuning.ask(task, trial_id=trial_id)
            except AwaitingResults:
                return "WAIT", None
            except TuningFinished:
                return "FINISHED", None
        if not known:
            session.event("ASKED", trial)
        return "TRIAL", trial

    @staticmethod
    def expire(session: ServiceSession) -> None:
        """End the session's leases that are over, with an ``EXPIRED`` event each (hold ``session.lock``).

        Args:
            session: The session.
        """
        for trial in session.tuning.expire():
            session.event("EXPIRED", trial)

    def heartbeat(self, owner: str, session_id: str, trial_id: str) -> Lease:
        """Renew a handed-out trial's lease (a running job calls this every so often).

        Args:
            owner: Who calls (the session's owner).
            session_id: The session.
            trial_id: The trial.

        Raises:
            UnknownTrial: The session never handed the trial out.
        """
        session = self.get(owner, session_id)
        if not isinstance(trial_id, str) or not _TRIAL_ID.fullmatch(trial_id):
            raise InvalidInputError("trial_id", f"{shown(trial_id)} is not 1-64 of letters, digits, _ . -")
        with session.lock:
            self.expire(session)
            status, left = session.tuning.renew(trial_id)
        seconds = session.spec.lease_seconds
        return Lease(status, 0.0 if left is None else time.time() + left, seconds)

    def tell(
        self,
        owner: str,
        session_id: str,
        trial_id: str,
        outputs: Mapping[str, Any] | None = None,
        *,
        failure: str | None = None,
        machine: Mapping[str, Any] | None = None,
        software: Mapping[str, Any] | None = None,
        additional_output: Mapping[str, Any] | None = None,
    ) -> tuple[FunctionEvaluation, bool]:
        """Record a trial's result; returns the record and whether it was told before (a retry).

        A Tell carries outputs or a failure (an empty one is an input error
        naming the first output). The session makes the record: a name that
        is not an output is refused; a missing output, or a value that is not
        a finite number (NaN, infinity), makes a failed record that says why.

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
        _check_id_length(trial_id, "trial_id")
        outputs = dict(outputs or {})
        if not failure and not outputs:
            objectives = session.tuning.problem.objectives
            raise InvalidInputError(
                f"outputs[{objectives[0]!r}]", "missing; tell the outputs or a failure", allowed=objectives
            )
        with session.lock:
            was_finished = session.finished
            duplicate = session.tuning.told_record(trial_id) is not None
            trial = session.tuning.pending.get(trial_id) or session.tuning.expired.get(trial_id)
            record = session.tuning.tell(
                trial_id,
                None if failure else outputs,
                failure=failure or None,
                additional_output=additional_output,
                machine=machine,
                software=software,
            )
            finished = session.finished
        if duplicate:
            return record, True
        session.event("TOLD", trial, record)
        if finished and not was_finished:
            session.event("FINISHED")
        return record, False

    def watch(
        self, owner: str, session_id: str, from_start: bool = False, active: Any = lambda: True, poll: float = 0.5
    ) -> Iterator[dict[str, Any]]:
        """A session's events as they come, while ``active()``; the already logged ones first if ``from_start``.

        Args:
            owner: Who calls (the session's owner).
            session_id: The session.
            from_start: Yield the events logged so far first.
            active: Whether the watcher still listens (checked between events).
            poll: Seconds between checks while no event comes.
        """
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
