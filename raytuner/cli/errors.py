"""How every ``raytuner`` command fails: one line on stderr, and an exit status that says whose fault it was.

Every command of the ``raytuner`` group (``history``, ``serve``,
``keys``, ``session``, ``ask``, ``tell``, ``crowd``) fails the same way,
because the one root group, :class:`CommandGroup`, turns every error of every
subcommand into a single ``Error: ...`` line. No command prints a traceback.

Exit statuses:

====  ==========================================================================================
0     done
1     failed, and not because of the input: the service or a store refused or could not do it
      (not found, not allowed, already told, unreachable, a disk error); the line says which
2     bad input: an argument, an option or an input file; the line names it (the file, the field
      in it) and, where it can, what is allowed
3, 4  ``raytuner ask`` only: the session is finished / nothing to hand out yet (``--no-wait``)
70    an internal error, i.e. a bug in raytuner: the line names the exception; run again with
      ``-v`` for the traceback (and please report it)
====  ==========================================================================================

An input file is read through :func:`raytuner.store.jsonfile.parse_json_file`
(or the :class:`JsonFile` parameter type, which does it while click parses the
command line, so a bad file is refused before any server or store is
contacted): a missing file, a directory, bytes that are not UTF-8, text that is
not JSON and JSON of the wrong shape each raise
:class:`~raytuner.errors.InvalidInputError` naming the file and the field.

Example:
    >>> CommandError("no such session", EXIT_INPUT).exit_code
    2
"""

from __future__ import annotations

import errno
import importlib
import logging
import os
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, NoReturn

import click

from raytuner.errors import InvalidInputError, RaytunerError
from raytuner.store.gptune_file import HISTORY_FILE, parse_history
from raytuner.store.jsonfile import parse_json_file

__all__ = [
    "EXIT_FAILED",
    "EXIT_INPUT",
    "EXIT_INTERNAL",
    "EXIT_STATUS_HELP",
    "CommandError",
    "CommandGroup",
    "JsonFile",
    "history_file",
    "store_location",
    "existing_store",
    "one_line",
]

log = logging.getLogger(__name__)

