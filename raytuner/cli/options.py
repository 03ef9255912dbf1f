"""Option values shared by the command groups: ``NAME=VALUE`` pairs, JSON arguments, JSON output, credentials.

Example:
    >>> pairs(["n=3", "name=cori", "ok=true"], "--task")
    {'n': 3, 'name': 'cori', 'ok': True}
    >>> json_arg('[1, 2]', "--tasks-json", list)
    [1, 2]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import click

from raytuner.errors import InvalidInputError
from raytuner.store.jsontext import dumps_standard, is_unicode, loads_strict

__all__ = [
    "parse_value",
    "pairs",
    "json_arg",
    "echo_json",
    "credential",
    "private_key_option",
    "connection_options",
    "ENV_PRIVATE_KEY",
]

#: Where ``--private-key`` is read from when it is not given.
ENV_PRIVATE_KEY = "RAYTUNER_CROWD_PRIVATE_KEY"


def parse_value(text: str) -> Any:
    """``text`` as JSON when it is standard JSON (``3``, ``true``, ``[1]``), else the text itself.

    ``NaN`` is no JSON number, so it stays the text ``'NaN'``.

    Args:
        text: A ``VALUE`` of ``NAME=VALUE``.

    >>> parse_value("[1, 2]"), parse_value("cori"), parse_value("NaN")
    ([1, 2], 'cori', 'NaN')
    """
    try:
        return loads_strict(text, "VALUE")
    except InvalidInputError:
        return text


def pairs(items: Iterable[str], option: str) -> dict[str, Any]:
    """``NAME=VALUE`` items as a dict (values read by :func:`parse_value`); a bad item names ``option``.

    Args:
        items: The option's values.
        option: The option's name, for the error message.
    """
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not NAME=VALUE", param_hint=option)
        if not is_unicode(item):
            raise click.BadParameter(f"{item!a} is not UTF-8 text", param_hint=option)
        out[key] = parse_value(value)
    return out


def json_arg(text: str | None, option: str, kind: type) -> Any:
    """The standard JSON value of ``text`` (``None`` when not given), which must be a ``kind``.

    Read strictly, as the service reads its JSON fields (:func:`raytuner.store.jsontext.loads_strict`).

    Args:
        text: The option's value.
        option: The option's name, for the error message.
        kind: The JSON type wanted (``list``, ``dict``).
    """
    if text is None:
        return None
    try:
        value = loads_strict(text, option)
    except InvalidInputError as exc:
        raise click.BadParameter(exc.reason, param_hint=option) from None
    if not isinstance(value, kind):
        raise click.BadParameter(f"must be a JSON {kind.__name__}", param_hint=option)
    return value


def echo_json(value: Any) -> None:
    """Print ``value`` as indented JSON with sorted keys (anything not JSON as its ``str``).

    Args:
        value: What to print.
    """
    click.echo(dumps_standard(value, indent=2, sort_keys=True, default=str))


def private_key_option(command: Any) -> Any:
    """Add ``--private-key FILE`` (default ``$RAYTUNER_CROWD_PRIVATE_KEY``): a crowd user's Ed25519 private key.

    Args:
        command: The command to add it to.
    """
    return click.option(
        "--private-key",
        envvar=ENV_PRIVATE_KEY,
        metavar="FILE",
        help=f"Your crowd Ed25519 private key file, which signs each call, instead of an API key "
        f"(default: ${ENV_PRIVATE_KEY}).",
    )(command)


def credential(api_key: str | None, private_key: str | None) -> Any:
    """The API key, or the :class:`~raytuner.signing.Signer` of the private key, the caller gave.

    With both, the one given on the command line wins over the other's
    environment variable; both on the command line (or both from the
    environment) is a usage error. ``None`` when neither is given.

    Args:
        api_key: The ``--api-key`` value.
        private_key: The ``--private-key`` value (a file).
    """
    if api_key is not None and private_key is not None:
        context = click.get_current_context()
        typed = [
            name
            for name in ("api_key", "private_key")
            if context.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
        ]
        if len(typed) != 1:
            raise click.UsageError("give one of --api-key and --private-key")
        api_key, private_key = (api_key, None) if typed == ["api_key"] else (None, private_key)
    if private_key is None:
        return api_key
    from raytuner.signing import Signer  # cryptography only when a key file is given

    return Signer.from_file(private_key)


def connection_options(
    server: str, api_key: tuple[str, str], timeout: float, timeout_help: str
) -> list[Callable[[Callable[..., Any]], Callable[..., Any]]]:
    """The options every command that calls a server takes: ``--server``, ``--api-key``, ``--private-key``,
    ``--tls-ca`` and ``--timeout``, in that order (apply them last to first).

    Args:
        server: What the server is, for ``--server``'s help ("The tuning service").
        api_key: ``--api-key``'s environment variable and help.
        timeout: ``--timeout``'s default, in seconds.
        timeout_help: ``--timeout``'s help.

    >>> [o.__name__ for o in connection_options("The server", ("KEY", "Your key."), 10.0, "Deadline.")][:1]
    ['decorator']
    """
    return [
        click.option(
            "--server",
            envvar="RAYTUNER_SERVER",
            required=True,
            metavar="HOST:PORT",
            help=f"{server} (default: $RAYTUNER_SERVER).",
        ),
        click.option("--api-key", envvar=api_key[0], metavar="KEY", help=api_key[1]),
        private_key_option,
        click.option(
            "--tls-ca",
            envvar="RAYTUNER_TLS_CA",
            type=click.File("rb"),
            help="CA certificate (PEM) of a TLS server (default: $RAYTUNER_TLS_CA).",
        ),
        click.option("--timeout", type=float, default=timeout, show_default=True, help=timeout_help),
    ]
