"""The Python client of the crowd repository, mirroring GPTune's crowdtune query API over gRPC.

:class:`CrowdClient` talks to the ``CrowdService`` of a ``raytuner serve
--crowd URI`` server with a crowd user's API key. Queries take the meta
description's ``problem_space`` and ``configuration_space`` (GPTuneCrowd
section IV-A) and return only what the key's user may see.

The module-level functions have crowdtune's signatures (the key first); the
server comes from ``server=`` or the ``RAYTUNER_SERVER`` environment
variable (default ``127.0.0.1:50051``). :func:`sync_store_for` makes a
tuning run upload its records to the repository when its meta description
says ``sync_crowd_repo`` (see :mod:`raytuner.crowd.sync`).

Example (needs a running server)::

    from raytuner.client.crowd import CrowdClient

    with CrowdClient("repo.example.org:50051", api_key) as crowd:
        crowd.upload("pdgeqrf", records, access="registered")
        records = crowd.query_function_evaluations("pdgeqrf", problem_space={
            "input_space": [{"name": "m", "type": "integer", "lower_bound": 1000, "upper_bound": 8000}]},
            configuration_space={"machine_configurations": [{"Cori": {"haswell": {"nodes": 8}}}]})
        model = crowd.query_surrogate_model("pdgeqrf", problem_space=meta["problem_space"])
        mean, variance = model.predict([{"mb": 4, "nb": 8}], task={"m": 4000, "n": 4000})
        indices = crowd.query_sensitivity_analysis("pdgeqrf", problem_space=meta["problem_space"],
                                                   task={"m": 4000, "n": 4000}, num_samples=512)
"""

from __future__ import annotations

import inspect
import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar, Unpack, cast

from pydantic import TypeAdapter

from raytuner.analysis.sensitivity import SensitivityResult
from raytuner.analysis.surrogate import surrogate_from_records
from raytuner.client.channel import Connection, ServiceChannel, check_connection
from raytuner.crowd.sync import DEFAULT_SYNC_ACCESS, SYNC_ACCESS, CrowdSyncStore
from raytuner.errors import InvalidInputError
from raytuner.problem.meta import MetaDescription
from raytuner.problem.records import EVALUATION_LIST, MODEL_LIST, FunctionEvaluation, SurrogateModelRecord
from raytuner.problem.space import ProblemSpace
from raytuner.protocol import MAX_JSON_BYTES, dumps
from raytuner.protocol.v1 import tuning_pb2 as pb
from raytuner.protocol.v1 import tuning_pb2_grpc as pb_grpc
from raytuner.signing import Signer
from raytuner.store import HistoryStore, open_store

__all__ = [
    "CrowdClient",
    "connect",
    "sync_store_for",
    "query_function_evaluations",
    "query_surrogate_model",
    "query_predict_output",
    "query_sensitivity_analysis",
    "UPLOAD_BATCH_BYTES",
]

log = logging.getLogger(__name__)

#: An upload is split into requests of at most this much JSON (the server takes up to 1 MiB per field).
UPLOAD_BATCH_BYTES = MAX_JSON_BYTES - 64 * 1024
ENV_SERVER = "RAYTUNER_SERVER"
DEFAULT_SERVER = "127.0.0.1:50051"

Record = FunctionEvaluation | SurrogateModelRecord | Mapping[str, Any]
P = ParamSpec("P")
R = TypeVar("R")


def _query(
    name: str, problem_space: Mapping[str, Any] | None, configuration_space: Mapping[str, Any] | None, limit: int = 0
) -> pb.CrowdQuery:
    return pb.CrowdQuery(
        tuning_problem_name=name,
        problem_space_json=dumps(dict(problem_space or {})),
        configuration_space_json=dumps(dict(configuration_space or {})),
        limit=limit,
    )


