"""``raytuner dashboard``: a read-only web application over histories and the crowd repository.

Start it with ``raytuner dashboard raytuner_results`` (a store directory, or a
``mongodb://`` URI of a history; ``--crowd URI`` adds the crowd repository's
pages), or build it in Python with :func:`create_app` and serve it with
:func:`serve`. It listens on loopback unless told otherwise.

>>> from raytuner.dashboard import create_app, serve
"""

from raytuner.dashboard.app import create_app
from raytuner.dashboard.server import DashboardServer, serve

__all__ = ["create_app", "serve", "DashboardServer"]
