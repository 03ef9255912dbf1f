"""Tuning that starts from the crowd's data: download the matching records once, keep them apart, learn from them.

GPTuneCrowd (paper 000) downloads performance data for a problem before
tuning. :func:`crowd_source` does that for any engine that learns from
sources (:class:`~raytuner.engines.MLA`, GPTuneBand, the TLA engines):

- the query is the meta description's ``problem_space`` (ranges and
  categories of the task and tuning parameters) and ``configuration_space``
  (machines, software, users), with the user's credential, so only what the
  user may see comes back (GPTuneCrowd's access levels);
- the records are cached in the local store under their own problem name,
  ``<problem>.crowd`` (:func:`crowd_cache_name`): never mixed with the run's
  records, never uploaded back (a :class:`~raytuner.crowd.sync.CrowdSyncStore`
  is bypassed), and records the run's store already holds (this user's own
  synced evaluations) are left out (:mod:`raytuner.crowd.cache`);
- the download happens once (the store's ledger notes it, even when nothing
  matched): a later run (a resumed one included) reads the cache, so it
  learns from the same sources and makes the same suggestions
  (``refresh=True`` downloads again);
- a crowd that cannot be reached never stops tuning: the run starts from what
  is cached, or without sources, and the log says so; a later run tries again.
  A refusal (a wrong key, a bad query) is an error, not an outage.

It returns a :class:`~raytuner.store.StoreSource` over the cache, which every
face takes as ``source=``::

    meta = MetaDescription.load("meta.json")      # problem_space, configuration_space, api_key
    source = crowd_source(meta, "history/", server="crowd.example.org:50051")
    scheduler = GPTuneBandScheduler(meta.problem_space, tasks, "history/", meta.tuning_problem_name,
                                    structure=BanditStructure.hyperband(1, 27, 3), options=GPTuneBandOptions(source=source))
"""

from __future__ import annotations

import logging
import os
from typing import Any

from raytuner.crowd.cache import cached_source, crowd_cache_name, downloaded, fill_cache, meta_query
from raytuner.errors import InvalidInputError
from raytuner.problem.meta import MetaDescription
from raytuner.signing import Signer
from raytuner.store import HistoryStore, StoreSource, open_store

__all__ = ["crowd_source"]

log = logging.getLogger(__name__)


def _local(store: HistoryStore) -> HistoryStore:
    """The store records are written to without being synced (a CrowdSyncStore's own store)."""
    from raytuner.crowd.sync import CrowdSyncStore

    return store.store if isinstance(store, CrowdSyncStore) else store


def crowd_source(
    meta: MetaDescription,
    store: HistoryStore | str | os.PathLike[str],
    *,
    credential: str | Signer | None = None,
    server: str | None = None,
    refresh: bool = False,
    **connection: Any,
) -> StoreSource | None:
    """The crowd's records matching ``meta``, downloaded once and cached in ``store``; see the module docstring.

    Args:
        meta: The meta description: ``tuning_problem_name``, ``problem_space`` and
            ``configuration_space`` make the query.
        store: The run's history store, or its location.
        credential: The crowd user's API key or :class:`~raytuner.signing.Signer` (default
            ``None``: the meta description's ``api_key``).
        server: ``host:port`` of the crowd server (default ``$RAYTUNER_SERVER``, else ``127.0.0.1:50051``).
        refresh: Download again even when records are cached (default ``False``).
        **connection: :class:`~raytuner.client.crowd.CrowdClient`'s connection arguments.

    Returns:
        A source over the cached records, or ``None`` when there are none (nothing matched, or the
        crowd could not be reached and nothing was cached).
    """
    from pydantic import ValidationError

    from raytuner.client.channel import RETRIED_CODES, ServiceError
    from raytuner.client.crowd import connect

    local = _local(open_store(store))
    problem = meta.tuning_problem_name
    cache = crowd_cache_name(problem)
    if not refresh and downloaded(local, cache):
        log.info("learning from the crowd records of %s cached in the store (downloaded before)", problem)
        return cached_source(local, cache)
    if not credential and meta.api_key is None:
        raise InvalidInputError(
            "api_key", "downloading from the crowd needs the user's API key in the meta description, or credential="
        )
    key = credential or meta.api_key.get_secret_value()  # type: ignore[union-attr]  # api_key checked above
    try:
        with connect(key, server, **connection) as client:
            records = client.query_function_evaluations(problem, *meta_query(meta))
    except (ServiceError, ValidationError) as exc:
        if isinstance(exc, ServiceError) and exc.code not in RETRIED_CODES:
            raise  # refused (the key, the query): the user's to fix, not an outage
        source = cached_source(local, cache)
        log.warning(
            "the crowd repository could not be reached or read (%s); tuning starts %s; a later run tries again",
            exc,
            "from the crowd records cached before" if source else "without crowd sources",
        )
        return source
    return fill_cache(local, problem, cache, records)
