"""The tuning service's commands: ``raytuner serve``, ``keys``, ``session``, ``ask``, ``tell`` and ``heartbeat``.

The client
commands read the server address from ``--server`` or ``$RAYTUNER_SERVER``,
the session from ``--session`` or ``$RAYTUNER_SESSION``, the API key from
``--api-key`` or ``$RAYTUNER_API_KEY`` and a TLS CA certificate from
``--tls-ca`` or ``$RAYTUNER_TLS_CA``. ``k=v`` values read as JSON when they
can (``n=3`` is a number, ``x=true`` a boolean), else as text.

A job script that is not Python loops like this (``examples/remote_hpc_job/job.sh``)::

    while :; do
        out=$(raytuner ask --format env) && rc=0 || rc=$?
        [ "$rc" -eq 3 ] && break                  # the session is over
        [ "$rc" -ne 0 ] && exit "$rc"             # an error (its message is on stderr)
        eval "$out"                               # TRIAL_ID, FIDELITY, LEASE_SECONDS, TASK_<name>, <name>
        raytuner heartbeat --trial "$TRIAL_ID" --every 60 & beat=$!   # keeps the trial leased
        raytuner tell --trial "$TRIAL_ID" --value "$(./my_program --nb "$nb")" --output runtime
        kill "$beat"
    done

``raytuner ask --format env`` prints shell-quoted assignments:
``RAYTUNER_STATUS=TRIAL``, ``TRIAL_ID``, ``FIDELITY`` (empty without
fidelity), ``LEASE_SECONDS`` (how long the trial stays leased without a
heartbeat; 0: it never expires), each task parameter as ``TASK_<name>`` and each tuning parameter
under its own name (characters that cannot be in a shell name become ``_``;
``--prefix`` puts a prefix before the parameter names). Its exit status is 0
for a trial, **3 when the session is finished** (it then prints
``RAYTUNER_STATUS=FINISHED``) and, with ``--no-wait``, 4 when the service has
nothing to hand out until pending trials are told (``RAYTUNER_STATUS=WAIT``).
``raytuner heartbeat --trial ID`` renews a trial's lease once, ``--every SECONDS``
until the trial is told or expired (exit status 0 while or once told, **5 when the
trial expired** and was handed out again: its tell is still kept).
Errors are one line on stderr (the service's status name and message):
exit status 2 for bad input (an option, the ``--meta`` file, or input the
service refused as ``INVALID_ARGUMENT``), 1 for any other failure (an
unreachable server, an unknown session, a conflicting tell), 70 for a bug
(see :mod:`raytuner.cli.errors`, which handles the errors of every command).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any
from urllib.parse import urlsplit

import click

from raytuner.cli.errors import CommandError, JsonFile, existing_store, store_location
from raytuner.cli.options import connection_options, credential, echo_json, json_arg, pairs
from raytuner.cli.trials import Report, echo_told, echo_trial, report_options, trial_format_options
from raytuner.problem.meta import MetaDescription
from raytuner.store import is_mongodb_uri

__all__ = [
    "serve",
    "keys",
    "session_group",
    "ask",
    "tell",
    "heartbeat",
    "EXIT_FINISHED",
    "EXIT_EXPIRED",
    "EXIT_WAIT",
    "DEFAULT_STORE",
    "DEFAULT_PORT",
]

log = logging.getLogger(__name__)

#: Exit status of ``raytuner ask`` when the session is over / busy (``--no-wait``).
EXIT_FINISHED, EXIT_WAIT = 3, 4
#: Exit status of ``raytuner heartbeat`` when the trial's lease had ended and it was handed out again.
EXIT_EXPIRED = 5
DEFAULT_STORE = "./raytuner-db"
DEFAULT_PORT = 50051
META_FILE = "a meta description: tuning_problem_name, problem_space, ..."


def _client(session: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add the connection options (and ``--session``) and pass a ready RemoteTuner as first argument."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(command)
        def wrapper(
            server: str,
            api_key: str | None,
            private_key: str | None,
            tls_ca: IO[bytes] | None,
            timeout: float,
            retry_for: float,
            session_id: str | None = None,
            **kwargs: Any,
        ) -> Any:
            from raytuner.client.remote import RemoteTuner  # gRPC only for these commands

            ca = tls_ca.read() if tls_ca else None
            given = credential(api_key, private_key)
            with RemoteTuner(
                server, given, session_id=session_id, root_certificates=ca, timeout=timeout, retry_for=retry_for
            ) as tuner:
                return command(tuner, **kwargs)

        options: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
            *connection_options(
                "The tuning service",
                ("RAYTUNER_API_KEY", "API key (default: $RAYTUNER_API_KEY)."),
                10.0,
                "Deadline of each call in seconds (calls are retried with backoff).",
            ),
            click.option(
                "--retry-for",
                type=click.FloatRange(min=0),
                default=150.0,
                show_default=True,
                envvar="RAYTUNER_RETRY_FOR",
                metavar="SECONDS",
                help="Retry a failed call with backoff for this long (a server restart; "
                "default: $RAYTUNER_RETRY_FOR or 150).",
            ),
        ]
        if session:
            options.append(
                click.option(
                    "--session",
                    "session_id",
                    envvar="RAYTUNER_SESSION",
                    required=True,
                    metavar="ID",
                    help="Session id (default: $RAYTUNER_SESSION).",
                )
            )
        for option in reversed(options):
            wrapper = option(wrapper)
        return wrapper

    return decorate


def _store_options(command: Callable[..., Any]) -> Callable[..., Any]:
    command = click.option("--mongodb", metavar="URI", help="A MongoDB store (mongodb://...).")(command)
    return click.option("--store", metavar="DIR", help=f"A JSON store directory (default {DEFAULT_STORE}).")(command)


def _location(store: str | None, mongodb: str | None) -> str:
    if store and mongodb:
        raise click.BadParameter("give --store or --mongodb, not both", param_hint="--mongodb")
    if mongodb and not is_mongodb_uri(mongodb):
        raise click.BadParameter(f"{mongodb!r} is not a mongodb:// URI", param_hint="--mongodb")
    return store_location(mongodb or store or DEFAULT_STORE, "--mongodb" if mongodb else "--store")


def _shown(location: str) -> str:
    """A store location fit to print: a MongoDB URI's password is masked."""
    parts = urlsplit(location)
    if parts.password:
        return location.replace(f":{parts.password}@", ":***@", 1)
    return location


