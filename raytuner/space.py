"""Problem spaces: parameters, the task / parameter / output spaces, and encoding.

A tuning problem has three spaces (GPTune's vocabulary): the *task* (input)
space of the problems an application may meet, the *parameter* space of the
tuning parameters, and the *output* space of the objectives. Parameters are
real (optionally log-scaled), integer (optionally log-scaled) or categorical.

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
from typing import Annotated, Any, Callable, Iterable, Iterator, Literal, Mapping, Sequence, Union

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

from raytuner.constraints import Constraint
from raytuner.errors import InvalidInputError, validate

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

#: Accepted spellings of each parameter type (GPTune writes "int", the
#: GPTuneCrowd meta description "integer").
PARAMETER_TYPES: dict[str, str] = {
    "real": "real",
    "float": "real",
    "integer": "integer",
    "int": "integer",
    "categorical": "categorical",
    "category": "categorical",
}

Scalar = Union[bool, int, float, str]


class _ParameterBase(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str = Field(min_length=1)

    def check(self, value: Any, field: str) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def to_unit(self, values: Sequence[Any]) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def from_unit(self, u: np.ndarray) -> list[Any]:  # pragma: no cover - abstract
        raise NotImplementedError


class _Numeric(_ParameterBase):
    lower_bound: float
    upper_bound: float
    log: bool = False

    @model_validator(mode="after")
    def _bounds(self) -> "_Numeric":
        lo, hi = self.lower_bound, self.upper_bound
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise InvalidInputError("lower_bound", f"bounds of {self.name!r} must be finite numbers, "
                                                   f"got [{lo}, {hi}]")
        if lo > hi or (lo == hi and isinstance(self, Real)):
            raise InvalidInputError("lower_bound", f"{lo:g} of {self.name!r} must be below "
                                                   f"upper_bound {hi:g}")
        if self.log and lo <= 0:
            raise InvalidInputError("lower_bound", f"a log-scaled parameter {self.name!r} needs "
                                                   f"lower_bound > 0, got {lo:g}")
        return self

    def _number(self, value: Any, field: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise InvalidInputError(field, f"{value!r} is not a number")
        v = float(value)
        if not math.isfinite(v) or v < self.lower_bound or v > self.upper_bound:
            raise InvalidInputError(field, f"{value!r} is outside [{self.lower_bound:g}, {self.upper_bound:g}]")
        return v


class Real(_Numeric):
    """A real parameter on ``[lower_bound, upper_bound]``, optionally log-scaled.

    >>> Real(name="lr", lower_bound=1e-4, upper_bound=1e-1, log=True).check(0.01, "lr")
    0.01
    """

    type: Literal["real"] = "real"

    def check(self, value: Any, field: str) -> float:
        """Return ``value`` as a float, or raise naming ``field``."""
        return self._number(value, field)

    def to_unit(self, values: Sequence[Any]) -> np.ndarray:
        """Map values into ``[0, 1]``.

        A value within the bounds lands within ``[0, 1]`` even where rounding
        (of a logarithm, say) would put it one unit past an end; values outside
        the bounds map outside ``[0, 1]``.
        """
        v = np.asarray(values, dtype=float)
        if self.log:
            lo, hi = math.log(self.lower_bound), math.log(self.upper_bound)
            u = (np.log(v) - lo) / (hi - lo)
        else:
            u = (v - self.lower_bound) / (self.upper_bound - self.lower_bound)
        inside = (v >= self.lower_bound) & (v <= self.upper_bound)
        return np.where(inside, np.clip(u, 0.0, 1.0), u)

    def from_unit(self, u: np.ndarray) -> list[float]:
        """Map ``[0, 1]`` back to values, clipped to the bounds."""
        u = np.clip(np.asarray(u, dtype=float), 0.0, 1.0)
        if self.log:
            lo, hi = math.log(self.lower_bound), math.log(self.upper_bound)
            v = np.exp(lo + u * (hi - lo))
        else:
            v = self.lower_bound + u * (self.upper_bound - self.lower_bound)
        return [float(x) for x in np.clip(v, self.lower_bound, self.upper_bound)]


class Integer(_Numeric):
    """An integer parameter on ``[lower_bound, upper_bound]`` (inclusive).

    Each integer owns an equal-width bin of ``[0, 1]`` (equal width in log
    space when ``log`` is set), so uniform samples are uniform over integers.

    >>> p = Integer(name="nb", lower_bound=1, upper_bound=4)
    >>> p.to_unit([1, 4]).tolist(), p.from_unit([0.0, 0.99])
    ([0.125, 0.875], [1, 4])
    """

    type: Literal["integer"] = "integer"

    @field_validator("lower_bound", "upper_bound")
    @classmethod
    def _whole(cls, v: float) -> float:
        if math.isfinite(v) and not float(v).is_integer():
            raise ValueError(f"an integer parameter needs whole-number bounds, got {v}")
        return v

    def _edges(self) -> tuple[float, float]:
        lo, hi = self.lower_bound - 0.5, self.upper_bound + 0.5
        if self.log:
            return math.log(lo), math.log(hi)
        return lo, hi

    def check(self, value: Any, field: str) -> int:
        """Return ``value`` as an int, or raise naming ``field``."""
        v = self._number(value, field)
        if not v.is_integer():
            raise InvalidInputError(field, f"{value!r} is not an integer")
        return int(v)

    def to_unit(self, values: Sequence[Any]) -> np.ndarray:
        """Map integers to the centres of their bins."""
        v = np.asarray(values, dtype=float)
        lo, hi = self._edges()
        return ((np.log(v) if self.log else v) - lo) / (hi - lo)

    def from_unit(self, u: np.ndarray) -> list[int]:
        """Map any point of a bin to its integer."""
        u = np.clip(np.asarray(u, dtype=float), 0.0, 1.0)
        lo, hi = self._edges()
        v = lo + u * (hi - lo)
        v = np.exp(v) if self.log else v
        ints = np.clip(np.floor(v + 0.5), self.lower_bound, self.upper_bound)
        return [int(x) for x in ints]


class Categorical(_ParameterBase):
    """A categorical parameter; each category owns an equal bin of ``[0, 1]``.

    >>> p = Categorical(name="alg", categories=["lu", "qr", "svd"])
    >>> p.from_unit(p.to_unit(["svd", "lu"]))
    ['svd', 'lu']
    """

    type: Literal["categorical"] = "categorical"
    categories: list[Scalar]

    @field_validator("categories")
    @classmethod
    def _non_empty(cls, v: list[Scalar]) -> list[Scalar]:
        if not v:
            raise ValueError("categories must hold at least one value")
        if len(set(map(repr, v))) != len(v):
            raise ValueError(f"categories must be distinct, got {v}")
        return v

    def check(self, value: Any, field: str) -> Scalar:
        """Return the matching category, or raise naming ``field`` and the categories."""
        for c in self.categories:
            if value == c and type(value) is type(c):
                return c
        for c in self.categories:  # tolerate 2 vs 2.0 or "2" vs 2 from JSON clients
            if str(value) == str(c):
                return c
        raise InvalidInputError(field, f"{value!r} is not a category", allowed=self.categories)

    def index(self, value: Any) -> int:
        """Position of ``value`` among the categories."""
        return self.categories.index(self.check(value, self.name))

    def to_unit(self, values: Sequence[Any]) -> np.ndarray:
        """Map categories to the centres of their bins."""
        n = len(self.categories)
        return (np.array([self.index(v) for v in values], dtype=float) + 0.5) / n

    def from_unit(self, u: np.ndarray) -> list[Scalar]:
        """Map any point of a bin to its category."""
        n = len(self.categories)
        idx = np.clip(np.floor(np.asarray(u, dtype=float) * n), 0, n - 1).astype(int)
        return [self.categories[i] for i in idx]


def _normalise_type(data: Any, index: int) -> Any:
    if isinstance(data, Mapping) and "type" in data:
        raw = data["type"]
        key = str(raw).lower() if isinstance(raw, str) else raw
        if key not in PARAMETER_TYPES:
            raise InvalidInputError(f"[{index}].type", f"unknown parameter type {raw!r}",
                                    allowed=["real", "integer (or int)", "categorical"])
        data = {**data, "type": PARAMETER_TYPES[key]}
    return data


Parameter = Annotated[Union[Real, Integer, Categorical], Field(discriminator="type")]


class Objective(BaseModel):
    """One output of the output space, minimised or maximised.

    >>> Objective(name="runtime").goal
    'minimize'
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str = Field(min_length=1)
    type: Literal["real"] = "real"
    goal: Literal["minimize", "maximize"] = "minimize"
    lower_bound: float = -math.inf
    upper_bound: float = math.inf

    def sign(self) -> float:
        """+1 to minimise, -1 to maximise: multiply to turn the goal into minimisation."""
        return 1.0 if self.goal == "minimize" else -1.0