def _model_query(
    tuning_problem_name: str,
    problem_space: Mapping[str, Any],
    configuration_space: Mapping[str, Any] | None,
    objective: str | None,
    task: Mapping[str, Any] | None,
    modeler: str,
) -> dict[str, Any]:
    """The fields of a request for a model the server fits to queried records (a prediction, an analysis)."""
    return {
        "query": _query(tuning_problem_name, problem_space, configuration_space),
        "objective": objective or "",
        "task_json": dumps(dict(task or {})),
        "modeler": modeler,
    }


def _batches(records: Sequence[Record]) -> list[str]:
    """The records as JSON lists of at most :data:`UPLOAD_BATCH_BYTES` each (every record dumped once)."""
    out: list[list[str]] = [[]]
    size = 0
    for record in records:
        text = dumps(record.to_dict() if hasattr(record, "to_dict") else dict(record))
        if out[-1] and size + len(text) + 1 > UPLOAD_BATCH_BYTES:
            out.append([])
            size = 0
        out[-1].append(text)
        size += len(text) + 1
    return ["[" + ",".join(batch) + "]" for batch in out if batch]


#: The repository action each call is signed for (:mod:`raytuner.signing`); an upload by its kind.
SIGNED_METHODS = {
    "QueryFunctionEvaluations": "query_function_evaluations",
    "QueryPredictOutput": "query_function_evaluations",
    "QuerySensitivityAnalysis": "query_function_evaluations",
    "QuerySurrogateModels": "query_surrogate_models",
    "UploadRecords": "upload",
}


