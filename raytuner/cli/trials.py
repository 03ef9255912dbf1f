"""How ``ask``/``tell`` and ``rci next``/``rci report`` print a trial and read reported values.

``--format env`` prints shell-quoted assignments (``RAYTUNER_STATUS``,
``TRIAL_ID``, ``FIDELITY``, ``TASK_<name>``, each tuning parameter under its
own name; characters that cannot be in a shell name become ``_``);
``--format json`` one JSON object. A reported ``--value`` is ``NAME=Y`` or a
bare number for the output ``--output`` names (default: the only output).

Example:
    >>> parse_values(("y=1.5",), None, None, lambda: ["y"])
    {'y': 1.5}
    >>> _shell_name("block-size"), _shell_value(True)
    ('block_size', 'true')
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import shlex
from collections.abc import Callable
from typing import Any, TypeVar

import click

from raytuner.cli.options import pairs

__all__ = ["echo_trial", "echo_told", "parse_values", "Report", "report_options", "trial_format_options"]

F = TypeVar("F", bound=Callable[..., Any])


def _shell_name(name: str) -> str:
    out = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return out if re.match(r"[A-Za-z_]", out) else f"_{out}"


def _shell_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if isinstance(value, (int, float, str)) else json.dumps(value)


def echo_trial(trial: Any, status: str, fmt: str, prefix: str = "") -> None:
    """Print a trial (``None``: only the status) as shell assignments (``env``) or one JSON object (``json``).

    Args:
        trial: The trial (``trial_id``, ``task``, ``config``, ``fidelity``; a service's also ``lease_seconds``,
            printed as ``LEASE_SECONDS``) or ``None``.
        status: ``TRIAL``, ``WAIT`` or ``FINISHED``.
        fmt: ``env`` or ``json``.
        prefix: Put before the parameter names in ``env`` format.
    """
    lease = {} if getattr(trial, "lease_seconds", None) is None else {"lease_seconds": trial.lease_seconds}
    if fmt == "json":
        data: dict[str, Any] = {"status": status}
        if trial is not None:
            data.update(trial_id=trial.trial_id, task=trial.task, config=trial.config, fidelity=trial.fidelity)
            data.update(lease)
        click.echo(json.dumps(data))
        return
    click.echo(f"RAYTUNER_STATUS={status}")
    if trial is not None:
        lines = {"TRIAL_ID": trial.trial_id, "FIDELITY": trial.fidelity}
        lines.update({k.upper(): v for k, v in lease.items()})
        lines.update({f"{prefix}TASK_{_shell_name(k)}": v for k, v in trial.task.items()})
        lines.update({_shell_name(f"{prefix}{k}"): v for k, v in trial.config.items()})
        for name, value in lines.items():
            click.echo(f"{name}={shlex.quote(_shell_value(value))}")


def trial_format_options(command: F) -> F:
    """The options of a command that prints a trial with :func:`echo_trial`: ``--format`` and ``--prefix``.

    The command gets ``fmt`` (``env`` or ``json``) and ``prefix``.

    Args:
        command: The command function.
    """
    command = click.option("--prefix", default="", help="Prefix of the parameter names in env format.")(command)
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(["env", "json"]),
        default="env",
        show_default=True,
        help="env: shell assignments to eval; json: one JSON object.",
    )(command)


def parse_values(
    values: tuple[str, ...], output: str | None, failed: str | None, output_names: Callable[[], list[str]]
) -> dict[str, float]:
    """The reported outputs, every value checked before anything is told.

    Args:
        values: The ``--value`` items (``NAME=Y`` or ``Y``).
        output: The output a bare ``Y`` is (``None``: the problem's only output).
        failed: ``--failed``'s reason (exactly one of values and a failure is given).
        output_names: Gives the problem's outputs (called only for a bare value without ``output``).
    """
    if bool(values) == bool(failed):
        raise click.UsageError("give --value (the outputs) or --failed (why the trial failed)")
    parsed: list[tuple[str | None, float]] = []
    for item in values:
        name, sep, text = item.rpartition("=")
        try:
            parsed.append((name if sep else None, float(text)))
        except ValueError:
            raise click.BadParameter(f"{item!r} is not a number or NAME=NUMBER", param_hint="--value") from None
    outputs: dict[str, float] = {}
    for name_or_none, number in parsed:
        if name_or_none is None and output is None:
            names = output_names()
            if len(names) != 1:
                raise click.UsageError(f"the problem has outputs {names}: say which with --output or NAME=Y")
            output = names[0]
        outputs[name_or_none if name_or_none is not None else str(output)] = number
    return outputs


def echo_told(uid: str, duplicate: bool, failed: bool, as_json: bool) -> None:
    """Print what a tell made: the record's uid (and whether it was told before), or JSON.

    Args:
        uid: The record's uid.
        duplicate: Whether the trial was told before (the first record stands).
        failed: Whether the record is a failure.
        as_json: Print ``{"uid", "duplicate", "failed"}``.
    """
    if as_json:
        click.echo(json.dumps({"uid": uid, "duplicate": duplicate, "failed": failed}))
    else:
        click.echo(uid + (" (told before; the first record stands)" if duplicate else ""))


@dataclasses.dataclass(frozen=True)
class Report:
    """What a command that reports a trial's result was given (:func:`report_options`).

    >>> Report(("y=1.5",), None, None, ("note=ok",), False).additional_output()
    {'note': 'ok'}
    """

    values: tuple[str, ...]
    output: str | None
    failed: str | None
    extra: tuple[str, ...]
    as_json: bool

    def outputs(self, output_names: Callable[[], list[str]]) -> dict[str, float]:
        """The reported outputs, checked (:func:`parse_values`); ``output_names`` gives the problem's outputs.

        Args:
            output_names: gives the problem's output names (called only where they are needed).
        """
        return parse_values(self.values, self.output, self.failed, output_names)

    def additional_output(self) -> dict[str, Any] | None:
        """The ``--extra`` items as a dict (``None``: none given)."""
        return pairs(self.extra, "--extra") or None


def report_options(command: F) -> F:
    """The options of a command that reports a trial's result: ``--value``, ``--output``, ``--failed``,
    ``--extra`` and ``--json``; the command gets them as one :class:`Report` named ``report``.

    Args:
        command: The command function.
    """

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        report = Report(**{field.name: kwargs.pop(field.name) for field in dataclasses.fields(Report)})
        return command(*args, report=report, **kwargs)

    reporting: Any = wrapper
    for option in reversed(
        [
            click.option(
                "--value",
                "values",
                multiple=True,
                metavar="[NAME=]Y",
                help="An output value; a bare number is the output named by --output.",
            ),
            click.option(
                "--output", default=None, help="Name of a bare --value's output (default: the problem's only output)."
            ),
            click.option("--failed", metavar="WHY", help="The trial failed (crash, timeout, failed build): why."),
            click.option(
                "--extra", multiple=True, metavar="NAME=VALUE", help="Additional output kept with the record."
            ),
            click.option("--json", "as_json", is_flag=True, help='Print {"uid", "duplicate", "failed"}.'),
        ]
    ):
        reporting = option(reporting)
    return reporting
