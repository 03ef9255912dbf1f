"""Storing uploaded crowd records: idempotent for the uploader, silent about other users' records.

A record's document has ``_id: "<problem>:<uid>"`` (:mod:`raytuner.crowd.documents`),
so uploading a uid again is not a second record. Answering "already there" for a
uid that *another* user stored would tell the uploader that the other user's record
exists, private or not. So a uid already stored by someone else is stored again,
as the uploader's own, under ``"<problem>:<uid>@<uploader>"``: the upload's answer
(records added, records the uploader had stored already) is the one it would get if
the other record did not exist, and the uploader finds its record in its queries.
Only the uploader's own earlier records (or a uid repeated in the upload) count as
duplicates. A reader who may see both records gets both: a uid reused by two
users on purpose names two records.

Example (needs MongoDB)::

    inserted = insert_documents(repo.func_eval, docs, "demo", repo._errors)
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from pymongo.collection import Collection
from pymongo.errors import BulkWriteError

from raytuner.store.mongo_client import already_stored

__all__ = ["insert_documents", "CHUNK"]

log = logging.getLogger(__name__)

#: Documents per bulk write.
CHUNK = 10_000

Errors = Callable[[str], AbstractContextManager[None]]


def insert_documents(
    collection: Collection[dict[str, Any]], docs: list[dict[str, Any]], problem: str, errors: Errors
) -> int:
    """Insert ``docs`` (all of one owner) in unordered bulk writes; returns how many were stored.

    A duplicate ``_id`` is "already there" when the uploader stored it; another user's record with
    that uid leaves the upload's answer as if it were not there (see the module documentation).

    Args:
        collection: The crowd collection (``func_eval`` or ``surrogate_model``).
        docs: The validated documents, each with its ``_id`` and ``owner``.
        problem: The problem's name (for messages).
        errors: Turns driver errors into :class:`~raytuner.errors.StoreError` (the repository's ``_errors``).
    """
    inserted = 0
    for start in range(0, len(docs), CHUNK):
        chunk = docs[start : start + CHUNK]
        added, clashes = _insert_many(collection, chunk, problem, errors)
        if clashes:
            added += _insert_beside_others(collection, clashes, problem, errors)
        inserted += added
    return inserted


def _insert_beside_others(
    collection: Collection[dict[str, Any]], clashes: list[dict[str, Any]], problem: str, errors: Errors
) -> int:
    """Store under the uploader's own ``_id`` the clashing documents whose stored twin is another user's."""
    with errors(f"upload to {problem!r}"):
        held = {
            d["_id"]: d.get("owner")
            for d in collection.find({"_id": {"$in": [c["_id"] for c in clashes]}}, {"owner": 1})
        }
    beside = [dict(c, _id=f"{c['_id']}@{c['owner']}") for c in clashes if held.get(c["_id"]) != c["owner"]]
    if not beside:
        return 0
    log.info("%d uploaded uid(s) of %s were another user's too; stored as the uploader's own", len(beside), problem)
    return _insert_many(collection, beside, problem, errors)[0]


def _insert_many(
    collection: Collection[dict[str, Any]], chunk: list[dict[str, Any]], problem: str, errors: Errors
) -> tuple[int, list[dict[str, Any]]]:
    """``(stored, documents whose _id was there already)``; any other write error is a StoreError."""
    with errors(f"upload to {problem!r}"):
        try:
            return len(collection.insert_many(chunk, ordered=False).inserted_ids), []
        except BulkWriteError as exc:
            failed = already_stored(exc, f"crowd repository failed to upload to {problem!r}")
            return int(exc.details.get("nInserted", 0)), [chunk[e["index"]] for e in failed]
