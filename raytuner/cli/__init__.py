"""The ``raytuner`` command line: one module per command group.

- :mod:`raytuner.cli.history`: ``raytuner history show|import|export``;
- :mod:`raytuner.cli.service`: ``raytuner serve``, ``keys``, ``session``, ``ask``, ``tell``;
- :mod:`raytuner.cli.crowd`: ``raytuner crowd ...``;
- :mod:`raytuner.cli.rci`: ``raytuner rci next|report`` (GPTune's reverse communication over a store directory);
- :mod:`raytuner.cli.dashboard`: ``raytuner dashboard [DIR_OR_URI] [--crowd URI]``;
- :mod:`raytuner.cli.bench`: ``raytuner bench NAME --out DIR [--quick]``;
- :mod:`raytuner.cli.errors`: exit statuses and one error line for every command.

>>> from raytuner.cli import main
>>> sorted(main.commands)
['ask', 'bench', 'crowd', 'dashboard', 'history', 'keys', 'rci', 'serve', 'session', 'tell']
"""

from raytuner.cli.bench import bench
from raytuner.cli.crowd import crowd
from raytuner.cli.dashboard import dashboard
from raytuner.cli.history import history
from raytuner.cli.main import main
from raytuner.cli.rci import rci
from raytuner.cli.service import ask, keys, serve, session_group, tell

__all__ = ["main"]

for _command in (history, bench, serve, keys, session_group, ask, tell, crowd, rci, dashboard):
    main.add_command(_command)
