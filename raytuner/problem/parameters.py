"""Parameters: real (optionally log-scaled), integer (optionally log-scaled) and categorical.

Each parameter checks a value (an error names the input and, for a
categorical, the allowed values) and maps values to ``[0, 1]`` and back.
Integers and categoricals own equal-width bins of ``[0, 1]`` (a value maps
to its bin's centre and any point of the bin maps back to it); reals map
linearly, or linearly in the logarithm. :mod:`raytuner.problem.space` builds the
task, parameter and output spaces from these.

Example:
    >>> n = Integer(name="n", lower_bound=1, upper_bound=1024, log=True)
    >>> n.from_unit(n.to_unit([64])), n.check(64.0, "n")
    ([64], 64)
    >>> Categorical(name="alg", categories=["lu", "qr"]).check("svd", "alg")
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: alg: 'svd' is not a category (allowed: lu, qr)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import ConfigDict, Field, field_validator, model_validator

from raytuner.errors import CheckedModel, InvalidInputError

__all__ = ["Real", "Integer", "Categorical", "Parameter", "Scalar", "PARAMETER_TYPES", "normalise_parameter_type"]

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

Scalar = bool | int | float | str


class _ParameterBase(CheckedModel):
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
    def _bounds(self) -> _Numeric:
        lo, hi = self.lower_bound, self.upper_bound
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise InvalidInputError("lower_bound", f"bounds of {self.name!r} must be finite numbers, got [{lo}, {hi}]")
        if lo > hi or (lo == hi and isinstance(self, Real)):
            raise InvalidInputError("lower_bound", f"{lo:g} of {self.name!r} must be below upper_bound {hi:g}")
        if self.log and lo <= 0:
            raise InvalidInputError(
                "lower_bound", f"a log-scaled parameter {self.name!r} needs lower_bound > 0, got {lo:g}"
            )
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
        """Return ``value`` as a float, or raise naming ``field``.

        Args:
            value: the value to check.
            field: the input's name in the error.
        """
        return self._number(value, field)

    def to_unit(self, values: Sequence[Any]) -> np.ndarray:
        """Map values into ``[0, 1]``.

        A value within the bounds lands within ``[0, 1]`` even where rounding
        (of a logarithm, say) would put it one unit past an end; values outside
        the bounds map outside ``[0, 1]``.

        Args:
            values: the parameter's values.
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
        """Map ``[0, 1]`` back to values, clipped to the bounds.

        Args:
            u: points of ``[0, 1]``.
        """
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
        """Return ``value`` as an int, or raise naming ``field``.

        Args:
            value: the value to check.
            field: the input's name in the error.
        """
        v = self._number(value, field)
        if not v.is_integer():
            raise InvalidInputError(field, f"{value!r} is not an integer")
        return int(v)

    def to_unit(self, values: Sequence[Any]) -> np.ndarray:
        """Map integers to the centres of their bins.

        Args:
            values: the parameter's values.
        """
        v = np.asarray(values, dtype=float)
        lo, hi = self._edges()
        return ((np.log(v) if self.log else v) - lo) / (hi - lo)

    def from_unit(self, u: np.ndarray) -> list[int]:
        """Map any point of a bin to its integer.

        Args:
            u: points of ``[0, 1]``.
        """
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

    @property
    def ordered(self) -> bool:
        """Whether the categories are numbers in increasing (or decreasing) order, as Kernel Tuner's ``[1, 2, 4, 8]``.

        Such a parameter is an ordinal: a model compares its values by position.

        >>> Categorical(name="tile", categories=[1, 2, 4, 8]).ordered, Categorical(name="alg", categories=["lu"]).ordered
        (True, False)
        """
        numbers = [c for c in self.categories if isinstance(c, (int, float)) and not isinstance(c, bool)]
        if len(numbers) < len(self.categories):
            return False
        pairs = list(zip(numbers, numbers[1:]))
        return all(a < b for a, b in pairs) or all(a > b for a, b in pairs)

    def check(self, value: Any, field: str) -> Scalar:
        """Return the matching category, or raise naming ``field`` and the categories.

        Args:
            value: the value to check.
            field: the input's name in the error.
        """
        for c in self.categories:
            if value == c and type(value) is type(c):
                return c
        for c in self.categories:  # tolerate 2 vs 2.0 or "2" vs 2 from JSON clients
            if str(value) == str(c):
                return c
        raise InvalidInputError(field, f"{value!r} is not a category", allowed=self.categories)

    def index(self, value: Any) -> int:
        """Position of ``value`` among the categories.

        The category :meth:`check` matched is found by identity, not ``==``:
        ``True == 1`` and ``1 == 1.0``, so ``list.index`` would put the later of
        two such categories in the earlier one's bin.

        Args:
            value: one of the categories.

        >>> Categorical(name="flag", categories=[True, 1, 1.0]).index(1.0)
        2
        """
        found = self.check(value, self.name)
        return next(i for i, c in enumerate(self.categories) if c is found)

    def to_unit(self, values: Sequence[Any]) -> np.ndarray:
        """Map categories to the centres of their bins.

        Args:
            values: the parameter's values.
        """
        n = len(self.categories)
        return (np.array([self.index(v) for v in values], dtype=float) + 0.5) / n

    def from_unit(self, u: np.ndarray) -> list[Scalar]:
        """Map any point of a bin to its category.

        Args:
            u: points of ``[0, 1]``.
        """
        n = len(self.categories)
        idx = np.clip(np.floor(np.asarray(u, dtype=float) * n), 0, n - 1).astype(int)
        return [self.categories[i] for i in idx]


def normalise_parameter_type(data: Any, index: int) -> Any:
    """A parameter's description with its ``type`` spelled as :data:`PARAMETER_TYPES` names it.

    Args:
        data: one parameter's description (anything else is returned as it is).
        index: its position in the space, for the error.

    Raises:
        InvalidInputError: the type is unknown.

    Example:
        >>> normalise_parameter_type({"name": "n", "type": "int"}, 0)
        {'name': 'n', 'type': 'integer'}
    """
    if isinstance(data, Mapping) and "type" in data:
        raw = data["type"]
        key = str(raw).lower() if isinstance(raw, str) else raw
        if key not in PARAMETER_TYPES:
            raise InvalidInputError(
                f"[{index}].type",
                f"unknown parameter type {raw!r}",
                allowed=["real", "integer (or int)", "categorical"],
            )
        data = {**data, "type": PARAMETER_TYPES[key]}
    return data


Parameter = Annotated[Real | Integer | Categorical, Field(discriminator="type")]
