"""Per-key limits on a server's concurrent calls and streams, so that no key holder starves another.

A gRPC server answers with a fixed pool of threads, and a call holds one of
them until it is answered; a stream (``WatchSession``) holds one as long as it
is watched. :class:`PerKeyLimits` is a server interceptor that counts, per
caller, the unary calls and the response streams being answered, and refuses
one over its limit at once with ``RESOURCE_EXHAUSTED`` and one line (the
clients retry it with backoff, :mod:`raytuner.client.channel`), so one key's
watchers or a burst of its calls always leave threads for the other keys.
Given the server's ``pool`` of threads, the last quarter of it is kept for
callers with nothing in flight: once three quarters are taken, a caller that
holds a call or a stream already is refused too, so even several keys at
their limits leave room for a key that comes with its first call.

The caller is the credential's public part, read from the metadata without
checking it (that is the handlers' job): an API key ``rt_<key id>_<secret>``
counts as ``rt_<key id>``, a signed crowd credential ``rtsig_<key id>_...`` as
``rtsig_<key id>``; calls without a key share one count.

Example:
    >>> limits = PerKeyLimits(max_calls=2, max_streams=1)
    >>> limits.caller((("x-api-key", "rt_0123456789abcdef_secret"),))
    'rt_0123456789abcdef'
    >>> limits.take("stream", "rt_a"), limits.take("stream", "rt_a"), limits.take("stream", "rt_b")
    (True, False, True)
    >>> limits.release("stream", "rt_a"); limits.take("stream", "rt_a")
    True
    >>> shared = PerKeyLimits(max_calls=8, max_streams=8, pool=4)      # 3 threads for those already in
    >>> [shared.take("call", "rt_a") for _ in range(4)], shared.take("call", "rt_b")
    ([True, True, True, False], True)
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

import grpc

from raytuner.errors import InvalidInputError
from raytuner.protocol import METADATA_KEY
from raytuner.service.handlers import wrap_handler

__all__ = ["PerKeyLimits", "default_limits"]

log = logging.getLogger(__name__)

Kind = Literal["call", "stream"]


def default_limits(max_workers: int) -> tuple[int, int]:
    """The default per-key limits of a server with ``max_workers`` threads: ``(calls, streams)``.

    One key may hold half of the threads with unary calls and a quarter with
    streams, so even a key at both limits leaves a quarter of the pool to the
    other keys; a stream holds its thread for as long as it is watched, hence the
    lower limit. Each is at least 1.

    >>> default_limits(64)
    (32, 16)

    Args:
        max_workers: The server's threads.
    """
    return max(1, max_workers // 2), max(1, max_workers // 4)


class PerKeyLimits(grpc.ServerInterceptor):
    """Refuses a caller's unary call over ``max_calls`` at once, or its stream over ``max_streams``.

    Pass it to ``grpc.server(..., interceptors=[limits])``. Over a limit the call
    ends with ``RESOURCE_EXHAUSTED`` and a line that names the limit.

    Args:
        max_calls: Unary calls one caller may have answered at once (0: no limit).
        max_streams: Response streams one caller may have open at once (0: no limit).
        pool: The server's threads (0: none kept for new callers).
    """

    def __init__(self, max_calls: int, max_streams: int, pool: int = 0) -> None:
        for name, value in (
            ("max_calls_per_key", max_calls),
            ("max_streams_per_key", max_streams),
            ("max_workers", pool),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidInputError(name, f"{value!r} is not a count (0: no limit)")
        self.limits: dict[Kind, int] = {"call": max_calls, "stream": max_streams}
        #: Threads that callers with something in flight may hold together (the rest wait for new callers).
        self.shared = pool - max(1, pool // 4) if pool else 0
        self._open: dict[Kind, Counter[str]] = {"call": Counter(), "stream": Counter()}
        self._lock = threading.Lock()
        self._idle: list[Callable[[], None]] = []

    def when_idle(self, action: Callable[[], None]) -> int:
        """Run ``action`` once no unary call is being answered: now, or as the last one ends.

        A stopped gRPC server cancels its calls but does not wait for their
        handlers, which may still write; what must follow the last write (giving
        the store to the next server) waits for them here. Returns the calls
        still running (0: ``action`` ran).

        Args:
            action: What to run (once).

        >>> limits = PerKeyLimits(max_calls=2, max_streams=1)
        >>> limits.take("call", "rt_a")
        True
        >>> limits.when_idle(lambda: print("idle"))
        1
        >>> limits.release("call", "rt_a")
        idle
        """
        with self._lock:
            running = sum(self._open["call"].values())
            if running:
                self._idle.append(action)
                return running
        action()
        return 0

    @staticmethod
    def caller(metadata: Sequence[tuple[str, Any]] | None) -> str:
        """Whom a call's metadata names: the public part of its credential (``""``: none).

        Args:
            metadata: The call's invocation metadata.
        """
        key = dict(metadata or ()).get(METADATA_KEY)
        if not isinstance(key, str):
            return ""
        return "_".join(key.split("_", 2)[:2])[:80]

    def take(self, kind: Kind, caller: str) -> bool:
        """Count one more ``kind`` of ``caller``'s; ``False`` (nothing counted) at its limit, or when the
        pool's shared part is taken and ``caller`` holds something already.

        Args:
            kind: ``"call"`` or ``"stream"``.
            caller: Whom the call counts for (:meth:`caller`).
        """
        with self._lock:
            limit, counts = self.limits[kind], self._open[kind]
            if limit and counts[caller] >= limit:
                return False
            held = self._open["call"][caller] + self._open["stream"][caller]
            if (
                self.shared
                and held
                and sum(self._open["call"].values()) + sum(self._open["stream"].values()) >= self.shared
            ):
                return False
            counts[caller] += 1
            return True

    def release(self, kind: Kind, caller: str) -> None:
        """Count one ``kind`` of ``caller``'s less (it was answered).

        Args:
            kind: ``"call"`` or ``"stream"``.
            caller: Whom the call counted for.
        """
        with self._lock:
            counts = self._open[kind]
            counts[caller] -= 1
            if counts[caller] <= 0:
                del counts[caller]
            idle, self._idle = (self._idle, []) if not self._open["call"] else ([], self._idle)
        for action in idle:
            action()

    def _refuse(self, kind: Kind, context: grpc.ServicerContext) -> None:
        what = "unary calls" if kind == "call" else "open streams"
        context.abort(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            f"{METADATA_KEY}: this key is at the server's per-key limit ({self.limits[kind]} {what}), or "
            f"holds calls while the server is busy; retry when one of them ends",
        )

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        """The method's handler, counted per caller (unary-unary and unary-stream handlers)."""
        return wrap_handler(continuation(handler_call_details), self._unary, self._stream)

    def _unary(self, behavior: Callable[[Any, grpc.ServicerContext], Any]) -> Callable[..., Any]:
        def limited(request: Any, context: grpc.ServicerContext) -> Any:
            caller = self.caller(context.invocation_metadata())
            if not self.take("call", caller):
                self._refuse("call", context)
            try:
                return behavior(request, context)
            finally:
                self.release("call", caller)

        return limited

    def _stream(self, behavior: Callable[[Any, grpc.ServicerContext], Iterator[Any]]) -> Callable[..., Any]:
        def limited(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            caller = self.caller(context.invocation_metadata())
            if not self.take("stream", caller):
                self._refuse("stream", context)
            try:
                yield from behavior(request, context)
            finally:
                self.release("stream", caller)

        return limited