class Space(BaseModel):
    """An ordered list of uniquely named parameters; serialises as a plain list.

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
            data = {**data, "parameters": [_normalise_type(p, i) if not isinstance(p, BaseModel) else p
                                           for i, p in enumerate(data["parameters"])]}
        return data

    @model_validator(mode="after")
    def _unique(self) -> "Space":
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

    def __iter__(self) -> Iterator[Parameter]:  # type: ignore[override]
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
        """
        if not isinstance(point, Mapping):
            raise InvalidInputError(field, f"expected a mapping of parameter names to values, "
                                           f"got {type(point).__name__}")
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
        """Whether :meth:`check` accepts ``point``."""
        try:
            self.check(point)
        except InvalidInputError:
            return False
        return True

    def encode(self, points: Iterable[Mapping[str, Any]]) -> np.ndarray:
        """Encode points to an ``(n, dimension)`` array in the unit hypercube."""
        rows = list(points)
        out = np.empty((len(rows), self.dimension), dtype=float)
        for j, p in enumerate(self.parameters):
            out[:, j] = p.to_unit([r[p.name] for r in rows]) if rows else []
        return out

    def decode(self, unit: np.ndarray) -> list[dict[str, Any]]:
        """Decode an ``(n, dimension)`` array of the unit hypercube to points."""
        u = np.atleast_2d(np.asarray(unit, dtype=float))
        if u.shape[1] != self.dimension:
            raise InvalidInputError("unit", f"expected {self.dimension} columns, got {u.shape[1]}")
        columns = [p.from_unit(u[:, j]) for j, p in enumerate(self.parameters)]
        return [{p.name: columns[j][i] for j, p in enumerate(self.parameters)} for i in range(u.shape[0])]


