"""The gRPC tuning service: remote jobs create sessions, ask for trials and tell results.

:class:`TuningServer` serves ``raytuner.v1.TuningService`` (see
``protos/raytuner/protocol/v1/tuning.proto``) over a history store — a JSON
store directory (the embedded default) or MongoDB — with sessions kept in the
store's ledger and rebuilt on start. Every request is checked and answered;
bad input gets ``INVALID_ARGUMENT`` with a message naming the field, an
unknown session or trial ``NOT_FOUND``, a problem the caller may not
read or append to ``NOT_FOUND`` as if it did not exist (the rules:
:mod:`raytuner.service.access`), a conflicting tell
``FAILED_PRECONDITION``, a missing or wrong API key ``UNAUTHENTICATED``, every
call while the store's lease cannot be renewed ``UNAVAILABLE``
(:mod:`raytuner.service.pause`; clients retry), and an unexpected error
``INTERNAL`` (logged; the server goes on).

Example:
    >>> import tempfile
    >>> server = TuningServer(tempfile.mkdtemp(), port=0)
    >>> port = server.start()
    >>> key = server.keys.create("alice")
    >>> server.address.startswith("127.0.0.1:")
    True
    >>> server.stop()
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc

from raytuner.crowd.cache import is_cache_name
from raytuner.errors import InvalidInputError, validate
from raytuner.models.executors import refuse_unguarded_script
from raytuner.problem.records import FunctionEvaluation, as_number, check_problem_name
from raytuner.protocol import MAX_MESSAGE_BYTES, METADATA_KEY, dumps, json_field
from raytuner.protocol.v1 import tuning_pb2 as pb
from raytuner.protocol.v1 import tuning_pb2_grpc as pb_grpc
from raytuner.service.access import ProblemAccess
from raytuner.service.auth import ApiKeys
from raytuner.service.bounds import SessionLimits
from raytuner.service.handlers import Abort, rpc, status_of
from raytuner.service.limits import PerKeyLimits, default_limits
from raytuner.service.listen import CLEAR_TEXT_WARNING, check_listen, is_loopback
from raytuner.service.pause import StorePause
from raytuner.service.session_crowd import CROWD_OWNER
from raytuner.service.sessions import ServiceSession, SessionManager
from raytuner.store import open_store
from raytuner.store.base import EvaluationQuery, HistoryStore
from raytuner.store.server_lock import LEASE_TTL, ServerLock

__all__ = ["TuningServer"]

log = logging.getLogger(__name__)

#: Largest failure message.
MAX_FAILURE_CHARS = 65536


def _session_message(session: ServiceSession) -> pb.Session:
    with session.lock:
        SessionManager.expire(session)  # its pending count leaves out the trials whose lease has ended
        records = session.tuning.records
        best = session.best()
        pending = len(session.tuning.pending)
    spec = session.spec
    return pb.Session(
        session_id=spec.session_id,
        problem_name=spec.problem_name,
        engine=spec.engine,
        tasks_json=dumps(spec.tasks),
        evaluations=len(records),
        failed=sum(r.status != "ok" for r in records),
        pending=pending,
        finished=session.finished,
        best=[
            pb.BestConfiguration(
                task_json=dumps(task), config_json=dumps(r.tuning_parameter), outputs=_outputs(r), uid=r.uid
            )
            for task, r in best
        ],
        created=spec.created,
        options_json=dumps(spec.options),
        max_evaluations=spec.max_evaluations,
        outputs=session.tuning.problem.objectives,
        goals=[o.goal if o.optimize else "" for o in session.tuning.problem.output_space],
        lease_seconds=spec.lease_seconds,
    )


def _outputs(record: FunctionEvaluation) -> dict[str, float]:
    return {k: n for k, v in record.evaluation_result.items() if (n := as_number(v)) is not None}


class _Servicer(pb_grpc.TuningServiceServicer):
    def __init__(self, manager: SessionManager, keys: ApiKeys | None) -> None:
        self.manager = manager
        self.keys = keys
        # who reads and appends to which problem (raytuner.service.access); none without authentication
        self.access = ProblemAccess(manager.ledger, manager.store) if keys is not None else None

    def _readable(self, owner: str, problem: str, field: str = "problem_name") -> str:
        if self.access is None:
            return check_problem_name(problem, field=field)
        return self.access.check_read(owner, problem, field)

    def _owner(self, context: grpc.ServicerContext, method: str) -> str:
        """Who calls ``method``: a service key's id, or ``crowd:<username>`` for a crowd user's key or signature."""
        if self.keys is None:
            return ""
        key = dict(context.invocation_metadata()).get(METADATA_KEY)
        info = self.keys.verify(key if isinstance(key, str) else None)
        if info is not None:
            return info.key_id
        user = self.manager.crowd_user_of(key, method) if isinstance(key, str) else None
        if user is None:
            why = (
                "missing API key"
                if key is None
                else (
                    "invalid or revoked API key, or a signed credential used "
                    "twice or out of its minute (check the clock)"
                )
            )
            raise Abort(grpc.StatusCode.UNAUTHENTICATED, f"{METADATA_KEY}: {why}")
        return CROWD_OWNER + user

    @rpc
    def CreateSession(self, request: pb.CreateSessionRequest, context: grpc.ServicerContext) -> pb.Session:
        owner = self._owner(context, "create_session")
        meta = json_field("problem_json", request.problem_json, dict, None) or {}
        options = json_field("options_json", request.options_json, dict, {})
        problem, source = meta.get("tuning_problem_name"), options.get("source_problem")
        if self.access is not None and isinstance(problem, str):  # the session replays (load_func_eval) and appends
            self.access.check_append(owner, problem, owner=True, field="problem_json.tuning_problem_name")
        if (
            self.access is not None
            and isinstance(source, str)
            and source != problem
            and not is_cache_name(source)
            and options.get("crowd_sources") is not True
        ):  # with crowd sources the manager refuses it
            self.access.check_read(owner, source, field="options.source_problem")
        access = self.access
        session = self.manager.create(
            owner,
            meta,
            request.engine,
            options=options,
            tasks=json_field("tasks_json", request.tasks_json, list, None),
            seed=request.seed,
            max_evaluations=request.max_evaluations,
            lease_seconds=request.lease_seconds if request.HasField("lease_seconds") else None,
            # checked again, and a free problem claimed, at once before the session is stored: another key
            # that claimed it meanwhile (an upload, a session) keeps it
            claim=None
            if access is None
            else lambda name: access.check_append(
                owner, name, owner=True, claim=True, field="problem_json.tuning_problem_name"
            ),
        )
        if self.access is not None:
            self.access.note_owner(owner, session.spec.problem_name)
        return _session_message(session)

    @rpc
    def Ask(self, request: pb.AskRequest, context: grpc.ServicerContext) -> pb.AskResponse:
        owner = self._owner(context, "ask")
        status, trial = self.manager.ask(
            owner, request.session_id, json_field("task_json", request.task_json, dict, None), request.trial_id or None
        )
        if trial is None:
            return pb.AskResponse(status=status)
        fidelity = trial.provenance.fidelity
        return pb.AskResponse(
            status="TRIAL",
            trial_id=trial.trial_id,
            task_json=dumps(trial.task),
            config_json=dumps(trial.config),
            fidelity=float(fidelity or 0.0),
            lease_seconds=self.manager.get(owner, request.session_id).spec.lease_seconds,
        )

    @rpc
    def Tell(self, request: pb.TellRequest, context: grpc.ServicerContext) -> pb.TellResponse:
        owner = self._owner(context, "tell")
        if len(request.failure) > MAX_FAILURE_CHARS:
            raise InvalidInputError("failure", f"{len(request.failure)} characters; at most {MAX_FAILURE_CHARS}")
        record, duplicate = self.manager.tell(
            owner,
            request.session_id,
            request.trial_id,
            dict(request.outputs),
            failure=request.failure or None,
            machine=json_field("machine_json", request.machine_json, dict, None),
            software=json_field("software_json", request.software_json, dict, None),
            additional_output=json_field("additional_output_json", request.additional_output_json, dict, None),
        )
        return pb.TellResponse(uid=record.uid, duplicate=duplicate, failed=record.status != "ok")

    @rpc
    def Heartbeat(self, request: pb.HeartbeatRequest, context: grpc.ServicerContext) -> pb.HeartbeatResponse:
        lease = self.manager.heartbeat(self._owner(context, "heartbeat"), request.session_id, request.trial_id)
        return pb.HeartbeatResponse(status=lease.status, lease_ends=lease.ends, lease_seconds=lease.seconds)

    @rpc
    def GetSession(self, request: pb.GetSessionRequest, context: grpc.ServicerContext) -> pb.Session:
        return _session_message(self.manager.get(self._owner(context, "get_session"), request.session_id))

    @rpc
    def ListSessions(self, request: pb.ListSessionsRequest, context: grpc.ServicerContext) -> pb.ListSessionsResponse:
        sessions = self.manager.list(self._owner(context, "list_sessions"), request.problem_name or None)
        return pb.ListSessionsResponse(sessions=[_session_message(s) for s in sessions])

    @rpc
    def UploadEvaluations(
        self, request: pb.UploadEvaluationsRequest, context: grpc.ServicerContext
    ) -> pb.UploadEvaluationsResponse:
        owner = self._owner(context, "upload_evaluations")
        problem = check_problem_name(request.problem_name, field="problem_name")
        raw = json_field("records_json", request.records_json, list, [])
        records = [validate(FunctionEvaluation, r, f"records_json[{i}]") for i, r in enumerate(raw)]
        records = [self._uploaded(owner, i, record) for i, record in enumerate(records)]
        if self.access is not None:  # the records were checked: now claim a new problem, then append
            self.access.check_append(owner, problem, claim=True)
        return pb.UploadEvaluationsResponse(received=self.manager.store.append_many(problem, records))

    def _uploaded(self, owner: str, index: int, record: FunctionEvaluation) -> FunctionEvaluation:
        """``record`` as an upload stores it: a service session replays as its own only what it told itself.

        A record naming one of the caller's sessions is refused (tell its trials instead); one naming any
        other session id, another key's or none of this service's, is kept alike, its id moved to
        ``raytuner.origin_session_id``: the answer says nothing of other keys' sessions, and no upload
        becomes a session's own evaluation.
        """
        provenance = record.raytuner
        if provenance is None or provenance.session_id is None:
            return record
        if self.manager.owns(owner, provenance.session_id):
            raise InvalidInputError(
                f"records_json[{index}].raytuner.session_id", "names a session of yours; tell its trials instead"
            )
        moved = provenance.model_copy(update={"session_id": None, "origin_session_id": provenance.session_id})
        return record.model_copy(update={"raytuner": moved})

    @rpc
    def QueryEvaluations(
        self, request: pb.QueryEvaluationsRequest, context: grpc.ServicerContext
    ) -> pb.QueryEvaluationsResponse:
        owner = self._owner(context, "query_evaluations")
        query = EvaluationQuery.parse(json_field("query_json", request.query_json, dict, {}))  # says nothing of
        problem = self._readable(owner, request.problem_name)  # the problem
        records = self.manager.store.evaluations(problem, query)
        return pb.QueryEvaluationsResponse(records_json=dumps([r.to_dict() for r in records]))

    @rpc
    def GrantAccess(self, request: pb.GrantAccessRequest, context: grpc.ServicerContext) -> pb.GrantAccessResponse:
        owner = self._owner(context, "grant_access")
        if self.access is None:
            raise InvalidInputError(
                "grantee",
                "this server runs without authentication: every caller reads and writes every problem already",
            )
        return pb.GrantAccessResponse(
            grantees=self.access.grant(owner, request.problem_name, request.grantee, revoke=request.revoke)
        )

    def WatchSession(self, request: pb.WatchSessionRequest, context: grpc.ServicerContext) -> Iterator[pb.SessionEvent]:
        try:
            owner = self._owner(context, "watch_session")
            events = self.manager.watch(owner, request.session_id, request.from_start, active=context.is_active)
            for item in events:
                yield pb.SessionEvent(
                    kind=item["kind"],
                    trial_id=item.get("trial_id", ""),
                    task_json=dumps(item.get("task", {})),
                    config_json=dumps(item.get("config", {})),
                    outputs=item.get("outputs") or {},
                    failure=item.get("failure") or "",
                    time=item["time"],
                    sequence=item["sequence"],
                )
        except Exception as exc:  # every error becomes a status
            code, message = status_of(exc)
            context.abort(code, message)


class TuningServer:
    """A gRPC server of the tuning service over one history store and its ledger.

    Args:
        store: A :class:`HistoryStore` or its location (a directory or a ``mongodb://`` URI).
        host: The address to listen on.
        port: The port (0: a free one, see :meth:`start`).
        auth: Whether requests need an API key (``False``: one owner; for a laptop).
        tls_cert: The PEM certificate file (with ``tls_key``: TLS).
        tls_key: The PEM key file.
        ray_address: A Ray cluster's address: model fits run as Ray tasks there.
        max_workers: Threads that answer requests.
        max_calls_per_key: Unary calls one API key may have answered at once (``None``: half of
            ``max_workers``; 0: no limit); more get ``RESOURCE_EXHAUSTED`` (:mod:`raytuner.service.limits`).
        max_streams_per_key: ``WatchSession`` streams one API key may have open at once (``None``: a
            quarter of ``max_workers``, as a stream holds its thread while watched; 0: no limit). With both
            defaults one key leaves a quarter of the threads to the others.
        crowd: A :class:`~raytuner.crowd.CrowdRepository` or its ``mongodb://`` URI: adds the
            crowd repository's service (``raytuner.v1.CrowdService``, keys of its own users).
        limits: What a session may ask for (fit starts, samples, candidates, ...) and the model-fit time
            of one Ask (default: :class:`~raytuner.service.bounds.SessionLimits`' defaults).
        server_lease_ttl: On a MongoDB store, seconds the server's lease on the store lasts after a renewal
            (default :data:`~raytuner.store.server_lock.LEASE_TTL`): a server killed elsewhere blocks a
            restart this long, and a database unreachable for about this long pauses the server
            (:mod:`raytuner.store.server_lock`).
    """

    def __init__(
        self,
        store: HistoryStore | str | os.PathLike[str],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        auth: bool = True,
        tls_cert: str | os.PathLike[str] | None = None,
        tls_key: str | os.PathLike[str] | None = None,
        ray_address: str | None = None,
        max_workers: int = 64,
        crowd: Any = None,
        max_calls_per_key: int | None = None,
        max_streams_per_key: int | None = None,
        limits: SessionLimits | None = None,
        server_lease_ttl: float = LEASE_TTL,
    ) -> None:
        # a model-fit worker re-running a script that serves at its top level (no main guard) stops here, before
        # it opens the store: it would be a second server on it, and its sessions' asks would fail and be retried
        refuse_unguarded_script()
        if (tls_cert is None) != (tls_key is None):
            raise InvalidInputError(
                "tls_key" if tls_key is None else "tls_cert", "TLS needs both a certificate and its key"
            )
        if isinstance(server_lease_ttl, bool) or not isinstance(server_lease_ttl, int | float) or server_lease_ttl <= 0:
            raise InvalidInputError("server_lease_ttl", f"{server_lease_ttl!r} is not a positive number of seconds")
        self.server_lease_ttl = float(server_lease_ttl)
        self.store = open_store(store)
        self.ledger = self.store.ledger()
        self.keys = ApiKeys(self.ledger)
        self.host, self.port = host, port
        self.tls = (tls_cert, tls_key) if tls_cert is not None else None
        self.auth = auth
        self.max_workers = max_workers
        calls, streams = default_limits(max_workers)
        self.limits = PerKeyLimits(
            calls if max_calls_per_key is None else max_calls_per_key,
            streams if max_streams_per_key is None else max_streams_per_key,
            pool=max_workers,
        )
        self.crowd = self._crowd(crowd)
        self.manager = SessionManager(
            self.store, self.ledger, executor=self._executor(ray_address), crowd=self.crowd, limits=limits
        )
        self._owns_crowd = isinstance(crowd, str)
        self._server: grpc.Server | None = None
        self._lock: ServerLock | None = None
        #: Why the server stopped by itself (its store's lease was taken by another server), else ``None``.
        self.lost: str | None = None

    @staticmethod
    def _crowd(crowd: Any) -> Any:
        if crowd is None or not isinstance(crowd, str):
            return crowd
        from pymongo.uri_parser import parse_uri

        from raytuner.crowd import CrowdRepository  # the crowd only when asked for

        try:
            database = parse_uri(crowd)["database"]
        except Exception as exc:  # pymongo raises several kinds for a bad URI
            raise InvalidInputError("crowd", f"not a MongoDB URI: {exc}") from None
        return CrowdRepository(crowd, **({"database": database} if database else {}))

    @staticmethod
    def _executor(ray_address: str | None) -> Any:
        from raytuner.models.executors import RayExecutor, default_executor

        if ray_address is None:
            # the process pool (or this process's Ray), for small fits too: concurrent sessions' fits then run
            # side by side, where inline fits in the server's threads took turns (bench service, MLA, 8
            # clients: 39 tells/s on the pool, 22 inline)
            return default_executor()
        import ray  # Ray only when a cluster is named

        ray.init(address=ray_address, ignore_reinit_error=True, include_dashboard=False)
        return RayExecutor()

    @property
    def address(self) -> str:
        """``host:port`` the server listens on."""
        return f"{self.host}:{self.port}"

    def start(self) -> int:
        """Bind and start serving at once; returns the port.

        The sessions of an earlier run are known from the start and rebuilt in a background thread
        (:mod:`raytuner.service.rebuild`); a call to one not rebuilt yet waits for its rebuild.

        Raises:
            StoreInUse: another server serves the store (:mod:`raytuner.store.server_lock`).
        """
        lock = self.store.server_lock(on_lost=self._lease_lost, ttl=self.server_lease_ttl)
        if lock is not None:
            lock.acquire()
        self._lock = lock
        try:
            return self._start()
        except BaseException:
            self._release()
            raise

    def _lease_lost(self, message: str) -> None:
        """Stop serving: another server took the store (this one's lease ran out)."""
        self.lost = message
        if self._server is not None:
            self._server.stop(0)

    @property
    def paused(self) -> bool:
        """Whether the server refuses the tuning service's calls (``UNAVAILABLE``, clients retry) because its
        store's lease could not be renewed in time (:mod:`raytuner.service.pause`); it serves again by itself."""
        return self._lock is not None and self._lock.paused

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def _start(self) -> int:
        check_listen(self.host, self.port)  # a port in use: one line naming it, before anything starts
        self.manager.load(background=True)
        warm = getattr(self.manager.executor, "warm", None)
        if callable(warm):  # a first Ask's fit must not wait for worker processes to start
            warm()
        options: list[tuple[str, Any]] = [
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 0),
        ]
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=self.max_workers, thread_name_prefix="raytuner-rpc"),
            options=options,
            # a call refused while the lease is paused is not counted per key
            interceptors=[
                StorePause(lambda: self.paused, [pb.DESCRIPTOR.services_by_name["TuningService"].full_name]),
                self.limits,
            ],
        )
        pb_grpc.add_TuningServiceServicer_to_server(_Servicer(self.manager, self.keys if self.auth else None), server)
        if self.crowd is not None:
            from raytuner.service.crowd import CrowdServicer  # SALib and GPy only for the crowd

            pb_grpc.add_CrowdServiceServicer_to_server(
                CrowdServicer(self.crowd, self.manager.executor, self.manager.limits.fit_seconds), server
            )
        target = f"{self.host}:{self.port}"
        try:
            if self.tls is not None:
                credentials = grpc.ssl_server_credentials([(_read(self.tls[1]), _read(self.tls[0]))])
                self.port = server.add_secure_port(target, credentials)
            else:
                self.port = server.add_insecure_port(target)
        except RuntimeError:  # taken since check_listen: gRPC says "Failed to bind"
            self.port = 0
        if not self.port:
            raise InvalidInputError("port", f"cannot listen on {target} (in use, or not an address of this machine)")
        if self.tls is None and not is_loopback(self.host):
            log.warning(CLEAR_TEXT_WARNING.format(address=self.address))
        server.start()
        self._server = server
        log.info(
            "tuning service on %s (%s, auth %s, TLS %s, crowd repository %s)",
            self.address,
            self.store,
            "on" if self.auth else "off",
            "on" if self.tls else "off",
            self.crowd or "off",
        )
        return self.port

    def stop(self, grace: float | None = 1.0) -> None:
        """Stop serving (requests in flight get ``grace`` seconds) and close the ledger.

        Args:
            grace: Seconds the requests in flight get (``None``: as long as they take).
        """
        if self._server is not None:
            self._server.stop(grace).wait()
            self._server = None
        self.manager.close()
        self.ledger.close()
        running = self.limits.when_idle(self._release)  # after the last write: the next server may start
        if running:
            log.warning(
                "%d request(s) still running after the stop: the store stays held until they end "
                "(or this process exits)",
                running,
            )
        if self._owns_crowd:
            self.crowd.close()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the server stops (or ``timeout`` passes); True when it stopped.

        Args:
            timeout: Seconds to wait at most (``None``: no limit).
        """
        # grpc's wait_for_termination returns whether it timed out
        return not self._server.wait_for_termination(timeout) if self._server is not None else True

    def __enter__(self) -> TuningServer:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _read(path: str | os.PathLike[str] | None) -> bytes:
    with open(path, "rb") as fh:  # type: ignore[arg-type]  # __init__ takes both TLS files or neither
        return fh.read()
