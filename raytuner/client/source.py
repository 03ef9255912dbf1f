"""Transfer-learning source data read through the tuning service.

:class:`RemoteSource` is an :class:`~raytuner.problem.records.EvaluationSource`: the
evaluations of one problem that pass a query, read with a
:class:`~raytuner.client.RemoteTuner`.

Example (needs a running service)::

    from raytuner.client import RemoteSource, RemoteTuner

    client = RemoteTuner("tuner.example.org:50051", api_key)
    source = RemoteSource(client, "my_problem", {"task": {"n": {"low": 1000, "high": 4000}}})
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from raytuner.problem.records import FunctionEvaluation, check_problem_name
from raytuner.store.base import EvaluationQuery

__all__ = ["RemoteSource"]


class RemoteSource:
    """Source evaluations for transfer learning, read from the tuning service.

    ``client`` is a :class:`~raytuner.client.RemoteTuner`; ``query``
    an :class:`~raytuner.store.EvaluationQuery` or the same as plain data.

    Args:
        client: a connected :class:`~raytuner.client.RemoteTuner`.
        problem_name: the source problem's name.
        query: an :class:`~raytuner.store.EvaluationQuery` or the same as plain data (default: all).
    """

    def __init__(
        self, client: Any, problem_name: str, query: EvaluationQuery | Mapping[str, Any] | None = None
    ) -> None:
        self.client = client
        self.problem_name = check_problem_name(problem_name, field="problem_name")
        self.query = query if isinstance(query, EvaluationQuery) or query is None else EvaluationQuery.parse(query)

    def evaluations(self) -> list[FunctionEvaluation]:
        """The matching evaluations, oldest first."""
        return self.client.query_evaluations(self.problem_name, self.query)

    def __repr__(self) -> str:
        return f"RemoteSource({self.problem_name!r}, {self.query!r})"
