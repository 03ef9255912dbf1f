"""History stores: GPTune JSON files (embedded default) and MongoDB, behind one interface.

Example:
    >>> import tempfile
    >>> store = open_store(tempfile.mkdtemp())
    >>> type(store).__name__
    'JsonStore'
    >>> store.close()
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from raytuner.store.base import EvaluationQuery, HistoryStore, VersionRange, check_problem_name
from raytuner.store.json_store import JsonStore, read_history_file, write_history_file
from raytuner.store.source import StoreSource

if TYPE_CHECKING:  # pragma: no cover
    from raytuner.store.mongo_store import MongoStore

__all__ = [
    "HistoryStore",
    "EvaluationQuery",
    "VersionRange",
    "JsonStore",
    "MongoStore",
    "open_store",
    "StoreSource",
    "is_mongodb_uri",
    "read_history_file",
    "write_history_file",
    "check_problem_name",
]


def is_mongodb_uri(location: str | os.PathLike[str]) -> bool:
    """Whether ``location`` names a MongoDB server rather than a directory."""
    return str(location).startswith(("mongodb://", "mongodb+srv://"))


def open_store(location: str | os.PathLike[str]) -> HistoryStore:
    """Open the store at ``location``: a ``mongodb://`` URI or a directory of GPTune files.

    The database of a MongoDB URI is its path (``mongodb://host:27017/mydb``),
    ``raytuner`` when the URI names none.
    """
    if is_mongodb_uri(location):
        from raytuner.store.mongo_store import MongoStore

        return MongoStore(str(location))
    return JsonStore(location)


def __getattr__(name: str) -> object:
    if name == "MongoStore":
        from raytuner.store.mongo_store import MongoStore

        return MongoStore
    raise AttributeError(name)
