"""Latin hypercube sampling of tasks and configurations that honours constraints.

Following GPTune's MLA (paper 003, section 4.1): tasks are chosen by an LHS
over the task space, and each task gets its own independent LHS of the
parameter space (a heterotopic initial sample). Points that break a
constraint are rejected and the sample is refilled with fresh LHS batches,
sized by the acceptance rate seen so far, until it is full or a candidate
budget runs out; then :class:`~raytuner.errors.InfeasibleSpaceError` says how
far it got and how rare valid points are.

Example:
    >>> from raytuner.problem.space import ProblemSpace
    >>> from raytuner.test_problems import DEMO_PROBLEM
    >>> problem = ProblemSpace.parse({**DEMO_PROBLEM, "constraints": {"half": "x < 0.5"}})
    >>> tasks = sample_tasks(problem, 3, seed=1)
    >>> samples = sample_configurations(problem, tasks[0], 4, seed=1)
    >>> len(samples), all(s["x"] < 0.5 for s in samples)
    (4, True)
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from scipy.stats import qmc

from raytuner.errors import InfeasibleSpaceError, InvalidInputError
from raytuner.problem.space import ProblemSpace, Space

__all__ = ["ConfigurationSet", "latin_hypercube", "sample_tasks", "sample_configurations", "initial_samples"]

log = logging.getLogger(__name__)

Seed = int | np.random.Generator | None


def _key(point: Mapping[str, Any]) -> str:
    return json.dumps(point, sort_keys=True, default=str)


class ConfigurationSet(Sequence[dict[str, Any]]):
    """Points kept with their keys, so that excluding a growing set costs no re-keying per draw.

    Pass one as ``exclude`` to :func:`latin_hypercube` or :func:`sample_configurations`.

    Args:
        points: the first points (default none).

    >>> seen = ConfigurationSet([{"x": 1}])
    >>> seen.append({"x": 2})
    >>> len(seen), {"x": 2} in seen
    (2, True)
    """

    def __init__(self, points: Sequence[Mapping[str, Any]] = ()) -> None:
        self._points: list[dict[str, Any]] = []
        self.keys: set[str] = set()
        for point in points:
            self.append(point)

    def append(self, point: Mapping[str, Any]) -> None:
        """Add ``point``.

        Args:
            point: a configuration.
        """
        self._points.append(dict(point))
        self.keys.add(_key(point))

    def __contains__(self, point: object) -> bool:
        return isinstance(point, Mapping) and _key(point) in self.keys

    def __len__(self) -> int:
        return len(self._points)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self._points)

    def __getitem__(self, index: Any) -> Any:
        return self._points[index]


def latin_hypercube(
    space: Space,
    n: int,
    *,
    seed: Seed = None,
    accept: Callable[[dict[str, Any]], bool] | None = None,
    exclude: Sequence[Mapping[str, Any]] = (),
    max_candidates: int | None = None,
) -> list[dict[str, Any]]:
    """``n`` distinct points of ``space`` by LHS, each passing ``accept``.

    ``exclude`` lists points not to return (for example ones already
    evaluated). ``max_candidates`` bounds the points drawn in all (default
    ``max(100_000, 1_000 * n)``).

    Args:
        space: the space to sample.
        n: how many points.
        seed: a seed or generator (default: fresh entropy).
        accept: keeps a point when true (default: every point).
        exclude: points not to return, a sequence or a :class:`ConfigurationSet` (default none).
        max_candidates: the most points drawn in all (default ``max(100_000, 1_000 * n)``).

    >>> s = Space.model_validate([{"name": "k", "type": "integer", "lower_bound": 1, "upper_bound": 3}])
    >>> sorted(p["k"] for p in latin_hypercube(s, 3, seed=0))
    [1, 2, 3]
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise InvalidInputError("n", f"the sample size must be a non-negative integer, got {n!r}")
    if n == 0:
        return []
    if space.dimension == 0:
        raise InvalidInputError("space", "cannot sample an empty space")
    size = space.cardinality()
    if size < n + len(exclude):
        raise InfeasibleSpaceError(
            f"the space holds only {size} distinct points, fewer than the {n} asked for"
            + (f" plus {len(exclude)} excluded" if exclude else "")
        )
    rng = np.random.default_rng(seed)
    budget = max_candidates if max_candidates is not None else max(100_000, 1_000 * n)
    seen = set(exclude.keys) if isinstance(exclude, ConfigurationSet) else {_key(p) for p in exclude}
    out: list[dict[str, Any]] = []
    drawn = accepted = 0
    while len(out) < n and drawn < budget:
        missing = n - len(out)
        if drawn == 0:
            batch = missing  # a true LHS of size n when nothing is rejected
        else:
            rate = (accepted + 1) / (drawn + 1)  # smoothed acceptance rate so far
            batch = max(missing, math.ceil(missing / rate * 1.2))
        batch = int(min(budget - drawn, batch))
        unit = qmc.LatinHypercube(d=space.dimension, rng=rng).random(batch)
        drawn += batch
        for point in space.decode(unit):
            if accept is not None and not accept(point):
                continue
            accepted += 1
            key = _key(point)
            if key in seen:
                continue
            seen.add(key)
            out.append(point)
            if len(out) == n:
                break
    if len(out) < n:
        raise InfeasibleSpaceError(
            f"could draw only {len(out)} of {n} distinct valid points after {drawn} candidates "
            f"({accepted / max(drawn, 1):.3%} met the constraints); loosen the constraints, widen the "
            f"space, ask for fewer points or raise max_candidates"
        )
    return out