class CrowdClient(ServiceChannel):
    """A crowd repository's client; the connection arguments are :class:`ServiceChannel`'s.

    Args:
        address: ``host:port`` of the server.
        api_key: the crowd user's API key (``raytuner crowd keys create``), or a
            :class:`~raytuner.signing.Signer` of their private key, which signs each call
            afresh (its public key registered with ``raytuner crowd keys register``).
        **connection: how the server is reached (:class:`~raytuner.client.channel.Connection`: TLS,
            ``timeout``, ``retries``, ``backoff``, ...).

    Example (needs a running server)::

        signer = Signer.from_file("~/.raytuner/crowd.pem")
        with CrowdClient("repo.example.org:50051", signer) as crowd:
            records = crowd.query_function_evaluations("pdgeqrf")
    """

    def __init__(self, address: str, api_key: str | Signer, **connection: Unpack[Connection]) -> None:
        connection = check_connection(connection)
        if not api_key:
            raise InvalidInputError(
                "api_key", "the crowd repository needs a user's API key (`raytuner crowd keys create`) or private key"
            )
        super().__init__(address, api_key, pb_grpc.CrowdServiceStub, **connection)

    def _signed_method(self, name: str, request: Any) -> str:
        """The repository action a call is signed for (:data:`SIGNED_METHODS`; an upload by its kind)."""
        if name == "UploadRecords" and request.kind == "surrogate_model":
            return "upload_surrogate_models"
        return SIGNED_METHODS[name]  # a call not listed there is a bug here, not a bad input

    def __repr__(self) -> str:
        return f"CrowdClient({self.address!r})"

    def upload(
        self,
        tuning_problem_name: str,
        records: Sequence[Record],
        *,
        kind: str = "function_evaluation",
        access: str = "public",
        shared_with_users: Sequence[str] = (),
        shared_with_groups: Sequence[str] = (),
    ) -> tuple[int, int]:
        """Upload records (idempotent by uid); returns (stored now, already there).

        ``access`` is ``public``, ``registered``, ``private`` or ``shared``
        (with ``shared_with_users`` and/or ``shared_with_groups``).

        Args:
            tuning_problem_name: the problem's name.
            records: function evaluations or surrogate-model records.
            kind: ``"function_evaluation"`` (default) or ``"surrogate_model"``.
            access: ``public`` (default), ``registered``, ``private`` or ``shared``.
            shared_with_users: usernames that may see ``shared`` records.
            shared_with_groups: groups that may see ``shared`` records.
        """
        added = duplicates = 0
        for batch in _batches(records):
            answer = self._call(
                "UploadRecords",
                pb.CrowdUploadRequest(
                    tuning_problem_name=tuning_problem_name,
                    records_json=batch,
                    kind=kind,
                    access=access,
                    shared_with_users=list(shared_with_users),
                    shared_with_groups=list(shared_with_groups),
                ),
            )
            added += answer.added
            duplicates += answer.duplicates
        log.info(
            "uploaded %d records of %s to %s (%d already there)", added, tuning_problem_name, self.address, duplicates
        )
        return added, duplicates

    def _records(
        self,
        method: str,
        adapter: TypeAdapter[Any],
        name: str,
        problem_space: Mapping[str, Any] | None,
        configuration_space: Mapping[str, Any] | None,
        limit: int,
    ) -> list[Any]:
        answers = self._call(method, _query(name, problem_space, configuration_space, limit))
        return [r for answer in answers for r in adapter.validate_json(answer.records_json or "[]")]

    def query_function_evaluations(
        self,
        tuning_problem_name: str,
        problem_space: Mapping[str, Any] | None = None,
        configuration_space: Mapping[str, Any] | None = None,
        limit: int = 0,
    ) -> list[FunctionEvaluation]:
        """The function evaluations you may see that match the meta description's spaces.

        Args:
            tuning_problem_name: the problem's name.
            problem_space: task and tuning-parameter ranges and categories, in the meta description's shape
                (``None``: any).
            configuration_space: machines, software versions and users, in the meta description's shape
                (``None``: any).
            limit: the most records returned (0: all).
        """
        return self._records(
            "QueryFunctionEvaluations", EVALUATION_LIST, tuning_problem_name, problem_space, configuration_space, limit
        )

    def query_surrogate_models(
        self,
        tuning_problem_name: str,
        problem_space: Mapping[str, Any] | None = None,
        configuration_space: Mapping[str, Any] | None = None,
        limit: int = 0,
    ) -> list[SurrogateModelRecord]:
        """The stored surrogate-model records you may see that match the spaces.

        Args:
            tuning_problem_name: the problem's name.
            problem_space: as for :meth:`query_function_evaluations`.
            configuration_space: as for :meth:`query_function_evaluations`.
            limit: the most records returned (0: all).
        """
        return self._records(
            "QuerySurrogateModels", MODEL_LIST, tuning_problem_name, problem_space, configuration_space, limit
        )

    def query_surrogate_model(
        self,
        tuning_problem_name: str,
        problem_space: Mapping[str, Any],
        configuration_space: Mapping[str, Any] | None = None,
        objective: str | None = None,
        task: Mapping[str, Any] | None = None,
        modeler: str = "LCM",
    ) -> Any:
        """A surrogate (``predict(points, task=...) -> (mean, variance)``) fitted here to the queried evaluations.

        Args:
            tuning_problem_name: the problem's name.
            problem_space: task and tuning-parameter ranges and categories, in the meta description's shape;
                its parameter space is the model's.
            configuration_space: machines, software versions and users, in the meta description's shape
                (``None``: any).
            objective: the modelled output (default: the first).
            task: the task predictions are for by default (required when the records span several tasks).
            modeler: ``"LCM"`` (default: one model over every queried task) or ``"GP"`` (``task``'s records alone).
        """
        records = self.query_function_evaluations(tuning_problem_name, problem_space, configuration_space)
        return surrogate_from_records(
            ProblemSpace.parse(dict(problem_space)), records, objective=objective, task=task, modeler=modeler
        )

    def query_predict_output(
        self,
        tuning_problem_name: str,
        problem_space: Mapping[str, Any],
        parameters: Sequence[Mapping[str, Any]],
        task: Mapping[str, Any] | None = None,
        configuration_space: Mapping[str, Any] | None = None,
        objective: str | None = None,
        modeler: str = "LCM",
    ) -> list[dict[str, float]]:
        """Predicted ``{"mean", "variance"}`` of the output at each of ``parameters``, computed on the server.

        Args:
            tuning_problem_name: the problem's name.
            problem_space: the model's spaces, as for :meth:`query_surrogate_model`.
            parameters: the configurations to predict at.
            task: the task to predict for (required when the records span several tasks).
            configuration_space: as for :meth:`query_function_evaluations` (``None``: any).
            objective: the predicted output (default: the first).
            modeler: ``"LCM"`` (default) or ``"GP"``, as for :meth:`query_surrogate_model`.
        """
        answer = self._call(
            "QueryPredictOutput",
            pb.CrowdPredictRequest(
                **_model_query(tuning_problem_name, problem_space, configuration_space, objective, task, modeler),
                parameters_json=dumps([dict(p) for p in parameters]),
            ),
        )
        predictions: list[dict[str, float]] = json.loads(answer.predictions_json)
        return predictions

    def query_sensitivity_analysis(
        self,
        tuning_problem_name: str,
        problem_space: Mapping[str, Any],
        task: Mapping[str, Any] | None = None,
        configuration_space: Mapping[str, Any] | None = None,
        *,
        method: str = "sobol",
        num_samples: int = 0,
        second_order: bool = False,
        objective: str | None = None,
        seed: int = 0,
        modeler: str = "LCM",
    ) -> SensitivityResult:
        """Sobol indices (S1, S1_conf, ST, ST_conf, and S2 on request) per parameter, computed on the server.

        Args:
            tuning_problem_name: the problem's name.
            problem_space: the model's spaces, as for :meth:`query_surrogate_model`.
            task: the task to analyse (required when the records span several tasks).
            configuration_space: as for :meth:`query_function_evaluations` (``None``: any).
            method: the analysis: ``"sobol"`` (the only one).
            num_samples: SALib's base sample size, a power of two (0: the server's default).
            second_order: also compute S2 (default False).
            objective: the output to analyse (default: the first).
            seed: seeds the sample and the bootstrap (default 0).
            modeler: ``"LCM"`` (default) or ``"GP"``, as for :meth:`query_surrogate_model`.
        """
        answer = self._call(
            "QuerySensitivityAnalysis",
            pb.CrowdSensitivityRequest(
                **_model_query(tuning_problem_name, problem_space, configuration_space, objective, task, modeler),
                method=method,
                num_samples=num_samples,
                second_order=second_order,
                seed=seed,
            ),
        )
        return SensitivityResult.from_dict(json.loads(answer.result_json))


