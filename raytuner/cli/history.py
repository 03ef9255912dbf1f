"""``raytuner history``: read, import and export GPTune-format tuning histories.

Examples::

    raytuner history show tests/data/gptune/GPTune-Demo.json --json
    raytuner history show raytuner_results --csv > evaluations.csv
    raytuner history plot raytuner_results --kind brackets --task t=1.3 --out brackets.png
    raytuner history import GPTune-Demo.json --to ./history
    raytuner history export --from ./history --problem GPTune-Demo --out demo.json
    raytuner history repair ./history GPTune-Demo
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
from matplotlib.backend_bases import FigureCanvasBase

from raytuner.cli.errors import JsonFile, existing_store, store_location
from raytuner.cli.service import META_FILE
from raytuner.errors import shown
from raytuner.problem.meta import MetaDescription
from raytuner.problem.records import HistoryDocument
from raytuner.problem.space import ProblemSpace
from raytuner.store import JsonStore, open_store, read_history_file, write_history_file
from raytuner.store.ledger import LOGS
from raytuner.view import (
    DETAIL_COLUMNS,
    PLOTS,
    HistoryView,
    config_label,
    csv_text,
    load_history,
    plot_brackets,
    plot_front,
    plot_history,
    plot_parameter,
    plot_task_correlation,
    problem_in,
    read_history,
    task_label,
)

__all__ = ["history", "summarise"]


def summarise(document: HistoryDocument, problem: ProblemSpace | None = None) -> dict[str, Any]:
    """Counts that describe a history: its schema, records, statuses, tasks (with statuses), outputs.

    ``schema`` is what reading the file did (:class:`~raytuner.store.gptune_schemas.SchemaReport`:
    the schema, what was read, skipped and converted); ``None`` for a store. With the problem known,
    ``objectives`` are the optimised outputs, ``constraints`` the bounds an output must meet and
    ``recorded`` the outputs only kept; without it every output counts as an objective.

    Args:
        document: a parsed GPTune history.
        problem: the problem's spaces, when known.

    >>> summarise(HistoryDocument(tuning_problem_name="p"))["func_eval"]
    0
    """
    statuses = Counter(r.status for r in document.func_eval)
    by_task: dict[str, Counter[str]] = {}
    for r in document.func_eval:
        by_task.setdefault(json.dumps(r.task_parameter, sort_keys=True), Counter())[r.status] += 1
    outputs = list(dict.fromkeys(k for r in document.func_eval for k in r.evaluation_result))
    known = problem.output_space if problem is not None else []
    objectives = [o.name for o in known if o.optimize] if known else outputs
    constraints = [o.constraint_text() for o in known if o.bounded]
    recorded = [o.name for o in known if not o.optimize]
    report = document.read_report
    return {
        "tuning_problem_name": document.tuning_problem_name,
        "schema": report.to_dict() if report is not None else None,
        "func_eval": len(document.func_eval),
        "surrogate_model": len(document.surrogate_model),
        "status": dict(sorted(statuses.items())),
        "tasks": len(by_task),
        "by_task": {task: dict(sorted(counts.items())) for task, counts in sorted(by_task.items())},
        "objectives": objectives,
        "constraints": constraints,
        "recorded": recorded,
    }


def plain_text(value: Any) -> str:
    """A value as ``history show`` prints it: numbers as ``%g``, mappings as ``name value, ...``, lists joined.

    Args:
        value: a count, a name, a mapping or a list of them.

    >>> plain_text({"ok": 5, "failed": 1}), plain_text([27.0, "a"]), plain_text({"t": 1.0})
    ('ok 5, failed 1', '27, a', 't 1')
    """
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {plain_text(v)}" for k, v in value.items()) or "none"
    if isinstance(value, (list, tuple)):
        return ", ".join(plain_text(v) for v in value) or "none"
    return str(value)


def _load(location: str, problem: str | None, meta: MetaDescription | None = None) -> HistoryDocument:
    return read_history(location, problem, meta.problem_space if meta is not None else None)


_META = click.option(
    "--meta",
    metavar="FILE",
    type=JsonFile(MetaDescription.parse, META_FILE),
    help="The problem's meta description: older files' string values are read by its types.",
)


@click.group()
def history() -> None:
    """Read, import and export GPTune-format tuning histories."""


def _view(document: HistoryDocument, meta: MetaDescription | None, objective: str | None) -> HistoryView:
    return load_history(document, objective=objective, problem_space=meta.problem_space if meta is not None else None)


def best_lines(view: HistoryView) -> list[str]:
    """Lines of ``history show``: per task its best value and configuration (at full fidelity) and counts.

    Args:
        view: the history.
    """
    width = max([len(task_label(t)) for t in view.tasks] + [4])
    fidelity = f" at fidelity {view.full_fidelity:g}" if view.full_fidelity is not None else ""
    lines = [
        f"best {view.objective} per task ({view.goal}{fidelity}):",
        f"  {'task':<{width}} {'evals':>6} {'failed':>6} {'cost':>8} {'best':>12}  configuration",
    ]
    for task, record, (_, row) in zip(view.tasks, view.best_per_task(), view.best_table().iterrows()):
        value = "-" if record is None else f"{record.value(view.objective):.6g}"
        config = "no successful evaluation" if record is None else config_label(record.tuning_parameter)
        lines.append(
            f"  {task_label(task):<{width}} {row['evaluations']:>6} {row['failed']:>6} "
            f"{row['total_cost']:>8.4g} {value:>12}  {config}"
        )
    return lines


_OBJECTIVE = click.option("--objective", help="The output the best values are of (default: the first).")


@history.command("show")
@click.argument("location", metavar="PATH_OR_URI")
@click.option("--problem", help="Problem name (needed when the store holds several).")
@_META
@_OBJECTIVE
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (counts and the best per task).")
@click.option("--csv", "as_csv", is_flag=True, help="Print every evaluation as CSV (one row each).")
@click.option(
    "--last",
    default=10,
    show_default=True,
    type=click.IntRange(min=0),
    help="How many of the latest evaluations the table shows.",
)
def history_show(
    location: str,
    problem: str | None,
    meta: MetaDescription | None,
    objective: str | None,
    as_json: bool,
    as_csv: bool,
    last: int,
) -> None:
    """Summarise a GPTune file, a store directory or a MongoDB store: counts, best per task, latest evaluations."""
    if as_json and as_csv:
        raise click.BadParameter("choose one of --json and --csv", param_hint="--json/--csv")
    document = _load(location, problem, meta)
    view = _view(document, meta, objective)
    if as_csv:
        click.echo(csv_text(view.frame), nl=False)
        return
    summary = summarise(document, view.problem_space)
    if as_json:
        click.echo(json.dumps({**summary, "best": view.summary()}, indent=2, default=str))
        return
    for key, value in summary.items():
        if key == "schema" and value is not None:
            click.echo(f"{'schema':>20}: {value['schema']} ({value['description']})")
            click.echo(f"{'read':>20}: {value['func_eval']} func_eval, {value['surrogate_model']} models")
            click.echo(
                f"{'skipped':>20}: {len(value['skipped'])}" + "".join(f"\n{'':>22}{line}" for line in value["skipped"])
            )
            for note in value["notes"]:
                click.echo(f"{'note':>20}: {note}")
        elif key == "by_task":
            for task, counts in value.items():
                click.echo(f"{'task':>20}: {task_label(json.loads(task))}: {plain_text(counts)}")
        elif key in ("constraints", "recorded") and not value:
            continue
        elif key != "schema":
            click.echo(f"{key:>20}: {plain_text(value)}")
    if view.records:
        click.echo("")
        click.echo("\n".join(best_lines(view)))
    if view.records and view.problem_space is not None and len(view.problem_space.optimised) > 1:
        names = [o.name for o in view.problem_space.optimised]
        click.echo(
            f"\nPareto front per task ({', '.join(f'{o.name} {o.goal}' for o in view.problem_space.optimised)}"
            f"; output constraints met):"
        )
        for task in view.tasks:
            for record in view.pareto_front(task):
                values = ", ".join(f"{n} {record.value(n):.6g}" for n in names)
                click.echo(f"  {task_label(task)}: {values}  [{config_label(record.tuning_parameter)}]")
    if view.records and last:
        columns = [c for c in view.frame.columns if c not in (*DETAIL_COLUMNS, "time", "machine", "software")]
        table = view.frame[columns].tail(last).dropna(axis=1, how="all")
        click.echo(f"\nlatest {len(table)} of {len(view.frame)} evaluations:")
        click.echo(table.to_string(index=False, na_rep="", float_format=lambda v: f"{v:.6g}"))


@history.command("plot")
@click.argument("location", metavar="PATH_OR_URI")
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False),
    help="The image to write; its suffix is the format (.png, .svg, .pdf, ... as matplotlib writes them).",
)
@click.option("--kind", type=click.Choice(PLOTS), default="history", show_default=True, help="What to draw.")
@click.option("--problem", help="Problem name (needed when the store holds several).")
@_META
@_OBJECTIVE
@click.option("--task", help="Only this task, as `history show` labels it (e.g. t=1.3).")
@click.option("--parameter", help="The tuning parameter of --kind parameter (default: the first).")
@click.option(
    "--by",
    type=click.Choice(["evaluations", "cost"]),
    default="evaluations",
    show_default=True,
    help="The x axis of --kind history.",
)
@click.option("--size", nargs=2, type=click.FloatRange(min=1, max=100), metavar="W H", help="Inches (default 6.4 4).")
@click.option("--dpi", type=click.IntRange(min=10, max=2400), default=120, show_default=True, help="Dots per inch.")
@click.option("--title", help="The chart's title (default: the problem and what is drawn).")
def history_plot(
    location: str,
    out: str,
    kind: str,
    problem: str | None,
    meta: MetaDescription | None,
    objective: str | None,
    task: str | None,
    parameter: str | None,
    by: str,
    size: tuple[float, float] | None,
    dpi: int,
    title: str | None,
) -> None:
    """Draw a history: best so far per task, a parameter against the objective, the LCM's task correlation,
    GPTuneBand's brackets and promotions, or each task's Pareto front (several objectives)."""
    if not Path(out).resolve().parent.is_dir():
        raise click.BadParameter(f"{Path(out).parent} is not a directory", param_hint="--out")
    formats = sorted(FigureCanvasBase.get_supported_filetypes())
    suffix = Path(out).suffix.removeprefix(".").lower()
    if suffix not in formats:
        raise click.BadParameter(
            f"{shown(out)} has no image suffix matplotlib writes (allowed: {', '.join('.' + f for f in formats)})",
            param_hint="--out",
        )
    view = _view(_load(location, problem, meta), meta, objective)
    if not view.records:
        raise click.BadParameter(f"{location} holds no evaluations of {view.problem}", param_hint="PATH_OR_URI")
    if task is None and kind in ("brackets", "front") and len(view.tasks) > 1:
        click.echo(f"no --task: drawing {task_label(view.tasks[0])}, the first of {len(view.tasks)} tasks", err=True)
    if kind == "history":
        figure = plot_history(view, by=by, task=task)  # type: ignore[arg-type]  # --by is a click.Choice of the two
    elif kind == "parameter":
        figure = plot_parameter(view, parameter or next(iter(view.columns["parameter"])), task=task)
    elif kind == "correlation":
        figure = plot_task_correlation(view)
    elif kind == "front":
        figure = plot_front(view, task=task)
    else:
        figure = plot_brackets(view, task=task)
    if size:
        figure.set_size_inches(*size)
    if title is not None:
        figure.axes[0].set_title(title)
    figure.savefig(out, dpi=dpi)
    click.echo(f"wrote {out}")


@history.command("import")
@click.argument("path", metavar="FILE", type=click.Path(dir_okay=False))
@click.option("--to", "target", required=True, metavar="DIR_OR_MONGODB_URI", help="The store to add to.")
@_META
def history_import(path: str, target: str, meta: MetaDescription | None) -> None:
    """Add every record of a GPTune FILE to a store (records already there are kept once).

    A record is known by its uid; one without a uid by its content (task,
    parameters, outputs and all else it holds), so importing a file again,
    or a copy of it, adds nothing.

    The whole file is read and checked first: a file that is not a GPTune
    history changes nothing. Prints how many records were new. With --meta,
    values a 2020 GPTune file wrote as strings are read by the problem's
    types; without it, each parameter's type is the one the file's own model
    spaces declare, else categorical (with the values seen) when a value is
    no number, else integer or real, and one warning line names every
    inferred type (`history show` prints it too).
    """
    document = read_history_file(path, meta.problem_space if meta is not None else None)
    with open_store(store_location(target, "--to")) as store:
        new_evaluations, new_models = store.import_document(document)
    distinct = len({r.uid for r in document.func_eval}) + len({m.uid for m in document.surrogate_model})
    already = distinct - new_evaluations - new_models
    click.echo(
        f"imported {new_evaluations} new evaluations and {new_models} new models of "
        f"{document.tuning_problem_name} into {target}" + (f" ({already} already in the store)" if already else "")
    )


@history.command("export")
@click.option("--from", "source", required=True, metavar="DIR_OR_MONGODB_URI", help="The store to read.")
@click.option("--problem", required=True, help="Problem name.")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="GPTune file to write.")
@click.option(
    "--ok-only",
    is_flag=True,
    help="Leave out failed and pending evaluations (for a GPTune user whose meta.json sets no_load_check).",
)
def history_export(source: str, problem: str, out: str, ok_only: bool) -> None:
    """Write one problem of a store as a GPTune file.

    A failed evaluation is written with its machine under its ``raytuner``
    key, so GPTune's load check passes over it (GPTune exits on a null
    output it loads); with ``no_load_check`` GPTune loads it anyway and
    exits: ``--ok-only`` leaves such evaluations out.
    """
    if not Path(out).resolve().parent.is_dir():
        raise click.BadParameter(f"{Path(out).parent} is not a directory", param_hint="--out")
    with open_store(existing_store(source, "--from")) as store:
        document = store.export_document(problem_in(store, problem, source))
    if ok_only:
        document.func_eval = [r for r in document.func_eval if r.status == "ok"]
    write_history_file(out, document)
    click.echo(f"wrote {len(document.func_eval)} evaluations and {len(document.surrogate_model)} models to {out}")


@history.command("repair")
@click.argument("directory", metavar="STORE_DIR")
@click.argument("problem", required=False)
def history_repair(directory: str, problem: str | None) -> None:
    """Salvage a damaged PROBLEM (default: every problem) of a JSON store in place, and the store's service ledger.

    Every line that cannot be read (of PROBLEM.json, its journal and the
    ledger's logs in STORE_DIR/.service) is moved, whole and with its file and
    byte offset, to the file's ``.corrupt`` companion; PROBLEM.json is
    rewritten from every intact record, and writers may append to it again.
    Nothing is dropped. Prints what was moved and kept.
    """
    store = JsonStore(existing_store(directory, "STORE_DIR"))
    with store:
        for name in [problem_in(store, problem, directory)] if problem else store.problems():
            moved, kept = store.repair(name)
            click.echo(
                f"{name}: kept {kept} evaluations; moved {moved} damaged line(s)"
                + (f" to {store.quarantine_path(name)}" if moved else "")
            )
        ledger, moved = store.ledger(), 0
        for name in LOGS:
            if lines := ledger.repair(name):
                moved += lines
                click.echo(f"ledger {name}: moved {lines} damaged line(s) to {ledger.directory / name}.jsonl.corrupt")
        if not moved:
            click.echo(f"ledger: nothing damaged in {ledger.directory}")
