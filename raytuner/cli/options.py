"""Option values shared by the command groups: ``NAME=VALUE`` pairs, JSON arguments, JSON output.

Example:
    >>> pairs(["n=3", "name=cori", "ok=true"], "--task")
    {'n': 3, 'name': 'cori', 'ok': True}
    >>> json_arg('[1, 2]', "--tasks-json", list)
    [1, 2]
"""

from __future__ import annotations

import json
from typing import Any, Iterable

import click

__all__ = ["parse_value", "pairs", "json_arg", "echo_json"]


def parse_value(text: str) -> Any:
    """``text`` as JSON when it is JSON (``3``, ``true``, ``[1]``), else the text itself.

    Args:
        text: A ``VALUE`` of ``NAME=VALUE``.
    """
    try:
        return json.loads(text)
    except ValueError:
        return text


def pairs(items: Iterable[str], option: str) -> dict[str, Any]:
    """``NAME=VALUE`` items as a dict (values read by :func:`parse_value`); a bad item names ``option``.

    Args:
        items: The option's values.
        option: The option's name, for the error message.
    """
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not NAME=VALUE", param_hint=option)
        out[key] = parse_value(value)
    return out


def json_arg(text: str | None, option: str, kind: type) -> Any:
    """The JSON value of ``text`` (``None`` when not given), which must be a ``kind``.

    Args:
        text: The option's value.
        option: The option's name, for the error message.
        kind: The JSON type wanted (``list``, ``dict``).
    """
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise click.BadParameter(f"not valid JSON: {exc}", param_hint=option) from None
    if not isinstance(value, kind):
        raise click.BadParameter(f"must be a JSON {kind.__name__}", param_hint=option)
    return value


def echo_json(value: Any) -> None:
    """Print ``value`` as indented JSON with sorted keys (anything not JSON as its ``str``).

    Args:
        value: What to print.
    """
    click.echo(json.dumps(value, indent=2, sort_keys=True, default=str))
