"""``python -m raytuner.cli``: the ``raytuner`` command."""

from raytuner.cli import main

main()
