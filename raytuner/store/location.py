"""Opening a history store from where it is: a directory of GPTune files or a ``mongodb://`` URI.

Example:
    >>> import tempfile
    >>> store = open_store(tempfile.mkdtemp())
    >>> type(store).__name__, open_store(store) is store     # a store is taken as it is
    ('JsonStore', True)
    >>> is_mongodb_uri("mongodb://127.0.0.1:27017/tuning"), is_mongodb_uri("runs/")
    (True, False)
"""

from __future__ import annotations

import os

from raytuner.store.base import HistoryStore
from raytuner.store.json_store import JsonStore

__all__ = ["open_store", "is_mongodb_uri"]


def is_mongodb_uri(location: str | os.PathLike[str]) -> bool:
    """Whether ``location`` names a MongoDB server rather than a directory.

    Args:
        location: A directory or a URI.
    """
    return str(location).startswith(("mongodb://", "mongodb+srv://"))


def open_store(location: HistoryStore | str | os.PathLike[str]) -> HistoryStore:
    """The store at ``location``: a ``mongodb://`` URI or a directory of GPTune files; a store itself unchanged.

    The database of a MongoDB URI is its path (``mongodb://host:27017/mydb``),
    ``raytuner`` when the URI names none.

    Args:
        location: A :class:`HistoryStore` (returned as it is), a directory or a MongoDB URI.
    """
    if isinstance(location, HistoryStore):
        return location
    if is_mongodb_uri(location):
        from raytuner.store.mongo_store import MongoStore  # pymongo only when MongoDB is used

        return MongoStore(str(location))
    return JsonStore(location)