# -- the server ---------------------------------------------------------------------------------


#: Seconds the requests in flight get when ``serve`` stops (SIGTERM, Ctrl-C); an Ask still fitting then is cut.
STOP_GRACE = 2.0
#: Seconds after SIGTERM by which ``serve`` has exited, whatever its threads still run.
EXIT_WITHIN = 4.0


def _exit_by(seconds: float, lost: Callable[[], str | None]) -> None:
    """End this process ``seconds`` from now unless it has exited by then (a daemon timer).

    It exits 0, or 1 with ``lost()``'s line where that says why the server stopped
    (another server took the store).

    An orderly stop ends every request (they get :data:`STOP_GRACE`), but the
    interpreter's exit joins the server's threads, and one may still be in a
    model fit: the timer ends the process without it. Nothing is lost: the
    gRPC server stopped answering first, and a tell is stored before it is
    acknowledged (a cut request is as one cut by ``kill -9``; its client retries).
    """

    def now() -> None:
        log.warning("requests still running %.0f s after the stop signal (a model fit): exiting without them", seconds)
        why = lost()
        if why is not None:
            click.echo(f"Error: {why}", err=True)
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed stream: nothing to flush
                pass
        os._exit(0 if why is None else 1)

    timer = threading.Timer(seconds, now)
    timer.daemon = True
    timer.start()


