"""Reading JSON input files so that every failure is one :class:`~raytuner.errors.InvalidInputError`.

A missing file, a directory, bytes that are not UTF-8, text that is not JSON
and JSON of the wrong shape each raise one error naming the file and the field
inside it. The command line, the history store's :func:`raytuner.store.read_history_file`
and meta descriptions read user files through here.

Example:
    >>> import tempfile, pathlib
    >>> from raytuner.problem.records import HistoryDocument
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "h.json"
    >>> _ = path.write_text('{"tuning_problem_name": "p", "func_eval": 3}')
    >>> parse_json_file(path, HistoryDocument.model_validate, "a GPTune history")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: .../h.json: func_eval: Input should be a valid list
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from raytuner.errors import InvalidInputError, from_validation_error
from raytuner.store.jsontext import loads_stored

__all__ = ["read_json_file", "parse_json_file"]

T = TypeVar("T")


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    return {dict: "object", list: "list", str: "string", int: "number", float: "number", type(None): "null"}.get(
        type(value), type(value).__name__
    )


def read_json_file(path: str | os.PathLike[str]) -> Any:
    """The JSON value in the file ``path``; :class:`InvalidInputError` naming the file when there is none.

    Args:
        path: the JSON file.

    >>> read_json_file("/nonexistent/x.json")
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: /nonexistent/x.json: does not exist
    """
    name = str(path)
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise InvalidInputError(name, "does not exist") from None
    except IsADirectoryError:
        raise InvalidInputError(name, "is a directory; expected a JSON file") from None
    except OSError as exc:
        raise InvalidInputError(name, f"cannot read it: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(
            name, f"not a JSON file: byte {exc.start} ({raw[exc.start]:#04x}) is not UTF-8 text"
        ) from None
    if not text.strip():
        raise InvalidInputError(name, "is empty; expected a JSON object")
    try:
        return loads_stored(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(
            name,
            f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
            f"{' (is the file truncated?)' if exc.pos >= len(text.rstrip()) else ''}",
        ) from None
    except RecursionError:
        raise InvalidInputError(name, "not usable JSON: nested too deeply") from None


def parse_json_file(
    path: str | os.PathLike[str], parse: Callable[[Any], T], what: str, defaults: dict[str, Any] | None = None
) -> T:
    """Read a JSON object from ``path`` and ``parse`` it (a pydantic ``model_validate``, or a ``parse``
    that raises :class:`InvalidInputError`).

    Every failure is one :class:`InvalidInputError` that names the file and
    the field inside it (``meta.json: problem_space.parameter_space[0].type:
    ...``). ``what`` says what the file should hold (``"a GPTune history"``);
    ``defaults`` fill keys the object lacks.

    Args:
        path: the JSON file.
        parse: turns the object into the result; raises on bad data.
        what: what the file should hold, for messages (``"a GPTune history"``).
        defaults: values for keys the object lacks (default none).
    """
    name = str(path)
    data = read_json_file(path)
    if not isinstance(data, dict):
        raise InvalidInputError(name, f"holds a JSON {_kind(data)}; expected a JSON object ({what})")
    if defaults:
        data = {**defaults, **data}
    try:
        return parse(data)
    except ValidationError as exc:
        error = from_validation_error(exc)
    except InvalidInputError as exc:
        error = exc
    raise InvalidInputError(f"{name}: {error.field}" if error.field else name, error.reason, error.allowed)