def sample_tasks(problem: ProblemSpace, n: int, *, seed: Seed = None) -> list[dict[str, Any]]:
    """``n`` tasks by LHS over the task space, honouring constraints on task parameters only.

    Args:
        problem: the problem.
        n: how many tasks.
        seed: a seed or generator (default: fresh entropy).
    """
    task_names = set(problem.input_space.names)
    task_constraints = [c for c in problem.compiled_constraints if c.names <= task_names]
    return latin_hypercube(problem.input_space, n, seed=seed, accept=lambda t: all(c(t) for c in task_constraints))


def sample_configurations(
    problem: ProblemSpace,
    task: Mapping[str, Any],
    n: int,
    *,
    seed: Seed = None,
    exclude: Sequence[Mapping[str, Any]] = (),
    max_candidates: int | None = None,
) -> list[dict[str, Any]]:
    """``n`` configurations by LHS over the parameter space, valid for ``task``.

    Args:
        problem: the problem.
        task: the task whose constraints the configurations pass.
        n: how many configurations.
        seed: a seed or generator (default: fresh entropy).
        exclude: configurations not to return (default none).
        max_candidates: the most points drawn in all (default ``max(100_000, 1_000 * n)``).
    """
    t = problem.input_space.check(task, "task")
    return latin_hypercube(
        problem.parameter_space,
        n,
        seed=seed,
        exclude=exclude,
        max_candidates=max_candidates,
        accept=lambda x: problem.satisfies({**t, **x}),
    )


def initial_samples(
    problem: ProblemSpace,
    tasks: Sequence[Mapping[str, Any]],
    n: int,
    *,
    seed: int | None = None,
) -> list[list[dict[str, Any]]]:
    """An independent LHS of ``n`` configurations per task (MLA's heterotopic initial sample).

    Each task's sample uses its own stream derived from ``seed``, so adding a
    task does not change the others' samples.

    Args:
        problem: the problem.
        tasks: the tasks' parameters.
        n: configurations per task.
        seed: the seed the per-task streams derive from (default: fresh entropy).
    """
    streams = np.random.SeedSequence(seed).spawn(len(tasks))
    return [
        sample_configurations(problem, task, n, seed=np.random.default_rng(stream))
        for task, stream in zip(tasks, streams)
    ]
