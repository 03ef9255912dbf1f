"""The valid configurations of a discrete search space, enumerated and normalised.

A GPU kernel's search space is a set of parameters with listed values and
restrictions between them. :class:`CandidateSet` holds every configuration
that meets the restrictions (or an explicit list of them), encoded into
``[0, 1]``: each parameter's values are ranked (numbers by value, other
values in their listed order) and the rank is scaled linearly, so that powers
of two such as 32, 64, 128, 256 are equally spaced. Parameters with one value
are pruned: they carry no information.

Example:
    >>> from raytuner.problem.space import ProblemSpace
    >>> problem = ProblemSpace.parse({
    ...     "parameter_space": [{"name": "bx", "type": "categorical", "categories": [256, 32, 64, 128]},
    ...                         {"name": "tile", "type": "integer", "lower_bound": 1, "upper_bound": 4},
    ...                         {"name": "fp", "type": "categorical", "categories": ["single"]}],
    ...     "constraints": {"threads": "bx * tile <= 256"}})
    >>> cands = CandidateSet.from_problem(problem)
    >>> len(cands), cands.names
    (11, ['bx', 'tile'])
    >>> cands.configs[0], cands.units[0].tolist()
    ({'bx': 32, 'tile': 1, 'fp': 'single'}, [0.0, 0.0])
    >>> cands.locate({"bx": 128, "tile": 4, "fp": "single"}) is None   # 128 * 4 > 256
    True
"""

from __future__ import annotations

import itertools
import logging
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import qmc

from raytuner.errors import InvalidInputError
from raytuner.problem.space import Categorical, Integer, ProblemSpace

__all__ = ["CandidateSet", "MAX_ENUMERATED"]

log = logging.getLogger(__name__)

#: The largest Cartesian product :meth:`CandidateSet.from_problem` enumerates.
MAX_ENUMERATED = 2_000_000


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _ordered_values(parameter: Any) -> list[Any]:
    """A discrete parameter's values in encoding order (numbers ascending, others as listed)."""
    if isinstance(parameter, Categorical):
        values = list(parameter.categories)
        return sorted(values) if all(_is_number(v) for v in values) else values
    if isinstance(parameter, Integer):
        count = int(parameter.upper_bound) - int(parameter.lower_bound) + 1
        if count > 100_000:
            raise InvalidInputError(
                f"parameter_space.{parameter.name}",
                f"has {count} integer values; discrete BO needs listed values "
                "(give it as a categorical parameter with its values)",
            )
        return list(range(int(parameter.lower_bound), int(parameter.upper_bound) + 1))
    raise InvalidInputError(
        f"parameter_space.{parameter.name}",
        f"is a {parameter.type} parameter; discrete BO needs listed values",
        allowed=["categorical", "integer"],
    )


