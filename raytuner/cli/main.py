"""The ``raytuner`` command group: logging, ``--version``, and one error mechanism for every command.

Every command fails with one ``Error: ...`` line on stderr and an exit status
that says whose fault it was (2: bad input, naming the argument or the file and
field; 1: the service or a store refused or failed; 70: a bug, ``-v`` shows the
traceback): see :mod:`raytuner.cli.errors`.
"""

from __future__ import annotations

import logging
import sys

import click

from raytuner.cli.errors import EXIT_STATUS_HELP, CommandGroup

__all__ = ["main"]


@click.group(cls=CommandGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_STATUS_HELP)
@click.option("-v", "--verbose", count=True, help="More log output (-v info, -vv debug).")
@click.version_option(package_name="raytuner", prog_name="raytuner", message="%(prog)s %(version)s")
def main(verbose: int) -> None:
    """raytuner: multi-task, multi-fidelity autotuning on Ray."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
