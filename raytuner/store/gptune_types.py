"""The types of a 2020-schema GPTune file's parameters, which it wrote as strings.

GPTune's 2020 history files (records keyed ``I``, ``P``, ``O``) write every
task and tuning parameter value as a string: ``"3"``, ``"0.46"``, ``"cg"``.
Given the problem's spaces (a meta description, ``--meta``), each value is read
by its parameter's type. Without them, :func:`infer_types` gives each
parameter one type for all its values:

1. the type the file's own ``model_data`` spaces declare (``IS``/``PS``
   entries, named by the records' key order), where the values fit it: a
   categorical of GPTune's categories keeps its values as those strings, as
   GPTune's boundary check (``value in categories``) needs;
2. else by the values: categorical (with the values seen) when any value is
   not a number, else integer when every value is written as a whole number,
   else real.

:func:`inference_note` says all of it in one line (the reader logs it as a
warning, and ``raytuner history import`` prints it).

Example:
    >>> legacy = {"name": "p", "func_eval": [
    ...     {"I": {"n": "8"}, "P": {"solver": "cg", "tol": "1e-3"}, "O": {"r": 1.0}},
    ...     {"I": {"n": "9"}, "P": {"solver": "gmres", "tol": "0.5"}, "O": {"r": 2.0}}]}
    >>> types = infer_types(legacy)
    >>> for part in inference_note(types, None).split("; "):
    ...     print(part)
    values written as strings were typed by inference (no problem given
    0 of 3 as the file's model_data declares
    --meta sets them): n integer, solver categorical cg|gmres, tol real
    >>> typed_values({"solver": "cg", "tol": "1e-3"}, None, types)
    {'solver': 'cg', 'tol': 0.001}
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from raytuner.problem.space import ProblemSpace, Space

__all__ = ["InferredType", "infer_types", "inference_note", "typed_values"]

_INT = re.compile(r"[+-]?\d+")
#: A legacy space entry's ``type``, as a parameter type.
_DECLARED = {"int": "integer", "integer": "integer", "real": "real", "categorical": "categorical"}
_SPACES = (("input_space", ("input_space", "IS")), ("parameter_space", ("parameter_space", "PS")))
_SHOWN_CATEGORIES = 8  # categories the note lists per parameter


@dataclass(frozen=True)
class InferredType:
    """The type given to a parameter whose values a legacy file wrote as strings, with no problem to say it.

    Args:
        type: ``integer``, ``real`` or ``categorical``.
        categories: A categorical parameter's values: those the file's model spaces declare, else those
            seen, in order of first appearance.
        declared: Whether the type is the one the file's own ``model_data`` spaces declare.

    >>> InferredType("categorical", ("a", "b")).label()
    'categorical a|b'
    """

    type: str
    categories: tuple[str, ...] = ()
    declared: bool = False

    def label(self) -> str:
        """The type as the note says it: ``integer``, ``real`` or ``categorical a|b|c``."""
        if self.type != "categorical":
            return self.type
        more = len(self.categories) - _SHOWN_CATEGORIES
        return "categorical " + "|".join(self.categories[:_SHOWN_CATEGORIES]) + (f"|...(+{more})" if more > 0 else "")


def _number(text: str) -> int | float | None:
    """The finite number ``text`` spells (an int when written as a whole number), else ``None``."""
    text = text.strip()
    if _INT.fullmatch(text):
        return int(text)
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _declared_types(data: Mapping[str, Any], names: Mapping[str, list[str]]) -> dict[str, InferredType]:
    """By name, the types a legacy file's ``model_data`` spaces declare (the first model declaring one wins).

    An entry is named by its ``name``, else by its position in ``names`` (the records' key order, the
    order GPTune writes both in) when the counts match.
    """
    out: dict[str, InferredType] = {}
    for model in data.get("model_data") or []:
        space = model.get("problem_space") if isinstance(model, Mapping) else None
        if not isinstance(space, Mapping):
            continue
        for key, spellings in _SPACES:
            entries = next((space[s] for s in spellings if s in space), None)
            if not isinstance(entries, list):
                continue
            positions: list[str | None] = list(names[key]) if len(entries) == len(names[key]) else [None] * len(entries)
            for entry, position in zip(entries, positions):
                if not isinstance(entry, Mapping):
                    continue
                kind, name = _DECLARED.get(str(entry.get("type"))), entry.get("name", position)
                if kind is None or not isinstance(name, str) or name in out:
                    continue
                categories = entry.get("categories") if kind == "categorical" else None
                out[name] = InferredType(
                    kind, tuple(str(c) for c in categories) if isinstance(categories, list) else (), declared=True
                )
    return out


def _fit(values: list[str], declared: InferredType | None) -> InferredType:
    """The type of a parameter written as ``values``: ``declared`` where the values fit it, else by the values."""
    numbers = [_number(v) for v in values]
    if declared is not None and declared.type == "categorical":
        return declared if declared.categories else InferredType("categorical", tuple(dict.fromkeys(values)), True)
    if declared is not None and all(
        n is not None and (declared.type == "real" or float(n).is_integer()) for n in numbers
    ):
        return declared
    if any(n is None for n in numbers):
        return InferredType("categorical", tuple(dict.fromkeys(values)))
    return InferredType("integer" if all(isinstance(n, int) for n in numbers) else "real")


def infer_types(data: Mapping[str, Any], problem: ProblemSpace | None = None) -> dict[str, InferredType]:
    """By name, in the records' order, the types of a 2020-schema file's parameters written as strings.

    Only parameters that ``problem`` does not type are inferred (see the module's description).

    Args:
        data: The file's JSON value (records keyed ``I``, ``P``, ``O``).
        problem: The problem's spaces, whose parameters need no inference.

    >>> infer_types({"func_eval": [{"I": {"t": 1}, "P": {"x": "2"}}]})
    {'x': InferredType(type='integer', categories=(), declared=False)}
    """
    records = [r for r in data.get("func_eval") or [] if isinstance(r, Mapping)]
    typed = set(problem.input_space.names + problem.parameter_space.names) if problem is not None else set()
    seen: dict[str, list[str]] = {}
    for record in records:
        for key in ("I", "P"):
            values = record.get(key)
            for name, value in values.items() if isinstance(values, Mapping) else ():
                if isinstance(value, str) and name not in typed:
                    seen.setdefault(name, []).append(value)
    if not seen:
        return {}
    first = next((r for r in records if isinstance(r.get("I"), Mapping) or isinstance(r.get("P"), Mapping)), {})
    declared = _declared_types(
        data, {"input_space": list(first.get("I") or {}), "parameter_space": list(first.get("P") or {})}
    )
    return {name: _fit(values, declared.get(name)) for name, values in seen.items()}


def inference_note(types: Mapping[str, InferredType], problem: ProblemSpace | None) -> str:
    """One line naming every inferred type, and how many the file's own model spaces declared.

    Args:
        types: What :func:`infer_types` gave.
        problem: The problem given to the reader (``None``: none).
    """
    declared = sum(t.declared for t in types.values())
    return (
        f"values written as strings were typed by inference "
        f"({'no problem given' if problem is None else 'not in the problem'}; {declared} of {len(types)} "
        f"as the file's model_data declares; --meta sets them): "
        + ", ".join(f"{name} {kind.label()}" for name, kind in types.items())
    )


def _converted(value: str, kind: str) -> Any:
    """``value`` as a value of a ``kind`` parameter (unchanged when it is categorical or no number)."""
    number = _number(value) if kind != "categorical" else None
    if number is None:
        return value
    return int(number) if kind == "integer" and float(number).is_integer() else float(number)


def typed_values(values: Mapping[str, Any], space: Space | None, types: Mapping[str, InferredType]) -> dict[str, Any]:
    """``values`` with strings converted: by ``space``'s types where it has the name, else by ``types``.

    Args:
        values: A record's ``I`` or ``P`` values.
        space: The problem's space of them, if given.
        types: What :func:`infer_types` gave.

    >>> typed_values({"x": "2", "c": "red", "t": 1}, None, infer_types({"func_eval": [{"P": {"x": "2", "c": "red"}}]}))
    {'x': 2, 'c': 'red', 't': 1}
    """
    params = {p.name: p for p in space} if space is not None else {}
    out = dict(values)
    for name, value in values.items():
        param = params.get(name)
        if not isinstance(value, str) or (param is None and name not in types):
            continue
        if param is not None and param.type == "categorical":
            out[name] = next((c for c in param.categories if str(c) == value), value)
        else:
            out[name] = _converted(value, param.type if param is not None else types[name].type)
    return out
