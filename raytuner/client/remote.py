"""The Python client of the tuning service: ask, tell, and a ``run(objective)`` loop.

:class:`RemoteTuner` talks to a :class:`~raytuner.service.server.TuningServer` (``raytuner serve``).
Every call has a deadline (``timeout``) and is retried with exponential backoff and jitter on
``UNAVAILABLE``, ``DEADLINE_EXCEEDED`` and ``RESOURCE_EXHAUSTED`` (never on bad input), by default
for up to ``retry_for`` seconds (150: a server restart of two minutes is waited out): that is
safe because a tell is idempotent by trial id and an ask carries a client-chosen trial id, so a
retried ask gets the same trial back. (A retried *create* after a lost answer may leave one
empty, unused session behind.) Failures surface as :class:`ServiceError` with the gRPC status
name and the server's message. Each tell carries this machine's configuration (its Slurm
allocation included) and software versions, captured once; the user's values win (``machine``,
else the created session's meta ``machine_configuration``).

Example (needs a running service)::

    with RemoteTuner("tuner.example.org:50051", api_key) as tuner:
        tuner.create_session("meta.json", "mla", tasks=[{"n": 2000}], max_evaluations=40)
        while (trial := tuner.ask()) is not None:
            tuner.tell(trial, {"runtime": run_my_code(**trial.config)})
        print(tuner.best())  # the best evaluation of the first task

or, with the loop written for you (it renews the trial's lease while the objective runs)::

    tuner.run(lambda config, task, fidelity: {"runtime": run_my_code(**config)})

A handed-out trial is leased (the session's ``lease_seconds``, 300 by default): a job that runs it
longer renews the lease with :meth:`RemoteTuner.heartbeat`, or with ``with tuner.heartbeats(trial):``
around the run; a trial whose lease ends is handed out again, and a late tell of it is still kept.
"""

from __future__ import annotations

import json
import logging
import numbers
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Unpack

import grpc

from raytuner.client.channel import RETRIED_CODES, Connection, ServiceChannel, ServiceError, check_connection
from raytuner.errors import InvalidInputError
from raytuner.problem.environment import describe_machine, software_configuration
from raytuner.problem.meta import MetaDescription
from raytuner.problem.records import FunctionEvaluation, parse_outputs
from raytuner.protocol import dumps
from raytuner.protocol.v1 import tuning_pb2 as pb
from raytuner.protocol.v1 import tuning_pb2_grpc as pb_grpc
from raytuner.signing import Signer
from raytuner.store.base import EvaluationQuery

__all__ = [
    "ServiceChannel",
    "RemoteTuner",
    "RemoteTrial",
    "TellResult",
    "TrialLease",
    "ServiceError",
    "RETRIED_CODES",
]

log = logging.getLogger(__name__)

Objective = Callable[[dict[str, Any], dict[str, Any], "float | None"], "Mapping[str, float] | float"]


@dataclass(frozen=True)
class RemoteTrial:
    """A trial handed out by the service: run ``config`` on ``task`` (at ``fidelity`` when not ``None``).

    ``lease_seconds``: how long it stays this job's without a heartbeat (0: it never expires).
    """

    trial_id: str
    task: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    fidelity: float | None = None
    lease_seconds: float = 0.0


@dataclass(frozen=True)
class TellResult:
    """The service's answer to a tell: the record's ``uid``; ``duplicate`` when the trial was told before."""

    uid: str
    duplicate: bool
    failed: bool


@dataclass(frozen=True)
class TrialLease:
    """The service's answer to a heartbeat.

    ``status``: ``LEASED`` (the trial is yours until ``ends``), ``TOLD`` (nothing to renew) or ``EXPIRED``
    (its lease ended and it was handed out again; a tell of it is still kept). ``ends``: seconds since the
    epoch by the server's clock (0: the lease never ends). ``seconds``: the session's lease time (0: none).
    """

    status: str
    ends: float
    seconds: float

    @property
    def held(self) -> bool:
        """Whether the trial is still the caller's (leased): renew it again later."""
        return self.status == "LEASED"


