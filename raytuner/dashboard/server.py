"""Serving the dashboard: a threaded WSGI server on loopback by default, in the foreground or a thread.

Example:
    >>> import tempfile, urllib.request
    >>> from raytuner.dashboard import create_app
    >>> from raytuner.problem.records import FunctionEvaluation
    >>> from raytuner.store import JsonStore
    >>> folder = tempfile.mkdtemp()
    >>> with JsonStore(folder) as store:
    ...     store.append("demo", FunctionEvaluation.create({"t": 1.0}, {"x": 0.5}, {"y": 0.25}))
    >>> with serve(create_app(store=folder), port=0) as server:
    ...     "demo" in urllib.request.urlopen(server.url).read().decode()
    True
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from flask import Flask
from werkzeug.serving import make_server

__all__ = ["DashboardServer", "serve"]

log = logging.getLogger(__name__)


class DashboardServer:
    """A running dashboard; stop it with :meth:`stop` or by leaving its ``with`` block.

    Args:
        app: the dashboard application.
        host: the address to listen on (default loopback).
        port: the port (0: a free one).

    A concrete ``host`` joins the names the application answers to (its ``TRUSTED_HOSTS``);
    ``0.0.0.0`` or ``::`` adds none: name them with ``create_app(allowed_hosts=...)``.
    """

    def __init__(self, app: Flask, host: str = "127.0.0.1", port: int = 8050) -> None:
        trusted = app.config.get("TRUSTED_HOSTS")
        if trusted is not None and host not in ("0.0.0.0", "::", "") and host not in trusted:
            app.config["TRUSTED_HOSTS"] = [*trusted, host]
        self._server = make_server(host, port, app, threaded=True)
        self.host, self.port = host, int(self._server.server_port)
        self._thread: threading.Thread | None = None
        self._served = False  # shutdown() waits for a serve_forever() that began: never call it otherwise

    @property
    def url(self) -> str:
        """The dashboard's address, e.g. ``http://127.0.0.1:8050/``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def start(self) -> DashboardServer:
        """Serve in a background thread; returns at once."""
        self._thread = threading.Thread(target=self._server.serve_forever, name="raytuner-dashboard", daemon=True)
        self._served = True
        self._thread.start()
        log.info("dashboard at %s", self.url)
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until interrupted."""
        log.info("dashboard at %s", self.url)
        self._served = True
        self._server.serve_forever()

    def stop(self) -> None:
        """Stop serving (if it began) and close the socket."""
        if self._served:
            self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> DashboardServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def serve(app: Flask, host: str = "127.0.0.1", port: int = 8050) -> DashboardServer:
    """Start serving ``app`` in a background thread.

    Args:
        app: the dashboard application (:func:`~raytuner.dashboard.create_app`).
        host: the address to listen on (default loopback; another address serves the network).
        port: the port (0: a free one).
    """
    return DashboardServer(app, host, port).start()
