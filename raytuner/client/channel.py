"""The plumbing of every client here: a gRPC channel with deadlines, retries and the caller's credential.

:class:`ServiceChannel` calls a raytuner server's methods with a deadline,
retrying with exponential backoff and jitter on :data:`RETRIED_CODES`; a
failure surfaces as :class:`ServiceError` with the gRPC status name and the
server's message.

Retries come in two kinds: a number of them (``retries=5``), or, with
``retries=None``, as many as fit in ``retry_for`` seconds from the first
attempt (the tuning service's clients: 150 s, so a job outlives a server
restart of two minutes). Each attempt waits for the connection (gRPC's
``wait_for_ready``) up to its deadline, so a call made while the server is
down goes through as soon as the channel reconnects (at most 2 s after the
server is back) rather than at the next backoff. A call still waiting
after a second asks the channel, with a call that does not wait, whether it
can connect at all, and so does an attempt that ended ``UNAVAILABLE`` or
``DEADLINE_EXCEEDED`` before it was asked (an attempt's deadline of a second
or less, or a loaded machine whose timer ran late): when the channel cannot
connect, one warning line names the address and the cause (``connection
refused``, ``domain name not found``), once per outage, before the next
attempt, and the error the call ends with names them too. gRPC's own retry policy
(the channel's service config) is not used: gRPC caps its ``maxAttempts`` at
5 and draws each backoff from ``[0, current]``, so it cannot promise a
window of minutes; and a call is retried only where that is safe (tells and
asks carry their trial id, the same in every attempt). Each attempt carries the credential in the metadata
(:meth:`ServiceChannel._call_metadata`): the API key, or with a crowd user's
private key a fresh signed credential for the method called (its name in
snake case; the crowd client signs the repository's action instead).
"""

from __future__ import annotations

import logging
import random
import re
import threading
import time
from collections.abc import Callable
from typing import Any, Self, TypedDict

import grpc

from raytuner.errors import InvalidInputError, RaytunerError
from raytuner.protocol import MAX_MESSAGE_BYTES, METADATA_KEY
from raytuner.signing import Signer

__all__ = ["ServiceChannel", "ServiceError", "Connection", "RETRIED_CODES", "check_connection", "connect_cause"]

log = logging.getLogger(__name__)

#: Status codes a call is retried on (the request may not have reached the server, or it was busy).
RETRIED_CODES = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED"})
_MAX_BACKOFF = 5.0
#: A method no server has: calling it without waiting for the connection says why there is none.
_PROBE = "/raytuner.v1.Diagnostics/NoSuchMethod"
#: Seconds a call waits before the channel is asked whether it can connect at all (:meth:`ServiceChannel._diagnose`).
_DIAGNOSE_AFTER = 1.0
#: Status codes of an attempt after which the channel is asked whether it can connect, unless it was this outage.
_OUTAGE_CODES = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED"})


def connect_cause(details: str) -> str:
    """The cause in gRPC's text for a channel that cannot connect, in lower case.

    Args:
        details: The details of an ``UNAVAILABLE`` status.

    >>> connect_cause("failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: "
    ...               "Failed to connect to remote host: Connection refused")
    'connection refused'
    >>> connect_cause("errors resolving x.invalid:1: [field:hostname lookup error:address lookup failed "
    ...               "for x.invalid:1: Domain name not found]")
    'domain name not found'
    """
    cause = details.rstrip("] ").rsplit(": ", 1)[-1].strip() or details or "no connection"
    return cause[:1].lower() + cause[1:]


class Connection(TypedDict, total=False):
    """How a client reaches its server: the keyword arguments every client takes beside address and key.

    See :class:`ServiceChannel` for each one's meaning and default.

    Example:
        >>> connection: Connection = {"timeout": 30.0, "retry_for": 600.0}
        >>> check_connection(connection) == connection
        True
    """

    root_certificates: bytes | None
    tls: bool | None
    timeout: float
    retries: int | None
    backoff: float
    tls_server_name: str | None
    retry_for: float


