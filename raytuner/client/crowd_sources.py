"""Tuning that starts from the crowd's data: download the matching records once, keep them apart, learn from them.

GPTuneCrowd (paper 000) downloads performance data for a problem before
tuning. :func:`crowd_source` does that for any engine that learns from
sources (:class:`~raytuner.strategies.MLA`, GPTuneBand, the TLA engines):

- the query is the meta description's ``problem_space`` (ranges and
  categories of the task and tuning parameters) and ``configuration_space``
  (machines, software, users), with the user's credential, so only what the
  user may see comes back (GPTuneCrowd's access levels);
- the records are cached in the local store under their own problem name,
  ``<problem>.crowd`` (:func:`crowd_cache_name`): never mixed with the run's
  records, never uploaded back (a :class:`~raytuner.crowd.sync.CrowdSyncStore`
  is bypassed), and records the run's store already holds (this user's own
  synced evaluations) are left out;
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
                                    b_min=1, b_max=27, source=source)
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from raytuner.crowd.signatures import Signer
from raytuner.errors import InvalidInputError, RaytunerError
from raytuner.meta import MetaDescription
from raytuner.records import FunctionEvaluation, check_problem_name
from raytuner.store import HistoryStore, StoreSource, open_store

__all__ = ["crowd_source", "crowd_cache_name", "CACHE_SUFFIX", "DOWNLOADS"]

log = logging.getLogger(__name__)

#: What a problem's crowd cache is named after it.
CACHE_SUFFIX = ".crowd"
#: The store ledger's log of downloads (one entry per download): a later run reads the cache instead.
DOWNLOADS = "crowd_downloads"


def crowd_cache_name(problem_name: str) -> str:
    """The name the crowd's records of ``problem_name`` are cached under in a local store.

    A name that ends in the suffix itself, or is too long to take it, is refused.

    Args:
        problem_name: The tuning problem's name.

    >>> crowd_cache_name("GPTune-Demo")
    'GPTune-Demo.crowd'
    >>> crowd_cache_name("GPTune-Demo.crowd")
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: tuning_problem_name: 'GPTune-Demo.crowd' names a crowd cache; a problem tuned from the crowd needs another name
    """
    name = check_problem_name(problem_name)
    if name.endswith(CACHE_SUFFIX):
        raise InvalidInputError("tuning_problem_name", f"{name!r} names a crowd cache; a problem tuned from the "
                                                       "crowd needs another name")
    if len(name) + len(CACHE_SUFFIX) > 128:
        raise InvalidInputError("tuning_problem_name", f"{len(name)} characters; a problem tuned from the crowd "
                                                       f"has at most {128 - len(CACHE_SUFFIX)}")
    return name + CACHE_SUFFIX


def _local(store: HistoryStore) -> HistoryStore:
    """The store records are written to without being synced (a CrowdSyncStore's own store)."""
    from raytuner.crowd.sync import CrowdSyncStore  # noqa: PLC0415

    return store.store if isinstance(store, CrowdSyncStore) else store


def crowd_source(meta: MetaDescription, store: HistoryStore | str | os.PathLike[str], *,
                 credential: str | Signer | None = None, server: str | None = None, refresh: bool = False,
                 **connection: Any) -> StoreSource | None:
    """The crowd's records matching ``meta``, downloaded once and cached in ``store``; see the module docstring.

    Args:
        meta: The meta description: ``tuning_problem_name``, ``problem_space`` and
            ``configuration_space`` make the query.
        store: The run's history store, or its location.
        credential: The crowd user's API key or :class:`~raytuner.crowd.signatures.Signer` (default
            ``None``: the meta description's ``api_key``).
        server: ``host:port`` of the crowd server (default ``$RAYTUNER_SERVER``, else ``127.0.0.1:50051``).
        refresh: Download again even when records are cached (default ``False``).
        **connection: :class:`~raytuner.client.crowd.CrowdClient`'s connection arguments.

    Returns:
        A source over the cached records, or ``None`` when there are none (nothing matched, or the
        crowd could not be reached and nothing was cached).
    """
    from pydantic import ValidationError  # noqa: PLC0415

    from raytuner.client.channel import RETRIED_CODES, ServiceError  # noqa: PLC0415
    from raytuner.client.crowd import connect  # noqa: PLC0415

    local = _local(open_store(store))
    problem = meta.tuning_problem_name
    cache = crowd_cache_name(problem)
    cached = local.evaluations(cache)
    ledger = local.ledger()
    if not refresh and any(True for _ in ledger.read(DOWNLOADS, cache=cache)):
        log.info("learning from the %d crowd records of %s cached in the store (downloaded before)",
                 len(cached), problem)
        return StoreSource(local, cache) if cached else None
    if not credential and meta.api_key is None:
        raise InvalidInputError("api_key", "downloading from the crowd needs the user's API key in the meta "
                                           "description, or credential=")
    spaces = {"input_space": meta.problem_space.input_space, "parameter_space": meta.problem_space.parameter_space}
    query = {name: space.model_dump(mode="json") for name, space in spaces.items() if len(space.names)}
    key = credential or meta.api_key.get_secret_value()  # type: ignore[union-attr]
    try:
        with connect(key, server, **connection) as client:
            records = client.query_function_evaluations(problem, query,
                                                        meta.configuration_space.model_dump(mode="json"))
    except (ServiceError, ValidationError) as exc:
        if isinstance(exc, ServiceError) and exc.code not in RETRIED_CODES:
            raise                    # refused (the key, the query): the user's to fix, not an outage
        log.warning("the crowd repository could not be reached or read (%s); tuning starts %s; a later run "
                    "tries again", exc, f"from the {len(cached)} crowd records cached before" if cached
                    else "without crowd sources")
        return StoreSource(local, cache) if cached else None
    own = {r.uid for r in local.evaluations(problem)} | {r.uid for r in cached}
    new: list[FunctionEvaluation] = [r for r in records if r.uid not in own]
    if new:
        local.append_many(cache, new)
    ledger.append(DOWNLOADS, {"cache": cache, "records": len(new), "time": time.time()})
    log.info("downloaded %d crowd records of %s (%d new, %d the run's own or cached before)", len(records),
             problem, len(new), len(records) - len(new))
    return StoreSource(local, cache) if cached or new else None