def sync_store_for(
    meta: MetaDescription,
    store: HistoryStore | str | os.PathLike[str],
    *,
    server: str | None = None,
    access: str = DEFAULT_SYNC_ACCESS,
    credential: str | Signer | None = None,
    **connection: Unpack[Connection],
) -> HistoryStore:
    """``store`` (opened when a location), synced to the crowd repository when ``meta`` says ``sync_crowd_repo``.

        Evaluations and surrogate-model records are both synced.

        The crowd server is ``server``, else the ``RAYTUNER_SERVER``
        environment variable, else ``127.0.0.1:50051``; the key is the meta
        description's ``api_key`` unless ``credential`` is given. ``access`` is the uploaded records' access
        level (``public``, ``registered``, ``private``; by default ``private``: the run's data is its user's
    until they choose to share it wider); ``connection`` goes to
        :class:`CrowdClient`.

        Args:
            meta: the meta description (``sync_crowd_repo``, ``api_key``).
            store: a history store or its location (a directory or a ``mongodb://`` URI).
            server: ``host:port`` of the crowd server (default ``$RAYTUNER_SERVER``, else ``127.0.0.1:50051``).
            access: the uploaded records' access level: ``public``, ``registered`` or ``private`` (default).
            credential: the crowd user's API key or :class:`~raytuner.signing.Signer` (default ``None``:
                the meta description's ``api_key``).
            **connection: :class:`CrowdClient`'s connection arguments.

        >>> from raytuner.test_problems import DEMO_PROBLEM
        >>> meta = MetaDescription.parse({"tuning_problem_name": "demo", "problem_space": DEMO_PROBLEM})
        >>> import tempfile; type(sync_store_for(meta, tempfile.mkdtemp())).__name__     # sync_crowd_repo is off
        'JsonStore'
    """
    if access not in SYNC_ACCESS:
        raise InvalidInputError(
            "access", f"{access!r} is not an access level for synced records", allowed=list(SYNC_ACCESS)
        )
    opened = open_store(store)
    if not meta.sync_crowd_repo:
        return opened
    if credential is None and meta.api_key is None:
        raise InvalidInputError(
            "api_key",
            "sync_crowd_repo is yes, so the meta description needs the crowd "
            "user's API key (`raytuner crowd keys create`), or pass credential=",
        )
    client = connect(credential or meta.api_key.get_secret_value(), server, **connection)  # type: ignore[union-attr]  # api_key checked above
    return CrowdSyncStore(
        opened,
        lambda problem, records: client.upload(problem, records, access=access),
        upload_models=lambda problem, records: client.upload(problem, records, kind="surrogate_model", access=access),
    )


