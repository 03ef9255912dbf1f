"""Executors: how independent pieces of model work (multi-start fits) run in parallel.

Engines and models never import Ray; they take an :class:`Executor`. Three
implementations:

- :class:`InlineExecutor` runs the items one after another in this process;
- :class:`ProcessExecutor` runs them on a shared pool of worker processes
  (threads would not help: SciPy's LAPACK wrappers hold the GIL, so two
  threads fitting run no faster than one). Workers are started with
  ``spawn``, so a script that fits models must guard its entry point with
  ``if __name__ == "__main__":``, as for any multiprocessing code;
- :class:`RayExecutor` runs them as zero-CPU Ray tasks, so they are spread
  over a cluster and never wait for CPUs that trials hold (no deadlock when
  every CPU is taken); results that miss the timeout are dropped, and if
  none arrive the first item runs inline.

:func:`default_executor` picks Ray when it is imported and initialised, and a
process pool otherwise. An executor returns ``None`` for an item that failed
or timed out; callers must cope with that.

Example:
    >>> InlineExecutor().map(abs, [-1, 2, -3])
    [1, 2, 3]
    >>> ProcessExecutor(2).map(abs, [-1, 2], timeout=60)
    [1, 2]
"""

from __future__ import annotations

import concurrent.futures
import concurrent.futures.process
import logging
import multiprocessing
import os
import sys
import threading
from collections import Counter
from typing import Any, Callable, Protocol, Sequence, TypeVar

__all__ = ["Executor", "InlineExecutor", "ProcessExecutor", "RayExecutor", "default_executor"]

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


class Executor(Protocol):
    """Runs ``fn`` over ``items``; returns results in order, ``None`` where one failed or timed out."""

    def map(self, fn: Callable[[T], R], items: Sequence[T], timeout: float | None = None) -> list[R | None]:
        """Apply ``fn`` to every item, waiting at most ``timeout`` seconds in all.

        Args:
            fn: a picklable function of one item.
            items: the items.
            timeout: seconds to wait in all (default: no limit); an item not done by then gives ``None``.
        """
        ...  # pragma: no cover - protocol


class InlineExecutor:
    """Run every item in the calling thread.

    ``timeout`` is not enforced here: an item that must respect a time
    limit stops itself (an LCM fit's starts stop their optimiser at the
    fit's deadline, whatever the executor).
    """

    def map(self, fn: Callable[[T], R], items: Sequence[T], timeout: float | None = None) -> list[R | None]:
        """Apply ``fn`` to each item in turn; an exception becomes ``None`` and is logged.

        Args:
            fn: a picklable function of one item.
            items: the items.
            timeout: seconds to wait in all (default: no limit).
        """
        results: list[R | None] = []
        for item in items:
            try:
                results.append(fn(item))
            except Exception:  # noqa: BLE001 - one failed start must not end a fit
                log.exception("executor item failed")
                results.append(None)
        return results


