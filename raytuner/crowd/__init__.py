"""The crowd repository (server side): users, API keys, access levels, catalogs, uploads, queries.

GPTuneCrowd's shared database (sections III-IV of the GPTuneCrowd paper) on
MongoDB: registered users upload GPTune records with an access level
(``public``, ``registered``, ``private`` or ``shared`` with users and
groups) and query them back with the paper's ``problem_space`` /
``configuration_space`` meta description. Machine and package names are
normalised through alias catalogs, versions are compared as versions.

Each name here is imported on first use, so the modules a client shares
with the server (:mod:`raytuner.crowd.sync`, :mod:`raytuner.crowd.cache`)
load without the repository and pymongo.

Example:
    >>> from raytuner.crowd import CrowdRepository
    >>> repo = CrowdRepository("mongodb://127.0.0.1:27017")                  # doctest: +SKIP
    >>> repo.add_user("alice", "alice@example.org")                          # doctest: +SKIP
    >>> key = repo.create_key("alice")                                       # doctest: +SKIP
    >>> repo.query_function_evaluations(key, "demo", problem_space={         # doctest: +SKIP
    ...     "input_space": [{"name": "t", "lower_bound": 1, "upper_bound": 10}]})
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from raytuner.lazy import lazy_names

if TYPE_CHECKING:
    from raytuner.crowd.access import ACCESS_LEVELS, AccessSpec, User, visibility_filter
    from raytuner.crowd.catalog import AliasCatalog
    from raytuner.crowd.errors import AccessDenied, Unauthenticated
    from raytuner.crowd.query import ConfigurationSpaceQuery, ProblemSpaceQuery
    from raytuner.crowd.repository import DEFAULT_DATABASE, CrowdRepository, KeyInfo, UploadResult
    from raytuner.crowd.versions import version_key

__all__ = [
    "CrowdRepository",
    "UploadResult",
    "KeyInfo",
    "User",
    "AccessSpec",
    "ACCESS_LEVELS",
    "AliasCatalog",
    "Unauthenticated",
    "AccessDenied",
    "ProblemSpaceQuery",
    "ConfigurationSpaceQuery",
    "visibility_filter",
    "version_key",
    "DEFAULT_DATABASE",
]

_MODULES = {
    "ACCESS_LEVELS": "raytuner.crowd.access",
    "AccessSpec": "raytuner.crowd.access",
    "User": "raytuner.crowd.access",
    "visibility_filter": "raytuner.crowd.access",
    "AliasCatalog": "raytuner.crowd.catalog",
    "AccessDenied": "raytuner.crowd.errors",
    "Unauthenticated": "raytuner.crowd.errors",
    "ConfigurationSpaceQuery": "raytuner.crowd.query",
    "ProblemSpaceQuery": "raytuner.crowd.query",
    "DEFAULT_DATABASE": "raytuner.crowd.repository",
    "CrowdRepository": "raytuner.crowd.repository",
    "KeyInfo": "raytuner.crowd.repository",
    "UploadResult": "raytuner.crowd.repository",
    "version_key": "raytuner.crowd.versions",
}

__getattr__, __dir__ = lazy_names(__name__, _MODULES)
