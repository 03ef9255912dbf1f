"""Training data of a multitask model: per-task inputs on the unit cube and outputs.

Tasks may hold unequal numbers of samples (heterotopic data), including
none. Failed evaluations (non-finite outputs) are dropped when the data is
built from records.

Example:
    >>> import numpy as np
    >>> data = TrainingData(X=[np.array([[0.1], [0.2]]), np.array([[0.5]])], y=[np.array([1.0, 2.0]), np.array([3.0])])
    >>> data.tasks, data.dimension, data.counts
    (2, 1, [2, 1])
    >>> X, task, y = data.stacked()
    >>> task.tolist()
    [0, 0, 1]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from raytuner.errors import InvalidInputError
from raytuner.problem.records import FunctionEvaluation, task_key
from raytuner.problem.space import ProblemSpace

__all__ = ["TrainingData"]


@dataclass
class TrainingData:
    """``X[i]`` ``(n_i, d)`` unit-cube inputs and ``y[i]`` ``(n_i,)`` outputs of task ``i``."""

    X: list[np.ndarray]
    y: list[np.ndarray]

    def __post_init__(self) -> None:
        if not self.X or len(self.X) != len(self.y):
            raise InvalidInputError(
                "data", f"X and y must list the same, non-zero number of tasks (got {len(self.X)} and {len(self.y)})"
            )
        self.X = [
            np.asarray(x, dtype=float).reshape(len(y_i), -1)
            if len(y_i)
            else np.asarray(x, dtype=float).reshape(0, np.asarray(self.X[0]).shape[-1])
            for x, y_i in zip(self.X, self.y)
        ]
        self.y = [np.asarray(v, dtype=float).ravel() for v in self.y]
        dims = {x.shape[1] for x in self.X}
        if len(dims) != 1:
            raise InvalidInputError("data.X", f"all tasks need the same number of columns, got {sorted(dims)}")
        if sum(self.counts) == 0:
            raise InvalidInputError("data", "no samples at all: a model needs at least one evaluation")

    @property
    def tasks(self) -> int:
        """Number of tasks."""
        return len(self.X)

    @property
    def dimension(self) -> int:
        """Number of input columns."""
        return int(self.X[0].shape[1])

    @property
    def counts(self) -> list[int]:
        """Samples per task."""
        return [len(v) for v in self.y]

    def stacked(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(X, task, y)`` with all tasks' samples stacked in task order."""
        task = np.concatenate([np.full(len(v), i, dtype=int) for i, v in enumerate(self.y)])
        return np.vstack(self.X), task, np.concatenate(self.y)

    def finite(self) -> TrainingData:
        """The same data without samples whose output is not finite."""
        keep = [np.isfinite(v) for v in self.y]
        return TrainingData([x[k] for x, k in zip(self.X, keep)], [v[k] for v, k in zip(self.y, keep)])

    @classmethod
    def from_records(
        cls,
        problem: ProblemSpace,
        tasks: Sequence[Mapping[str, Any]],
        records: Sequence[FunctionEvaluation],
        objective: str | None = None,
    ) -> tuple[TrainingData, list[str]]:
        """Successful evaluations of ``tasks`` as training data, with the uids used.

        Records of other tasks and failed records are skipped.

        Args:
            problem: the problem the records are of.
            tasks: the tasks to keep, in model order.
            records: the evaluations.
            objective: the modelled output (default: the first).
        """
        name = problem.objective(objective).name
        index = {task_key(t): i for i, t in enumerate(tasks)}
        configs: list[list[dict[str, Any]]] = [[] for _ in tasks]
        values: list[list[float]] = [[] for _ in tasks]
        uids: list[str] = []
        for record in records:
            i = index.get(task_key(record.task_parameter))
            value = record.value(name)
            if i is None or value is None or not np.isfinite(value):
                continue
            configs[i].append(record.tuning_parameter)
            values[i].append(float(value))
            uids.append(record.uid)
        d = problem.parameter_space.dimension
        X = [problem.parameter_space.encode(c) if c else np.empty((0, d)) for c in configs]
        return cls(X, [np.asarray(v) for v in values]), uids