class ProcessExecutor:
    """A pool of ``workers`` spawned processes (default: the CPU count), created on first use.

    Each worker limits its BLAS to one thread. Items still running at the
    timeout are abandoned (their result is ``None``); a broken pool is
    replaced and the items run inline.

    Args:
        workers: how many processes (default: the CPU count).
    """

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers or os.cpu_count() or 1
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    def _get_pool(self) -> concurrent.futures.ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = concurrent.futures.ProcessPoolExecutor(
                    self.workers, mp_context=multiprocessing.get_context("spawn"), initializer=_single_blas_thread)
            return self._pool

    def map(self, fn: Callable[[T], R], items: Sequence[T], timeout: float | None = None) -> list[R | None]:
        """Apply ``fn`` to the items in the worker processes; late or failed items give ``None``.

        Args:
            fn: a picklable function of one item.
            items: the items.
            timeout: seconds to wait in all (default: no limit).
        """
        if len(items) <= 1 or self.workers == 1:
            return InlineExecutor().map(fn, items)
        try:
            futures = [self._get_pool().submit(fn, item) for item in items]
            concurrent.futures.wait(futures, timeout=timeout)
        except (concurrent.futures.process.BrokenProcessPool, OSError) as exc:
            log.warning("process pool unusable (%r); running %d items inline", exc, len(items))
            self.shutdown()
            return InlineExecutor().map(fn, items)
        if any(f.done() and isinstance(f.exception(), concurrent.futures.process.BrokenProcessPool)
               for f in futures):
            log.warning("worker processes died (a script without an `if __name__ == \"__main__\":` guard "
                        "cannot use a spawned pool); running %d items inline", len(items))
            self.shutdown()
            return InlineExecutor().map(fn, items)
        results: list[R | None] = []
        for future in futures:
            if not future.done():
                future.cancel()
                log.warning("an executor item missed its %.1f s timeout", timeout or 0.0)
                results.append(None)
            elif future.exception() is not None:
                log.error("executor item failed: %r", future.exception())
                results.append(None)
            else:
                results.append(future.result())
        return results

    def shutdown(self) -> None:
        """Stop the worker processes (a later :meth:`map` starts new ones)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def __getstate__(self) -> dict[str, Any]:
        return {"workers": self.workers}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["workers"])  # type: ignore[misc]


def _single_blas_thread() -> None:
    """Worker initialiser: one BLAS thread per worker process."""
    from threadpoolctl import threadpool_limits  # noqa: PLC0415

    threadpool_limits(1, user_api="blas")


class RayExecutor:
    """Items as Ray tasks that reserve no CPU (``num_cpus``), spread over the cluster.

    Needs ``ray.init`` to have been called. Tasks still running at the
    timeout are cancelled; when none finished, the first item runs inline so
    a fit always returns.

    Args:
        num_cpus: the CPUs each task reserves (default 0).
    """

    def __init__(self, num_cpus: float = 0.0) -> None:
        self.num_cpus = num_cpus
        self._remote: Any = None
        #: How many items ran on each Ray node (by node id), for checking the spread over a cluster.
        self.nodes: Counter[str] = Counter()

    def map(self, fn: Callable[[T], R], items: Sequence[T], timeout: float | None = None) -> list[R | None]:
        """Run the items as Ray tasks and gather what finishes within ``timeout``.

        Args:
            fn: a picklable function of one item.
            items: the items.
            timeout: seconds to wait in all (default: no limit).
        """
        import ray  # noqa: PLC0415 - Ray is optional for engines; imported only when used

        if self._remote is None:
            self._remote = ray.remote(num_cpus=self.num_cpus, max_retries=0, scheduling_strategy="SPREAD")(_on_node)
        refs = [self._remote.remote(fn, item) for item in items]
        ready, waiting = ray.wait(refs, num_returns=len(refs), timeout=timeout)
        for ref in waiting:
            ray.cancel(ref, force=True)
        if waiting:
            log.warning("%d of %d Ray tasks missed the %.1f s timeout", len(waiting), len(refs), timeout or 0.0)
        done = {ref.hex(): ref for ref in ready}
        results: list[R | None] = []
        for ref in refs:
            try:
                located = ray.get(done[ref.hex()], timeout=0) if ref.hex() in done else None
            except Exception as exc:  # noqa: BLE001 - a failed task is one lost start
                log.error("Ray task failed: %r", exc)
                located = None
            if located is not None:
                self.nodes[located[0]] += 1
            results.append(located[1] if located is not None else None)
        if items and all(r is None for r in results):
            results[0] = InlineExecutor().map(fn, items[:1])[0]
        return results

    def __getstate__(self) -> dict[str, Any]:
        return {"num_cpus": self.num_cpus}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["num_cpus"])  # type: ignore[misc]


def _on_node(fn: Callable[[T], R], item: T) -> tuple[str, R]:
    """Run ``fn(item)`` in a Ray task and say on which node it ran."""
    import ray  # noqa: PLC0415 - runs inside a Ray worker

    return ray.get_runtime_context().get_node_id(), fn(item)


_PROCESSES = ProcessExecutor()


def default_executor() -> Executor:
    """A :class:`RayExecutor` when Ray is imported and initialised, else a shared :class:`ProcessExecutor`.

    >>> isinstance(default_executor(), (RayExecutor, ProcessExecutor))
    True
    """
    ray = sys.modules.get("ray")
    if ray is not None and getattr(ray, "is_initialized", lambda: False)():
        return RayExecutor()
    return _PROCESSES
