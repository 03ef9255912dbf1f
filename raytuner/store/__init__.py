"""History stores: GPTune JSON files (embedded default) and MongoDB, behind one interface, each with its trial ledger.

Example:
    >>> import tempfile
    >>> store = open_store(tempfile.mkdtemp())
    >>> type(store).__name__
    'JsonStore'
    >>> list(store.ledger().read("trials"))     # the trial ledger beside the records
    []
    >>> store.close()
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from raytuner.store.base import EvaluationQuery, HistoryStore, StoreChanges, VersionRange, check_problem_name
from raytuner.store.gptune_file import history_text, read_history_file, write_history_file
from raytuner.store.json_store import JsonStore
from raytuner.store.ledger import JsonLedger, Ledger, MongoLedger
from raytuner.store.location import is_mongodb_uri, open_store
from raytuner.store.source import StoreSource

if TYPE_CHECKING:  # pragma: no cover
    from raytuner.store.mongo_store import MongoStore

__all__ = [
    "HistoryStore",
    "EvaluationQuery",
    "StoreChanges",
    "VersionRange",
    "JsonStore",
    "MongoStore",
    "open_store",
    "Ledger",
    "JsonLedger",
    "MongoLedger",
    "StoreSource",
    "is_mongodb_uri",
    "read_history_file",
    "write_history_file",
    "history_text",
    "check_problem_name",
]


def __getattr__(name: str) -> object:
    if name == "MongoStore":
        from raytuner.store.mongo_store import MongoStore

        return MongoStore
    raise AttributeError(name)
