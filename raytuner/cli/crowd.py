"""``raytuner crowd``: administer the crowd repository and query it.

Administration works on the MongoDB database directly, on the machine that
holds it (``--mongodb URI``, default ``$RAYTUNER_CROWD_MONGODB``)::

    raytuner crowd users add --mongodb URI --username alice --email a@x.org --group lbl
    raytuner crowd keys create --mongodb URI --username alice      # prints the key once
    raytuner crowd keys revoke --mongodb URI --key-id ID
    raytuner crowd keys register --mongodb URI --username alice --public-key KEY   # an Ed25519 public key
    raytuner crowd machines add --mongodb URI Cori --alias cori --alias cori.nersc.gov

Users work through the server (``--server``/``$RAYTUNER_SERVER``) with their
API key (``--api-key``/``$RAYTUNER_CROWD_API_KEY``) or their private key
(``--private-key FILE``/``$RAYTUNER_CROWD_PRIVATE_KEY``), which signs each
call and never leaves their machine::

    raytuner crowd keys generate --out ~/.raytuner/crowd.pem   # prints the public key to register
    raytuner crowd keys token --private-key ~/.raytuner/crowd.pem   # a one-time dashboard sign-in

    raytuner crowd upload history.json --access registered
    raytuner crowd query --problem pdgeqrf --problem-space @meta.json --json
    raytuner crowd sensitivity --problem pdgeqrf --problem-space @meta.json --task m=4000 --json

``--problem-space`` and ``--configuration-space`` take JSON text or ``@FILE``;
a file holding a whole meta description gives its ``problem_space`` (or
``configuration_space``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

import click

from raytuner.cli.errors import history_file
from raytuner.cli.options import ENV_PRIVATE_KEY, connection_options, credential, echo_json, pairs
from raytuner.errors import InvalidInputError
from raytuner.problem.records import HistoryDocument
from raytuner.store.jsonfile import read_json_file
from raytuner.store.jsontext import loads_strict

__all__ = ["crowd"]

ENV_MONGODB = "RAYTUNER_CROWD_MONGODB"
ENV_KEY = "RAYTUNER_CROWD_API_KEY"


def _space(text: str | None, option: str, name: str) -> dict[str, Any] | None:
    """JSON text or ``@FILE``; a whole meta description gives its ``name`` part."""
    if not text:
        return None
    try:
        value = read_json_file(text[1:]) if text.startswith("@") else loads_strict(text, option)
    except InvalidInputError as exc:  # names the file
        raise click.BadParameter(str(exc), param_hint=option) from None
    except (ValueError, RecursionError) as exc:
        raise click.BadParameter(f"not a JSON object or @FILE of one: {exc}", param_hint=option) from None
    if not isinstance(value, dict):
        raise click.BadParameter("must be a JSON object", param_hint=option)
    inner = value.get(name)
    return inner if isinstance(inner, dict) else value


def _read_text(path: str, option: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise click.BadParameter(f"cannot read {path}: {exc}", param_hint=option) from None


def _repository(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--mongodb`` and pass an open CrowdRepository as the first argument."""

    @functools.wraps(command)
    def wrapper(mongodb: str, **kwargs: Any) -> Any:
        from pymongo.errors import ConfigurationError
        from pymongo.uri_parser import parse_uri

        from raytuner.crowd import CrowdRepository

        try:
            database = parse_uri(mongodb)["database"]
        except (ConfigurationError, ValueError) as exc:  # InvalidURI is a ConfigurationError
            raise click.BadParameter(f"not a MongoDB URI: {exc}", param_hint="--mongodb") from None
        with CrowdRepository(mongodb, **({"database": database} if database else {})) as repository:
            return command(repository, **kwargs)

    return click.option(
        "--mongodb",
        envvar=ENV_MONGODB,
        required=True,
        metavar="URI",
        help=f"The crowd repository's MongoDB (default: ${ENV_MONGODB}).",
    )(wrapper)


