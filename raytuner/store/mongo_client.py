"""Opening a MongoDB client, and the driver's errors as raytuner's: one place for every MongoDB user.

:func:`open_client` turns a malformed URI into
:class:`~raytuner.errors.InvalidInputError`; :func:`mongo_errors` turns what
the driver raises inside its block into :class:`~raytuner.errors.StoreError`
(an unreachable server named as such, with pymongo's long topology
description cut off) or, for data MongoDB cannot store, into
:class:`~raytuner.errors.InvalidInputError` naming the input. The MongoDB
store, the crowd repository, the local test server and the benchmarks all
open their clients here.

Example:
    >>> from pymongo.errors import ServerSelectionTimeoutError
    >>> with mongo_errors("read 'demo'", server="the MongoDB server db.example.org",
    ...                   owner="MongoDB server db.example.org (database 'tuning')"):
    ...     raise ServerSelectionTimeoutError("timed out, Topology Description: <...>")
    Traceback (most recent call last):
    ...
    raytuner.errors.StoreError: cannot reach the MongoDB server db.example.org to read 'demo': timed out
    >>> open_client("mongodb://db.example.org:notaport")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: uri: invalid MongoDB URI: Port ...
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pymongo
from bson.errors import InvalidDocument
from pymongo.errors import BulkWriteError, ConfigurationError, ConnectionFailure, PyMongoError

from raytuner.errors import InvalidInputError, StoreError

__all__ = ["open_client", "mongo_errors", "unreachable_reason", "redact_uri", "already_stored"]

#: MongoDB's error code for a document whose key is stored already.
_DUPLICATE_KEY = 11000


def open_client(
    uri: str,
    *,
    timeout_ms: int = 10000,
    appname: str = "raytuner",
    field: str = "uri",
    shown_as: str | None = None,
    **options: Any,
) -> pymongo.MongoClient[dict[str, Any]]:
    """A :class:`pymongo.MongoClient` for ``uri`` (it connects lazily, on the first command).

    Args:
        uri: a ``mongodb://`` or ``mongodb+srv://`` URI.
        timeout_ms: the client's server selection timeout in milliseconds.
        appname: the name the server logs for this client.
        field: the input's name in the error when ``uri`` is malformed.
        shown_as: ``uri`` as the error may show it (no password); ``None``: the URI is not shown.
        **options: further :class:`pymongo.MongoClient` options (``directConnection``, ``connectTimeoutMS``).

    Raises:
        InvalidInputError: ``uri`` (or an option) is not valid.
    """
    try:
        client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(
            uri, serverSelectionTimeoutMS=timeout_ms, appname=appname, **options
        )
    except (ConfigurationError, ValueError, TypeError) as exc:
        where = f" {shown_as}" if shown_as is not None else ""
        raise InvalidInputError(field, f"invalid MongoDB URI{where}: {exc}") from None
    return client


def redact_uri(uri: str) -> str:
    """The URI without credentials or options, for messages.

    Args:
        uri: A ``mongodb://`` URI.

    >>> redact_uri("mongodb://alice:s3cret@db.example.org:27017/tuning?authSource=admin")
    'mongodb://db.example.org:27017/tuning'
    """
    uri = re.sub(r"^(mongodb(?:\+srv)?://)[^/?#]*@", r"\1", uri)
    return uri.split("?", 1)[0]


def unreachable_reason(exc: BaseException) -> str:
    """The driver's message without its (long) topology description.

    Args:
        exc: a driver error.

    Example:
        >>> unreachable_reason(ValueError("No servers found, Topology Description: <...>"))
        'No servers found'
    """
    return str(exc).split(", Topology Description:", 1)[0]


@contextmanager
def mongo_errors(action: str, *, server: str, owner: str, field: str = "record") -> Iterator[None]:
    """Within the block, driver errors become :class:`StoreError` and unstorable data :class:`InvalidInputError`.

    Args:
        action: what was being done, after "to" (``"append to 'demo'"``).
        server: the server in "cannot reach <server> to <action>".
        owner: who failed in "<owner> failed to <action>" (a store and its database).
        field: the input named when a document cannot be stored (too large, not BSON).

    Raises:
        InvalidInputError: a document cannot be stored in MongoDB.
        StoreError: the server is unreachable or the command failed.
    """
    try:
        yield
    except (InvalidDocument, OverflowError) as exc:  # DocumentTooLarge is an InvalidDocument
        raise InvalidInputError(field, f"cannot be stored in MongoDB: {exc}") from None
    except ConnectionFailure as exc:
        raise StoreError(f"cannot reach {server} to {action}: {unreachable_reason(exc)}") from None
    except PyMongoError as exc:
        raise StoreError(f"{owner} failed to {action}: {exc}") from None


def already_stored(exc: BulkWriteError, failed_to: str) -> list[dict[str, Any]]:
    """The write errors of an unordered ``insert_many`` whose key was stored already; any other is a StoreError.

    Args:
        exc: what ``insert_many(documents, ordered=False)`` raised.
        failed_to: who failed to do what, for the error (``"MongoDB server x failed to append to 'demo'"``).

    Raises:
        StoreError: a document failed for another reason, or the write concern failed.

    >>> already_stored(BulkWriteError({"writeErrors": [{"index": 1, "code": 11000}]}), "the store failed to append")
    [{'index': 1, 'code': 11000}]
    >>> already_stored(BulkWriteError({"writeErrors": [{"index": 0, "code": 2, "errmsg": "bad"}]}), "it failed to append")
    Traceback (most recent call last):
    ...
    raytuner.errors.StoreError: it failed to append: 1 records not written, first error: bad
    """
    details = exc.details
    failed: list[dict[str, Any]] = details.get("writeErrors", [])
    others = [e for e in failed if e.get("code") != _DUPLICATE_KEY]
    if others or details.get("writeConcernErrors"):
        first = (others or details["writeConcernErrors"])[0]
        raise StoreError(
            f"{failed_to}: {len(others)} records not written, first error: {first.get('errmsg', first)}"
        ) from None
    return failed
