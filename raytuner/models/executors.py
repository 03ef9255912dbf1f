"""Executors: how independent pieces of model work (multi-start fits) run in parallel.

Engines and models never import Ray; they take an :class:`Executor`. Three
implementations:

- :class:`InlineExecutor` runs the items one after another in this process;
- :class:`ProcessExecutor` runs them on a shared pool of worker processes
  (threads would not help: SciPy's LAPACK wrappers hold the GIL, so two
  threads fitting run no faster than one). Workers are started with
  ``spawn``, so a script that fits models should guard its entry point with
  ``if __name__ == "__main__":``, as for any multiprocessing code (one that
  does not still tunes once, with its fits inline: see
  :func:`refuse_unguarded_script`);
- :class:`RayExecutor` runs them on Ray actors (warm pooled zero-CPU ones by
  default), so they are spread over a cluster and never wait for CPUs that
  trials hold (no deadlock when every CPU is taken); results that miss the timeout are
  dropped, and if none arrive the first item runs inline.

:func:`default_executor` picks Ray when it is imported and initialised, and a
process pool otherwise; given the size of a fit, it runs one of at most
:data:`INLINE_RECORDS` records inline. An executor returns ``None`` for an item that failed
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
import importlib
import logging
import multiprocessing
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from raytuner.models.blas import one_blas_thread

__all__ = [
    "INLINE_RECORDS",
    "Executor",
    "InlineExecutor",
    "ProcessExecutor",
    "RayExecutor",
    "default_executor",
    "refuse_unguarded_script",
]

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
            except Exception:  # one failed start must not end a fit
                log.exception("executor item failed")
                results.append(None)
        return results


def refuse_unguarded_script() -> None:
    """Stop a spawned worker process that is running the user's script again.

    A process started by ``spawn`` (a :class:`ProcessExecutor` worker, or
    any other) first imports the main script again; a script that tunes
    at its top level, without ``if __name__ == "__main__":``, would tune
    again there, running its evaluations once more in every worker. Every
    engine calls this when it is built, so such a worker exits with one line
    before it evaluates anything; its pool breaks and the fits run inline in
    the script's own process (:class:`ProcessExecutor`). Anywhere else it
    does nothing.

    Example:
        >>> refuse_unguarded_script()  # not a worker starting: nothing happens
    """
    # multiprocessing marks a process that is still importing its parent's main script the same way
    # (its own check, spawn._check_not_importing_main, reads this flag)
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise SystemExit(
            "raytuner: this worker process was running the script again, which tunes at its top level; "
            'guard the tuning with `if __name__ == "__main__":` (model fits run in the script\'s process meanwhile)'
        )


class ProcessExecutor:
    """A pool of ``workers`` spawned processes (default: the CPU count), created on first use.

    Each worker limits its BLAS to one thread. Items still running at the
    timeout are abandoned (their result is ``None``); when the pool breaks
    (a worker died) the items run inline, and a later call starts a new
    pool, unless the broken one never returned a result: then its workers
    died starting (a script without a main guard breaks every pool it
    starts), and every later call in this process runs inline.

    One :meth:`map` keeps at most ``per_map`` of its items in the pool at
    once (the next goes in when one ends): with more workers than that, a
    map called meanwhile from another thread (another session's fit) finds
    a worker free at once instead of queueing behind the first one's items.

    With ``inline_while_cold``, a map called before any worker has started
    (a new pool's, which takes seconds of CPU each) runs its items inline
    while the workers start in the background (:meth:`warm`): a fit with a
    time budget then uses it to fit rather than to wait.

    Args:
        workers: how many processes (default: the CPU count).
        per_map: how many items of one map run at once (default: ``workers``).
        inline_while_cold: run maps inline until a worker has started (default: wait for the workers).
    """

    #: Whether a pool of this process broke before it returned any result: every later call runs inline
    #: (another pool would break as well).
    broken = False

    def __init__(self, workers: int | None = None, per_map: int | None = None, inline_while_cold: bool = False) -> None:
        self.workers = workers or os.cpu_count() or 1
        self.per_map = min(per_map or self.workers, self.workers)
        self.inline_while_cold = inline_while_cold
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._served = False  # the current pool has returned a result
        self._warming = False  # warm-ups were submitted to the current pool
        self._lock = threading.Lock()

    def _get_pool(self) -> concurrent.futures.ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = concurrent.futures.ProcessPoolExecutor(
                    self.workers,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_start_worker,
                    initargs=(os.getpid(),),
                )
            return self._pool

    def warm(self, wait: bool = False, module: str | None = None) -> None:
        """Start every worker now, each importing ``module``: a server's first fit then does not wait for
        them (starting one takes seconds of CPU, more than a fit's time budget may allow).

        Args:
            wait: return once they have started (default: at once; they start in the background).
            module: the module the work to come is in (its import is part of a worker's start), or ``None``.
        """
        if self.workers == 1 or ProcessExecutor.broken:
            return
        try:
            pool = self._get_pool()
            with self._lock:
                if self._warming and not wait:
                    return
                self._warming = True
            futures = [pool.submit(_warm_up, module) for _ in range(self.workers)]  # all at once: a worker each
            for future in futures:
                future.add_done_callback(self._warmed)
            if wait:
                concurrent.futures.wait(futures)
        except (concurrent.futures.process.BrokenProcessPool, OSError, RuntimeError) as exc:
            log.warning("could not start the fit workers ahead: %r", exc)

    def _warmed(self, future: concurrent.futures.Future[None]) -> None:
        """A warm-up ended: the pool serves (or, broken before serving, never will: see :attr:`broken`)."""
        if future.cancelled():
            return
        if future.exception() is None:
            self._served = True
        elif isinstance(future.exception(), concurrent.futures.process.BrokenProcessPool):
            with self._lock:
                first = not self._served and not ProcessExecutor.broken
                ProcessExecutor.broken = ProcessExecutor.broken or not self._served
            if first:
                _never_served("worker processes died starting", "this and every later call's")

    def terminate(self) -> None:
        """Stop the worker processes at once, with the fits they run (a process that must exit now)."""
        with self._lock:
            pool, self._pool, self._served, self._warming = self._pool, None, False, False
        if pool is None:
            return
        processes = list((getattr(pool, "_processes", None) or {}).values())  # the pool has no public way
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.terminate()

    def map(self, fn: Callable[[T], R], items: Sequence[T], timeout: float | None = None) -> list[R | None]:
        """Apply ``fn`` to the items in the worker processes; late or failed items give ``None``.

        Args:
            fn: a picklable function of one item.
            items: the items.
            timeout: seconds to wait in all (default: no limit).
        """
        if len(items) <= 1 or self.per_map == 1 or ProcessExecutor.broken:
            return InlineExecutor().map(fn, items)
        if self.inline_while_cold and not self._served:
            self.warm(module=getattr(fn, "__module__", None))
            return InlineExecutor().map(fn, items)
        try:
            futures = self._submit(fn, items, timeout)
        except (concurrent.futures.process.BrokenProcessPool, OSError) as exc:
            return self._inline(f"process pool unusable ({exc!r})", fn, items)
        if any(
            f is not None and f.done() and isinstance(f.exception(), concurrent.futures.process.BrokenProcessPool)
            for f in futures
        ):
            return self._inline("worker processes died", fn, items)
        results: list[R | None] = []
        for future in futures:
            if future is None or not future.done():
                if future is not None:
                    future.cancel()
                log.warning("an executor item missed its %.1f s timeout", timeout or 0.0)
                results.append(None)
            elif future.exception() is not None:
                log.error("executor item failed: %r", future.exception())
                results.append(None)
            else:
                results.append(future.result())
                self._served = True
        return results

    def _submit(
        self, fn: Callable[[T], R], items: Sequence[T], timeout: float | None
    ) -> list[concurrent.futures.Future[R] | None]:
        """Run the items, at most :attr:`per_map` at once, until all are done or ``timeout`` passes.

        Returns a future per item, ``None`` for one never submitted by then.
        """
        end = None if timeout is None else time.monotonic() + timeout
        pool = self._get_pool()
        futures: list[concurrent.futures.Future[R] | None] = [None] * len(items)
        running: set[concurrent.futures.Future[R]] = set()
        waiting = iter(range(len(items)))
        while True:
            for i in waiting:
                futures[i] = future = pool.submit(fn, items[i])
                running.add(future)
                if len(running) >= self.per_map:
                    break
            left = None if end is None else end - time.monotonic()
            if not running or (left is not None and left <= 0):
                return futures
            done, running = concurrent.futures.wait(running, timeout=left, return_when="FIRST_COMPLETED")
            if any(isinstance(f.exception(), concurrent.futures.process.BrokenProcessPool) for f in done):
                return futures

    def _inline(self, why: str, fn: Callable[[T], R], items: Sequence[T]) -> list[R | None]:
        """Run ``items`` inline after the pool broke; for good where it never returned a result."""
        if self._served:
            log.warning("%s; running %d items inline", why, len(items))
        else:
            ProcessExecutor.broken = True
            _never_served(why, f"these {len(items)} items and every later call's")
        self.shutdown()
        return InlineExecutor().map(fn, items)

    def shutdown(self) -> None:
        """Stop the worker processes (a later :meth:`map` starts new ones)."""
        with self._lock:
            pool, self._pool, self._served, self._warming = self._pool, None, False, False
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def __getstate__(self) -> dict[str, Any]:
        return {"workers": self.workers, "per_map": self.per_map, "inline_while_cold": self.inline_while_cold}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["workers"], state.get("per_map"), state.get("inline_while_cold", False))  # type: ignore[misc]  # unpickling: build anew


def _never_served(why: str, what: str) -> None:
    """Warn that a pool broke before it returned any result, so ``what`` runs inline."""
    log.warning(
        '%s before the pool returned any result (a script without an `if __name__ == "__main__":` guard '
        "cannot use a spawned pool); running %s inline",
        why,
        what,
    )


#: Seconds between a pool worker's checks that the process that started it is still there.
PARENT_POLL_SECONDS = 1.0


def _start_worker(parent: int) -> None:
    """A new pool worker's set-up: an end of its own once its parent has gone, and BLAS on one thread.

    A worker waits for items on a queue whose write end it holds itself, so the
    end of the process that started it (killed by ``kill -9`` or the OOM killer,
    with no chance to shut the pool down) would never reach it: it would wait
    for good. A daemon thread ends it instead, once it has been handed to
    another parent (at once if that happened while the worker started).

    Args:
        parent: The pid of the process that started the pool.
    """
    threading.Thread(target=_end_when_orphaned, args=(parent,), name="parent-watch", daemon=True).start()
    one_blas_thread()


def _end_when_orphaned(parent: int) -> None:
    """End this process once its parent is no longer ``parent`` (checked every :data:`PARENT_POLL_SECONDS`)."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_SECONDS)
    os._exit(0)


def _warm_up(module: str | None) -> None:
    """Import ``module``, what the work to come needs (run in a new worker)."""
    if module is not None:
        importlib.import_module(module)


class RayExecutor:
    """Items on Ray actors, spread over the cluster: warm pooled ones that reserve no CPU, by default.

    Needs ``ray.init`` to have been called. Each item runs on an actor of
    its own. Zero-CPU actors come from a pool that every
    :class:`RayExecutor` of this process shares (per Ray session), which
    grows to the most items in flight at once, across threads; each map
    first lets go of the actors idle for over :data:`IDLE_SECONDS` and of
    those whose node is gone (an idle actor is not swept at other times).
    A warm actor has imported everything a fit needs already. (Plain Ray tasks would not do: Ray stops
    idle workers beyond its CPU count soon, so fits a few seconds apart would
    each pay a cold worker's start, which costs more than the fit itself.)
    Actors that reserve CPUs are not kept: an idle one
    would hold its CPUs from trials. A new actor goes to the alive node
    that has fewest of the pool's actors, so the starts of a fit spread over
    the cluster (pinned there; see :meth:`_ActorPool._new_actor`); one that
    reserves CPUs is spread by Ray instead. An actor whose item is still
    running at the timeout is killed; when no item finished, the first runs
    inline so a fit always returns.

    Args:
        num_cpus: the CPUs each actor reserves (default 0).
    """

    def __init__(self, num_cpus: float = 0.0) -> None:
        self.num_cpus = num_cpus
        #: How many items ran on each Ray node (by node id), for checking the spread over a cluster.
        self.nodes: Counter[str] = Counter()

    def map(self, fn: Callable[[T], R], items: Sequence[T], timeout: float | None = None) -> list[R | None]:
        """Run the items on the pool's actors and gather what finishes within ``timeout``.

        An item whose actor died (an idle actor killed, say for memory) runs
        once more on a new actor if time is left.

        Args:
            fn: a picklable function of one item.
            items: the items.
            timeout: seconds to wait in all (default: no limit).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        results: list[R | None] = [None] * len(items)
        lost = self._run(fn, items, list(range(len(items))), deadline, results)
        if lost and (deadline is None or deadline > time.monotonic()):
            self._run(fn, items, lost, deadline, results)
        if items and all(r is None for r in results):
            results[0] = InlineExecutor().map(fn, items[:1])[0]
        return results

    def _run(
        self,
        fn: Callable[[T], R],
        items: Sequence[T],
        indices: list[int],
        deadline: float | None,
        results: list[R | None],
    ) -> list[int]:
        """Run ``items[i]`` for each index on an actor, into ``results``; the indices whose actor was lost."""
        import ray  # Ray is optional for engines; imported only when used

        actors = _ACTORS.take(self.num_cpus, len(indices))
        healthy: list[_Pooled] = []
        lost: list[int] = []
        try:
            refs = [pooled.actor.run.remote(fn, items[i]) for pooled, i in zip(actors, indices)]
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, waiting = ray.wait(refs, num_returns=len(refs), timeout=timeout)
            if waiting:
                log.warning("%d of %d Ray tasks missed the %.1f s timeout", len(waiting), len(refs), timeout or 0.0)
            done = {ref.hex() for ref in ready}
            for pooled, ref, i in zip(actors, refs, indices):
                if ref.hex() not in done:  # still busy with a late item: not reusable
                    continue
                try:
                    node, results[i] = ray.get(ref, timeout=0)
                    self.nodes[node] += 1
                    healthy.append(pooled)
                except (ray.exceptions.RayActorError, ray.exceptions.ActorUnschedulableError) as exc:
                    log.error("Ray actor lost: %r", exc)  # it (or its node) died, or its node is gone
                    lost.append(i)
                except Exception as exc:  # a failed task is one lost start
                    log.error("Ray task failed: %r", exc)
                    healthy.append(pooled)
        finally:
            _ACTORS.give_back(self.num_cpus, actors, healthy)
        return lost

    def __getstate__(self) -> dict[str, Any]:
        return {"num_cpus": self.num_cpus}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["num_cpus"])  # type: ignore[misc]  # unpickling: build anew


#: Seconds a pooled executor actor may stay idle before the pool lets it go.
IDLE_SECONDS = 300.0


@dataclass
class _Pooled:
    actor: Any
    node: str | None  # where it was placed (None: anywhere)
    session: tuple[str, str]  # the Ray session it belongs to (see _ActorPool._current)
    idle_since: float = 0.0


class _ActorPool:
    """Idle zero-CPU executor actors of this process, per Ray session; safe across threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._session: tuple[str, str] | None = None
        self._idle: list[_Pooled] = []
        self._placed: Counter[str | None] = Counter()  # live actors per node id, of this session
        self._worker: Any = None  # the Ray actor class

    @staticmethod
    def _current() -> tuple[str, str]:
        import ray

        context = ray.get_runtime_context()  # a new local Ray has a new node; a new connection a new job
        return context.get_job_id(), context.get_node_id()

    def take(self, num_cpus: float, count: int) -> list[_Pooled]:
        """``count`` actors: idle zero-CPU ones on alive nodes (the last given back first), then new ones.

        Idle actors past :data:`IDLE_SECONDS`, and those whose node is gone,
        are dropped here. If Ray fails while new actors are made, everything
        taken or made is let go and the error is raised.
        """
        import ray

        session = self._current()
        alive: list[str | None] = sorted(n["NodeID"] for n in ray.nodes() if n.get("Alive"))
        now = time.monotonic()
        with self._lock:
            if session != self._session:  # the actors of an earlier Ray session are gone with it
                self._session, self._idle, self._placed = session, [], Counter()
                self._worker = ray.remote(max_restarts=0)(_Worker)
            usable: list[_Pooled] = []
            stale: list[_Pooled] = []
            for pooled in self._idle:
                fresh = now - pooled.idle_since <= IDLE_SECONDS and (pooled.node is None or pooled.node in alive)
                (usable if fresh else stale).append(pooled)
            keep = max(0, len(usable) - count) if num_cpus == 0 else len(usable)
            taken, self._idle = usable[keep:], usable[:keep]  # the most recently used: the warmest
            nodes = self._fewest_actors(alive, count - len(taken))
            worker = self._worker
        self._drop(stale)
        made: list[_Pooled] = []
        try:
            for node in nodes:
                made.append(_Pooled(self._new_actor(worker, num_cpus, node), node, session))
        except BaseException:
            self._drop(taken + made)
            with self._lock:
                if self._session == session:  # the nodes chosen for actors never made
                    self._placed.subtract(nodes[len(made) :])
            raise
        return taken + made

    def give_back(self, num_cpus: float, actors: list[_Pooled], healthy: list[_Pooled]) -> None:
        """Keep the ``healthy`` zero-CPU ``actors`` for later (in this Ray session); let the others go."""
        session = self._current()
        reuse = {id(p) for p in healthy} if num_cpus == 0 else set()
        now = time.monotonic()
        drop: list[_Pooled] = []
        with self._lock:
            for pooled in actors:
                if id(pooled) in reuse and pooled.session == session == self._session:
                    pooled.idle_since = now
                    self._idle.append(pooled)
                else:
                    drop.append(pooled)
        self._drop(drop)

    def _drop(self, actors: list[_Pooled]) -> None:
        import ray

        for pooled in actors:
            with self._lock:
                if pooled.session == self._session:  # an earlier session's counts are gone already
                    self._placed[pooled.node] -= 1
            try:
                ray.kill(pooled.actor)
            except Exception as exc:  # an actor already gone is gone
                log.debug("killing a pooled actor: %r", exc)

    def _fewest_actors(self, alive: list[str | None], count: int) -> list[str | None]:
        """``count`` of the ``alive`` nodes, each with the fewest live actors (node order on ties); counted.

        Called with the lock held.
        """
        chosen = []
        for _ in range(max(0, count)):
            node = min(alive or [None], key=lambda n: self._placed[n])
            self._placed[node] += 1
            chosen.append(node)
        return chosen

    @staticmethod
    def _new_actor(worker: Any, num_cpus: float, node: str | None) -> Any:
        """An actor on ``node``: pinned there when it reserves no CPU, else spread (``None``: anywhere).

        A zero-CPU actor is pinned (hard affinity): Ray places an actor with a
        soft affinity elsewhere at times even when the node is alive and idle,
        which would pile a fit's starts on one node. A
        node that died since it was chosen fails the actor's creation, which
        costs that item alone. An actor that reserves CPUs is spread instead,
        so that it never waits for CPUs that trials hold on one node.
        """
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        if node is None:
            return worker.options(num_cpus=num_cpus).remote()
        if num_cpus > 0:
            return worker.options(num_cpus=num_cpus, scheduling_strategy="SPREAD").remote()
        pinned = NodeAffinitySchedulingStrategy(node, soft=False)
        return worker.options(num_cpus=num_cpus, scheduling_strategy=pinned).remote()


_ACTORS = _ActorPool()


class _Worker:
    """A Ray actor that runs executor items (the pool keeps it warm between fits)."""

    def run(self, fn: Callable[[T], R], item: T) -> tuple[str, R]:
        """Run ``fn(item)`` and say on which node it ran."""
        return _on_node(fn, item)


def _on_node(fn: Callable[[T], R], item: T) -> tuple[str, R]:
    """Run ``fn(item)`` in a Ray worker and say on which node it ran."""
    import ray  # runs inside a Ray worker

    return ray.get_runtime_context().get_node_id(), fn(item)


#: The shared pool: twice as many workers as CPUs, one map using as many as there are CPUs, so a fit that
#: starts while another one runs (a server's sessions) finds free workers at once (:class:`ProcessExecutor`).
#: Until its workers have started, its maps run inline (a fit's time budget is not spent waiting for them).
_PROCESSES = ProcessExecutor(2 * (os.cpu_count() or 1), per_map=os.cpu_count() or 1, inline_while_cold=True)

#: A fit of at most this many records runs inline when its caller named no executor. Each new Ray actor or pool
#: worker starts Python and imports NumPy, SciPy and the models, while warm ones beat one process by little at
#: this size (docs/benchmarks.md has the figures). Results do not depend on the executor. A server of many concurrent sessions names the pool instead (inline
#: fits in its threads take turns: raytuner.service.server).
INLINE_RECORDS = 64


def default_executor(records: int | None = None) -> Executor:
    """The executor for a fit of ``records`` records, when the caller named none.

    :class:`InlineExecutor` for a fit of at most :data:`INLINE_RECORDS`
    records; otherwise a :class:`RayExecutor` when Ray is imported and
    initialised, else a shared :class:`ProcessExecutor`.

    Args:
        records: how many records the fit models (default: unknown, so never inline).

    >>> isinstance(default_executor(), (RayExecutor, ProcessExecutor))
    True
    >>> isinstance(default_executor(records=40), InlineExecutor)
    True
    """
    if records is not None and records <= INLINE_RECORDS:
        return InlineExecutor()
    ray = sys.modules.get("ray")
    if ray is not None and getattr(ray, "is_initialized", lambda: False)():
        return RayExecutor()
    return _PROCESSES