class ProblemSpace(BaseModel):
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
        return v

    @model_validator(mode="after")
    def _cross_checks(self) -> "ProblemSpace":
        names: set[str] = set()
        for space_name, nm in ([("input_space", n) for n in self.input_space.names]
                               + [("parameter_space", n) for n in self.parameter_space.names]
                               + [("output_space", o.name) for o in self.output_space]):
            if nm in names:
                raise ValueError(f"duplicate name {nm!r} in {space_name}: names must be unique across "
                                 f"the input, parameter and output spaces")
            names.add(nm)
        known = set(self.input_space.names) | set(self.parameter_space.names)
        compiled = []
        for cname, spec in self.constraints.items():
            c = Constraint.from_spec(cname, spec)
            missing = sorted(c.names - known)
            if missing:
                raise InvalidInputError(f"constraints.{cname}", f"names unknown parameter {missing[0]!r}",
                                        allowed=sorted(known))
            compiled.append(c)
        self._compiled = compiled
        return self

    @model_serializer(mode="wrap")
    def _serialise(self, handler: Callable[[Any], Any]) -> Any:
        data = handler(self)
        data["constraints"] = {c.name: c.source for c in self._compiled if c.is_expression}
        return data

    @classmethod
    def parse(cls, data: Any, field: str = "") -> "ProblemSpace":
        """Validate ``data``, raising :class:`InvalidInputError` that names the field."""
        return validate(cls, data, field)

    @property
    def compiled_constraints(self) -> list[Constraint]:
        """The constraints as :class:`~raytuner.constraints.Constraint` objects."""
        return list(self._compiled)

    @property
    def objectives(self) -> list[str]:
        """Names of the outputs."""
        return [o.name for o in self.output_space]

    def objective(self, name: str | None = None) -> Objective:
        """The named objective, or the first one."""
        if name is None:
            return self.output_space[0]
        for o in self.output_space:
            if o.name == name:
                return o
        raise InvalidInputError("objective", f"no output {name!r}", allowed=self.objectives)

    def satisfies(self, values: Mapping[str, Any]) -> bool:
        """Whether task and tuning values together satisfy every constraint."""
        return all(c(values) for c in self._compiled)

    def is_valid(self, task: Mapping[str, Any], config: Mapping[str, Any]) -> bool:
        """Whether ``config`` lies in the parameter space and meets the constraints for ``task``."""
        if not self.parameter_space.contains(config):
            return False
        return self.satisfies({**task, **config})

    def check(self, task: Mapping[str, Any], config: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Validate a task and a configuration; raise naming the field when either is bad."""
        t = self.input_space.check(task, "task_parameter")
        x = self.parameter_space.check(config, "tuning_parameter")
        broken = [c.name for c in self._compiled if not c({**t, **x})]
        if broken:
            raise InvalidInputError(f"constraints.{broken[0]}", f"violated by task {t} and configuration {x}")
        return t, x