@click.command()
@_store_options
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Interface to listen on (0.0.0.0: all; give --tls-cert and --tls-key then).",
)
@click.option("--port", type=int, default=DEFAULT_PORT, show_default=True, help="Port (0: any free one).")
@click.option("--ray-address", metavar="ADDR", help="Fit models on this Ray cluster.")
@click.option("--tls-cert", type=click.Path(exists=True, dir_okay=False), help="Server certificate (PEM).")
@click.option("--tls-key", type=click.Path(exists=True, dir_okay=False), help="Its private key (PEM).")
@click.option("--no-auth", is_flag=True, help="Serve without API keys (a single user on a trusted host).")
@click.option(
    "--crowd",
    metavar="URI",
    envvar="RAYTUNER_CROWD_MONGODB",
    help="Also serve the crowd repository in this MongoDB (default: $RAYTUNER_CROWD_MONGODB).",
)
@click.option(
    "--max-calls-per-key",
    type=click.IntRange(min=0),
    default=None,
    help="Calls one API key may have answered at once (default: half of the 64 threads; 0: none).",
)
@click.option(
    "--max-streams-per-key",
    type=click.IntRange(min=0),
    default=None,
    help="Session watches one API key may have open at once (default: a quarter of the threads).",
)
@click.option(
    "--limit",
    "limits",
    multiple=True,
    metavar="NAME=VALUE",
    help="A cap on what a session may ask for, e.g. fit_seconds=2, starts=8, fit_samples=1000 (repeatable; "
    "see the remote-jobs guide for every limit and its default).",
)
def serve(
    store: str | None,
    mongodb: str | None,
    host: str,
    port: int,
    ray_address: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    no_auth: bool,
    crowd: str | None,
    max_calls_per_key: int | None,
    max_streams_per_key: int | None,
    limits: tuple[str, ...],
) -> None:
    """Serve the tuning service until SIGTERM or Ctrl-C (it exits within a few seconds, even mid-fit)."""
    from raytuner.service.bounds import SessionLimits
    from raytuner.service.server import TuningServer

    bounds = SessionLimits.parse(limits)
    location = _location(store, mongodb)
    server = TuningServer(
        location,
        host=host,
        port=port,
        auth=not no_auth,
        tls_cert=tls_cert,
        tls_key=tls_key,
        ray_address=ray_address,
        crowd=crowd,
        max_calls_per_key=max_calls_per_key,
        max_streams_per_key=max_streams_per_key,
        limits=bounds,
    )
    stop = threading.Event()
    server.start()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    log.info("serving %s on %s", _shown(location), server.address)
    click.echo(
        f"raytuner tuning service on {server.address} (store {_shown(location)}, "
        f"auth {'off' if no_auth else 'on'}, TLS {'on' if tls_cert else 'off'}, "
        f"crowd repository {_shown(crowd) if crowd else 'off'})"
    )
    if not no_auth and not server.keys.list():
        click.echo(
            f"no API key yet: create one with `raytuner keys create --{'mongodb' if mongodb else 'store'} "
            f"{_shown(location)} --name NAME`",
            err=True,
        )
    try:
        while not stop.wait(0.5) and server.lost is None:  # lost: another server took the store's lease
            pass
    finally:
        click.echo("stopping", err=True)
        _exit_by(EXIT_WITHIN, lambda: server.lost)
        server.stop(grace=STOP_GRACE)
        terminate = getattr(server.manager.executor, "terminate", None)
        if callable(terminate):  # the fit workers of requests cut at the grace
            terminate()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if server.lost is not None:
        raise CommandError(server.lost)


# -- API keys -----------------------------------------------------------------------------------


def _registry(store: str | None, mongodb: str | None) -> Any:
    location = _location(store, mongodb)
    from raytuner.service.auth import open_keys  # gRPC-free, but only for these commands

    return open_keys(location)


@click.group()
def keys() -> None:
    """Create, list and revoke API keys, and grant problems to them (on the machine that holds the store)."""


@keys.command("create")
@_store_options
@click.option("--name", required=True, help="Whose key (letters, digits, _ . @ -).")
def keys_create(store: str | None, mongodb: str | None, name: str) -> None:
    """Print a new key; it is shown this once (only its hash is stored)."""
    key = _registry(store, mongodb).create(name)
    click.echo(key)
    click.echo("keep this key: it is not shown again", err=True)


@keys.command("revoke")
@_store_options
@click.argument("key_id")
def keys_revoke(store: str | None, mongodb: str | None, key_id: str) -> None:
    """Revoke the key KEY_ID (the part after ``rt_``, as ``keys list`` shows it)."""
    _registry(store, mongodb).revoke(key_id)
    click.echo(f"revoked {key_id}")


@keys.command("list")
@_store_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def keys_list(store: str | None, mongodb: str | None, as_json: bool) -> None:
    """List the keys: id, name, creation time, revoked."""
    infos = [
        {"key_id": k.key_id, "name": k.name, "created": k.created, "revoked": k.revoked}
        for k in _registry(store, mongodb).list()
    ]
    if as_json:
        echo_json(infos)
        return
    for k in infos:
        click.echo(f"{k['key_id']}  {k['name']:<20} {'revoked' if k['revoked'] else 'active'}")


@keys.command("grant")
@_store_options
@click.argument("problem")
@click.argument("principal")
@click.option("--owner", is_flag=True, help="Make PRINCIPAL an owner of PROBLEM (who may grant others too).")
@click.option("--revoke", is_flag=True, help="End PRINCIPAL's grant instead.")
def keys_grant(store: str | None, mongodb: str | None, problem: str, principal: str, owner: bool, revoke: bool) -> None:
    """Let PRINCIPAL (a key id from ``keys list``, or crowd:USERNAME) read and append to PROBLEM.

    The store operator's grant (see raytuner.service.access); a running server sees it within a second.
    """
    if owner and revoke:
        raise click.BadParameter("give --owner or --revoke, not both", param_hint="--revoke")
    from raytuner.service.access import ProblemAccess  # only for this command
    from raytuner.store import open_store
    from raytuner.view import problem_in

    location = _location(store, mongodb)
    opened = open_store(existing_store(location, "--store"))
    try:
        problem = problem_in(opened, problem, _shown(location))
        ProblemAccess(opened.ledger(), opened).admit(
            problem, principal, "owner" if owner else "revoke" if revoke else "grant"
        )
    finally:
        opened.close()
    click.echo(
        f"{'revoked' if revoke else 'granted'} {problem} {'from' if revoke else 'to'} {principal}"
        + (" as an owner" if owner else "")
    )