def check_connection(connection: Any) -> Connection:
    """``connection`` checked to hold only :class:`Connection`'s names; an unknown one is refused in one line.

    Args:
        connection: The connection keyword arguments a client was given.

    >>> check_connection({"timeot": 3})
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: connection: no argument 'timeot' (allowed: backoff, retries, retry_for, root_certificates, timeout, tls, tls_server_name)
    """
    unknown = sorted(set(connection) - set(Connection.__annotations__))
    if unknown:
        raise InvalidInputError("connection", f"no argument {unknown[0]!r}", allowed=sorted(Connection.__annotations__))
    return connection


class ServiceError(RaytunerError):
    """A call to the tuning service failed: ``code`` is the gRPC status name, ``message`` the server's text.

    Args:
        code: the gRPC status name (``"NOT_FOUND"``).
        message: the server's text.

    >>> str(ServiceError("NOT_FOUND", "session_id: no session 'x'"))
    "NOT_FOUND: session_id: no session 'x'"
    """

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(f"{code}: {message}")


class ServiceChannel:
    """A channel to a raytuner server with deadlines and retries: the plumbing of every client here.

    Args:
        address: ``host:port`` of the server.
        api_key: the API key sent in each request's metadata, never logged (``None``: none), or a
            :class:`~raytuner.signing.Signer` of a crowd user's private key, which signs
            each attempt of each call afresh.
        stub: the generated stub class of the service this client calls.
        root_certificates: PEM bytes of the CA; turns TLS on.
        tls: TLS with the system's roots (default: only with ``root_certificates``).
        timeout: each call's deadline in seconds (default 10).
        retries: how many times a failed call is tried again, the n-th after about
            ``backoff * 2**n`` seconds, at most 5 s (default 5; ``None``: as often as ``retry_for`` allows).
        backoff: seconds before the first retry (default 0.2).
        tls_server_name: the name the server's certificate is checked for (default: the host).
        retry_for: with ``retries=None``, seconds from a call's first attempt within which it is retried.
    """

    def __init__(
        self,
        address: str,
        api_key: str | Signer | None,
        stub: Callable[[grpc.Channel], Any],
        *,
        root_certificates: bytes | None = None,
        tls: bool | None = None,
        timeout: float = 10.0,
        retries: int | None = 5,
        backoff: float = 0.2,
        tls_server_name: str | None = None,
        retry_for: float = 150.0,
    ) -> None:
        if not isinstance(address, str) or not address:
            raise InvalidInputError("address", f"{address!r} is not a host:port address")
        for name, value in (
            ("timeout", timeout),
            ("retries", 0 if retries is None else retries),
            ("backoff", backoff),
            ("retry_for", retry_for),
        ):
            if value < 0 or (name == "timeout" and value == 0):
                raise InvalidInputError(name, "must be positive (retries, backoff and retry_for may be 0)")
        self.address = address
        self.timeout, self.backoff, self.retry_for = float(timeout), float(backoff), float(retry_for)
        self.retries = None if retries is None else int(retries)
        if api_key is not None and not isinstance(api_key, (str, Signer)):
            raise InvalidInputError(
                "api_key",
                f"a {type(api_key).__name__}; give the key as text, or a Signer",
                allowed=["str", "raytuner.signing.Signer", "None"],
            )
        self.signer = api_key if isinstance(api_key, Signer) else None
        self._metadata = ((METADATA_KEY, api_key),) if isinstance(api_key, str) and api_key else ()
        options: list[tuple[str, Any]] = [
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.enable_retries", 0),  # this class retries, with its own policy
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 2000),
        ]
        if root_certificates is not None or tls:
            if tls_server_name:
                options.append(("grpc.ssl_target_name_override", tls_server_name))
            credentials = grpc.ssl_channel_credentials(root_certificates)
            self._channel = grpc.secure_channel(address, credentials, options=options)
        else:
            self._channel = grpc.insecure_channel(address, options=options)
        self._stub = stub(self._channel)
        self._cause: str | None = None  # why the channel could not connect (None: it did, or has not tried)
        self._warned = False  # whether this outage was named in the log
        self._state_lock = threading.Lock()

    def _diagnose(self) -> None:
        """Name the address and why the channel cannot connect, once per outage (a call is waiting for it).

        Asks with a call that does not wait for the connection (a method no server has: a server that
        is reached answers ``UNIMPLEMENTED``, and nothing is logged).
        """
        probe = self._channel.unary_unary(_PROBE, request_serializer=bytes, response_deserializer=bytes)
        try:
            probe(b"", timeout=min(self.timeout, 5.0), wait_for_ready=False)
            return
        except grpc.RpcError as exc:
            if exc.code() is not grpc.StatusCode.UNAVAILABLE:
                return  # reached
            cause = connect_cause(exc.details() or "")
        except ValueError:  # the channel was closed meanwhile
            return
        with self._state_lock:
            self._cause = cause
            if self._warned:
                return
            self._warned = True
        within = f"for up to {self.retry_for:.0f} s" if self.retries is None else f"{self.retries} time(s)"
        log.warning("cannot reach %s: %s; retrying %s", self.address, cause, within)

    def _reached(self) -> None:
        """A call was answered: the next outage is named again."""
        if self._warned:
            with self._state_lock:
                self._warned, self._cause = False, None
            log.info("reached %s again", self.address)

    def _signed_method(self, name: str, request: Any) -> str:
        """The method a call of ``name`` is signed for: its name in snake case (``CreateSession``: ``create_session``)."""
        return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()

    def _call_metadata(self, name: str, request: Any) -> tuple[tuple[str, str], ...]:
        """The metadata of one attempt at calling ``name`` with ``request``: a fresh signed credential, or the key."""
        if self.signer is None:
            return self._metadata
        return ((METADATA_KEY, self.signer.credential(self._signed_method(name, request))),)

    def _call(self, name: str, request: Any) -> Any:
        """Call method ``name``, retrying on :data:`RETRIED_CODES`; a stream's answers are read in full."""
        method = getattr(self._stub, name)
        attempt, started = 0, time.monotonic()
        while True:
            # a call still waiting after a moment may wait for a connection that cannot be made: say why
            diagnosis = threading.Timer(_DIAGNOSE_AFTER, self._diagnose)
            diagnosis.daemon = True
            diagnosis.start()
            try:
                answer = method(
                    request, timeout=self.timeout, metadata=self._call_metadata(name, request), wait_for_ready=True
                )
                answer = list(answer) if isinstance(answer, grpc.Call) and hasattr(answer, "__iter__") else answer
                self._reached()
                return answer
            except grpc.RpcError as exc:
                diagnosis.cancel()
                code = exc.code().name if exc.code() is not None else "UNKNOWN"
                message = exc.details() or ""
                retry = code in RETRIED_CODES and "larger than max" not in message  # oversized: never
                delay = min(_MAX_BACKOFF, self.backoff * 2**attempt) * random.uniform(0.5, 1.5)
                if self.retries is None:
                    spent = time.monotonic() - started
                    within = spent + delay < self.retry_for
                else:
                    within = attempt < self.retries
                if retry and code in _OUTAGE_CODES and not self._warned:
                    self._diagnose()  # the timer may not have run: it must not race the attempt's deadline
                if not retry or not within:
                    if retry:
                        unreachable = f"; {self.address}: {self._cause}" if self._cause else ""
                        message = (
                            f"{message} (after {attempt + 1} attempts in {time.monotonic() - started:.0f} s"
                            f"{unreachable})"
                        )
                    raise ServiceError(code, message) from None
                log.info("%s to %s: %s; retrying in %.2f s", name, self.address, code, delay)
                time.sleep(delay)
                attempt += 1
            finally:
                diagnosis.cancel()  # (an interrupted call too)

    def close(self) -> None:
        """Close the channel."""
        self._channel.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
