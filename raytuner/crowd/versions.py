"""Sortable version keys: versions compared part by part as numbers, inside MongoDB.

A version ``[5, 10]`` is stored beside the record as a fixed-width key, each
of :data:`PARTS` parts zero-padded to :data:`WIDTH` digits, so that the
database's plain ordering of the key is the numeric ordering of the version
(``5.10 > 5.9``) and a version range is one index range scan. Missing
trailing parts count as 0 (``8 == 8.0.0``).

Example:
    >>> version_key([5, 10]) > version_key([5, 9])
    True
    >>> version_key([8]) == version_key([8, 0, 0])
    True
    >>> version_key("5.10.1")[:21]
    '0000000005.0000000010'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from raytuner.errors import InvalidInputError
from raytuner.problem.environment import split_version

__all__ = ["version_key", "version_parts", "PARTS", "WIDTH"]

#: Parts a key holds (longer versions are refused) and digits per part.
PARTS = 6
WIDTH = 10
_LIMIT = 10**WIDTH


def version_parts(version: Any, field: str = "version") -> list[int]:
    """A version as a list of non-negative integers, from a list of ints or a ``"1.2.3"`` string.

    A string keeps its leading numeric parts (``"2.60.0rc1"`` is ``[2, 60, 0]``:
    :func:`raytuner.problem.environment.split_version`, as records store versions).

    Args:
        version: a list of ints or a version string.
        field: the input's name in the error.

    Raises:
        InvalidInputError: ``version`` is empty, longer than :data:`PARTS`, or not non-negative integers.
    """
    if isinstance(version, str):
        version = split_version(version)
    if (
        not isinstance(version, (list, tuple))
        or not version
        or len(version) > PARTS
        or not all(isinstance(p, int) and not isinstance(p, bool) and 0 <= p < _LIMIT for p in version)
    ):
        raise InvalidInputError(
            field,
            f"{version!r} is not a version",
            allowed=[f"1-{PARTS} non-negative integers below 10**{WIDTH}, e.g. [8, 3, 0]"],
        )
    return list(version)


def version_key(version: Sequence[int] | str, field: str = "version") -> str:
    """The sortable key of ``version`` (see the module documentation).

    Args:
        version: a list of ints or a version string.
        field: the input's name in the error.
    """
    parts = version_parts(version, field)
    parts = parts + [0] * (PARTS - len(parts))
    return ".".join(f"{p:0{WIDTH}d}" for p in parts)
