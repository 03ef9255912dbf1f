"""Pareto fronts and hypervolume for problems with several objectives and output constraints.

Values are turned into minimisation by each objective's goal. A record
counts for a front when it succeeded and meets every output constraint; the
front is the set of such records that no other dominates (at least as good
in every objective, better in one).

Example:
    >>> from raytuner.problem.records import FunctionEvaluation
    >>> from raytuner.problem.space import ProblemSpace
    >>> problem = ProblemSpace.parse({
    ...     "parameter_space": [{"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1}],
    ...     "output_space": [{"name": "time"}, {"name": "accuracy", "goal": "maximize"},
    ...                      {"name": "memory", "optimize": False, "upper_bound": 8}]})
    >>> records = [FunctionEvaluation.create({}, {"x": x}, {"time": t, "accuracy": a, "memory": m})
    ...            for x, t, a, m in [(0.1, 1.0, 0.5, 2), (0.2, 2.0, 0.9, 4), (0.3, 3.0, 0.8, 4), (0.4, 0.5, 0.99, 9)]]
    >>> [r.tuning_parameter["x"] for r in pareto_front(problem, records)]     # x=0.4 breaks memory <= 8
    [0.1, 0.2]
    >>> hypervolume(objective_values(problem, pareto_front(problem, records)), reference=[4.0, 0.0])
    2.3
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from raytuner.errors import InvalidInputError
from raytuner.problem.records import FunctionEvaluation, task_key
from raytuner.problem.space import ProblemSpace

__all__ = [
    "best_of",
    "objective_values",
    "non_dominated",
    "pareto_front",
    "hypervolume",
    "hypervolume_improvement",
    "feasible",
    "nsga_order",
]


def feasible(problem: ProblemSpace, record: FunctionEvaluation) -> bool:
    """Whether ``record`` succeeded with every objective a number and meets every output constraint.

    Args:
        problem: the problem (its objectives and output constraints).
        record: an evaluation.
    """
    return (
        record.status == "ok"
        and all(record.value(o.name) is not None for o in problem.optimised)
        and problem.meets_output_constraints(record.evaluation_result)
    )


def best_of(
    problem: ProblemSpace,
    records: Sequence[FunctionEvaluation],
    task: Mapping[str, Any],
    objective: str | None = None,
) -> FunctionEvaluation | None:
    """The best evaluation of ``task`` in ``objective``, or ``None`` when no evaluation of it counts.

    An evaluation counts when it succeeded, has a number for the objective and
    meets every output constraint; of equal ones, the first.

    Args:
        problem: the problem (the objective's goal, the output constraints).
        records: evaluations, oldest first.
        task: the task.
        objective: the objective's name (default: the problem's first).

    >>> from raytuner.problem.records import FunctionEvaluation
    >>> space = ProblemSpace.parse({"parameter_space": [{"name": "x", "type": "real", "lower_bound": 0,
    ...     "upper_bound": 1}], "output_space": [{"name": "y", "goal": "maximize"}]})
    >>> runs = [FunctionEvaluation.create({}, {"x": x}, {"y": x}) for x in (0.2, 0.9, 0.5)]
    >>> best_of(space, runs, {}).tuning_parameter
    {'x': 0.9}
    """
    target = problem.objective(objective)
    key = task_key(task)
    scored = [
        (target.sign() * v, n, r)
        for n, r in enumerate(records)
        if r.status == "ok"
        and task_key(r.task_parameter) == key
        and (v := r.value(target.name)) is not None
        and problem.meets_output_constraints(r.evaluation_result)
    ]
    return min(scored, key=lambda s: (s[0], s[1]))[2] if scored else None


def objective_values(problem: ProblemSpace, records: Sequence[FunctionEvaluation]) -> np.ndarray:
    """The records' objectives as an ``(n, m)`` array to minimise (a maximised objective negated).

    Args:
        problem: the problem (its optimised outputs, in order).
        records: successful evaluations with every objective.
    """
    objectives = problem.optimised
    rows = [[o.sign() * r.known_value(o.name) for o in objectives] for r in records]
    return np.array(rows, dtype=float).reshape(len(rows), len(objectives))


def non_dominated(values: np.ndarray) -> np.ndarray:
    """A boolean mask of the rows of ``values`` (to minimise) that no other row dominates.

    Of rows that are equal, the first is kept; a row that is not finite is refused.

    Args:
        values: an ``(n, m)`` array, one row per point.

    >>> non_dominated(np.array([[1.0, 2.0], [2.0, 1.0], [2.0, 2.0], [1.0, 2.0]])).tolist()
    [True, True, False, False]
    """
    Y = np.atleast_2d(np.asarray(values, dtype=float))
    if not np.isfinite(Y).all():
        raise InvalidInputError("values", "every point needs finite values (a failed evaluation has no point)")
    keep = np.ones(len(Y), dtype=bool)
    for i in range(len(Y)):
        if not keep[i]:
            continue
        others = Y[keep]
        dominated = np.all(others <= Y[i], axis=1) & np.any(others < Y[i], axis=1)
        if dominated.any():
            keep[i] = False
            continue
        equal_before = np.all(Y[:i] == Y[i], axis=1) & keep[:i]
        if equal_before.any():
            keep[i] = False
    return keep


def pareto_front(
    problem: ProblemSpace, records: Sequence[FunctionEvaluation], task: Mapping[str, Any] | None = None
) -> list[FunctionEvaluation]:
    """The feasible records no other feasible record dominates, by the first objective (then the next).

    Args:
        problem: the problem (its objectives, goals and output constraints).
        records: evaluations (failed ones and those breaking an output constraint are left out).
        task: only this task's records (default: all the records given).
    """
    key = task_key(task) if task is not None else None
    candidates = [r for r in records if (key is None or task_key(r.task_parameter) == key) and feasible(problem, r)]
    if not candidates:
        return []
    values = objective_values(problem, candidates)
    front = [i for i in np.flatnonzero(non_dominated(values))]
    front.sort(key=lambda i: tuple(values[i]))
    return [candidates[i] for i in front]


def nsga_order(problem: ProblemSpace, records: Sequence[FunctionEvaluation]) -> list[int]:
    """The indices of the records with every objective, best first, as NSGA-II ranks a population.

    Feasible records come first, front by front (non-dominated sorting); within
    a front, the larger crowding distance first (the ends of a front first),
    so a cut keeps the front's spread; ties keep the records' order. Then the
    records that break an output constraint, the smaller total violation (in
    ranges of each bound's output) first. A failed record is left out.

    Args:
        problem: the problem (its objectives and output constraints).
        records: the evaluations, in the order they were told.

    >>> from raytuner.problem.records import FunctionEvaluation
    >>> problem = ProblemSpace.parse({
    ...     "parameter_space": [{"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1}],
    ...     "output_space": [{"name": "f1"}, {"name": "f2"}, {"name": "mem", "optimize": False, "upper_bound": 5}]})
    >>> rows = [(1, 5, 1), (2, 2, 1), (5, 1, 1), (3, 3, 1), (0, 0, 9), (4, 4, 1), (2.5, 2.5, 1)]
    >>> nsga_order(problem, [FunctionEvaluation.create({}, {"x": 0.5}, {"f1": a, "f2": b, "mem": m})
    ...                      for a, b, m in rows])
    [0, 2, 1, 6, 3, 5, 4]
    """
    ranked = [
        n
        for n, r in enumerate(records)
        if r.status == "ok" and all(r.value(o.name) is not None for o in problem.optimised)
    ]
    good = [n for n in ranked if feasible(problem, records[n])]
    order: list[int] = []
    left = good
    while left:
        values = objective_values(problem, [records[n] for n in left])
        mask = non_dominated(values)
        front = [n for n, keep in zip(left, mask) if keep]
        crowding = _crowding(values[mask])
        order += [front[k] for k in sorted(range(len(front)), key=lambda k: (-crowding[k], k))]
        left = [n for n, keep in zip(left, mask) if not keep]
    kept = set(good)
    bad = [n for n in ranked if n not in kept]
    return order + sorted(bad, key=lambda n: (_violation(problem, records[n]), n))


def _crowding(values: np.ndarray) -> np.ndarray:
    """NSGA-II's crowding distance of each point of one front (the ends of each objective: infinite)."""
    n, m = values.shape
    distance = np.zeros(n)
    if n <= 2:
        return np.full(n, np.inf)
    for k in range(m):
        order = np.argsort(values[:, k], kind="stable")
        span = values[order[-1], k] - values[order[0], k]
        distance[order[0]] = distance[order[-1]] = np.inf
        if span > 0:
            distance[order[1:-1]] += (values[order[2:], k] - values[order[:-2], k]) / span
    return distance


def _violation(problem: ProblemSpace, record: FunctionEvaluation) -> float:
    """How far ``record`` lies outside its output constraints, each in units of its bound's size."""
    total = 0.0
    for o in problem.output_constraints:
        value = record.value(o.name)
        if value is None:
            return float("inf")
        scale = max(abs(b) for b in (o.lower_bound, o.upper_bound) if np.isfinite(b)) or 1.0
        total += max(o.lower_bound - value, value - o.upper_bound, 0.0) / scale
    return total


def hypervolume(values: np.ndarray, reference: Sequence[float]) -> float:
    """The volume the points (to minimise) dominate below ``reference``, exactly.

    Points that do not dominate the reference point add nothing. Two
    objectives take a sweep; more take slices along the last objective
    (exact, meant for the fronts of a tuning run: up to a few hundred points
    and a few objectives).

    Args:
        values: an ``(n, m)`` array of points to minimise.
        reference: the reference point, ``m`` values (each worse than every point that counts).

    >>> hypervolume(np.array([[1.0, 3.0], [2.0, 2.0], [3.0, 1.0]]), [4.0, 4.0])
    6.0
    >>> hypervolume(np.array([[1.0, 1.0, 1.0]]), [2.0, 2.0, 3.0])
    2.0
    """
    ref = np.asarray(reference, dtype=float)
    Y = np.atleast_2d(np.asarray(values, dtype=float))
    if Y.size == 0:
        return 0.0
    if Y.shape[1] != len(ref):
        raise InvalidInputError("reference", f"{len(ref)} values for points of {Y.shape[1]} objectives")
    Y = Y[np.all(Y < ref, axis=1)]
    if len(Y) == 0:
        return 0.0
    return float(_volume(Y if Y.shape[1] <= 2 else Y[non_dominated(Y)], ref))  # the sweep skips dominated points


def _volume(Y: np.ndarray, ref: np.ndarray) -> float:
    if Y.shape[1] == 1:
        return float(ref[0] - Y[:, 0].min())
    if Y.shape[1] == 2:
        order = Y[np.argsort(Y[:, 0])]
        total, ceiling = 0.0, ref[1]
        for x, y in order:
            if y < ceiling:
                total += (ref[0] - x) * (ceiling - y)
                ceiling = y
        return total
    levels = np.unique(Y[:, -1])
    total = 0.0
    for k, level in enumerate(levels):
        top = levels[k + 1] if k + 1 < len(levels) else ref[-1]
        slab = Y[Y[:, -1] <= level][:, :-1]
        total += (top - level) * _volume(slab[non_dominated(slab)], ref[:-1])
    return total


def hypervolume_improvement(
    front: np.ndarray, reference: Sequence[float] | np.ndarray, points: np.ndarray
) -> np.ndarray:
    """What each of ``points`` would add to the hypervolume of ``front`` (two objectives, to minimise), vectorised.

    Dominated points of ``front`` are left out first.

    Below the front's staircase, a point adds the area between it and the
    staircase up to the reference point; a point the front dominates adds 0.

    Args:
        front: a ``(k, 2)`` array of non-dominated points (``k`` may be 0).
        reference: the reference point (2 values).
        points: an array of shape ``(..., 2)``.

    >>> front = np.array([[1.0, 3.0], [3.0, 1.0]])
    >>> hypervolume_improvement(front, [4.0, 4.0], np.array([[2.0, 2.0], [3.5, 3.5], [0.0, 0.0]])).tolist()
    [1.0, 0.0, 11.0]
    """
    ref = np.asarray(reference, dtype=float)
    F = np.atleast_2d(np.asarray(front, dtype=float)).reshape(-1, 2)
    F = F[non_dominated(F)] if len(F) else F
    F = F[np.argsort(F[:, 0])]
    starts = np.concatenate([[-np.inf], F[:, 0]])
    ends = np.concatenate([F[:, 0], [ref[0]]])
    heights = np.concatenate([[ref[1]], F[:, 1]])
    P = np.asarray(points, dtype=float)[..., None, :]
    width = np.clip(np.minimum(ends, ref[0]) - np.maximum(starts, P[..., 0]), 0.0, None)
    height = np.clip(np.minimum(heights, ref[1]) - P[..., 1], 0.0, None)
    return (width * height).sum(axis=-1)
