"""Problem spaces: parameters, the task / parameter / output spaces, and encoding.

A tuning problem has three spaces (GPTune's vocabulary): the *task* (input)
space of the problems an application may meet, the *parameter* space of the
tuning parameters, and the *output* space of the objectives. Parameters are
real (optionally log-scaled), integer (optionally log-scaled) or categorical
(:mod:`raytuner.problem.parameters`).

Every space encodes points to the unit hypercube and back. Integers and
categoricals own equal-width bins of ``[0, 1]`` (a value encodes to its bin's
centre and any point of the bin decodes to it), so decoding is exact for them;
reals round-trip to within one or two units in the last place.

Example:
    >>> space = Space.model_validate([
    ...     {"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1},
    ...     {"name": "n", "type": "integer", "lower_bound": 1, "upper_bound": 1024, "log": True},
    ...     {"name": "alg", "type": "categorical", "categories": ["lu", "qr"]},
    ... ])
    >>> u = space.encode([{"x": 0.25, "n": 64, "alg": "qr"}])
    >>> u.shape
    (1, 3)
    >>> space.decode(u)
    [{'x': 0.25, 'n': 64, 'alg': 'qr'}]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
    model_serializer,
    model_validator,
)

from raytuner.errors import CheckedModel, InvalidInputError, validate
from raytuner.problem.constraints import Constraint
from raytuner.problem.parameters import PARAMETER_TYPES, Categorical, Integer, Parameter, Real, normalise_parameter_type
from raytuner.problem.values import as_number

__all__ = [
    "Real",
    "Integer",
    "Categorical",
    "Parameter",
    "Objective",
    "Space",
    "ProblemSpace",
    "PARAMETER_TYPES",
]


class Objective(CheckedModel):
    """One output of the output space: optimised (minimised or maximised), bounded, or both.

    An output with ``optimize`` (GPTune's field, default true) is an
    objective; a finite ``lower_bound`` or ``upper_bound`` makes the output
    a constraint a configuration must meet (``lower_bound <= value <=
    upper_bound``), whether it is optimised or not. An output that is
    neither optimised nor bounded is only recorded.

    >>> Objective(name="runtime").goal
    'minimize'
    >>> Objective(name="memory", optimize=False, upper_bound=64).bounded
    True
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str = Field(min_length=1)
    type: Literal["real"] = "real"
    goal: Literal["minimize", "maximize"] = "minimize"
    lower_bound: float = -math.inf
    upper_bound: float = math.inf
    optimize: bool = True

    @model_validator(mode="after")
    def _bounds(self) -> Objective:
        if math.isnan(self.lower_bound) or math.isnan(self.upper_bound) or self.lower_bound >= self.upper_bound:
            raise ValueError(
                f"output {self.name!r}: lower_bound {self.lower_bound} must be below upper_bound {self.upper_bound}"
            )
        return self

    @property
    def bounded(self) -> bool:
        """Whether a bound makes this output a constraint."""
        return math.isfinite(self.lower_bound) or math.isfinite(self.upper_bound)

    def meets(self, value: float | None) -> bool:
        """Whether ``value`` lies within the bounds (a missing value meets none).

        Args:
            value: the output's value.
        """
        return value is not None and self.lower_bound <= value <= self.upper_bound

    def sign(self) -> float:
        """+1 to minimise, -1 to maximise: multiply to turn the goal into minimisation."""
        return 1.0 if self.goal == "minimize" else -1.0

    def minimised_bounds(self) -> tuple[float, float]:
        """The bounds on ``sign() * value``, the output turned into minimisation.

        >>> Objective(name="accuracy", goal="maximize", lower_bound=0.9).minimised_bounds()
        (-inf, -0.9)
        """
        low, high = sorted((self.sign() * self.lower_bound, self.sign() * self.upper_bound))
        return low, high

    def constraint_text(self) -> str:
        """The output's bounds as text (empty when it has none).

        >>> Objective(name="mem", optimize=False, upper_bound=2).constraint_text()
        'mem <= 2'
        >>> Objective(name="acc", goal="maximize", lower_bound=0.5, upper_bound=1).constraint_text()
        '0.5 <= acc <= 1'
        """
        if not self.bounded:
            return ""
        low = [f"{self.lower_bound:g}"] if math.isfinite(self.lower_bound) else []
        high = [f"{self.upper_bound:g}"] if math.isfinite(self.upper_bound) else []
        return " <= ".join([*low, self.name, *high])


class Space(CheckedModel):
    """An ordered list of uniquely named parameters; serialises as a plain list.

    Examples:
        >>> s = Space.model_validate([{"name": "t", "type": "int", "lower_bound": 1, "upper_bound": 10}])
        >>> s.names, s.model_dump()[0]["type"]
        (['t'], 'integer')
    """

    model_config = ConfigDict(frozen=True)

    parameters: list[Parameter] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _from_list(cls, data: Any) -> Any:
        if isinstance(data, (list, tuple)):
            data = {"parameters": list(data)}
        if isinstance(data, Mapping) and isinstance(data.get("parameters"), (list, tuple)):
            data = {
                **data,
                "parameters": [
                    normalise_parameter_type(p, i) if not isinstance(p, BaseModel) else p
                    for i, p in enumerate(data["parameters"])
                ],
            }
        return data

    @model_validator(mode="after")
    def _unique(self) -> Space:
        seen: set[str] = set()
        for p in self.parameters:
            if p.name in seen:
                raise ValueError(f"duplicate parameter name {p.name!r}")
            seen.add(p.name)
        return self

    @model_serializer(mode="wrap")
    def _as_list(self, handler: Callable[[Any], Any]) -> Any:
        return handler(self)["parameters"]

    @property
    def names(self) -> list[str]:
        """Parameter names in order."""
        return [p.name for p in self.parameters]

    @property
    def dimension(self) -> int:
        """Number of parameters."""
        return len(self.parameters)

    def __iter__(self) -> Iterator[Parameter]:  # type: ignore[override]  # its parameters, not pydantic's fields
        return iter(self.parameters)

    def __len__(self) -> int:
        return len(self.parameters)

    def __getitem__(self, name: str) -> Parameter:
        for p in self.parameters:
            if p.name == name:
                return p
        raise InvalidInputError("name", f"no parameter {name!r}", allowed=self.names)

    def cardinality(self) -> float:
        """How many distinct points the space has (``math.inf`` with a real parameter).

        >>> Space.model_validate([{"name": "k", "type": "int", "lower_bound": 1, "upper_bound": 4},
        ...                       {"name": "c", "type": "categorical", "categories": ["a", "b"]}]).cardinality()
        8
        """
        total: float = 1
        for p in self.parameters:
            if isinstance(p, Real):
                return math.inf
            total *= len(p.categories) if isinstance(p, Categorical) else int(p.upper_bound - p.lower_bound) + 1
        return total

    def check(self, point: Mapping[str, Any], field: str = "point") -> dict[str, Any]:
        """Validate a point: every name present, nothing unknown, each value in its domain.

        Returns the point with normalised values (ints as ``int``, the stored
        category objects) in space order.

        Args:
            point: the values by name.
            field: the field named in errors (default ``"point"``).
        """
        if not isinstance(point, Mapping):
            raise InvalidInputError(
                field, f"expected a mapping of parameter names to values, got {type(point).__name__}"
            )
        known = {p.name for p in self.parameters}
        unknown = [k for k in point if k not in known]
        if unknown:
            raise InvalidInputError(f"{field}.{unknown[0]}", "unknown parameter", allowed=self.names)
        out: dict[str, Any] = {}
        for p in self.parameters:
            if p.name not in point:
                raise InvalidInputError(f"{field}.{p.name}", "missing value")
            out[p.name] = p.check(point[p.name], f"{field}.{p.name}")
        return out

    def contains(self, point: Mapping[str, Any]) -> bool:
        """Whether :meth:`check` accepts ``point``.

        Args:
            point: the values by name.
        """
        try:
            self.check(point)
        except InvalidInputError:
            return False
        return True

    def encode(self, points: Iterable[Mapping[str, Any]]) -> np.ndarray:
        """Encode points to an ``(n, dimension)`` array in the unit hypercube.

        Args:
            points: the points, values by name.
        """
        rows = list(points)
        out = np.empty((len(rows), self.dimension), dtype=float)
        for j, p in enumerate(self.parameters):
            out[:, j] = p.to_unit([r[p.name] for r in rows]) if rows else []
        return out

    def decode(self, unit: np.ndarray) -> list[dict[str, Any]]:
        """Decode an ``(n, dimension)`` array of the unit hypercube to points.

        Args:
            unit: an ``(n, dimension)`` array with entries in ``[0, 1]``.
        """
        u = np.atleast_2d(np.asarray(unit, dtype=float))
        if u.shape[1] != self.dimension:
            raise InvalidInputError("unit", f"expected {self.dimension} columns, got {u.shape[1]}")
        columns = [p.from_unit(u[:, j]) for j, p in enumerate(self.parameters)]
        return [{p.name: columns[j][i] for j, p in enumerate(self.parameters)} for i in range(u.shape[0])]


class ProblemSpace(CheckedModel):
    """The three spaces of a tuning problem plus its constraints.

    Constraints map a name to an expression string or a callable over task and
    tuning parameter names; a constraint naming an unknown parameter is an
    error. Only expression constraints serialise.

    >>> problem = ProblemSpace.model_validate({
    ...     "input_space": [{"name": "m", "type": "integer", "lower_bound": 1, "upper_bound": 100}],
    ...     "parameter_space": [{"name": "mb", "type": "integer", "lower_bound": 1, "upper_bound": 16}],
    ...     "output_space": [{"name": "runtime"}],
    ...     "constraints": {"fits": "mb * 8 <= m"},
    ... })
    >>> problem.is_valid({"m": 40}, {"mb": 5}), problem.is_valid({"m": 40}, {"mb": 6})
    (True, False)
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    input_space: Space = Field(default_factory=Space)
    parameter_space: Space
    output_space: list[Objective] = Field(default_factory=lambda: [Objective(name="y")])
    constraints: dict[str, Any] = Field(default_factory=dict)

    _compiled: list[Constraint] = PrivateAttr(default_factory=list)

    @field_validator("output_space")
    @classmethod
    def _has_output(cls, v: list[Objective]) -> list[Objective]:
        if not v:
            raise ValueError("output_space must hold at least one objective")
        if not any(o.optimize for o in v):
            raise ValueError('no output is optimised: give at least one output "optimize": true')
        return v

    @model_validator(mode="after")
    def _cross_checks(self) -> ProblemSpace:
        names: set[str] = set()
        for space_name, nm in (
            [("input_space", n) for n in self.input_space.names]
            + [("parameter_space", n) for n in self.parameter_space.names]
            + [("output_space", o.name) for o in self.output_space]
        ):
            if nm in names:
                raise ValueError(
                    f"duplicate name {nm!r} in {space_name}: names must be unique across "
                    f"the input, parameter and output spaces"
                )
            names.add(nm)
        known = set(self.input_space.names) | set(self.parameter_space.names)
        compiled = []
        for cname, spec in self.constraints.items():
            c = Constraint.from_spec(cname, spec)
            missing = sorted(c.names - known)
            if missing:
                raise InvalidInputError(
                    f"constraints.{cname}", f"names unknown parameter {missing[0]!r}", allowed=sorted(known)
                )
            compiled.append(c)
        self._compiled = compiled
        return self

    @model_serializer(mode="wrap")
    def _serialise(self, handler: Callable[[Any], Any]) -> Any:
        data = handler(self)
        data["constraints"] = {c.name: c.source for c in self._compiled if c.is_expression}
        return data

    @classmethod
    def parse(cls, data: Any, field: str = "") -> ProblemSpace:
        """Validate ``data``, raising :class:`InvalidInputError` that names the field.

        Args:
            data: the problem description, as GPTune's JSON object (a mapping).
            field: the prefix of the field names in errors (default ``""``: none).
        """
        return validate(cls, data, field)

    @property
    def compiled_constraints(self) -> list[Constraint]:
        """The constraints as :class:`~raytuner.problem.constraints.Constraint` objects."""
        return list(self._compiled)

    @property
    def objectives(self) -> list[str]:
        """Names of the outputs (every output a record holds: optimised, bounded or recorded)."""
        return [o.name for o in self.output_space]

    @property
    def optimised(self) -> list[Objective]:
        """The outputs to optimise, in order (more than one: a multi-objective problem)."""
        return [o for o in self.output_space if o.optimize]

    @property
    def output_constraints(self) -> list[Objective]:
        """The outputs with a bound a configuration must meet."""
        return [o for o in self.output_space if o.bounded]

    @property
    def multiobjective(self) -> bool:
        """Whether the problem optimises several outputs or bounds one: its best is then a Pareto front per task."""
        return len(self.optimised) > 1 or bool(self.output_constraints)

    @property
    def modelled(self) -> list[Objective]:
        """The outputs a multi-objective engine models: every optimised or bounded one, in order."""
        return [o for o in self.output_space if o.optimize or o.bounded]

    def meets_output_constraints(self, outputs: Mapping[str, Any]) -> bool:
        """Whether reported ``outputs`` meet every output constraint (a missing bounded output does not).

        Args:
            outputs: output names to values.

        >>> p = ProblemSpace.parse({"parameter_space": [{"name": "x", "type": "real", "lower_bound": 0,
        ...     "upper_bound": 1}], "output_space": [{"name": "t"}, {"name": "mem", "optimize": False,
        ...     "upper_bound": 8}]})
        >>> p.meets_output_constraints({"t": 1.0, "mem": 4.0}), p.meets_output_constraints({"t": 1.0, "mem": 9})
        (True, False)
        """
        return all(o.meets(as_number(outputs.get(o.name))) for o in self.output_constraints)

    def objective(self, name: str | None = None) -> Objective:
        """The named output, or the first optimised one.

        Args:
            name: the output's name (default ``None``: the first optimised output).
        """
        if name is None:
            return self.optimised[0]
        for o in self.output_space:
            if o.name == name:
                return o
        raise InvalidInputError("objective", f"no output {name!r}", allowed=self.objectives)

    def satisfies(self, values: Mapping[str, Any]) -> bool:
        """Whether task and tuning values together satisfy every constraint.

        Args:
            values: the task and tuning parameter values together, by name.
        """
        return all(c(values) for c in self._compiled)

    def is_valid(self, task: Mapping[str, Any], config: Mapping[str, Any]) -> bool:
        """Whether ``config`` lies in the parameter space and meets the constraints for ``task``.

        Args:
            task: the task parameter values.
            config: the tuning parameter values.
        """
        if not self.parameter_space.contains(config):
            return False
        return self.satisfies({**task, **config})

    def check(self, task: Mapping[str, Any], config: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Validate a task and a configuration; raise naming the field when either is bad.

        Args:
            task: the task parameter values.
            config: the tuning parameter values.
        """
        t = self.input_space.check(task, "task_parameter")
        x = self.parameter_space.check(config, "tuning_parameter")
        broken = [c.name for c in self._compiled if not c({**t, **x})]
        if broken:
            raise InvalidInputError(f"constraints.{broken[0]}", f"violated by task {t} and configuration {x}")
        return t, x
