"""What every gRPC handler of the server shares: errors to status codes, the handler wrapper and the
interceptors' way of wrapping a handler (:func:`wrap_handler`).

JSON fields are read with :func:`raytuner.protocol.json_field`.

An exception says its own status: :class:`~raytuner.errors.InvalidInputError`
is ``INVALID_ARGUMENT``, :class:`~raytuner.errors.StoreError` ``UNAVAILABLE``
(clients retry), and any other exception class with a ``grpc_status``
attribute (a status name, such as ``"NOT_FOUND"``) that status; anything
else is ``INTERNAL``, logged with its stack. A message is cut to
:data:`MAX_STATUS_MESSAGE` characters: gRPC carries it in a header, and a
header over 16 KiB reaches the client as a retryable ``RESOURCE_EXHAUSTED``.

Example:
    >>> status_of(InvalidInputError("x", "bad"))[0].name
    'INVALID_ARGUMENT'
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

import grpc

from raytuner.errors import InvalidInputError, StoreError

__all__ = ["Abort", "status_of", "rpc", "wrap_handler", "MAX_STATUS_MESSAGE"]

log = logging.getLogger(__name__)

#: The most characters of a status message sent (a longer one is cut, saying so).
MAX_STATUS_MESSAGE = 2000


class Abort(Exception):
    """End a call with ``code`` and ``message``.

    Args:
        code: the gRPC status code to end the call with.
        message: the status message.
    """

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def status_of(exc: Exception) -> tuple[grpc.StatusCode, str]:
    """The status code and message a failed call answers with (see the module documentation).

    Args:
        exc: the exception the handler raised.
    """
    code, message = _status(exc)
    if len(message) > MAX_STATUS_MESSAGE:
        message = f"{message[:MAX_STATUS_MESSAGE]}... (cut: {len(message)} characters)"
    return code, message


def _status(exc: Exception) -> tuple[grpc.StatusCode, str]:
    if isinstance(exc, Abort):
        return exc.code, str(exc)
    if isinstance(exc, InvalidInputError):
        return grpc.StatusCode.INVALID_ARGUMENT, str(exc)
    if isinstance(exc, StoreError):
        return grpc.StatusCode.UNAVAILABLE, f"store unavailable: {exc}"
    name = getattr(exc, "grpc_status", None)
    if isinstance(name, str) and name in grpc.StatusCode.__members__:
        return grpc.StatusCode[name], str(exc)
    log.exception("internal error")
    return grpc.StatusCode.INTERNAL, f"internal error ({type(exc).__name__}); see the server log"


def rpc(method: Callable[..., Any]) -> Callable[..., Any]:
    """Answer every failure of a unary handler with a status; never let it escape.

    Args:
        method: the servicer's unary handler.
    """

    @functools.wraps(method)
    def handler(self: Any, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return method(self, request, context)
        except Exception as exc:  # every error becomes a status
            code, message = status_of(exc)
        context.abort(code, message)

    return handler


def wrap_handler(
    handler: grpc.RpcMethodHandler | None,
    unary: Callable[[Callable[..., Any]], Callable[..., Any]],
    stream: Callable[[Callable[..., Any]], Callable[..., Any]],
) -> grpc.RpcMethodHandler | None:
    """``handler`` with its behaviour wrapped, as a server interceptor returns it.

    A unary-unary behaviour becomes ``unary(behaviour)``, a unary-stream one ``stream(behaviour)``; a
    handler that streams requests (none here) and ``None`` (an unknown method) are returned as they are.

    Args:
        handler: What the interceptor's continuation gave.
        unary: Wraps a unary-unary behaviour ``(request, context) -> response``.
        stream: Wraps a unary-stream behaviour ``(request, context) -> iterator of responses``.
    """
    if handler is None or handler.request_streaming:
        return handler
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(
            stream(handler.unary_stream), handler.request_deserializer, handler.response_serializer
        )
    return grpc.unary_unary_rpc_method_handler(
        unary(handler.unary_unary), handler.request_deserializer, handler.response_serializer
    )
