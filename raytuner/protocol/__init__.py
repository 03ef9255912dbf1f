"""The wire contract shared by the gRPC servers and their clients.

``raytuner.v1.TuningService`` and ``raytuner.v1.CrowdService`` are defined in
``protos/raytuner/protocol/v1/tuning.proto``; :mod:`raytuner.protocol.v1`
holds the generated stubs. JSON travels in string fields, written by
:func:`dumps` as standard JSON (RFC 8259) and at most :data:`MAX_JSON_BYTES`
long. Every JSON field a client sends is read by :func:`json_field`, strictly
(:func:`raytuner.store.jsontext.loads_strict`): no ``NaN`` or ``Infinity``, no lone
surrogate, at most :data:`~raytuner.store.jsontext.MAX_DEPTH` levels deep; anything
else is refused (``INVALID_ARGUMENT``) naming the field.

Example:
    >>> dumps({"x": 1.5, "n": [1, 2]})
    '{"x":1.5,"n":[1,2]}'
    >>> json_field("options_json", '{"a": 1}', dict, {})
    {'a': 1}
"""

from __future__ import annotations

from typing import Any

from raytuner.errors import InvalidInputError
from raytuner.store.jsontext import dumps_standard, loads_strict

__all__ = ["MAX_JSON_BYTES", "MAX_MESSAGE_BYTES", "METADATA_KEY", "dumps", "json_field"]

#: Largest JSON text field (UTF-8 bytes), and largest failure message.
MAX_JSON_BYTES = 1024 * 1024
#: Largest message either side sends or reads (larger ones get RESOURCE_EXHAUSTED from gRPC).
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
#: The request metadata entry that carries the API key.
METADATA_KEY = "x-api-key"


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else str(value)  # numpy scalars become numbers


def dumps(value: Any) -> str:
    """Compact standard JSON text of ``value`` (numpy scalars as numbers, anything else as its ``str``).

    A number that is not finite is written as ``null`` and a lone surrogate as U+FFFD
    (:func:`raytuner.store.jsontext.dumps_standard`), so any parser reads what a server answers.

    Args:
        value: What to write.

    >>> dumps([1.0, float("nan")])
    '[1.0,null]'
    """
    return dumps_standard(value, default=_plain)


def json_field(field: str, text: str, kind: type, default: Any) -> Any:
    """The JSON text of request field ``field``, which must hold a ``kind`` (dict or list); ``default`` if empty.

    At most :data:`MAX_JSON_BYTES` bytes of standard JSON (see :func:`raytuner.store.jsontext.loads_strict`);
    what is not, or is not a ``kind``, is refused with one :class:`InvalidInputError` naming ``field``.

    Args:
        field: the request field's name, for error messages.
        text: its JSON text.
        kind: the type it must hold: ``dict`` or ``list``.
        default: what an empty field gives.
    """
    if not text:
        return default
    value = loads_strict(text, field, MAX_JSON_BYTES)
    if not isinstance(value, kind):
        raise InvalidInputError(
            field, f"must be a JSON {'object' if kind is dict else 'list'}, not {type(value).__name__}"
        )
    return value
