"""``raytuner dashboard``: serve the web dashboard over a store and/or a crowd repository.

Examples::

    raytuner dashboard raytuner_results
    raytuner dashboard mongodb://127.0.0.1:27017/raytuner --port 8060
    raytuner dashboard --crowd mongodb://127.0.0.1:27017/gptune_crowd
    raytuner dashboard --service 127.0.0.1:50051      # a running tuning service's sessions ($RAYTUNER_API_KEY)
"""

from __future__ import annotations

import logging

import click

from raytuner.cli.errors import existing_store

__all__ = ["dashboard"]

log = logging.getLogger(__name__)


@click.command("dashboard")
@click.argument("location", metavar="[DIR_OR_MONGODB_URI]", required=False)
@click.option(
    "--crowd",
    "crowd_uri",
    metavar="MONGODB_URI",
    help="Also show this crowd repository (its database is the URI's path).",
)
@click.option("--service", metavar="HOST:PORT", help="Show a running tuning service's sessions instead of a store.")
@click.option(
    "--api-key", envvar="RAYTUNER_API_KEY", metavar="KEY", help="The service's API key (default: $RAYTUNER_API_KEY)."
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on (loopback by default; 0.0.0.0 serves the network).",
)
@click.option("--port", default=8050, show_default=True, type=click.IntRange(0, 65535), help="Port (0: a free one).")
@click.option(
    "--allow-host",
    "allowed",
    multiple=True,
    metavar="NAME",
    help="A host name browsers may reach it by, besides loopback and --host (repeat for more).",
)
def dashboard(
    location: str | None,
    crowd_uri: str | None,
    service: str | None,
    api_key: str | None,
    host: str,
    port: int,
    allowed: tuple[str, ...],
) -> None:
    """Serve a read-only web dashboard of a store's histories or a service's sessions (and a crowd repository).

    A directory is read as the embedded JSON store (the main job writes ./raytuner_results).
    A request that names another host than loopback, --host or an --allow-host is refused
    (a DNS-rebinding page cannot read a loopback dashboard).
    """
    from raytuner.dashboard import DashboardServer, create_app  # Flask only for this command
    from raytuner.dashboard.pages import LOOPBACK_HOSTS
    from raytuner.store import is_mongodb_uri

    if location is None and crowd_uri is None and service is None:
        raise click.BadParameter(
            "give a store (directory or mongodb:// URI), --service or --crowd", param_hint="DIR_OR_MONGODB_URI"
        )
    if location is not None and service is not None:
        raise click.BadParameter("show a store or a service, not both", param_hint="--service")
    if location is not None:
        existing_store(location, "DIR_OR_MONGODB_URI")
    if crowd_uri is not None and not is_mongodb_uri(crowd_uri):
        raise click.BadParameter(f"{crowd_uri[:80]} is not a mongodb:// URI", param_hint="--crowd")
    tuner = None
    if service is not None and host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("--service on %s: whoever reaches the dashboard sees this API key's sessions", host)
    if service is not None:
        from raytuner.client import RemoteTuner

        tuner = RemoteTuner(service, api_key)
    app = create_app(store=location, crowd=crowd_uri, service=tuner, allowed_hosts=[*LOOPBACK_HOSTS, *allowed])
    server = DashboardServer(app, host, port)
    click.echo(f"raytuner dashboard at {server.url} (Ctrl-C stops it)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