@dataclass
class CandidateSet:
    """Every valid configuration of one task, with its normalised encoding.

    ``configs[i]`` is a configuration (every tuning parameter, pruned ones
    included); ``units[i]`` its encoding over the parameters in :attr:`names`
    (those with more than one value). Build one with :meth:`from_problem` or
    :meth:`from_configs`.
    """

    names: list[str]
    configs: list[dict[str, Any]]
    units: np.ndarray
    _space_names: list[str]
    _positions: dict[tuple[int, ...], int]
    _ranks: list[dict[str, int]]

    def __len__(self) -> int:
        return len(self.configs)

    @classmethod
    def from_problem(
        cls, problem: ProblemSpace, task: Mapping[str, Any] | None = None, limit: int = MAX_ENUMERATED
    ) -> CandidateSet:
        """Enumerate the configurations of ``problem`` that meet its constraints for ``task``.

        Args:
            problem: The problem (listed values and restrictions).
            task: The task the configurations must be valid for.
            limit: The most configurations to enumerate.
        """
        space = problem.parameter_space
        values = [_ordered_values(p) for p in space.parameters]
        total = math.prod(len(v) for v in values)
        if total > limit:
            raise InvalidInputError(
                "parameter_space",
                f"has {total} combinations, more than the {limit} discrete BO enumerates; pass candidates= instead",
            )
        task = dict(task or {})
        names = space.names
        configs = [dict(zip(names, combo)) for combo in itertools.product(*values)]
        if problem.compiled_constraints:
            configs = [c for c in configs if problem.satisfies({**task, **c})]
        if not configs:
            raise InvalidInputError("constraints", "no configuration of the parameter space meets them")
        log.debug("enumerated %d of %d configurations", len(configs), total)
        return cls._build(problem, values, configs)

    @classmethod
    def from_configs(cls, problem: ProblemSpace, configs: Sequence[Mapping[str, Any]]) -> CandidateSet:
        """The explicit list ``configs`` (duplicates dropped), checked against the parameter space.

        Args:
            problem: The problem the configurations belong to.
            configs: The valid configurations.
        """
        space = problem.parameter_space
        values = [_ordered_values(p) for p in space.parameters]
        unique: dict[tuple[Any, ...], dict[str, Any]] = {}
        for i, config in enumerate(configs):
            checked = space.check(config, f"candidates[{i}]")
            unique.setdefault(tuple(repr(checked[n]) for n in space.names), checked)
        if not unique:
            raise InvalidInputError("candidates", "must list at least one configuration")
        return cls._build(problem, values, list(unique.values()))

    @classmethod
    def _build(cls, problem: ProblemSpace, values: list[list[Any]], configs: list[dict[str, Any]]) -> CandidateSet:
        space_names = problem.parameter_space.names
        ranks = [{repr(v): r for r, v in enumerate(vals)} for vals in values]
        rank_matrix = np.array(
            [[ranks[j][repr(c[n])] for j, n in enumerate(space_names)] for c in configs], dtype=np.int64
        ).reshape(len(configs), len(space_names))
        kept = [j for j, vals in enumerate(values) if len(vals) > 1]
        scale = np.array([len(values[j]) - 1 for j in kept], dtype=float)
        units = rank_matrix[:, kept] / scale if kept else np.zeros((len(configs), 0))
        positions = {tuple(row): i for i, row in enumerate(rank_matrix.tolist())}
        return cls(
            [space_names[j] for j in kept],
            configs,
            np.ascontiguousarray(units, dtype=float),
            list(space_names),
            positions,
            ranks,
        )

    def locate(self, config: Mapping[str, Any]) -> int | None:
        """The position of ``config`` among the candidates, or ``None`` if it is not one.

        Args:
            config: A configuration.
        """
        try:
            key = tuple(rank[repr(config[name])] for rank, name in zip(self._ranks, self._space_names))
        except KeyError:
            return None
        return self._positions.get(key)

    def latin_hypercube(self, n: int, rng: np.random.Generator, designs: int = 30) -> list[int | None]:
        """Positions of a maximin Latin hypercube design of ``n`` points over the parameters' values.

        ``designs`` random LHS designs are drawn and the one whose closest pair
        of points is farthest apart is kept. A design point that is not a
        candidate (the restrictions rule it out) or repeats an earlier one is
        ``None``: the caller replaces it by a random valid configuration.

        Args:
            n: How many points.
            rng: The random stream.
            designs: How many random designs to draw (the maximin one is kept).
        """
        d = len(self.names)
        if d == 0 or n <= 0:
            return [None] * max(n, 0)
        levels = np.array([len(r) for r, name in zip(self._ranks, self._space_names) if name in self.names])
        best, best_gap = None, -1.0
        for _ in range(max(1, designs)):
            sample = qmc.LatinHypercube(d=d, rng=rng).random(n)
            idx = np.minimum((sample * levels).astype(int), levels - 1)
            unit = idx / (levels - 1)
            gaps = np.linalg.norm(unit[:, None, :] - unit[None, :, :], axis=2) if n > 1 else np.ones((1, 1))
            gap = float(np.min(gaps + np.eye(n) * 1e9))
            if gap > best_gap:
                best, best_gap = idx, gap
        assert best is not None
        kept = [j for j, name in enumerate(self._space_names) if name in self.names]
        full = np.zeros(len(self._space_names), dtype=int)
        out: list[int | None] = []
        seen: set[int] = set()
        for row in best:
            full[kept] = row
            pos = self._positions.get(tuple(full.tolist()))
            out.append(None if pos is None or pos in seen else pos)
            if pos is not None:
                seen.add(pos)
        return out
