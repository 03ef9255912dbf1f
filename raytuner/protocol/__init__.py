"""The wire contract shared by the gRPC servers and their clients.

``raytuner.v1.TuningService`` and ``raytuner.v1.CrowdService`` are defined in
``protos/raytuner/protocol/v1/tuning.proto``; :mod:`raytuner.protocol.v1`
holds the generated stubs. JSON travels in string fields, written by
:func:`dumps` and at most :data:`MAX_JSON_BYTES` long.

Example:
    >>> dumps({"x": 1.5, "n": [1, 2]})
    '{"x":1.5,"n":[1,2]}'
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["MAX_JSON_BYTES", "MAX_MESSAGE_BYTES", "METADATA_KEY", "dumps"]

#: Largest JSON text field, and largest failure message.
MAX_JSON_BYTES = 1024 * 1024
#: Largest message either side sends or reads (larger ones get RESOURCE_EXHAUSTED from gRPC).
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
#: The request metadata entry that carries the API key.
METADATA_KEY = "x-api-key"


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else str(value)  # numpy scalars become numbers


def dumps(value: Any) -> str:
    """Compact JSON text of ``value`` (numpy scalars as numbers, anything else as its ``str``).

    Args:
        value: What to write.
    """
    return json.dumps(value, separators=(",", ":"), default=_plain)