EXIT_FAILED = 1
EXIT_INPUT = 2
EXIT_INTERNAL = 70  # sysexits.h EX_SOFTWARE
#: The exit statuses in a sentence, for the commands' help.
EXIT_STATUS_HELP = (
    "Exit status: 0 done; 1 failed (the service or a store refused or could not do it); "
    "2 bad input (an argument, option or input file); 3/4 `ask`: finished / wait; "
    "70 internal error (a bug: run with -v for the traceback)."
)


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines included) as one space.

    Args:
        text: any text.

    >>> one_line("a\\n  b\\tc ")
    'a b c'
    """
    return " ".join(str(text).split())


class CommandError(click.ClickException):
    """A command's failure, shown as one ``Error: ...`` line on stderr; exits with ``exit_code``.

    Args:
        message: the line shown after ``Error:``.
        exit_code: the exit status (default 1: not the input's fault).
    """

    def __init__(self, message: str, exit_code: int = EXIT_FAILED) -> None:
        super().__init__(one_line(message) or "failed")
        # click types exit_code as a ClassVar, yet its main() reads it from the instance
        self.exit_code = exit_code  # type: ignore[misc]

    def show(self, file: Any = None) -> None:
        click.echo(f"Error: {self.format_message()}", file=file, err=True)


# -- input files ------------------------------------------------------------------------------------------------


class JsonFile(click.ParamType):
    """A click parameter type: a JSON file, read and parsed while the command line is parsed.

    The command gets the parsed value; a bad file stops the command before
    its body runs (so before any connection is made) with exit status 2 and
    one line naming the file and the field.

    Args:
        parse: turns the file's JSON data into the command's value; raises InvalidInputError on bad data.
        what: what the file holds, for messages (``"a meta description"``).
        defaults: gives values for keys the file leaves out, from its path (default none).

    >>> from raytuner.problem.meta import MetaDescription
    >>> option = click.option("--problem", type=JsonFile(MetaDescription.parse, "a meta description"))
    """

    name = "file"

    def __init__(
        self, parse: Callable[[Any], Any], what: str, defaults: Callable[[Path], dict[str, Any]] | None = None
    ) -> None:
        self.parse = parse
        self.what = what
        self.defaults = defaults

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, (str, os.PathLike)):
            return value  # already parsed (a default, or a test)
        try:
            return parse_json_file(value, self.parse, self.what, self.defaults(Path(value)) if self.defaults else None)
        except InvalidInputError as exc:
            self.fail(str(exc), param, ctx)


def store_location(location: str, param_hint: str) -> str:
    """``location`` when it can be a store (a ``mongodb://`` URI, a directory, or a path to make one);
    :class:`click.BadParameter` naming ``param_hint`` for an existing file.

    Args:
        location: what the user gave.
        param_hint: the option it came from, for the error (``"--to"``).

    >>> store_location("mongodb://127.0.0.1/db", "--to")
    'mongodb://127.0.0.1/db'
    """
    from raytuner.store import is_mongodb_uri  # the store package only when a command needs one

    if not is_mongodb_uri(location) and os.path.lexists(location) and not os.path.isdir(location):
        raise click.BadParameter(
            f"{location} is a file, not a store directory (or a mongodb:// URI)", param_hint=param_hint
        )
    return location


def existing_store(location: str, param_hint: str) -> str:
    """``location`` when it is a store to read (a ``mongodb://`` URI or a directory that exists);
    a :class:`CommandError` (exit 2) ``"<location>: does not exist"`` for a missing path, as every command says it.

    Args:
        location: what the user gave.
        param_hint: the option it came from, for the error of an existing file (``"--from"``).

    >>> existing_store("/nonexistent/store", "--from")
    Traceback (most recent call last):
    ...
    raytuner.cli.errors.CommandError: /nonexistent/store: does not exist
    """
    from raytuner.store import is_mongodb_uri  # the store package only when a command needs one

    if not is_mongodb_uri(location) and not os.path.lexists(location):
        raise CommandError(f"{location}: does not exist", EXIT_INPUT)
    return store_location(location, param_hint)


def history_file(name_from_file_name: bool = False) -> JsonFile:
    """The parameter type of a GPTune history file argument: the command gets a
    :class:`~raytuner.problem.records.HistoryDocument`. With ``name_from_file_name`` a
    file without ``tuning_problem_name`` takes its file name without ``.json``.

    Args:
        name_from_file_name: a file without ``tuning_problem_name`` takes its file name without ``.json``
            (default False).
    """
    return JsonFile(
        parse_history, HISTORY_FILE, (lambda path: {"tuning_problem_name": path.stem}) if name_from_file_name else None
    )


# -- the root group -------------------------------------------------------------------------------------------


def _service_status(exc: RaytunerError) -> int:
    # raytuner.client.remote.ServiceError, without importing gRPC here: the server refused the input
    return EXIT_INPUT if getattr(exc, "code", None) == "INVALID_ARGUMENT" else EXIT_FAILED


def _translate(exc: Exception, ctx: click.Context | None, verbose: int) -> click.ClickException | None:
    """The one-line error that replaces ``exc``, or ``None`` when ``exc`` must propagate as it is."""
    if isinstance(exc, click.exceptions.NoArgsIsHelpError):
        return None  # `raytuner session` alone prints its help
    if isinstance(exc, CommandError):
        return exc
    if isinstance(exc, click.UsageError):
        # click's own parse errors and BadParameter: one line instead of usage + hint + error
        message = exc.format_message()
        context = exc.ctx or ctx
        if context is not None and (not isinstance(exc, click.BadParameter) or isinstance(exc, click.MissingParameter)):
            message += f" (see '{context.command_path} -h')"
        return CommandError(message, EXIT_INPUT)
    if isinstance(exc, click.ClickException):
        return CommandError(exc.format_message(), exc.exit_code)
    if isinstance(exc, InvalidInputError):
        return CommandError(str(exc), EXIT_INPUT)
    if isinstance(exc, RaytunerError):
        # StoreError, ServiceError (the service's status name and message) and the engines' own
        status = _service_status(exc)
        return CommandError(str(exc), status)
    if isinstance(exc, OSError):
        if exc.errno == errno.EPIPE:
            return None  # click's main quiets a closed pipe itself
        return CommandError(str(exc), EXIT_FAILED)
    # anything else is a bug: still one line, with the traceback behind -v
    if verbose:
        click.echo("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip(), err=True)
        hint = "this is a bug in raytuner; please report it with the traceback above"
    else:
        hint = "this is a bug in raytuner; run again with -v for the traceback"
    log.debug("internal error", exc_info=exc)
    return CommandError(f"internal error: {type(exc).__name__}: {exc} ({hint})", EXIT_INTERNAL)


class CommandGroup(click.Group):
    """The ``raytuner`` group: every error of every subcommand becomes one line and an exit status.

    Errors are caught here, once, where the command line is parsed
    (:meth:`make_context`) and where the chosen subcommand runs
    (:meth:`invoke`; subgroups run inside it), so a command group never
    handles errors of its own. See the module documentation for the statuses.
    """

    #: Subcommands imported only when used (name -> ``"module:attribute"``): ``raytuner ask`` then loads the
    #: service's client alone, not the history views' pandas and matplotlib (3.5 s -> 0.6 s per call).
    lazy: Mapping[str, str] = MappingProxyType({})

    def list_commands(self, ctx: click.Context | None) -> list[str]:
        """Every subcommand's name, the lazy ones included."""
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context | None, cmd_name: str) -> click.Command | None:
        """The subcommand ``cmd_name``, imported on first use when it is lazy."""
        if cmd_name not in self.commands and cmd_name in self.lazy:
            module, _, attribute = self.lazy[cmd_name].partition(":")
            self.add_command(getattr(importlib.import_module(module), attribute), cmd_name)
        return self.commands.get(cmd_name)

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except Exception as exc:  # _translate lets through what it does not know as input
            self._reraise(exc, None, 0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as exc:  # _translate decides, one place for every command
            self._reraise(exc, ctx, int(ctx.params.get("verbose") or 0))

    @staticmethod
    def _reraise(exc: Exception, ctx: click.Context | None, verbose: int) -> NoReturn:
        if isinstance(exc, (click.exceptions.Exit, click.exceptions.Abort)):  # --help, ctx.exit(n), Ctrl-C
            raise exc
        replacement = _translate(exc, ctx, verbose)
        if replacement is None or replacement is exc:
            raise exc
        raise replacement from None
