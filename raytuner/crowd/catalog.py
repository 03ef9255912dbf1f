"""Machine and software catalogs: canonical names and the other names people use for them.

Different users describe the same machine or package differently ("Cori",
"cori", "cori.nersc.gov"). A catalog maps every known name, compared without
regard to case, to one canonical name; uploads and query filters both go
through :meth:`AliasCatalog.canonical`, so they meet on the same name. A name
the catalog does not know stays as given, and is still matched without
regard to case (through :func:`match_key`).

One document per canonical name: ``{"_id": canonical, "aliases": [...],
"keys": [lower-cased canonical and aliases]}``, with a unique index on
``keys``, so that a name can never belong to two canonical names.

Example:
    >>> match_key("  Cori.NERSC.gov ")
    'cori.nersc.gov'
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import pymongo
from pymongo.collection import Collection
from pymongo.errors import DuplicateKeyError

from raytuner.crowd.names import check_catalog_name
from raytuner.errors import InvalidInputError

__all__ = ["AliasCatalog", "match_key"]

log = logging.getLogger(__name__)


def match_key(name: str) -> str:
    """The case-insensitive form names are matched on.

    Args:
        name: a machine or software name.
    """
    return name.strip().lower()


class AliasCatalog:
    """Canonical names and aliases of one kind (``machine`` or ``software``) in one collection.

    Args:
        collection: the MongoDB collection the catalog lives in.
        kind: ``"machine"`` or ``"software"``.
    """

    def __init__(self, collection: Collection[dict[str, Any]], kind: str) -> None:
        self.collection = collection
        self.kind = kind

    def create_indexes(self) -> None:
        """The unique index on the lower-cased names."""
        self.collection.create_indexes(
            [pymongo.IndexModel([("keys", pymongo.ASCENDING)], unique=True, name="alias_keys_unique")]
        )

    def add(self, name: str, aliases: Iterable[str] = ()) -> str:
        """Register ``name`` (canonical) with ``aliases``; adding to an existing entry extends it.

        An alias that already names another entry raises :class:`InvalidInputError`.

        Args:
            name: the canonical name.
            aliases: other names for it (default none).
        """
        name = check_catalog_name(name, "name")
        if isinstance(aliases, str):
            raise InvalidInputError("aliases", "must be a list of names, not one string")
        alias_list = [check_catalog_name(a, f"aliases[{i}]") for i, a in enumerate(aliases)]
        keys = sorted({match_key(name), *(match_key(a) for a in alias_list)})
        owner = self.collection.find_one({"keys": {"$in": keys}, "_id": {"$ne": name}}, {"_id": 1})
        if owner is not None:
            raise InvalidInputError("aliases", f"a name in {keys} already belongs to {self.kind} {owner['_id']!r}")
        try:
            self.collection.update_one(
                {"_id": name}, {"$addToSet": {"aliases": {"$each": alias_list}, "keys": {"$each": keys}}}, upsert=True
            )
        except DuplicateKeyError:
            raise InvalidInputError("aliases", f"a name in {keys} already belongs to another {self.kind}") from None
        log.info("%s %r: aliases %s", self.kind, name, alias_list)
        return name

    def mapping(self) -> dict[str, str]:
        """Every known lower-cased name to its canonical name."""
        out: dict[str, str] = {}
        for doc in self.collection.find({}, {"keys": 1}):
            for key in doc.get("keys", []):
                out[key] = doc["_id"]
        return out

    def canonical(self, name: str, mapping: dict[str, str] | None = None) -> str:
        """The canonical name of ``name`` (itself, stripped, when unknown).

        Args:
            name: a canonical name or an alias.
            mapping: match key to canonical name, read once for many calls (default: ask the collection).
        """
        table = self.mapping() if mapping is None else mapping
        return table.get(match_key(name), name.strip())

    def entries(self) -> dict[str, list[str]]:
        """Canonical names and their aliases."""
        return {doc["_id"]: list(doc.get("aliases", [])) for doc in self.collection.find({}).sort("_id")}