def _session_dict(message: pb.Session) -> dict[str, Any]:
    return {
        "session_id": message.session_id,
        "problem_name": message.problem_name,
        "engine": message.engine,
        "tasks": json.loads(message.tasks_json or "[]"),
        "options": json.loads(message.options_json or "{}"),
        "evaluations": message.evaluations,
        "failed": message.failed,
        "pending": message.pending,
        "finished": message.finished,
        "max_evaluations": message.max_evaluations,
        "lease_seconds": message.lease_seconds,
        "created": message.created,
        "outputs": list(message.outputs),
        "goals": dict(zip(message.outputs, message.goals, strict=False)),
        "best": [
            {
                "task": json.loads(b.task_json or "{}"),
                "config": json.loads(b.config_json or "{}"),
                "outputs": dict(b.outputs),
                "uid": b.uid,
            }
            for b in message.best
        ],
    }


def _event_dict(event: pb.SessionEvent) -> dict[str, Any]:
    return {
        "kind": pb.SessionEvent.Kind.Name(event.kind),
        "sequence": event.sequence,
        "time": event.time,
        "trial_id": event.trial_id,
        "task": json.loads(event.task_json or "{}"),
        "config": json.loads(event.config_json or "{}"),
        "outputs": dict(event.outputs),
        "failure": event.failure or None,
    }


def _best_of(
    front: Sequence[FunctionEvaluation], goals: Mapping[str, str], objective: str | None
) -> FunctionEvaluation | None:
    """The record of ``front`` best in ``objective`` (default: the first optimised output), or ``None``."""
    optimised = [name for name, goal in goals.items() if goal]
    name = objective if objective is not None else (optimised[0] if optimised else None)
    if name is None or name not in optimised:
        raise InvalidInputError("objective", f"{name!r} is not an optimised output of the session", allowed=optimised)
    sign = -1.0 if goals[name] == "maximize" else 1.0
    scored = [(sign * v, n, r) for n, r in enumerate(front) if (v := r.value(name)) is not None]
    return min(scored, key=lambda s: (s[0], s[1]))[2] if scored else None


