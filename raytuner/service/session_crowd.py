"""The crowd repository in the tuning service's sessions: who the crowd user is, syncing, crowd sources.

:class:`CrowdSessions` is the part of :class:`~raytuner.service.sessions.SessionManager`
that deals with the server's crowd repository (``raytuner serve --crowd URI``):

- a caller who signs in with a crowd API key (or a signed credential) is
  ``crowd:<username>`` (:data:`CROWD_OWNER`);
- a session whose meta description says ``sync_crowd_repo`` uploads its
  records as the crowd user (:class:`~raytuner.crowd.sync.CrowdSyncStore`), with
  the access level its creator chose in ``options.crowd_access`` (``public``,
  ``registered`` or ``private``; :data:`~raytuner.crowd.sync.DEFAULT_SYNC_ACCESS`,
  ``private``, when not given: the records are the creator's own data, and
  sharing them wider is a choice the creator makes, never a default);
- a session created with ``options.crowd_sources: true`` learns from the
  crowd's records that match its meta description and that its crowd user may
  see: the server downloads them once, at creation, into its store under
  ``<problem>.crowd.<username>`` (:mod:`raytuner.crowd.cache`; per user, as the
  access levels differ), and the session's engine takes that problem as its
  ``source_problem``, so a restarted server rebuilds it with the same sources.
  A crowd that cannot be read never stops the session: it starts without
  sources, and the log says so.
"""

from __future__ import annotations

import logging
from typing import Any

from raytuner.crowd.cache import crowd_cache_name, downloaded, is_cache_name, meta_query
from raytuner.crowd.errors import Unauthenticated
from raytuner.crowd.sync import DEFAULT_SYNC_ACCESS, SYNC_ACCESS
from raytuner.engines.registry import ENGINES
from raytuner.errors import InvalidInputError, RaytunerError, StoreError
from raytuner.problem.meta import MetaDescription
from raytuner.problem.records import FunctionEvaluation
from raytuner.store.base import HistoryStore

__all__ = ["CrowdSessions", "CROWD_OWNER"]

log = logging.getLogger(__name__)

#: The owner of a session created by a crowd user: ``crowd:<username>``.
CROWD_OWNER = "crowd:"


class CrowdSessions:
    """The crowd part of the session manager (a mixin: it sets ``store`` and ``crowd``)."""

    store: HistoryStore
    crowd: Any

    def _crowd(self, field: str) -> Any:
        if self.crowd is None:
            raise InvalidInputError(
                field, "this server keeps no crowd repository (start it with `raytuner serve --crowd mongodb://...`)"
            )
        return self.crowd

    def crowd_user_of(self, key: str, method: str | None = None) -> str | None:
        """The crowd user whose API key ``key`` is, or ``None`` (no crowd repository, or not such a key).

        Args:
            key: A crowd user's API key, or a credential signed for ``method``.
            method: The call it authenticates (the service method in snake case: ``create_session``).
        """
        if self.crowd is None:
            return None
        try:
            return str(self.crowd.authenticate(key, method).username)
        except Unauthenticated:
            return None

    def _crowd_identity(self, meta: MetaDescription, owner: str, field: str) -> str:
        """The crowd user of a session (its key checked now): the meta description's ``api_key``, else the caller."""
        crowd = self._crowd(field)
        if meta.api_key is not None:
            return str(crowd.authenticate(meta.api_key.get_secret_value()).username)
        if owner.startswith(CROWD_OWNER):
            return owner[len(CROWD_OWNER) :]
        raise InvalidInputError(
            "api_key", f"{field} needs a crowd user: give the crowd user's API key (or call with it)"
        )

    def _crowd_user(self, meta: MetaDescription, owner: str) -> str:
        """The crowd user a ``sync_crowd_repo`` session uploads as; '' without sync."""
        return self._crowd_identity(meta, owner, "sync_crowd_repo") if meta.sync_crowd_repo else ""

    def _sync_access(self, meta: MetaDescription, options: dict[str, Any]) -> str:
        """The access level a synced session's records get: ``options.crowd_access`` (taken out), else private."""
        if "crowd_access" not in options:
            return DEFAULT_SYNC_ACCESS
        access = options.pop("crowd_access")
        if access not in SYNC_ACCESS:
            raise InvalidInputError(
                "options.crowd_access",
                f"{access!r} is not an access level for synced records",
                allowed=list(SYNC_ACCESS),
            )
        if not meta.sync_crowd_repo:
            raise InvalidInputError("options.crowd_access", "only a session with sync_crowd_repo uploads records")
        return str(access)

    def _store_of(self, session_id: str, crowd_user: str, access: str = DEFAULT_SYNC_ACCESS) -> HistoryStore:
        """The server's store, synced to the crowd repository as ``crowd_user`` (with ``access``) when asked."""
        if not crowd_user:
            return self.store
        from raytuner.crowd.sync import CrowdSyncStore  # the crowd only when asked for

        try:
            user = self._crowd("sync_crowd_repo").get_user(crowd_user)
        except RaytunerError as exc:  # restarted without the crowd, or the user is gone: tune, sync later
            log.warning("session %s is not synced to the crowd repository: %s", session_id, exc)
            return self.store
        return CrowdSyncStore.as_user(self.store, self.crowd, user, session_id, access)

    def _with_crowd_sources(
        self, meta: MetaDescription, owner: str, engine: str, options: dict[str, Any]
    ) -> tuple[dict[str, Any], list[FunctionEvaluation] | None]:
        """``options`` with ``crowd_sources: true`` replaced by the ``source_problem`` of the crowd's cache.

        Also returns the records downloaded now, for the cache (``None``: nothing to write, the cache
        holds them already or the crowd could not be read). The caller writes them with
        :func:`~raytuner.crowd.cache.fill_cache` once the session is known to be good, so that a
        refused session leaves nothing behind.
        """
        given = options.get("source_problem")
        if isinstance(given, str) and is_cache_name(given):  # another user's cache: other access levels
            raise InvalidInputError(
                "options.source_problem",
                f"{given!r} is a crowd cache; a session learns from the crowd through options.crowd_sources",
            )
        wanted = options.pop("crowd_sources", False)
        if wanted is False:
            return options, None
        if wanted is not True:
            raise InvalidInputError("options.crowd_sources", f"{wanted!r} is not a yes or no", allowed=[True, False])
        if not ENGINES[engine].learns_from_sources:
            raise InvalidInputError(
                "options.crowd_sources",
                f"{engine} learns from no source data",
                allowed=sorted(n for n, e in ENGINES.items() if e.learns_from_sources),
            )
        if "source_problem" in options:
            raise InvalidInputError("options.crowd_sources", "give crowd_sources or source_problem, not both")
        user = self._crowd("options.crowd_sources").get_user(self._crowd_identity(meta, owner, "options.crowd_sources"))
        problem = meta.tuning_problem_name
        cache = crowd_cache_name(problem, user.username)
        fresh = None
        if not downloaded(self.store, cache):
            try:
                fresh = self.crowd.evaluations_for(user, problem, *meta_query(meta))
            except StoreError as exc:  # the crowd's database is down: tune without its data
                log.warning(
                    "the crowd repository could not be read (%s); session of %s starts without crowd sources",
                    exc,
                    problem,
                )
                return options, None
        options["source_problem"] = cache
        return options, fresh
