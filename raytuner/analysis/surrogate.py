"""Surrogate-model queries over function-evaluation records (GPTuneCrowd's QuerySurrogateModel).

:func:`surrogate_from_records` fits one LCM (an ordinary GP for a single
task) to the successful evaluations among ``records`` and wraps it in a
:class:`SurrogateModel`: a black box that predicts an objective's mean and
variance, in the objective's own units, for many configurations at once.
Configurations are given as parameter dicts or as rows of the parameter
space's unit cube; either way integers and categoricals are snapped to the
bins of the space's own encoding before the model sees them, so a prediction
always belongs to a configuration the space can decode.

Example:
    >>> from raytuner.models.executors import InlineExecutor
    >>> from raytuner.problem.records import FunctionEvaluation
    >>> from raytuner.problem.space import ProblemSpace
    >>> from raytuner.test_problems import DEMO_PROBLEM
    >>> problem = ProblemSpace.parse(DEMO_PROBLEM)           # task t, parameter x in [0, 1], output y
    >>> records = [FunctionEvaluation.create({"t": 1.0}, {"x": i / 9}, {"y": (i / 9) ** 2}) for i in range(10)]
    >>> model = surrogate_from_records(problem, records, executor=InlineExecutor())
    >>> out = model.predict_output({"x": 0.5})
    >>> round(out["mean"], 2), out["variance"] < 1e-3
    (0.25, True)
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from raytuner.errors import InvalidInputError
from raytuner.models import LCM, FittedLCM, LCMOptions, TrainingData
from raytuner.models.executors import Executor
from raytuner.problem.records import FunctionEvaluation, task_key
from raytuner.problem.space import Objective, ProblemSpace, Space

__all__ = [
    "SurrogateModel",
    "surrogate_from_records",
    "snap_to_space",
    "DEFAULT_CHUNK_SIZE",
    "MODELERS",
    "check_modeler",
]

log = logging.getLogger(__name__)

#: Rows per model call when predicting many points (bounds the ``(rows, samples)`` cross-covariance).
DEFAULT_CHUNK_SIZE = 8192
#: The surrogate models a crowd query may ask for: one LCM over every task, or one GP of the task alone.
MODELERS = ("LCM", "GP")

Points = Sequence[Mapping[str, Any]] | np.ndarray


def snap_to_space(space: Space, unit: np.ndarray) -> np.ndarray:
    """Unit-cube rows moved to what the space decodes them to, encoded again, column by column.

    Reals stay where they are (clipped to the cube); an integer or a
    categorical moves to the centre of the bin it falls in, which is where
    :meth:`Space.encode` puts that value. This is ``space.encode(space.decode(unit))``
    without building one dict per row.

    Args:
        space: the parameter space.
        unit: an ``(n, d)`` array of unit-cube rows.

    >>> space = Space.model_validate([{"name": "k", "type": "integer", "lower_bound": 1, "upper_bound": 2},
    ...                               {"name": "c", "type": "categorical", "categories": ["a", "b"]}])
    >>> snap_to_space(space, np.array([[0.1, 0.9]])).tolist()
    [[0.25, 0.75]]
    """
    U = np.atleast_2d(np.asarray(unit, dtype=float))
    if U.ndim != 2 or U.shape[1] != space.dimension:
        raise InvalidInputError(
            "points",
            f"expected unit-cube rows of {space.dimension} columns ({', '.join(space.names)}), got shape {U.shape}",
        )
    out = np.empty_like(U)
    for j, parameter in enumerate(space.parameters):
        out[:, j] = parameter.to_unit(parameter.from_unit(U[:, j]))
    return out


@dataclass(repr=False, eq=False)
class SurrogateModel:
    """A fitted LCM of one objective over the tasks of a set of records; see the module docstring.

    ``tasks`` are the task-parameter dicts the model covers (in the order of
    first appearance in the records) and ``task`` the index of the default
    task of predictions. ``fitted`` is the underlying
    :class:`~raytuner.models.FittedLCM`; ``function_evaluations`` the uids of
    the records it was fitted to.

    Args:
        problem: the problem the model is of.
        objective: the modelled output.
        tasks: the task-parameter dicts the model covers, in order of first appearance.
        task: the index of the default task of predictions.
        fitted: the underlying :class:`~raytuner.models.FittedLCM`.
        function_evaluations: the uids of the records it was fitted to.
        chunk_size: rows per prediction call (default 8192).
    """

    problem: ProblemSpace
    objective: Objective
    tasks: list[dict[str, Any]]
    task: int
    fitted: FittedLCM
    function_evaluations: list[str]
    chunk_size: int = DEFAULT_CHUNK_SIZE

    @property
    def parameter_names(self) -> list[str]:
        """The tuning parameters, in the order of the unit-cube columns."""
        return self.problem.parameter_space.names

    def task_index(self, task: Mapping[str, Any] | int | None = None) -> int:
        """The index of ``task`` (a task-parameter dict or an index; ``None``: the default task).

        Args:
            task: a task-parameter dict, an index, or ``None`` (the default task).
        """
        if task is None:
            return self.task
        if isinstance(task, (int, np.integer)) and not isinstance(task, bool):
            if not 0 <= int(task) < len(self.tasks):
                raise InvalidInputError("task", f"task index {task} out of range", allowed=list(range(len(self.tasks))))
            return int(task)
        if isinstance(task, Mapping):
            key = task_key(task)
            for i, known in enumerate(self.tasks):
                if task_key(known) == key:
                    return i
        raise InvalidInputError("task", f"{task!r} is not a task the model was fitted to", allowed=self.tasks)

    def unit(self, points: Points) -> np.ndarray:
        """``points`` (parameter dicts, or unit-cube rows) as snapped unit-cube rows.

        Args:
            points: parameter dicts, or unit-cube rows.
        """
        space = self.problem.parameter_space
        if isinstance(points, np.ndarray):
            U = points
        else:
            rows = list(points)
            if rows and not isinstance(rows[0], Mapping):
                U = np.asarray(rows, dtype=float)
            else:
                checked = [space.check(p, f"points[{i}]") for i, p in enumerate(rows)]
                return space.encode(checked) if checked else np.empty((0, space.dimension))
        U = np.asarray(U, dtype=float)
        if U.ndim != 2 or U.shape[1] != space.dimension:
            raise InvalidInputError(
                "points",
                f"expected a 2-D array of unit-cube rows with {space.dimension} "
                f"columns ({', '.join(space.names)}), got shape {U.shape}",
            )
        if not np.all(np.isfinite(U)) or U.size and (U.min() < 0.0 or U.max() > 1.0):
            raise InvalidInputError("points", "unit-cube rows must be finite and lie in [0, 1]")
        return snap_to_space(space, U)

    def predict(self, points: Points, task: Mapping[str, Any] | int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Predicted mean and variance of the objective at ``points``, in the objective's units.

        ``points`` is a list of parameter dicts or an ``(n, d)`` array of
        unit-cube rows (columns in :attr:`parameter_names` order). All points
        go to the model together, in chunks of :attr:`chunk_size` rows.

        Args:
            points: parameter dicts, or an ``(n, d)`` array of unit-cube rows.
            task: a task-parameter dict, an index, or ``None`` (the default task).

        >>> import numpy as np
        >>> from raytuner.models.executors import InlineExecutor
        >>> from raytuner.problem.records import FunctionEvaluation
        >>> from raytuner.problem.space import ProblemSpace
        >>> from raytuner.test_problems import DEMO_PROBLEM
        >>> problem = ProblemSpace.parse(DEMO_PROBLEM)
        >>> records = [FunctionEvaluation.create({"t": 1.0}, {"x": x}, {"y": 2 * x}) for x in np.linspace(0, 1, 8)]
        >>> model = surrogate_from_records(problem, records, executor=InlineExecutor())
        >>> mean, variance = model.predict(np.array([[0.75], [1.0]]))
        >>> np.round(mean, 2).tolist()
        [1.5, 2.0]
        """
        index = self.task_index(task)
        U = self.unit(points)
        if len(U) == 0:
            return np.empty(0), np.empty(0)
        means, variances = [], []
        for start in range(0, len(U), self.chunk_size):
            mean, variance = self.fitted.predict(index, U[start : start + self.chunk_size])
            means.append(mean)
            variances.append(variance)
        return np.concatenate(means), np.concatenate(variances)

    def predict_output(
        self, parameters: Mapping[str, Any], task: Mapping[str, Any] | int | None = None
    ) -> dict[str, float]:
        """The prediction at one configuration as ``{"mean": ..., "variance": ...}`` (QueryPredictOutput).

        Args:
            parameters: one configuration.
            task: a task-parameter dict, an index, or ``None`` (the default task).

        >>> from raytuner.models.executors import InlineExecutor
        >>> from raytuner.problem.records import FunctionEvaluation
        >>> from raytuner.problem.space import ProblemSpace
        >>> problem = ProblemSpace.parse({"parameter_space": [
        ...     {"name": "c", "type": "categorical", "categories": ["lu", "qr"]}]})
        >>> records = [FunctionEvaluation.create({}, {"c": c}, {"y": v}) for c, v in
        ...            [("lu", 1.0), ("lu", 1.0), ("qr", 3.0), ("qr", 3.0)]]
        >>> model = surrogate_from_records(problem, records, executor=InlineExecutor())
        >>> round(model.predict_output({"c": "qr"})["mean"], 1)
        3.0
        """
        mean, variance = self.predict([parameters], task)
        return {"mean": float(mean[0]), "variance": float(variance[0])}

    def __repr__(self) -> str:
        return (
            f"SurrogateModel(objective={self.objective.name!r}, tasks={len(self.tasks)}, "
            f"parameters={self.parameter_names}, samples={len(self.function_evaluations)})"
        )


