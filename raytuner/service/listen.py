"""Where a server listens: refuse an address it cannot bind in one line, and warn when keys would travel in clear.

:func:`check_listen` binds the address the way gRPC will (``SO_REUSEADDR``, no
``SO_REUSEPORT``) and lets it go again, so that a port another server holds, an
address that is not this machine's or a host name that does not resolve is an
:class:`~raytuner.errors.InvalidInputError` naming the address and the cause
(the command line's exit status 2), not gRPC's ``RuntimeError``.
:func:`is_loopback` says whether only this machine can reach an address: the
server warns once when it listens elsewhere without TLS.

Example:
    >>> import socket
    >>> with socket.socket() as taken:
    ...     taken.bind(("127.0.0.1", 0)); taken.listen()
    ...     check_listen("127.0.0.1", taken.getsockname()[1])    # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: port: cannot listen on 127.0.0.1:...: address already in use ...
    >>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("0.0.0.0"), is_loopback("[::1]")
    (True, True, False, True)
"""

from __future__ import annotations

import errno
import ipaddress
import socket

from raytuner.errors import InvalidInputError

__all__ = ["check_listen", "is_loopback", "CLEAR_TEXT_WARNING"]

#: What a server listening beyond this machine without TLS logs (``{address}``: where it listens).
CLEAR_TEXT_WARNING = (
    "listening on {address} without TLS: API keys and data travel in clear text; "
    "give --tls-cert FILE --tls-key FILE (TuningServer(tls_cert=..., tls_key=...)) to encrypt them"
)

_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


def _bare(host: str) -> str:
    """``host`` without the brackets of an IPv6 literal (``[::1]``: ``::1``)."""
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only (a loopback address or ``localhost``).

    Args:
        host: The address a server listens on (an IP address, ``[IPv6]`` or a host name).
    """
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(_bare(host)).is_loopback
    except ValueError:
        return False  # a host name: other machines may reach it


def check_listen(host: str, port: int) -> None:
    """Raise :class:`~raytuner.errors.InvalidInputError` naming the address and why a server cannot listen there.

    Binds each address ``host`` resolves to (with ``SO_REUSEADDR``, as gRPC does) and closes it again;
    port 0 (any free port) is only resolved.

    Args:
        host: The address to listen on.
        port: The port.
    """
    target = f"{host}:{port}"
    try:
        addresses = socket.getaddrinfo(_bare(host), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise InvalidInputError("host", f"cannot listen on {target}: {_reason(exc)}") from None
    if port == 0:
        return
    failure: OSError | None = None
    for family, kind, protocol, _, address in addresses:
        with socket.socket(family, kind, protocol) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                failure = failure or exc
                continue
        return  # gRPC listens where it can bind, and fails only where it binds nothing
    if failure is not None:
        in_use = failure.errno in (errno.EADDRINUSE, errno.EACCES)
        hint = _HINTS.get(failure.errno or 0, "")
        raise InvalidInputError("port" if in_use else "host", f"cannot listen on {target}: {_reason(failure)}{hint}")


_HINTS = {
    errno.EADDRINUSE: " (another server holds it? give another --port, or 0 for any free one)",
    errno.EADDRNOTAVAIL: " (not an address of this machine?)",
    errno.EACCES: " (a port under 1024 needs privileges: give another --port)",
}


def _reason(exc: OSError | UnicodeError) -> str:
    """The cause of ``exc`` in lower case (``address already in use``)."""
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return text[:1].lower() + text[1:]
