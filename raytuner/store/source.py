"""Source evaluations for transfer learning, read from a history store.

:class:`StoreSource` is the history-store implementation of
:class:`raytuner.problem.records.EvaluationSource`: the evaluations of one tuning
problem that pass an :class:`~raytuner.store.EvaluationQuery` (task-parameter
ranges, machine and software configuration, status). The source may differ
from the target in task, machine or software version; each record's
configuration says which, and transfer learning groups them by it.

Example:
    >>> import tempfile
    >>> from raytuner.problem.records import FunctionEvaluation
    >>> from raytuner.store import JsonStore
    >>> store = JsonStore(tempfile.mkdtemp())
    >>> store.append_many("demo", [FunctionEvaluation.create({"t": t}, {"x": 0.5}, {"y": t})
    ...                            for t in (0.5, 0.8, 3.0)])
    3
    >>> source = StoreSource(store, "demo", {"task": {"t": (0.0, 1.0)}})   # a tuple is a range
    >>> sorted(r.task_parameter["t"] for r in source.evaluations())
    [0.5, 0.8]
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from raytuner.problem.records import FunctionEvaluation, check_problem_name
from raytuner.store.base import EvaluationQuery, HistoryStore
from raytuner.store.location import open_store

__all__ = ["StoreSource"]


class StoreSource:
    """The evaluations of ``problem_name`` in ``store`` that match ``query`` (read on each call).

    Args:
        store: A :class:`HistoryStore` or where to open one (a directory or a ``mongodb://`` URI).
        problem_name: The source problem's name in the store.
        query: An :class:`EvaluationQuery` or the same as plain data (a bad field is named in
            the error); every evaluation when ``None``.
    """

    def __init__(
        self,
        store: HistoryStore | str | os.PathLike[str],
        problem_name: str,
        query: EvaluationQuery | Mapping[str, Any] | None = None,
    ) -> None:
        self.store = open_store(store)
        self.problem_name = check_problem_name(problem_name)
        self.query = query if isinstance(query, EvaluationQuery) or query is None else EvaluationQuery.parse(query)

    def evaluations(self) -> list[FunctionEvaluation]:
        """The matching evaluations, oldest first."""
        return self.store.evaluations(self.problem_name, self.query)

    def __repr__(self) -> str:
        return f"StoreSource({type(self.store).__name__}, {self.problem_name!r}, {self.query!r})"