# -- sessions -----------------------------------------------------------------------------------


@click.group("session")
def session_group() -> None:
    """Create and read tuning sessions of a service."""


@session_group.command("create")
@click.option(
    "--meta",
    "problem",
    required=True,
    metavar="FILE",
    type=JsonFile(MetaDescription.parse, META_FILE),
    help="The problem's meta description (JSON); checked before the service is called.",
)
@click.option(
    "--engine", required=True, help="An engine: random | mla | gptuneband | discrete | transfer | tla1 | tla2."
)
@click.option("--task", "task", multiple=True, metavar="NAME=VALUE", help="One task's parameters.")
@click.option("--tasks-json", metavar="JSON", help='Several tasks: a JSON list, e.g. \'[{"n": 100}, {"n": 200}]\'.')
@click.option("--option", "option", multiple=True, metavar="NAME=VALUE", help="An engine option.")
@click.option("--seed", type=int, default=0, show_default=True, help="Engine seed (0: the server draws one).")
@click.option("--max-evaluations", type=int, default=0, show_default=True, help="Budget of tells (0: none).")
@click.option(
    "--lease",
    "lease_seconds",
    type=float,
    default=None,
    metavar="SECONDS",
    help="How long a handed-out trial stays leased without a heartbeat before it is handed out again "
    "(default: the server's, 300; 0: trials never expire).",
)
@click.option("--json", "as_json", is_flag=True, help='Print {"session_id": ...}.')
@_client(session=False)
def session_create(
    tuner: Any,
    problem: MetaDescription,
    engine: str,
    task: tuple[str, ...],
    tasks_json: str | None,
    option: tuple[str, ...],
    seed: int,
    max_evaluations: int,
    lease_seconds: float | None,
    as_json: bool,
) -> None:
    """Create a session; print its id."""
    if task and tasks_json:
        raise click.BadParameter("give --task or --tasks-json, not both", param_hint="--tasks-json")
    tasks = json_arg(tasks_json, "--tasks-json", list) or ([pairs(task, "--task")] if task else None)
    session_id = tuner.create_session(
        problem,
        engine,
        tasks=tasks,
        options=pairs(option, "--option"),
        seed=seed,
        max_evaluations=max_evaluations,
        lease_seconds=lease_seconds,
    )
    click.echo(json.dumps({"session_id": session_id}) if as_json else session_id)


@session_group.command("show")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_client(session=True)
def session_show(tuner: Any, as_json: bool) -> None:
    """Show a session: problem, engine, counts and the best configuration per task."""
    info = tuner.session()
    if as_json:
        echo_json(info)
        return
    for key in (
        "session_id",
        "problem_name",
        "engine",
        "tasks",
        "options",
        "evaluations",
        "failed",
        "pending",
        "max_evaluations",
        "lease_seconds",
        "finished",
    ):
        click.echo(f"{key:>16}: {json.dumps(info[key]) if isinstance(info[key], (dict, list)) else info[key]}")
    _print_best(info["best"])


def _print_best(best: list[dict[str, Any]]) -> None:
    for entry in best:
        click.echo(
            f"best for task {json.dumps(entry['task'])}: {json.dumps(entry['config'])} -> "
            f"{json.dumps(entry['outputs'])} ({entry['uid']})"
        )


@session_group.command("best")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: a list of {task, config, outputs, uid}.")
@_client(session=True)
def session_best(tuner: Any, as_json: bool) -> None:
    """The best configuration found for each task of a session (several objectives: each task's Pareto front)."""
    best = tuner.session()["best"]
    if as_json:
        echo_json(best)
    else:
        _print_best(best)


