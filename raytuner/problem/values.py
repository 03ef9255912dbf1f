"""Reported values as numbers: the one place where a result becomes a measurement or a failure's reason.

Example:
    >>> parse_outputs({"y": 0.5})
    ({'y': 0.5}, None)
    >>> parse_outputs({"y": "fast"})
    ({}, "y: 'fast' is not a number")
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

__all__ = ["as_number", "output_problem", "parse_outputs"]


def as_number(value: Any) -> float | None:
    """``value`` as a float when it is one finite real number, else ``None``.

    Real numbers (numpy's included) and 0-d numeric values with ``__float__``
    (a 0-d array, a framework's scalar tensor) count; a bool, a string,
    ``None``, NaN and infinities do not. This is the one place where a
    reported value becomes a number.

    Args:
        value: A reported or stored value.

    >>> as_number(3), as_number("3"), as_number(True), as_number(float("nan"))
    (3.0, None, None, None)
    """
    if isinstance(value, (bool, str, bytes)) or value is None:
        return None
    if not isinstance(value, numbers.Real):  # a 0-d array or tensor of numbers, not of bools
        if (
            not hasattr(value, "__float__")
            or getattr(value, "ndim", 0) != 0
            or getattr(getattr(value, "dtype", None), "kind", None) == "b"
        ):
            return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _shown(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def output_problem(name: str, value: Any) -> str | None:
    """Why the output ``name`` = ``value`` is not a measurement, or ``None`` when it is a finite number.

    Args:
        name: The output's name (it starts the reason).
        value: The reported value.

    >>> output_problem("runtime", "fast"), output_problem("runtime", None)
    ("runtime: 'fast' is not a number", 'runtime: no value')
    >>> output_problem("y", float("inf")), output_problem("y", 2) is None
    ('non-finite output y=inf', True)
    """
    if as_number(value) is not None:
        return None
    if value is None:
        return f"{name}: no value"
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return f"non-finite output {name}={float(value)}"
    return f"{name}: {_shown(value)} is not a number"


def parse_outputs(result: Mapping[str, Any] | None) -> tuple[dict[str, float], str | None]:
    """A result's outputs as finite floats, or the reason it is no measurement.

    Every face (a session, the Ray searchers and scheduler, the service and
    its client) turns what a trial reported into outputs here, so the same
    result fails the same way everywhere.

    Args:
        result: Output names to reported values (``None``: nothing reported).

    Returns:
        ``(values, None)`` when every value is a finite number, else
        ``({}, reason)`` naming the first bad output.

    >>> parse_outputs({"y": 1, "z": 2.5})
    ({'y': 1.0, 'z': 2.5}, None)
    >>> parse_outputs({"y": 1.0, "runtime": "fast"})
    ({}, "runtime: 'fast' is not a number")
    >>> parse_outputs({})
    ({}, 'no output reported')
    >>> parse_outputs(0.5)
    ({}, 'result: float is not a mapping of output names to values')
    """
    if not isinstance(result, Mapping) and result is not None:
        return {}, f"result: {type(result).__name__} is not a mapping of output names to values"
    if not result:
        return {}, "no output reported"
    values: dict[str, float] = {}
    for name, value in result.items():
        number = as_number(value)
        if number is None:
            return {}, output_problem(str(name), value)
        values[str(name)] = number
    return values, None
