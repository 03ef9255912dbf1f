"""Checks for every user-supplied string that reaches a MongoDB filter or document key.

Filters are built only from values these checks return: a name that would
become a field path must not start with ``$`` or contain ``.`` or NUL; a
value must be a plain scalar (no mapping, so no ``{"$gt": ""}``), and a
string value must not start with ``$``.

Example:
    >>> check_username("alice")
    'alice'
    >>> check_field_name("$where", "problem_space.input_space[0].name")
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: problem_space.input_space[0].name: '$where' cannot be used as a field name (allowed: names that do not start with '$' and contain no '.' or NUL)
    >>> check_scalar({"$gt": ""}, "categories[0]")
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: categories[0]: {'$gt': ''} is not a plain value (allowed: strings not starting with '$', numbers, booleans)
"""

from __future__ import annotations

import math
import re
from typing import Any

from raytuner.errors import InvalidInputError, shown

__all__ = [
    "check_username",
    "check_group",
    "check_email",
    "check_field_name",
    "check_scalar",
    "check_catalog_name",
    "NAME_RULE",
    "FIELD_RULE",
]

NAME_RULE = "1-64 of letters, digits, '_', '.', '-', starting with a letter or digit"
FIELD_RULE = "names that do not start with '$' and contain no '.' or NUL"
SCALAR_RULE = "strings not starting with '$', numbers, booleans"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_EMAIL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+")
_CATALOG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+ -]{0,127}")


def _check_name(name: Any, field: str, kind: str) -> str:
    """``name`` if it follows :data:`NAME_RULE`; else the error naming ``field`` and what ``kind`` of name it is."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidInputError(field, f"{shown(name)} is not a valid {kind} name", allowed=[NAME_RULE])
    return name


def check_username(name: Any, field: str = "username") -> str:
    """A username (also used for shared-with lists and ``user_configurations``).

    Args:
        name: the value to check.
        field: the field named in the error (default ``"username"``).
    """
    return _check_name(name, field, "user")


def check_group(name: Any, field: str = "groups") -> str:
    """A group name (same rule as user names).

    Args:
        name: the value to check.
        field: the field named in the error (default ``"groups"``).
    """
    return _check_name(name, field, "group")


def check_email(email: Any, field: str = "email") -> str:
    """An e-mail address, lower-cased (``user@example.org``).

    Args:
        email: the value to check.
        field: the field named in the error (default ``"email"``).
    """
    if not isinstance(email, str) or len(email) > 254 or not _EMAIL.fullmatch(email):
        raise InvalidInputError(field, f"{shown(email)} is not a valid e-mail address", allowed=["user@domain.tld"])
    return email.lower()


def check_catalog_name(name: Any, field: str) -> str:
    """A machine or software name or alias (letters, digits, ``_ . + -`` and spaces), stripped.

    Args:
        name: the value to check.
        field: the field named in the error.
    """
    if isinstance(name, str):
        name = name.strip()
    if not isinstance(name, str) or not _CATALOG.fullmatch(name):
        raise InvalidInputError(
            field,
            f"{shown(name)} is not a valid machine or software name",
            allowed=["1-128 of letters, digits, '_', '.', '+', '-', ' ', starting with a letter or digit"],
        )
    return name


def check_field_name(key: Any, field: str) -> str:
    """A name that becomes part of a MongoDB field path (a parameter or processor name).

    Args:
        key: the value to check.
        field: the field named in the error.
    """
    if not isinstance(key, str) or not key or key.startswith("$") or "." in key or "\x00" in key:
        raise InvalidInputError(field, f"{shown(key)} cannot be used as a field name", allowed=[FIELD_RULE])
    return key


def check_scalar(value: Any, field: str) -> str | int | float | bool:
    """A value that goes into a filter as a literal: a finite number, a boolean or a plain string.

    Args:
        value: the value to check.
        field: the field named in the error.
    """
    if isinstance(value, bool) or (isinstance(value, int) and -(2**63) <= value < 2**63):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    if isinstance(value, str) and not value.startswith("$") and "\x00" not in value:
        return value
    raise InvalidInputError(field, f"{shown(value)} is not a plain value", allowed=[SCALAR_RULE])
