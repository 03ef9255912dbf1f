"""Errors raised by raytuner.

Every error about user input names the offending field and, where it makes
sense, the values that are allowed, so that a message alone tells the user
what to fix.

Example:
    >>> from raytuner.errors import InvalidInputError
    >>> err = InvalidInputError("parameter_space[0].type", "unknown type 'foo'",
    ...                         allowed=["real", "integer", "categorical"])
    >>> str(err)
    "parameter_space[0].type: unknown type 'foo' (allowed: real, integer, categorical)"
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

ModelT = TypeVar("ModelT", bound=BaseModel)


class RaytunerError(Exception):
    """Base class of every error raytuner raises on purpose."""


class InvalidInputError(RaytunerError, ValueError):
    """Bad user input: names the field, what is wrong, and what is allowed.

    Args:
        field: where the bad value is (``parameter_space[0].type``; empty: no one field).
        message: what is wrong with it.
        allowed: the values that would do (default: not listed).
    """

    def __init__(self, field: str, message: str, allowed: Iterable[Any] | None = None) -> None:
        self.field = field
        self.reason = message
        self.allowed = list(allowed) if allowed is not None else None
        text = f"{field}: {message}" if field else message
        if self.allowed:
            text += f" (allowed: {', '.join(str(a) for a in self.allowed)})"
        super().__init__(text)


class InfeasibleSpaceError(RaytunerError):
    """A space is so constrained that a sample of the requested size cannot be drawn."""


class AwaitingResults(RaytunerError):
    """An engine has nothing to suggest until evaluations in flight are told (a rung is not complete)."""


class TuningFinished(RaytunerError):
    """An engine has run its whole plan (every pass of every bracket); nothing is left to suggest."""


class TrialConflict(RaytunerError):
    """A trial cannot take this request in its state (told before with another result; asked again once told)."""

    grpc_status = "FAILED_PRECONDITION"


class UnknownTrial(RaytunerError):
    """A session has no such trial: it was never handed out (or belongs to another session)."""

    grpc_status = "NOT_FOUND"


class StoreError(RaytunerError):
    """A history store cannot do what was asked (unreadable file, unreachable server)."""


class MissingPackageError(RaytunerError):
    """Something optional was asked for whose packages are not installed; the message says which extra has them."""


#: How many characters of a value an error message shows (:func:`shown`).
SHOWN_CHARACTERS = 80


def shown(value: Any, limit: int = SHOWN_CHARACTERS) -> str:
    """``value`` as an error message quotes it: its ``repr``, cut to ``limit`` characters and saying how long it was.

    A message echoes what the caller sent; a 20,000-character id must not come back whole.

    Args:
        value: What the caller sent (any value; a non-string is shown by its ``repr``, cut likewise).
        limit: How many of its characters to show.

    >>> shown("demo\\n"), shown("a" * 100, limit=5), shown({"$gt": ""})
    ("'demo\\\\n'", "'aaaaa'... (100 characters)", "{'$gt': ''}")
    """
    if not isinstance(value, str):
        text = repr(value)
        return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}... ({len(value)} characters)"


def field_path(loc: Sequence[int | str], prefix: str = "") -> str:
    """Render a pydantic error location as ``a.b[0].c``.

    Args:
        loc: a pydantic error location.
        prefix: a path to put in front (default none).

    >>> field_path(("parameter_space", 0, "type"))
    'parameter_space[0].type'
    """
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def from_validation_error(err: ValidationError, prefix: str = "") -> InvalidInputError:
    """Turn a pydantic ``ValidationError`` into one :class:`InvalidInputError`.

    The first error decides the field; the message keeps pydantic's wording,
    which already lists expected tags and literal values.

    Args:
        err: pydantic's error.
        prefix: a path to put in front of the field (default none).
    """
    first = err.errors(include_url=False)[0]
    # "parameters" is the inner field of a Space, which users write as a plain list
    loc = [p for p in first.get("loc", ()) if not _is_union_tag(p) and p != "parameters"]
    ctx = first.get("ctx") or {}
    cause = ctx.get("error")
    if isinstance(cause, InvalidInputError):
        field = field_path(loc, prefix)
        inner = cause.field
        joined = field + ("" if inner.startswith("[") else ".") + inner if field and inner else field or inner
        return InvalidInputError(joined, cause.reason, cause.allowed)
    message = first.get("msg", str(err))
    message = message.removeprefix("Value error, ")
    return InvalidInputError(field_path(loc, prefix), message)


class CheckedModel(BaseModel):
    """A pydantic model whose constructor raises one :class:`InvalidInputError` naming the field.

    Plain pydantic raises its multi-line ``ValidationError`` from ``Model(...)``; a model built
    from this class says what :func:`validate` says, so ``Real(name="x", lower_bound=2,
    upper_bound=1)`` is refused with one line. Subclass it instead of ``BaseModel`` for
    classes users construct themselves.

    >>> class Point(CheckedModel):
    ...     x: int
    >>> Point(x="one")
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: x: Input should be a valid integer, unable to parse string as an integer
    """

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise from_validation_error(exc) from None


def _is_union_tag(part: Any) -> bool:
    # pydantic puts the discriminator tag ('real', 'integer', ...) or a
    # function-validator name into the location of union members.
    return isinstance(part, str) and (
        part in {"real", "integer", "categorical", "int", "float", "str", "bool"} or "[" in part
    )


def validate(model: type[ModelT], data: Any, prefix: str = "") -> ModelT:
    """``model.model_validate(data)``, raising one :class:`InvalidInputError` that names the field.

    Args:
        model: the pydantic model class.
        data: the input.
        prefix: a path to put in front of the field (default none).

    >>> from pydantic import BaseModel
    >>> class Point(BaseModel):
    ...     x: int
    >>> validate(Point, {"x": "one"}, "point")
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: point.x: Input should be a valid integer, unable to parse string as an integer
    """
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(exc, prefix) from None