def check_modeler(modeler: str) -> str:
    """``modeler`` if it names a surrogate model (:data:`MODELERS`); else one line naming the field and the choices.

    Args:
        modeler: ``"LCM"`` or ``"GP"``.

    >>> check_modeler("GP")
    'GP'
    >>> check_modeler("RF")
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: modeler: 'RF' is not a surrogate model (allowed: LCM, GP)
    """
    if modeler not in MODELERS:
        raise InvalidInputError("modeler", f"{modeler!r} is not a surrogate model", allowed=list(MODELERS))
    return modeler


def surrogate_from_records(
    problem: ProblemSpace,
    records: Sequence[FunctionEvaluation],
    objective: str | None = None,
    task: Mapping[str, Any] | None = None,
    *,
    options: LCMOptions | None = None,
    seed: int | np.random.Generator | None = 0,
    executor: Executor | None = None,
    min_records: int = 3,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    modeler: str = "LCM",
) -> SurrogateModel:
    """Fit a surrogate of ``objective`` (default: the first output) to the successful ``records``.

    Failed records, records without a finite value of the objective and
    records whose configuration lies outside the parameter space are
    skipped (the last with a warning). The tasks are the distinct
    ``task_parameter`` values of the remaining records; several tasks give
    one LCM over all of them (``modeler="LCM"``), or one GP of the chosen
    task's records alone (``modeler="GP"``), as crowdtune lets a query
    choose. ``task`` is the default task of predictions
    (required when the records span several tasks). ``options`` configure the
    LCM (default :class:`~raytuner.models.LCMOptions`), ``executor`` runs its
    multi-start fit, and at least ``min_records`` successful records of the
    chosen task are required.

    Args:
        problem: the problem the records are of.
        records: the evaluations to fit.
        objective: the modelled output (default: the first).
        task: the default task of predictions (required when the records span several tasks).
        options: the LCM's options (default :class:`~raytuner.models.LCMOptions`).
        seed: a seed or generator for the fit's restarts (default 0).
        executor: runs the multi-start fits (default :func:`~raytuner.models.executors.default_executor`: inline
            for a small fit, else Ray when initialised, else a process pool).
        min_records: the fewest usable records (default 3).
        chunk_size: rows per prediction call (default 8192).
        modeler: ``"LCM"`` (default: every task's records in one model) or ``"GP"`` (the chosen task's only).

    >>> from raytuner.problem.records import FunctionEvaluation
    >>> from raytuner.problem.space import ProblemSpace
    >>> from raytuner.test_problems import DEMO_PROBLEM
    >>> problem = ProblemSpace.parse(DEMO_PROBLEM)
    >>> surrogate_from_records(problem, [FunctionEvaluation.create({"t": 1.0}, {"x": 0.5}, {"y": 1.0})])
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: records: 1 successful record(s) of objective 'y' for task {'t': 1.0}; a surrogate needs at least 3
    """
    target = problem.objective(objective)
    check_modeler(modeler)
    if not isinstance(min_records, int) or isinstance(min_records, bool) or min_records < 1:
        raise InvalidInputError("min_records", f"must be an integer >= 1, got {min_records!r}")
    if not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1:
        raise InvalidInputError("chunk_size", f"must be an integer >= 1, got {chunk_size!r}")
    space = problem.parameter_space
    usable: list[FunctionEvaluation] = []
    outside = 0
    for record in records:
        value = record.value(target.name)
        if value is None or not math.isfinite(value):
            continue
        if not space.contains(record.tuning_parameter):
            outside += 1
            continue
        usable.append(record)
    if outside:
        log.warning("skipped %d record(s) whose configuration lies outside the parameter space", outside)
    tasks: list[dict[str, Any]] = []
    seen: set[tuple[tuple[str, Any], ...]] = set()
    for record in usable:
        key = task_key(record.task_parameter)
        if key not in seen:
            seen.add(key)
            tasks.append(dict(record.task_parameter))
    if task is None:
        if len(tasks) > 1:
            raise InvalidInputError(
                "task", f"the records span {len(tasks)} tasks; say which one predictions are for", allowed=tasks
            )
        index = 0
        chosen: Mapping[str, Any] = tasks[0] if tasks else {}
    else:
        chosen = task
        index = next((i for i, t in enumerate(tasks) if task_key(t) == task_key(task)), -1)
    count = sum(task_key(r.task_parameter) == task_key(chosen) for r in usable)
    if index < 0 or count < min_records:
        raise InvalidInputError(
            "records",
            f"{count} successful record(s) of objective {target.name!r} for "
            f"task {dict(chosen)}; a surrogate needs at least {min_records}",
        )
    if modeler == "GP":  # the chosen task's records alone
        usable = [r for r in usable if task_key(r.task_parameter) == task_key(chosen)]
        tasks, index = [dict(chosen)], 0
    data, uids = TrainingData.from_records(problem, tasks, usable, target.name)
    fitted = LCM((options or LCMOptions()).over(problem.parameter_space)).fit(data, seed=seed, executor=executor)
    log.info(
        "surrogate of %r fitted to %d records over %d task(s) in %.2f s",
        target.name,
        len(uids),
        len(tasks),
        fitted.report.seconds,
    )
    return SurrogateModel(problem, target, tasks, index, fitted, uids, chunk_size)
