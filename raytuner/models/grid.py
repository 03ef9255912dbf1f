"""Every configuration of a finite parameter space, for an acquisition search that scores them all.

A space of integer and categorical parameters only has finitely many
configurations; when there are few enough,
:func:`~raytuner.models.acquisition.optimize_acquisition` scores every valid one
instead of a random sample, and so returns the acquisition's maximum itself.
A search runs again at every suggestion, so the grid of the last few problems
is kept, and each constraint is checked once per configuration and task.

Example:
    >>> import numpy as np
    >>> from raytuner.problem.space import ProblemSpace
    >>> problem = ProblemSpace.parse({"parameter_space": [
    ...     {"name": "k", "type": "integer", "lower_bound": 1, "upper_bound": 4},
    ...     {"name": "tile", "type": "categorical", "categories": [8, 16]}], "constraints": {"fits": "k * tile <= 32"}})
    >>> unit, configs = valid_grid(problem, {}, np.random.default_rng(0))
    >>> sorted((c["k"], c["tile"]) for c in configs)
    [(1, 8), (1, 16), (2, 8), (2, 16), (3, 8), (4, 8)]
    >>> bool(np.array_equal(unit, problem.parameter_space.encode(configs)))
    True
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from raytuner.problem.space import Categorical, ProblemSpace

__all__ = ["valid_grid"]


@dataclass
class _Grid:
    """Every point of a finite space (unit rows, configurations) and, per task, which are valid."""

    unit: np.ndarray
    configs: list[dict[str, Any]]
    valid: dict[tuple[tuple[str, Any], ...], np.ndarray] = field(default_factory=dict)


# id(problem) -> (problem, its grid), for the last _KEPT problems (shared by every session thread)
_GRIDS: OrderedDict[int, tuple[ProblemSpace, _Grid]] = OrderedDict()
_KEPT = 4
_LOCK = threading.Lock()


def _grid_of(problem: ProblemSpace) -> _Grid:
    """``problem``'s grid, made once while it is among the last few problems asked for."""
    with _LOCK:
        kept = _GRIDS.get(id(problem))
        if kept is not None and kept[0] is problem:
            _GRIDS.move_to_end(id(problem))
            return kept[1]
    axes = []
    for p in problem.parameter_space:
        values = p.categories if isinstance(p, Categorical) else range(int(p.lower_bound), int(p.upper_bound) + 1)
        axes.append(p.to_unit(list(values)))
    mesh = np.meshgrid(*axes, indexing="ij")
    unit = np.stack([m.reshape(-1) for m in mesh], axis=1)
    _, first = np.unique(unit, axis=0, return_index=True)  # categories equal as numbers (1 and 1.0) share a row
    unit = unit[np.sort(first)]
    grid = _Grid(unit, problem.parameter_space.decode(unit))
    with _LOCK:
        _GRIDS[id(problem)] = (problem, grid)
        while len(_GRIDS) > _KEPT:
            _GRIDS.popitem(last=False)
    return grid


def valid_grid(
    problem: ProblemSpace, task: Mapping[str, Any], rng: np.random.Generator
) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Every valid configuration of ``problem``'s finite parameter space for ``task``, in a random order.

    The order is random so that ties in a score (an expected improvement
    that underflows to 0) go by chance, not to the first configuration.
    Returns the unit-cube rows (bin centres, as
    :meth:`~raytuner.problem.space.Space.encode` gives them) and the configurations.

    Args:
        problem: the problem; its parameter space must be finite (integers and categoricals only).
        task: the task parameters the constraints are checked for.
        rng: the generator that shuffles the order.
    """
    grid = _grid_of(problem)
    key = tuple(task.items())
    valid = grid.valid.get(key)
    if valid is None:
        valid = (
            np.flatnonzero([problem.is_valid(task, config) for config in grid.configs])
            if problem.compiled_constraints
            else np.arange(len(grid.configs))
        )
        grid.valid[key] = valid
    order = valid[rng.permutation(len(valid))]
    return grid.unit[order], [grid.configs[i] for i in order]
