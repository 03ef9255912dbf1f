"""Refuse a server's calls that need its store while its hold on the store is paused.

A server on a MongoDB store holds the store's lease
(:class:`~raytuner.store.server_lock.MongoServerLease`). When the database
cannot be reached for so long that the lease may run out, the lease is
*paused*: another server may take the store from then on, so this one must
neither write nor acknowledge anything until the lease is renewed. Every call
of the services that use the store is then refused at once, before its
handler runs, with ``UNAVAILABLE`` and :data:`PAUSED_MESSAGE`; the clients
retry it with backoff (:mod:`raytuner.client.channel`), and it goes through
once the database answers and the lease is taken back. A lost lease stops the
server instead.

Example:
    >>> pause = StorePause(lambda: False, ["raytuner.v1.TuningService"])
    >>> pause.guards("/raytuner.v1.TuningService/Tell"), pause.guards("/raytuner.v1.CrowdService/Query")
    (True, False)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import grpc

from raytuner.service.handlers import wrap_handler

__all__ = ["StorePause", "PAUSED_MESSAGE"]

#: The status message of a call refused while the lease is paused.
PAUSED_MESSAGE = "the store's server lease could not be renewed: the database is unreachable; retry"


class StorePause(grpc.ServerInterceptor):
    """Refuses the calls of ``services`` with ``UNAVAILABLE`` while ``paused()`` is true.

    Pass it to ``grpc.server(..., interceptors=[...])``, ahead of the others, so that a refused call
    costs nothing else. ``paused`` is asked as each call's handler is about to run.

    Args:
        paused: Whether the store may not be used now (:attr:`~raytuner.store.server_lock.ServerLock.paused`).
        services: The full names of the services whose calls use the store (``"raytuner.v1.TuningService"``).
    """

    def __init__(self, paused: Callable[[], bool], services: Iterable[str]) -> None:
        self.paused = paused
        self.prefixes = tuple(f"/{name}/" for name in services)

    def guards(self, method: str) -> bool:
        """Whether calls of ``method`` (``/package.Service/Method``) are refused while paused.

        Args:
            method: The method's full name, as gRPC gives it.
        """
        return method.startswith(self.prefixes)

    def _check(self, context: grpc.ServicerContext) -> None:
        if self.paused():
            context.abort(grpc.StatusCode.UNAVAILABLE, PAUSED_MESSAGE)

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        """The method's handler, refusing while paused (unary-unary and unary-stream handlers of ``services``)."""
        handler = continuation(handler_call_details)
        if not self.guards(handler_call_details.method):
            return handler
        return wrap_handler(handler, self._unary, self._stream)

    def _unary(self, behavior: Callable[[Any, grpc.ServicerContext], Any]) -> Callable[..., Any]:
        def answered(request: Any, context: grpc.ServicerContext) -> Any:
            self._check(context)
            return behavior(request, context)

        return answered

    def _stream(self, behavior: Callable[[Any, grpc.ServicerContext], Iterator[Any]]) -> Callable[..., Any]:
        def streamed(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            self._check(context)
            yield from behavior(request, context)

        return streamed