def connect(api_key: str | Signer, server: str | None = None, **connection: Any) -> CrowdClient:
    """A client of the crowd server at ``server``, else ``$RAYTUNER_SERVER``, else ``127.0.0.1:50051``.

    Args:
        api_key: the crowd user's API key, or a :class:`~raytuner.signing.Signer` of their private key.
        server: ``host:port`` of the crowd server (default ``None``: the environment's, or the local default).
        **connection: :class:`CrowdClient`'s connection arguments.
    """
    return CrowdClient(server or os.environ.get(ENV_SERVER) or DEFAULT_SERVER, api_key, **connection)


def _crowdtune(method: Callable[Concatenate[CrowdClient, P], R]) -> Callable[Concatenate[str | Signer, P], R]:
    """crowdtune's module function for a :class:`CrowdClient` query: the method, the crowd user's key first.

    The function connects (:func:`connect`: ``server=``, else ``$RAYTUNER_SERVER``, else
    ``127.0.0.1:50051``), calls the method with the other arguments and closes the connection.
    Its signature and ``Args:`` are the method's, with ``api_key`` first and the keyword
    ``server`` last. A type checker sees the method's parameters after ``api_key``; ``server=``
    is the one it is not told of (a ``ParamSpec`` takes no added keyword).

    Args:
        method: the :class:`CrowdClient` method, its ``Args:`` the last section of its docstring.
    """

    def crowdtune(api_key: str | Signer, *args: P.args, **kwargs: P.kwargs) -> R:
        server = kwargs.pop("server", None)
        with connect(api_key, cast("str | None", server)) as crowd:
            return method(crowd, *args, **kwargs)

    signature = inspect.signature(method)
    parameters = list(signature.parameters.values())[1:]  # less self
    crowdtune.__signature__ = signature.replace(  # type: ignore[attr-defined]  # what help() and inspect show
        parameters=[
            inspect.Parameter("api_key", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation="str | Signer"),
            *parameters,
            inspect.Parameter("server", inspect.Parameter.KEYWORD_ONLY, default=None, annotation="str | None"),
        ]
    )
    summary, arguments = inspect.cleandoc(method.__doc__ or "").split("\nArgs:\n", 1)
    crowdtune.__doc__ = (
        f"crowdtune's ``{method.__name__}``: :meth:`CrowdClient.{method.__name__}` with the key first.\n\n"
        f"{summary.strip()}\n\nArgs:\n{_API_KEY}\n{arguments.rstrip()}\n{_SERVER}\n"
    )
    crowdtune.__name__ = crowdtune.__qualname__ = method.__name__
    return crowdtune


_API_KEY = "    api_key: the crowd user's API key, or a :class:`~raytuner.signing.Signer` of their private key."
_SERVER = "    server: ``host:port`` of the crowd server (default ``$RAYTUNER_SERVER``, else ``127.0.0.1:50051``)."

query_function_evaluations = _crowdtune(CrowdClient.query_function_evaluations)
query_surrogate_model = _crowdtune(CrowdClient.query_surrogate_model)
query_predict_output = _crowdtune(CrowdClient.query_predict_output)
query_sensitivity_analysis = _crowdtune(CrowdClient.query_sensitivity_analysis)
