"""The ``raytuner`` command line: one module per command group.

- :mod:`raytuner.cli.history`: ``raytuner history show|import|export``;
- :mod:`raytuner.cli.service`: ``raytuner serve``, ``keys``, ``session``, ``ask``, ``tell``, ``heartbeat``;
- :mod:`raytuner.cli.crowd`: ``raytuner crowd ...``;
- :mod:`raytuner.cli.rci`: ``raytuner rci next|report`` (GPTune's reverse communication over a store directory);
- :mod:`raytuner.cli.dashboard`: ``raytuner dashboard [DIR_OR_URI] [--crowd URI]``;
- :mod:`raytuner.cli.errors`: exit statuses and one error line for every command.

>>> from raytuner.cli import main
>>> main.list_commands(None)
['ask', 'crowd', 'dashboard', 'heartbeat', 'history', 'keys', 'rci', 'serve', 'session', 'tell']

Each command group is imported when its command runs (``CommandGroup.lazy``), so a
command loads only what it needs: ``raytuner ask`` in a job script does not pay for
the history views' pandas and matplotlib.
"""

from types import MappingProxyType

from raytuner.cli.main import main

__all__ = ["main"]

main.lazy = MappingProxyType(
    {
        "history": "raytuner.cli.history:history",
        "serve": "raytuner.cli.service:serve",
        "keys": "raytuner.cli.service:keys",
        "session": "raytuner.cli.service:session_group",
        "ask": "raytuner.cli.service:ask",
        "tell": "raytuner.cli.service:tell",
        "heartbeat": "raytuner.cli.service:heartbeat",
        "crowd": "raytuner.cli.crowd:crowd",
        "rci": "raytuner.cli.rci:rci",
        "dashboard": "raytuner.cli.dashboard:dashboard",
    }
)
