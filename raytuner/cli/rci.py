"""``raytuner rci next`` / ``rci report``: GPTune's reverse-communication interface over a store directory.

For a job that can speak neither Python nor gRPC: each call is a process of
its own, the session lives in the store directory (see
:mod:`raytuner.service.rci`). The first ``next`` creates the session from
``--meta``, ``--engine`` and the tasks; later calls find it by ``--name``
(default: the problem's name) or, for ``report``, by the trial id::

    raytuner rci next --store db --meta meta.json --engine mla --task n=100 > trial.env
    while [ $? -eq 0 ]; do
        . ./trial.env                              # TRIAL_ID, TASK_n, and each tuning parameter
        raytuner rci report --store db --trial "$TRIAL_ID" --value "$(./my_program --nb "$nb")"
        raytuner rci next --store db --name my_problem > trial.env
    done                                           # exit status 3: the session is over

``next`` prints the trial as ``ask`` does (``--format env`` or ``json``) and
hands out the same trial until it is reported; exit status 3 when the
session is over. One job at a time: calls on one store wait for each other.
"""

from __future__ import annotations

from typing import Any

import click

from raytuner.cli.errors import JsonFile, store_location
from raytuner.cli.options import json_arg, pairs
from raytuner.cli.service import DEFAULT_STORE, EXIT_FINISHED, META_FILE
from raytuner.cli.trials import Report, echo_told, echo_trial, report_options, trial_format_options
from raytuner.problem.meta import MetaDescription
from raytuner.store import is_mongodb_uri

__all__ = ["rci"]


def _where(store: str | None, meta: MetaDescription | None) -> str:
    location = store or (meta.historydb_path if meta is not None else None) or DEFAULT_STORE
    if is_mongodb_uri(location):
        raise click.BadParameter("the RCI keeps its session in a store directory, not MongoDB", param_hint="--store")
    return store_location(location, "--store")


_STORE = click.option(
    "--store", metavar="DIR", help=f"The store directory (default: the meta's historydb_path, else {DEFAULT_STORE})."
)
_NAME = click.option("--name", help="The RCI session's name (default: the problem's name).")
_META = click.option(
    "--meta",
    metavar="FILE",
    type=JsonFile(MetaDescription.parse, META_FILE),
    help="The problem's meta description (GPTune's meta.json); needed by the first next.",
)


@click.group("rci")
def rci() -> None:
    """GPTune's reverse-communication interface: next / report over a store directory."""


@rci.command("next")
@_STORE
@_NAME
@_META
@click.option("--engine", help="An engine (first call): random | mla | gptuneband | discrete | transfer | tla1 | tla2.")
@click.option("--option", "option", multiple=True, metavar="NAME=VALUE", help="An engine option (first call).")
@click.option("--task", "task", multiple=True, metavar="NAME=VALUE", help="One task's parameters (first call).")
@click.option("--tasks-json", metavar="JSON", help="Several tasks: a JSON list (first call).")
@click.option("--seed", type=int, default=0, show_default=True, help="Engine seed (0: one is drawn and kept).")
@click.option("--max-evaluations", type=int, default=0, show_default=True, help="Budget of reports (0: none).")
@trial_format_options
@click.pass_context
def rci_next(
    ctx: click.Context,
    store: str | None,
    name: str | None,
    meta: MetaDescription | None,
    engine: str | None,
    option: tuple[str, ...],
    task: tuple[str, ...],
    tasks_json: str | None,
    seed: int,
    max_evaluations: int,
    fmt: str,
    prefix: str,
) -> None:
    """Print the trial to run now (the one not yet reported, else a new one); exit 3 when the session is over."""
    from raytuner.service.rci import RciSession  # the engines only when a command needs them

    if task and tasks_json:
        raise click.BadParameter("give --task or --tasks-json, not both", param_hint="--tasks-json")
    tasks = json_arg(tasks_json, "--tasks-json", list) or ([pairs(task, "--task")] if task else None)
    session = RciSession(
        _where(store, meta),
        name,
        meta=meta,
        engine=engine,
        options=pairs(option, "--option"),
        tasks=tasks,
        seed=seed,
        max_evaluations=max_evaluations,
    )
    trial = session.next()
    echo_trial(trial, "TRIAL" if trial is not None else "FINISHED", fmt, prefix)
    if trial is None:
        ctx.exit(EXIT_FINISHED)


@rci.command("report")
@_STORE
@_NAME
@_META
@click.option("--trial", required=True, metavar="TRIAL_ID", help="The trial id that next printed.")
@report_options
def rci_report(
    store: str | None,
    name: str | None,
    meta: MetaDescription | None,
    trial: str,
    report: Report,
) -> None:
    """Record a trial's outputs (--value) or its failure (--failed); in the store when this returns."""
    from raytuner.service.rci import RciSession

    session = RciSession(_where(store, meta), name, meta=meta)
    outputs: dict[str, Any] = report.outputs(lambda: session.output_names(trial))
    record, duplicate = session.report(
        trial, outputs or None, failure=report.failed, additional_output=report.additional_output()
    )
    echo_told(record.uid, duplicate, record.status != "ok", report.as_json)
