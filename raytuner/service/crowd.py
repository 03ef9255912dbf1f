"""The crowd repository served over gRPC (``CrowdService`` of ``raytuner.v1``).

A :class:`~raytuner.crowd.CrowdRepository` on MongoDB answers; this module
turns requests into its calls and its errors into status codes (through the
tuning server's mapping). The caller's crowd API key (metadata
``x-api-key``) decides which records a query may return. Surrogate
predictions and Sobol analyses are computed here, on the server, from the
evaluations the caller may see, so the records need not travel.

``raytuner serve --crowd URI`` serves it beside the tuning service.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import grpc

from raytuner.analysis.sensitivity import check_num_samples, sobol_analysis
from raytuner.analysis.surrogate import check_modeler, surrogate_from_records
from raytuner.crowd.repository import RECORD_KINDS
from raytuner.errors import InvalidInputError
from raytuner.models.budget import fit_budget
from raytuner.problem.space import ProblemSpace
from raytuner.protocol import METADATA_KEY, dumps, json_field
from raytuner.protocol.v1 import tuning_pb2 as pb
from raytuner.protocol.v1 import tuning_pb2_grpc as pb_grpc
from raytuner.service.handlers import rpc, status_of

__all__ = ["CrowdServicer", "BATCH"]

log = logging.getLogger(__name__)

#: Records per streamed answer (well under the 4 MiB message limit for GPTune records).
BATCH = 500


def _api_key(context: grpc.ServicerContext) -> str:
    return dict(context.invocation_metadata()).get(METADATA_KEY, "")


class CrowdServicer(pb_grpc.CrowdServiceServicer):
    """The gRPC face of a crowd repository.

    Args:
        repository: the crowd repository it serves (a :class:`~raytuner.crowd.CrowdRepository`).
        executor: where model fits run (the server's; default ``None``: inline for a small fit, else a process pool).
        fit_seconds: the model-fit time of one call (the server's ``fit_seconds`` limit; ``None``: no bound).
    """

    def __init__(self, repository: Any, executor: Any = None, fit_seconds: float | None = None) -> None:
        self.repository = repository
        self.executor = executor  # model fits (None: each fit's default for its size)
        self.fit_seconds = fit_seconds

    # -- records ------------------------------------------------------------------------------------

    @rpc
    def UploadRecords(self, request: pb.CrowdUploadRequest, context: grpc.ServicerContext) -> pb.CrowdUploadResponse:
        kind = request.kind or "function_evaluation"
        if kind not in RECORD_KINDS:
            raise InvalidInputError("kind", f"{kind!r} is not a record kind", allowed=list(RECORD_KINDS))
        records = json_field("records_json", request.records_json, list, [])  # the repository validates each
        result = self.repository.upload(
            _api_key(context),
            request.tuning_problem_name,
            records,
            access=request.access or "public",
            shared_with_users=list(request.shared_with_users),
            shared_with_groups=list(request.shared_with_groups),
            kind=kind,
        )
        return pb.CrowdUploadResponse(added=result.inserted, duplicates=result.duplicates)

    def _query(self, method: str, query: pb.CrowdQuery, context: grpc.ServicerContext, raw: bool = False) -> list[Any]:
        spaces: dict[str, Any] = {
            "configuration_space": json_field("configuration_space_json", query.configuration_space_json, dict, None)
            or None
        }
        if method == "query_function_evaluations":
            spaces["problem_space"] = json_field("problem_space_json", query.problem_space_json, dict, None) or None
        elif query.problem_space_json not in ("", "{}"):
            raise InvalidInputError(
                "problem_space_json",
                "surrogate-model records are queried by configuration_space (user_configurations) only",
            )
        records: list[Any] = getattr(self.repository, method)(
            _api_key(context), query.tuning_problem_name, limit=query.limit or None, raw=raw, **spaces
        )
        return records

    def _stream(self, method: str, query: pb.CrowdQuery, context: grpc.ServicerContext) -> Iterator[pb.CrowdRecords]:
        try:
            records = self._query(method, query, context, raw=True)  # JSON texts as stored
        except Exception as exc:  # a stream aborts with the mapped status
            code, message = status_of(exc)
            context.abort(code, message)
        for start in range(0, len(records), BATCH):  # the stored JSON texts, joined: nothing re-encoded
            yield pb.CrowdRecords(records_json="[" + ",".join(records[start : start + BATCH]) + "]")

    def QueryFunctionEvaluations(
        self, request: pb.CrowdQuery, context: grpc.ServicerContext
    ) -> Iterator[pb.CrowdRecords]:
        return self._stream("query_function_evaluations", request, context)

    def QuerySurrogateModels(self, request: pb.CrowdQuery, context: grpc.ServicerContext) -> Iterator[pb.CrowdRecords]:
        return self._stream("query_surrogate_models", request, context)

    # -- models ---------------------------------------------------------------------------------------

    def _surrogate(
        self,
        query: pb.CrowdQuery,
        objective: str,
        task_json: str,
        modeler: str,
        context: grpc.ServicerContext,
        check: Callable[[ProblemSpace], Any] | None = None,
    ) -> tuple[Any, dict[str, Any], int]:
        """The surrogate of the queried records; every field (``check``: the caller's too) is checked first."""
        space = json_field("query.problem_space_json", query.problem_space_json, dict, None)
        if not space:
            raise InvalidInputError(
                "query.problem_space_json",
                "a surrogate needs the problem space (input_space, parameter_space, output_space)",
            )
        problem = ProblemSpace.parse(space)
        # every field is checked before the repository is read (the query may be large)
        task = json_field("task_json", task_json, dict, {})
        if task:
            problem.input_space.check(task, "task_json")
        problem.objective(objective or None)
        modeler = check_modeler(modeler or "LCM")
        if check is not None:
            check(problem)
        records = self._query("query_function_evaluations", query, context)
        with fit_budget(self.fit_seconds):  # as a session's Ask: no key holds the fit workers for long
            model = surrogate_from_records(
                problem,
                records,
                objective=objective or None,
                task=task or None,
                executor=self.executor,
                modeler=modeler,
            )
        return model, task, len(records)

    @rpc
    def QueryPredictOutput(
        self, request: pb.CrowdPredictRequest, context: grpc.ServicerContext
    ) -> pb.CrowdPredictResponse:
        points = json_field("parameters_json", request.parameters_json, list, [])
        if not points or not all(isinstance(p, Mapping) for p in points):
            raise InvalidInputError("parameters_json", "a non-empty JSON list of parameter objects")
        model, task, n = self._surrogate(
            request.query,
            request.objective,
            request.task_json,
            request.modeler,
            context,
            check=lambda problem: [problem.parameter_space.check(p, "parameters_json") for p in points],
        )
        mean, variance = model.predict([dict(p) for p in points], task=task or None)
        return pb.CrowdPredictResponse(
            predictions_json=dumps([{"mean": float(m), "variance": float(v)} for m, v in zip(mean, variance)]),
            evaluations=n,
        )

    @rpc
    def QuerySensitivityAnalysis(
        self, request: pb.CrowdSensitivityRequest, context: grpc.ServicerContext
    ) -> pb.CrowdSensitivityResponse:
        method = request.method or "sobol"
        if method != "sobol":
            raise InvalidInputError("method", f"{method!r} is not an analysis method", allowed=["sobol"])
        # the seed as given, 0 included (the client's default): with `seed or None` every default call would
        # draw fresh Sobol samples, and the indices would differ from call to call
        options: dict[str, Any] = {"second_order": request.second_order, "seed": int(request.seed)}
        if request.num_samples:
            options["num_samples"] = check_num_samples(int(request.num_samples))
        model, task, n = self._surrogate(request.query, request.objective, request.task_json, request.modeler, context)
        result = sobol_analysis(model, task=task or None, **options)
        return pb.CrowdSensitivityResponse(result_json=dumps(result.to_dict()), evaluations=n)