@session_group.command("list")
@click.option("--problem", help="Only sessions of this problem.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_client(session=False)
def session_list(tuner: Any, problem: str | None, as_json: bool) -> None:
    """List your sessions, oldest first."""
    sessions = tuner.sessions(problem)
    if as_json:
        echo_json(sessions)
        return
    for s in sessions:
        budget = f"/{s['max_evaluations']}" if s["max_evaluations"] else ""
        click.echo(
            f"{s['session_id']}  {s['problem_name']:<20} {s['engine']:<8} "
            f"{s['evaluations']}{budget} evaluations{'  finished' if s['finished'] else ''}"
        )


@session_group.command("watch")
@click.option("--from-start", is_flag=True, help="The events already logged first.")
@_client(session=True)
def session_watch(tuner: Any, from_start: bool) -> None:
    """Print a session's events as JSON lines until it finishes (or Ctrl-C)."""
    for event in tuner.watch(from_start=from_start):
        click.echo(json.dumps(event, sort_keys=True))


# -- ask and tell -------------------------------------------------------------------------------


@click.command()
@click.option("--task", "task", multiple=True, metavar="NAME=VALUE", help="Ask for this task of the session.")
@trial_format_options
@click.option(
    "--wait/--no-wait", default=True, show_default=True, help="When trials are pending, wait (or exit 4 at once)."
)
@click.option("--poll", type=float, default=0.5, show_default=True, help="Seconds between asks while waiting.")
@click.option("--trial-id", metavar="ID", help="Your trial id: asking again with it returns the same trial.")
@_client(session=True)
@click.pass_context
def ask(
    ctx: click.Context,
    tuner: Any,
    task: tuple[str, ...],
    fmt: str,
    prefix: str,
    wait: bool,
    poll: float,
    trial_id: str | None,
) -> None:
    """Print the next trial's id, task and configuration; exit 3 when the session is over."""
    trial = tuner.ask(pairs(task, "--task") or None, wait=wait, poll=poll, trial_id=trial_id)
    status = "TRIAL" if trial is not None else "FINISHED" if tuner.finished else "WAIT"
    echo_trial(trial, status, fmt, prefix)
    if trial is None:
        ctx.exit(EXIT_FINISHED if tuner.finished else EXIT_WAIT)


@click.command()
@click.option("--trial", required=True, metavar="TRIAL_ID", help="The trial id that ask printed.")
@report_options
@_client(session=True)
def tell(tuner: Any, trial: str, report: Report) -> None:
    """Report a trial's outputs (--value) or its failure (--failed)."""
    outputs = report.outputs(tuner.output_names)
    result = tuner.tell(trial, outputs or None, failure=report.failed, additional_output=report.additional_output())
    echo_told(result.uid, result.duplicate, result.failed, report.as_json)


@click.command()
@click.option("--trial", required=True, metavar="TRIAL_ID", help="The trial id that ask printed.")
@click.option(
    "--every",
    type=click.FloatRange(min=0.1),
    default=None,
    metavar="SECONDS",
    help="Renew every SECONDS until the trial is told or expired, or the process is killed (default: once).",
)
@click.option(
    "--while-pid",
    type=click.IntRange(min=1),
    default=None,
    metavar="PID",
    help="With --every: stop renewing once process PID has ended (the job script's $$), so a killed job's "
    "trial expires even where its heartbeat outlives it.",
)
@_client(session=True)
@click.pass_context
def heartbeat(ctx: click.Context, tuner: Any, trial: str, every: float | None, while_pid: int | None) -> None:
    """Renew a trial's lease (a running job's trial is handed out again once its lease ends without one).

    Prints the trial's state (LEASED, TOLD or EXPIRED) and when its lease ends (seconds since the epoch,
    0: never); exits 5 when the trial had expired and was handed out again (its tell is still kept).
    """
    lease = tuner.heartbeat(trial)
    if every is not None and lease.held and lease.seconds:
        # `kill` of a backgrounded loop, or its job gone: end quietly at once, also mid-retry (nothing to save)
        signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
        if while_pid is not None:
            threading.Thread(target=_end_after, args=(while_pid,), daemon=True).start()
        lease = tuner.keep_leased(trial, every, threading.Event()) or lease
    click.echo(f"{lease.status} {lease.ends:.3f}")
    if lease.status == "EXPIRED":
        click.echo(
            f"trial {trial}: its lease ended and it was handed out again; tell its result still (kept)", err=True
        )
        ctx.exit(EXIT_EXPIRED)


def _end_after(pid: int, poll: float = 1.0) -> None:
    """End this process once process ``pid`` has ended (checked every ``poll`` seconds)."""
    while True:
        time.sleep(poll)
        if not _alive(pid):
            os._exit(0)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs: it exists and is not a zombie no parent has reaped yet."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists (another user's)
        pass
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):  # no /proc (not Linux): it exists
        return True