class RemoteTuner(ServiceChannel):
    """A client of one tuning service (see the module documentation).

    Args:
        address: ``host:port`` of the server.
        api_key: the API key (``None``: a server without keys), or a
            :class:`~raytuner.signing.Signer` of a crowd user's private key (a server with a
            crowd repository where its public key is registered).
        session_id: the session to join (default: none until :meth:`create_session`).
        machine: machine configuration values that win over the captured ones (default: the meta's).
        software: software configuration values that win over the captured ones.
        **connection: how the server is reached (:class:`~raytuner.client.channel.Connection`:
            ``timeout``, ``retries``, ``backoff``, ``retry_for``, ``root_certificates``, ``tls``,
            ``tls_server_name``), as :class:`ServiceChannel` takes them, save that ``retries`` is
            ``None`` by default (retried for ``retry_for`` seconds); an ``mla`` ask may need a larger
            ``timeout``.
    """

    def __init__(
        self,
        address: str,
        api_key: str | Signer | None = None,
        *,
        session_id: str | None = None,
        machine: Mapping[str, Any] | None = None,
        software: Mapping[str, Any] | None = None,
        **connection: Unpack[Connection],
    ) -> None:
        connection = check_connection(connection)
        connection.setdefault("retries", None)
        super().__init__(address, api_key, pb_grpc.TuningServiceStub, **connection)
        self.session_id = session_id
        self.finished = False
        self.machine, self._machine_given = describe_machine(machine), machine is not None
        self.software = software_configuration((), software)
        self._outputs: dict[str, list[str]] = {}

    def __repr__(self) -> str:
        return f"RemoteTuner({self.address!r}, session_id={self.session_id!r})"

    # -- plumbing -------------------------------------------------------------------------------

    def _session(self, session_id: str | None) -> str:
        session_id = session_id or self.session_id
        if not session_id:
            raise InvalidInputError("session_id", "no session: call create_session() or pass session_id")
        return session_id

    # -- sessions ---------------------------------------------------------------------------------

    def create_session(
        self,
        problem: MetaDescription | Mapping[str, Any] | str | os.PathLike[str],
        engine: str,
        tasks: Sequence[Mapping[str, Any]] | None = None,
        options: Mapping[str, Any] | None = None,
        seed: int = 0,
        max_evaluations: int = 0,
        lease_seconds: float | None = None,
    ) -> str:
        """Create a session (it becomes this client's session) and return its id.

        Args:
            problem: a meta description: parsed, as plain data, or a JSON file's path. With ``"sync_crowd_repo":
                "yes"`` the server also uploads the session's records to its crowd repository as its ``api_key``'s user.
            engine: the engine's name: ``random``, ``mla``, ``gptuneband``, ``transfer``, ``tla1``, ``tla2`` or ``discrete``.
            tasks: the task parameters to tune (none for a problem without input space).
            options: the engine's options (default none).
            seed: the engine's seed (default 0).
            max_evaluations: the most trials the session hands out (default 0: no limit).
            lease_seconds: how long a handed-out trial stays leased without a heartbeat before it is handed
                out again (default: the server's, 300 s; 0: trials never expire).
        """
        if isinstance(problem, MetaDescription):
            data = problem.to_dict()
        elif isinstance(problem, (str, os.PathLike)):
            data = MetaDescription.load(problem).to_dict()
        else:
            data = dict(problem)
        if str(data.get("sync_crowd_repo", "no")).lower() not in ("yes", "y", "true"):  # key: for uploads only
            data.pop("api_key", None)
        request = pb.CreateSessionRequest(
            problem_json=dumps(data),
            engine=engine,
            options_json=dumps(dict(options or {})),
            tasks_json=dumps([dict(t) for t in tasks]) if tasks else "",
            seed=seed,
            max_evaluations=max_evaluations,
            lease_seconds=lease_seconds,
        )
        message = self._call("CreateSession", request)
        self.session_id = message.session_id
        self.finished = False
        if not self._machine_given:  # the user's description wins
            self.machine = describe_machine(m if isinstance(m := data.get("machine_configuration"), Mapping) else None)
        try:
            self._outputs[message.session_id] = MetaDescription.parse(data).problem_space.objectives
        except InvalidInputError:  # the server took it; its names stay unknown here
            pass
        log.info("created session %s on %s", message.session_id, self.address)
        return message.session_id

    def session(self, session_id: str | None = None) -> dict[str, Any]:
        """The session as plain data, with ``best``: one entry per task.

        Args:
            session_id: the session (default: this client's).
        """
        return _session_dict(self._call("GetSession", pb.GetSessionRequest(session_id=self._session(session_id))))

    def pareto_front(
        self, task: Mapping[str, Any] | None = None, session_id: str | None = None
    ) -> list[FunctionEvaluation]:
        """The session's best evaluations of ``task``: its best, or with several objectives its Pareto front.

        They meet every output constraint; the records hold the task, the
        configuration, the outputs and the uid the service stored them under.

        Args:
            task: One of the session's tasks (default: the first).
            session_id: the session (default: this client's).
        """
        return self._fronts(self.session(session_id), task)

    def best(
        self, task: Mapping[str, Any] | None = None, objective: str | None = None, session_id: str | None = None
    ) -> FunctionEvaluation | None:
        """The best evaluation of ``task`` in ``objective``, or ``None`` while none counts.

        It answers as every engine's and :class:`~raytuner.session.tuning_session.TuningSession`'s
        ``best()`` does: the evaluation that succeeded, meets every output constraint and is best
        in ``objective``.

        Args:
            task: One of the session's tasks (default: the first).
            objective: The objective's name (default: the problem's first optimised output).
            session_id: the session (default: this client's).
        """
        data = self.session(session_id)
        return _best_of(self._fronts(data, task), data["goals"], objective)

    def best_per_task(
        self, objective: str | None = None, session_id: str | None = None
    ) -> list[FunctionEvaluation | None]:
        """:meth:`best` of each of the session's tasks, in their order.

        Args:
            objective: The objective's name (default: the problem's first optimised output).
            session_id: the session (default: this client's).
        """
        data = self.session(session_id)
        return [_best_of(self._fronts(data, task), data["goals"], objective) for task in data["tasks"] or [{}]]

    @staticmethod
    def _fronts(data: Mapping[str, Any], task: Mapping[str, Any] | None) -> list[FunctionEvaluation]:
        tasks = data["tasks"] or [{}]
        chosen = dict(tasks[0] if task is None else task)
        if chosen not in tasks:
            raise InvalidInputError("task", f"{chosen} is no task of session {data['session_id']}", allowed=tasks)
        return [
            FunctionEvaluation.create(entry["task"], entry["config"], entry["outputs"], uid=entry["uid"] or None)
            for entry in data["best"]
            if entry["task"] == chosen
        ]

    def output_names(self, session_id: str | None = None) -> list[str]:
        """The session's output names (asked of the server once, then remembered).

        Args:
            session_id: the session (default: this client's).
        """
        sid = self._session(session_id)
        if sid not in self._outputs:
            self._outputs[sid] = self.session(sid)["outputs"]
        return self._outputs[sid]

    def sessions(self, problem_name: str | None = None) -> list[dict[str, Any]]:
        """The caller's sessions (of ``problem_name`` when given), oldest first.

        Args:
            problem_name: only this problem's sessions (default: all).
        """
        answer = self._call("ListSessions", pb.ListSessionsRequest(problem_name=problem_name or ""))
        return [_session_dict(s) for s in answer.sessions]

    def watch(self, from_start: bool = False, session_id: str | None = None) -> Iterator[dict[str, Any]]:
        """The session's events (``kind`` ASKED, TOLD or FINISHED) as they happen; ends after FINISHED.

        Not retried and without a deadline: a broken stream raises :class:`ServiceError`.

        Args:
            from_start: replay the events that happened before the call (default False).
            session_id: the session (default: this client's).
        """
        request = pb.WatchSessionRequest(session_id=self._session(session_id), from_start=from_start)
        call = self._stub.WatchSession(request, metadata=self._call_metadata("WatchSession", request))
        try:
            for event in call:
                yield _event_dict(event)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                raise ServiceError(exc.code().name, exc.details() or "") from None
        finally:
            call.cancel()

    # -- ask and tell -----------------------------------------------------------------------------

    def ask(
        self,
        task: Mapping[str, Any] | None = None,
        *,
        wait: bool = True,
        poll: float = 0.5,
        trial_id: str | None = None,
    ) -> RemoteTrial | None:
        """The next trial, or ``None``: the session is over (``self.finished``) or, with ``wait=False``, busy.

        Args:
            task: the task to run (default: the engine chooses).
            wait: when the service answers WAIT (nothing to run until pending trials are told), ask again
                every ``poll`` seconds (default True); False returns ``None`` at once with ``self.finished`` false.
            poll: seconds between asks while waiting (default 0.5).
            trial_id: asking again with it returns the same pending trial (default: a fresh uuid).
        """
        request = pb.AskRequest(
            session_id=self._session(None),
            task_json=dumps(dict(task)) if task else "",
            trial_id=trial_id or uuid.uuid4().hex,
        )
        while True:
            answer = self._call("Ask", request)
            if answer.status == pb.AskResponse.TRIAL:
                self.finished = False
                return RemoteTrial(
                    answer.trial_id,
                    json.loads(answer.task_json or "{}"),
                    json.loads(answer.config_json or "{}"),
                    answer.fidelity or None,
                    answer.lease_seconds,
                )
            self.finished = answer.status == pb.AskResponse.FINISHED
            if self.finished or not wait:
                return None
            time.sleep(poll)

    def tell(
        self,
        trial: RemoteTrial | str,
        outputs: Mapping[str, Any] | None = None,
        *,
        failure: str | None = None,
        additional_output: Mapping[str, Any] | None = None,
    ) -> TellResult:
        """Report a trial's ``outputs`` (every output of the problem), or its ``failure`` message.

        An output that is not a finite number (``"fast"``, ``None``, NaN) is
        told as the trial's failure, saying why: the service stores a failed
        record. A retried tell is harmless: the service answers
        ``duplicate=True`` with the first record's uid (also when this call's
        own first attempt was recorded but its answer was lost).

        Args:
            trial: The trial (or its id).
            outputs: Output names to values.
            failure: Why the trial failed (the outputs are then ignored).
            additional_output: Extra values kept with the record (JSON).
        """
        trial_id = trial.trial_id if isinstance(trial, RemoteTrial) else trial
        if not failure and not outputs:
            raise InvalidInputError("outputs", "tell the outputs, or a failure message")
        values: dict[str, float] = {}
        if not failure:
            values, failure = parse_outputs(outputs)
        request = pb.TellRequest(
            session_id=self._session(None),
            trial_id=trial_id,
            outputs={} if failure else values,
            failure=failure or "",
            machine_json=dumps(self.machine),
            software_json=dumps(self.software),
            additional_output_json=dumps(dict(additional_output)) if additional_output else "",
        )
        answer = self._call("Tell", request)
        return TellResult(answer.uid, answer.duplicate, answer.failed)

    def heartbeat(self, trial: RemoteTrial | str) -> TrialLease:
        """Renew a trial's lease: the service keeps it this job's for the session's lease time from now.

        Args:
            trial: The trial (or its id).
        """
        trial_id = trial.trial_id if isinstance(trial, RemoteTrial) else trial
        answer = self._call("Heartbeat", pb.HeartbeatRequest(session_id=self._session(None), trial_id=trial_id))
        return TrialLease(pb.HeartbeatResponse.Status.Name(answer.status), answer.lease_ends, answer.lease_seconds)

    def keep_leased(
        self, trial: RemoteTrial | str, every: float | None = None, stop: threading.Event | None = None
    ) -> TrialLease | None:
        """Renew ``trial``'s lease every ``every`` seconds until ``stop`` is set or it is told or expired.

        The first renewal comes ``every`` seconds from now. Returns the last answer (``None`` when
        stopped before the first). A failed renewal (the server unreachable for longer than the client
        retries) is logged and tried again.

        Args:
            trial: The trial (or its id).
            every: Seconds between renewals (default: a third of the trial's lease time, at least 0.2).
            stop: Set to stop renewing (default: renew until the trial is told or expired).
        """
        stop = stop or threading.Event()
        lease = None
        if every is None:
            seconds = trial.lease_seconds if isinstance(trial, RemoteTrial) else 0.0
            every = max(0.2, (seconds or 3.0) / 3)
        while not stop.wait(every):
            try:
                lease = self.heartbeat(trial)
            except ServiceError as exc:
                if exc.code not in RETRIED_CODES:
                    raise
                log.warning("heartbeat of trial %s failed (%s); trying again", trial, exc)
            else:
                if not lease.held or not lease.seconds:
                    return lease
        return lease

    @contextmanager
    def heartbeats(self, trial: RemoteTrial | str, every: float | None = None) -> Iterator[None]:
        """Renew ``trial``'s lease in a background thread while the ``with`` block runs (it runs the trial).

        Args:
            trial: The trial (or its id).
            every: Seconds between renewals (default: a third of the trial's lease time; a trial that
                never expires is not renewed).

        Example (needs a running service)::

            with tuner.heartbeats(trial):
                runtime = run_my_code(**trial.config)
        """
        if every is None and isinstance(trial, RemoteTrial) and not trial.lease_seconds:
            yield  # a trial that never expires: nothing to renew
            return
        stop = threading.Event()

        def renew() -> None:
            try:
                self.keep_leased(trial, every, stop)
            except Exception as exc:  # the trial's run goes on; its tell says the rest
                log.warning("stopped renewing the lease of trial %s: %s", trial, exc)

        thread = threading.Thread(target=renew, name="raytuner-heartbeat", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=5.0)  # a renewal being retried ends on its own

    def run(
        self,
        objective: Objective,
        max_trials: int | None = None,
        *,
        output: str | None = None,
        task: Mapping[str, Any] | None = None,
        poll: float = 0.5,
    ) -> int:
        """Ask → ``objective(config, task, fidelity)`` → tell until the session is over; returns the trials run.

        The trial's lease is renewed while ``objective`` runs (:meth:`heartbeats`). An exception in ``objective`` is told as a failure (its type and text) and the loop goes
        on, as does an output that is not a finite number. A result the service refuses as bad
        input is told as a failure, then the error is raised (the trial is not left pending).

        Args:
            objective: ``objective(config, task, fidelity)`` returns a mapping of every output, or a number.
            max_trials: stop after this many trials (default: when the session is over).
            output: the output a number stands for (default: the only output, known when this client made the session).
            task: the task to run (default: the engine chooses).
            poll: seconds between asks while the service says WAIT (default 0.5).
        """
        count = 0
        while max_trials is None or count < max_trials:
            trial = self.ask(task, poll=poll)
            if trial is None:
                break
            count += 1
            try:
                with self.heartbeats(trial):
                    result = objective(dict(trial.config), dict(trial.task), trial.fidelity)
            except Exception as exc:  # the objective's failure is the trial's result
                log.info("trial %s failed: %s: %s", trial.trial_id, type(exc).__name__, exc)
                self.tell(trial, failure=f"{type(exc).__name__}: {exc}")
                continue
            try:
                outputs = self._outputs_of(result, output)
            except InvalidInputError as exc:
                self.tell(trial, failure=str(exc))
                raise
            try:
                self.tell(trial, outputs)
            except ServiceError as exc:
                if exc.code == "INVALID_ARGUMENT":
                    self.tell(trial, failure=f"refused result: {exc.message}")
                raise
        return count

    def _outputs_of(self, result: Any, output: str | None) -> dict[str, Any]:
        """The objective's outputs by name (values as returned: :meth:`tell` checks them)."""
        if isinstance(result, Mapping):
            return {str(k): v for k, v in result.items()}
        if isinstance(result, numbers.Real) and not isinstance(result, bool):
            names = self.output_names()
            name = output or (names[0] if len(names) == 1 else None)
            if name is None:
                raise InvalidInputError(
                    "output",
                    "the objective returned a number: name its output with "
                    "run(..., output=NAME) or return a mapping {name: value}",
                )
            return {name: result}
        raise InvalidInputError(
            "objective", f"returned {type(result).__name__}; return a mapping of outputs or a number"
        )

    # -- the shared repository (used by raytuner.client.source and the Ray callback) --------------------------------------------

    def upload_evaluations(self, problem_name: str, records: Sequence[FunctionEvaluation | Mapping[str, Any]]) -> int:
        """Add evaluations made elsewhere to the service's store (idempotent by uid); returns how many it got.

        Args:
            problem_name: the problem's name.
            records: the evaluations, as records or plain data.
        """
        data = [r.to_dict() if isinstance(r, FunctionEvaluation) else dict(r) for r in records]
        answer = self._call(
            "UploadEvaluations", pb.UploadEvaluationsRequest(problem_name=problem_name, records_json=dumps(data))
        )
        return int(answer.received)

    def query_evaluations(
        self, problem_name: str, query: EvaluationQuery | Mapping[str, Any] | None = None
    ) -> list[FunctionEvaluation]:
        """The stored evaluations of ``problem_name`` that match ``query``, oldest first.

        Args:
            problem_name: the problem's name.
            query: an :class:`~raytuner.store.EvaluationQuery` or the same as plain data (default: all).
        """
        data = query.to_json() if isinstance(query, EvaluationQuery) else dict(query or {})
        answer = self._call(
            "QueryEvaluations", pb.QueryEvaluationsRequest(problem_name=problem_name, query_json=dumps(data))
        )
        return [FunctionEvaluation.model_validate(r) for r in json.loads(answer.records_json or "[]")]

    def grant_access(self, problem_name: str, grantee: str, revoke: bool = False) -> list[str]:
        """Let ``grantee`` read and append to ``problem_name``, which this key owns (``revoke``: no longer).

        Returns everyone the problem is granted to now (see :mod:`raytuner.service.access`).

        Args:
            problem_name: the problem's name.
            grantee: a service API key's id (``raytuner keys list``) or ``crowd:<username>``.
            revoke: end the grant instead (default ``False``).
        """
        answer = self._call(
            "GrantAccess", pb.GrantAccessRequest(problem_name=problem_name, grantee=grantee, revoke=revoke)
        )
        return list(answer.grantees)
