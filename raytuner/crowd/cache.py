"""The local cache of the crowd's records: downloaded once, apart from the run's records, never sent back.

A download (by a client, :func:`raytuner.client.crowd_sources.crowd_source`,
or by the tuning service for a session, :mod:`raytuner.service.session_crowd`)
writes the records into the local store under the cache's own problem name
(:func:`crowd_cache_name`), leaves out those the store already holds (the
user's own synced evaluations come back from the crowd too), and notes the
download in the store's ledger (log ``crowd_downloads``), even when nothing
matched: a later or resumed run reads the cache, so it learns from the same
sources and makes the same suggestions. A cache is named after the problem (and
user), not the query: a later query of other spaces for the same problem reads
what the first one brought.

Example:
    >>> import tempfile
    >>> from raytuner.problem.records import FunctionEvaluation
    >>> from raytuner.store import JsonStore
    >>> store = JsonStore(tempfile.mkdtemp())
    >>> shared = [FunctionEvaluation.create({"t": 2.0}, {"x": 0.5}, {"y": 1.0})]
    >>> downloaded(store, "demo.crowd"), fill_cache(store, "demo", "demo.crowd", shared).problem_name
    (False, 'demo.crowd')
    >>> downloaded(store, "demo.crowd"), len(cached_source(store, "demo.crowd").evaluations())
    (True, 1)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from raytuner.errors import InvalidInputError
from raytuner.problem.meta import MetaDescription
from raytuner.problem.records import FunctionEvaluation, check_problem_name
from raytuner.store import HistoryStore, StoreSource

__all__ = [
    "crowd_cache_name",
    "is_cache_name",
    "cached_source",
    "downloaded",
    "uncached",
    "fill_cache",
    "meta_query",
    "CACHE_SUFFIX",
    "DOWNLOADS",
]

log = logging.getLogger(__name__)

#: What a problem's crowd cache is named after it.
CACHE_SUFFIX = ".crowd"
#: The store ledger's log of downloads (one entry per download).
DOWNLOADS = "crowd_downloads"


def crowd_cache_name(problem_name: str, user: str | None = None) -> str:
    """The name the crowd's records of ``problem_name`` are cached under (per ``user`` on a shared server).

    A name that ends in the suffix itself, or is too long to take it, is refused.

    Args:
        problem_name: The tuning problem's name.
        user: Whose download it is, where one store serves several users (default ``None``: the store's owner).

    >>> crowd_cache_name("GPTune-Demo"), crowd_cache_name("GPTune-Demo", "alice")
    ('GPTune-Demo.crowd', 'GPTune-Demo.crowd.alice')
    >>> crowd_cache_name("GPTune-Demo.crowd")
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: tuning_problem_name: 'GPTune-Demo.crowd' names a crowd cache; a problem tuned from the crowd needs another name
    """
    name = check_problem_name(problem_name)
    if is_cache_name(name):
        raise InvalidInputError(
            "tuning_problem_name", f"{name!r} names a crowd cache; a problem tuned from the crowd needs another name"
        )
    cache = name + CACHE_SUFFIX + (f".{user}" if user else "")
    if len(cache) > 128:
        raise InvalidInputError(
            "tuning_problem_name",
            f"{len(name)} characters; a problem tuned from the crowd has at most {128 - len(cache) + len(name)}",
        )
    return cache


def is_cache_name(name: str) -> bool:
    """Whether ``name`` is the name of a crowd cache (``<problem>.crowd``, ``<problem>.crowd.<user>``).

    Args:
        name: A problem name.

    >>> is_cache_name("demo.crowd.alice"), is_cache_name("fft.crowdsourced")
    (True, False)
    """
    return name.endswith(CACHE_SUFFIX) or CACHE_SUFFIX + "." in name


def meta_query(meta: MetaDescription) -> tuple[dict[str, Any], dict[str, Any]]:
    """The crowd query of a meta description: its task and tuning-parameter spaces, its configuration space.

    Args:
        meta: The meta description of the problem tuned.
    """
    spaces = {"input_space": meta.problem_space.input_space, "parameter_space": meta.problem_space.parameter_space}
    return (
        {name: space.model_dump(mode="json") for name, space in spaces.items() if len(space.names)},
        meta.configuration_space.model_dump(mode="json"),
    )


def cached_source(store: HistoryStore, cache: str) -> StoreSource | None:
    """A source over the cache's records, or ``None`` when it holds none.

    Args:
        store: The local store.
        cache: The cache's problem name.
    """
    return StoreSource(store, cache) if store.evaluations(cache) else None


def downloaded(store: HistoryStore, cache: str) -> bool:
    """Whether the store's ledger notes a download into ``cache``.

    Args:
        store: The local store.
        cache: The cache's problem name.
    """
    return any(True for _ in store.ledger().read(DOWNLOADS, cache=cache))


def uncached(
    store: HistoryStore, problem: str, cache: str, records: Sequence[FunctionEvaluation]
) -> list[FunctionEvaluation]:
    """The downloaded ``records`` the store holds neither as the run's own nor in the cache: what the cache takes.

    Args:
        store: The local store.
        problem: The tuned problem's name (its records are the run's own).
        cache: The cache's problem name.
        records: What the crowd answered.
    """
    return _not_held(records, store.evaluations(problem), store.evaluations(cache))


def _not_held(records: Sequence[FunctionEvaluation], *held: Sequence[FunctionEvaluation]) -> list[FunctionEvaluation]:
    """``records`` whose uid none of the ``held`` lists has."""
    uids = {r.uid for records_held in held for r in records_held}
    return [r for r in records if r.uid not in uids]


def fill_cache(
    store: HistoryStore, problem: str, cache: str, records: Sequence[FunctionEvaluation]
) -> StoreSource | None:
    """Cache the downloaded ``records`` (those the store holds already left out: :func:`uncached`) and note the download.

    Args:
        store: The local store (not a syncing one: the cache is never uploaded).
        problem: The tuned problem's name (its records are the run's own).
        cache: The cache's problem name.
        records: What the crowd answered.
    """
    cached = store.evaluations(cache)  # read once: what the cache held decides the source too
    new = _not_held(records, store.evaluations(problem), cached)
    if new:
        store.append_many(cache, new)
    store.ledger().append(DOWNLOADS, {"cache": cache, "records": len(new), "time": time.time()})
    log.info(
        "downloaded %d crowd records of %s into %s (%d new, %d the store's already)",
        len(records),
        problem,
        cache,
        len(new),
        len(records) - len(new),
    )
    return StoreSource(store, cache) if cached or new else None