def _client(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add the connection options and pass a ready CrowdClient as the first argument."""

    @functools.wraps(command)
    def wrapper(
        server: str, api_key: str | None, private_key: str | None, tls_ca: Any, timeout: float, **kwargs: Any
    ) -> Any:
        from raytuner.client.crowd import CrowdClient

        given = credential(api_key, private_key)
        if given is None:
            raise click.UsageError(f"give one of --api-key (${ENV_KEY}) and --private-key (${ENV_PRIVATE_KEY})")
        ca = tls_ca.read() if tls_ca else None
        with CrowdClient(server, given, root_certificates=ca, timeout=timeout) as client:
            return command(client, **kwargs)

    options = connection_options(
        "The server",
        (ENV_KEY, f"Your crowd API key (default: ${ENV_KEY})."),
        60.0,
        "Deadline of each call in seconds (model fits run on the server).",
    )
    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


def _query_options(command: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(
        [
            click.option("--problem", "problem_name", required=True, help="The tuning problem's name."),
            click.option("--problem-space", help="The meta description's problem_space: JSON or @FILE."),
            click.option("--configuration-space", help="The meta description's configuration_space: JSON or @FILE."),
        ]
    ):
        command = option(command)
    return command


@click.group()
def crowd() -> None:
    """The crowd repository: users and keys, uploads, queries, sensitivity analysis."""


@crowd.group()
def users() -> None:
    """Registered users (administration, on the database)."""


@users.command("add")
@_repository
@click.option("--username", required=True)
@click.option("--email", required=True)
@click.option("--group", "groups", multiple=True, help="A group of the user (repeatable).")
def users_add(repository: Any, username: str, email: str, groups: tuple[str, ...]) -> None:
    """Register a user."""
    user = repository.add_user(username, email, groups)
    click.echo(f"added user {user.username} (groups: {', '.join(user.groups) or 'none'})")


@crowd.group("keys")
def crowd_keys() -> None:
    """Users' API keys (administration, on the database)."""


@crowd_keys.command("create")
@_repository
@click.option("--username", required=True)
def keys_create(repository: Any, username: str) -> None:
    """Create a key for a user and print it (the only time it is shown)."""
    click.echo(repository.create_key(username))


@crowd_keys.command("revoke")
@_repository
@click.option("--key-id", required=True, help="The id part of the key (rt_<id>_...) or from `keys list`.")
def keys_revoke(repository: Any, key_id: str) -> None:
    """Revoke a key: it no longer authenticates."""
    repository.revoke_key(key_id)
    click.echo(f"revoked {key_id}")


@crowd_keys.command("list")
@_repository
@click.option("--username", required=True)
def keys_list(repository: Any, username: str) -> None:
    """A user's keys (ids, kinds and dates, never the secrets)."""
    for info in repository.list_keys(username):
        click.echo(
            f"{info.key_id}  {info.kind:8}  {info.created:%Y-%m-%d %H:%M}  {'revoked' if info.revoked else 'active'}"
        )


@crowd_keys.command("register")
@_repository
@click.option("--username", required=True)
@click.option(
    "--public-key",
    required=True,
    help="The user's Ed25519 public key (`keys generate` prints it), or @FILE holding it or a PEM PUBLIC KEY block.",
)
def keys_register(repository: Any, username: str, public_key: str) -> None:
    """Register a user's public key and print its key id (the private key stays with the user)."""
    if public_key.startswith("@"):
        public_key = _read_text(public_key[1:], "--public-key")
    click.echo(repository.register_public_key(username, public_key))


@crowd_keys.command("generate")
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False, writable=True),
    help="Where to write the private key (PEM, readable by you only); an existing file is kept.",
)
def keys_generate(out: str) -> None:
    """Make an Ed25519 key pair on this machine: write the private key, print the public key to register."""
    import os

    from raytuner.signing import generate_key_pair, key_id_of

    private_pem, public_key = generate_key_pair()
    try:
        fd = os.open(os.path.expanduser(out), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise click.BadParameter(
            f"{out} exists; choose another file (a key is never overwritten)", param_hint="--out"
        ) from None
    except OSError as exc:
        raise click.BadParameter(f"cannot write {out} ({exc.strerror})", param_hint="--out") from None
    with os.fdopen(fd, "wb") as handle:
        handle.write(private_pem)
    click.echo(f"private key: {out} (keep it; it never leaves this machine)")
    click.echo(f"public key:  {public_key}")
    click.echo(f"key id:      {key_id_of(public_key)}")


@crowd_keys.command("token")
@click.option(
    "--private-key",
    envvar=ENV_PRIVATE_KEY,
    required=True,
    metavar="FILE",
    help=f"Your Ed25519 private key file (default: ${ENV_PRIVATE_KEY}).",
)
def keys_token(private_key: str) -> None:
    """Print a one-time dashboard sign-in token signed with your private key (good for a minute)."""
    from raytuner.signing import DASHBOARD_SIGN_IN, WINDOW_SECONDS

    click.echo(credential(None, private_key).credential(DASHBOARD_SIGN_IN))
    click.echo(f"(paste it into the dashboard's sign-in within {WINDOW_SECONDS} s; it works once)", err=True)


def _catalog_command(kind: str, plural: str, noun: str) -> click.Command:
    """``raytuner crowd machines|software NAME --alias A ...``: a catalog entry with its alternative names."""

    @_repository
    @click.argument("name")
    @click.option("--alias", "aliases", multiple=True, help="Another name users give it (repeatable).")
    def command(repository: Any, name: str, aliases: tuple[str, ...]) -> None:
        click.echo(getattr(repository, f"add_{kind}")(name, aliases))

    command.__doc__ = f"Add a {noun} with its alternative names (uploads and queries use the canonical name)."
    return click.command(plural)(command)


crowd.add_command(_catalog_command("machine", "machines", "machine"))
crowd.add_command(_catalog_command("software", "software", "software package"))


#: Who may read records of each access level, as an upload's answer says.
_READERS = {
    "public": "anyone may read them",
    "registered": "every registered user may read them",
    "private": "only you may read them",
    "shared": "you and those you shared them with may read them",
}


@crowd.command()
@_client
@click.argument("document", metavar="FILE", type=history_file(name_from_file_name=True))
@click.option(
    "--problem",
    "problem_name",
    help="Problem name (default: the file's tuning_problem_name, or the file's name without .json when it has none).",
)
@click.option(
    "--access",
    type=click.Choice(["public", "registered", "private", "shared"]),
    default="private",
    show_default=True,
    help="Who may read the records: private (you only) unless you choose to widen it.",
)
@click.option("--share-user", "users_", multiple=True, help="With --access shared: a user (repeatable).")
@click.option("--share-group", "groups", multiple=True, help="With --access shared: a group (repeatable).")
def upload(
    client: Any,
    document: HistoryDocument,
    problem_name: str | None,
    access: str,
    users_: tuple[str, ...],
    groups: tuple[str, ...],
) -> None:
    """Upload a GPTune history file (func_eval and surrogate_model records); idempotent by uid.

    The whole file is read and checked before the server is contacted.
    """
    name = problem_name or document.tuning_problem_name
    share = {"access": access, "shared_with_users": users_, "shared_with_groups": groups}
    added, duplicates = client.upload(name, document.func_eval, **share)
    if document.surrogate_model:
        more, repeated = client.upload(name, document.surrogate_model, kind="surrogate_model", **share)
        added, duplicates = added + more, duplicates + repeated
    click.echo(f"{name}: {added} records stored as {access} ({_READERS[access]}), {duplicates} already there")
    if access == "private":  # 0.1 stored public by default: say how to share, so a private upload is no surprise
        click.echo("others see none of them: upload with --access public, registered or shared to share", err=True)


@crowd.command()
@_client
@_query_options
@click.option("--limit", type=int, default=0, help="At most this many records (0: all).")
@click.option("--json", "as_json", is_flag=True, help="Print the records as JSON.")
def query(
    client: Any,
    problem_name: str,
    problem_space: str | None,
    configuration_space: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """The function evaluations you may see that match the spaces."""
    records = client.query_function_evaluations(
        problem_name,
        _space(problem_space, "--problem-space", "problem_space"),
        _space(configuration_space, "--configuration-space", "configuration_space"),
        limit,
    )
    if as_json:
        echo_json([r.to_dict() for r in records])
        return
    for r in records:
        click.echo(
            f"{r.uid}  task {json.dumps(r.task_parameter)}  config {json.dumps(r.tuning_parameter)}  "
            f"result {json.dumps(r.evaluation_result)}"
        )
    click.echo(f"{len(records)} records", err=True)


@crowd.command()
@_client
@_query_options
@click.option("--task", "task", multiple=True, metavar="NAME=VALUE", help="A task parameter (repeatable).")
@click.option("--objective", help="The output to analyse (default: the first).")
@click.option("--num-samples", type=int, default=0, help="Saltelli base samples, a power of two (0: default).")
@click.option("--second-order", is_flag=True, help="Also the second-order indices S2.")
@click.option("--seed", type=int, default=0)
@click.option(
    "--modeler",
    type=click.Choice(["LCM", "GP"]),
    default="LCM",
    show_default=True,
    help="One LCM over every queried task, or one GP of the task's records alone.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the indices as JSON.")
def sensitivity(
    client: Any,
    problem_name: str,
    problem_space: str | None,
    configuration_space: str | None,
    task: tuple[str, ...],
    objective: str | None,
    num_samples: int,
    second_order: bool,
    seed: int,
    modeler: str,
    as_json: bool,
) -> None:
    """Sobol sensitivity analysis on a surrogate of the evaluations you may see (a table like GPTuneCrowd's)."""

    space = _space(problem_space, "--problem-space", "problem_space")
    if space is None:
        raise click.BadParameter("the analysis needs the problem space", param_hint="--problem-space")
    result = client.query_sensitivity_analysis(
        problem_name,
        space,
        pairs(task, "--task"),
        _space(configuration_space, "--configuration-space", "configuration_space"),
        num_samples=num_samples,
        second_order=second_order,
        objective=objective,
        seed=seed,
        modeler=modeler,
    )
    if as_json:
        echo_json(result.to_dict())
        return
    click.echo(result.table(digits=3))
