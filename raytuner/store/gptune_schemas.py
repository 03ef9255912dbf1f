"""Every schema of GPTune's history database, read into today's.

GPTune's history files changed shape over the years; GPTune's own tools and
its web repository read all of them:

1. current: ``tuning_problem_name``, ``func_eval`` (with
   ``evaluation_result``) and ``surrogate_model``;
2. 2021: ``tuning_problem_name``, ``func_eval`` and the models under ``model_data``;
3. early 2021: top-level ``name``, ``model_data``, and ``func_eval`` records
   with ``evaluated_result`` and ``machine_configuration`` as
   ``{"machine", "type", "nodes", "cores"}``;
4. 2020: top-level ``name``, ``model_data``, and ``func_eval`` records keyed
   ``I`` (task), ``P`` (tuning parameters, values written as strings), ``O``
   (outputs), ``machine_deps``, ``compile_deps`` and ``runtime_deps``.

:func:`normalise_history` turns any of them into a schema-1 JSON object:
each record in today's spelling (a string value converted through the
problem's types when a problem is given, else by the types
:func:`~raytuner.store.gptune_types.infer_types` infers, which one note of the
report names), each ``model_data`` model a ``surrogate_model`` record, and whatever
has no place in today's schema kept verbatim as an extra field of its record.
In an older schema, an entry that is not a JSON object cannot be a record:
it is skipped, and the report says where and why (in today's schema such a
file is refused, as every malformed input is).

Example:
    >>> legacy = {"name": "hypre", "model_data": [], "func_eval": [
    ...     {"I": {"nx": 200}, "P": {"Px": "3", "tol": "0.5"}, "O": {"r": 28.7},
    ...      "machine_deps": {"machine": "cori", "type": "haswell", "nodes": 1, "cores": 32},
    ...      "compile_deps": {}, "runtime_deps": {}, "uid": "a"}]}
    >>> data, report = normalise_history(legacy)
    >>> record = data["func_eval"][0]
    >>> record["tuning_parameter"], record["evaluation_result"], record["machine_configuration"]
    ({'Px': 3, 'tol': 0.5}, {'r': 28.7}, {'machine_name': 'cori', 'haswell': {'nodes': 1, 'cores': 32}})
    >>> report.schema, report.evaluations, report.notes[0].split(": ", 1)[1]
    (4, 1, 'Px integer, tol real')
"""

from __future__ import annotations

import json
import logging
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from raytuner.errors import InvalidInputError
from raytuner.problem.gptune_fields import with_transformers
from raytuner.problem.space import ProblemSpace
from raytuner.store.gptune_types import InferredType, infer_types, inference_note, typed_values

__all__ = ["SCHEMAS", "SchemaReport", "detect_schema", "normalise_history"]

log = logging.getLogger(__name__)

#: GPTune's history schemas, by number (what each looks like).
SCHEMAS: dict[int, str] = {
    1: "current: tuning_problem_name, func_eval with evaluation_result, surrogate_model",
    2: "2021: tuning_problem_name, func_eval, model_data",
    3: "early 2021: name, model_data, func_eval with evaluated_result and machine/type/nodes/cores",
    4: "2020: name, model_data, func_eval records keyed I, P, O, machine_deps, compile_deps, runtime_deps",
}

_NAMESPACE = uuid.UUID("6f1c1d5e-3a51-4bd0-9a53-6b0f6f3f2a10")  # uids of records that had none


@dataclass
class SchemaReport:
    """What reading one history did: its schema, what was read, skipped and converted.

    Args:
        schema: The file's schema (a key of :data:`SCHEMAS`).
        evaluations: ``func_eval`` records read.
        models: Surrogate models read (``surrogate_model`` or ``model_data``).
        skipped: One line per entry that could not be a record, naming it and why.
        notes: What was converted or guessed (each said once).
    """

    schema: int
    evaluations: int = 0
    models: int = 0
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        """Add ``text`` to the notes once (and log it once).

        Args:
            text: What was converted or guessed.
        """
        if text not in self.notes:
            self.notes.append(text)
            log.warning("GPTune history (schema %d): %s", self.schema, text)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON: schema, its description, counts, skipped and notes."""
        return {
            "schema": self.schema,
            "description": SCHEMAS[self.schema],
            "func_eval": self.evaluations,
            "surrogate_model": self.models,
            "skipped": list(self.skipped),
            "notes": list(self.notes),
        }


def detect_schema(data: Any) -> int:
    """The schema (1-4) of a parsed GPTune history, or one error naming what is missing.

    Args:
        data: The file's JSON value.

    >>> detect_schema({"tuning_problem_name": "p", "func_eval": [], "surrogate_model": []})
    1
    >>> detect_schema({"name": "p", "perf": []})
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: func_eval: missing; a GPTune history has tuning_problem_name (or name) and a func_eval list
    """
    if not isinstance(data, Mapping):
        raise InvalidInputError("history", f"expected a JSON object, got {type(data).__name__}")
    named = "tuning_problem_name" in data or "name" in data
    if not named:
        raise InvalidInputError(
            "tuning_problem_name",
            "missing; a GPTune history names its problem in tuning_problem_name (or name, before 2021)",
        )
    if not isinstance(data.get("func_eval"), list):
        raise InvalidInputError(
            "func_eval",
            "missing; a GPTune history has tuning_problem_name (or name) and a func_eval list"
            if "func_eval" not in data
            else f"expected a list, got {type(data['func_eval']).__name__}",
        )
    for key in ("surrogate_model", "model_data"):
        if key in data and not isinstance(data[key], list):
            raise InvalidInputError(key, f"expected a list, got {type(data[key]).__name__}")
    records = [r for r in data["func_eval"] if isinstance(r, Mapping)]
    if any("P" in r or "I" in r or "O" in r for r in records):
        return 4
    if (
        any("evaluated_result" in r or _legacy_machine(r.get("machine_configuration")) for r in records)
        or "tuning_problem_name" not in data
    ):
        return 3
    return 2 if "model_data" in data and "surrogate_model" not in data else 1


def _legacy_machine(machine: Any) -> bool:
    """Whether ``machine`` is the early-2021 ``{"machine", "type", "nodes", "cores"}``."""
    return isinstance(machine, Mapping) and "machine_name" not in machine and "machine" in machine


def _machine(legacy: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """GPTune's ``{"machine_name", "<processor>": {"nodes", "cores"}}`` from ``{"machine", "type", "nodes", "cores"}``.

    Returns the configuration and the legacy keys it did not use (kept verbatim).
    """
    used = ("machine", "type", "nodes", "cores")
    machine: dict[str, Any] = {"machine_name": legacy.get("machine", "unknown")}
    machine[str(legacy.get("type", "unknown"))] = {"nodes": legacy.get("nodes"), "cores": legacy.get("cores")}
    return machine, {k: v for k, v in legacy.items() if k not in used}


class _ContentUids:
    """Uids for the records of one file that have none, derived from their content: every read gives the same.

    A record's uid is the UUID5 of its JSON text (task, parameters, outputs, machine, times: all it
    holds), so importing the file again, or a copy of it, keeps each record once. Identical records
    of one file (the same point measured twice, with no time written) stay apart: the second and later
    ones' uids also take their place among them.
    """

    def __init__(self) -> None:
        self._seen: Counter[str] = Counter()

    def __call__(self, record: Mapping[str, Any]) -> str:
        text = json.dumps(record, sort_keys=True, default=str)
        repeat = self._seen[text]
        self._seen[text] += 1
        return str(uuid.uuid5(_NAMESPACE, f"{text}\n{repeat}" if repeat else text))


def _evaluation(
    record: Mapping[str, Any],
    problem: ProblemSpace | None,
    types: Mapping[str, InferredType],
    report: SchemaReport,
    uids: _ContentUids,
) -> dict[str, Any]:
    """One ``func_eval`` record in today's spelling (any schema); ``types`` from :func:`infer_types`."""
    out = dict(record)
    if "I" in out or "P" in out or "O" in out:
        spaces = (problem.input_space, problem.parameter_space) if problem is not None else (None, None)
        out["task_parameter"] = typed_values(out.pop("I", {}) or {}, spaces[0], types)
        out["tuning_parameter"] = typed_values(out.pop("P", {}) or {}, spaces[1], types)
        out["evaluation_result"] = out.pop("O", {}) or {}
    if "evaluated_result" in out and "evaluation_result" not in out:
        out["evaluation_result"] = out.pop("evaluated_result")
    if isinstance(out.get("machine_deps"), Mapping) and "machine_configuration" not in out:
        machine, rest = _machine(out.pop("machine_deps"))
        out["machine_configuration"] = machine
        if rest:
            out["machine_deps"] = rest
    if _legacy_machine(out.get("machine_configuration")):
        out["machine_configuration"], rest = _machine(out["machine_configuration"])
        if rest:
            out["legacy_machine_configuration"] = rest
    deps = [k for k in ("compile_deps", "runtime_deps") if isinstance(out.get(k), Mapping)]
    if deps and "software_configuration" not in out:
        software: dict[str, Any] = {}
        for key in deps:
            clash = set(software) & set(out[key])
            if clash:
                continue  # kept verbatim below
            software.update(out.pop(key))
        out["software_configuration"] = software
    if "uid" not in out:
        out["uid"] = uids(record)
        report.note("records without a uid were given one derived from their content")
    return out


def _space_entries(entries: list[Mapping[str, Any]], names: list[str], output: bool) -> list[dict[str, Any]]:
    """A legacy model's space entries, named by ``names`` when they have no names and the counts match.

    Each gets the ``transformer`` GPTune's exact model match reads (``output``: the entries are outputs).
    """
    out = with_transformers(entries, output=output)
    if len(out) == len(names):
        for entry, name in zip(out, names):
            entry.setdefault("name", name)
    return out


def _model(
    record: Mapping[str, Any], names: dict[str, list[str]], report: SchemaReport, uids: _ContentUids
) -> dict[str, Any]:
    """One ``model_data`` model as a ``surrogate_model`` record (its legacy fields kept)."""
    out = dict(record)
    if "func_eval" in out and "function_evaluations" not in out:
        out["function_evaluations"] = out.pop("func_eval")
    space = out.get("problem_space")
    if isinstance(space, Mapping):
        keys = {
            "input_space": ("input_space", "IS"),
            "parameter_space": ("parameter_space", "PS"),
            "output_space": ("output_space", "OS"),
        }
        mapped: set[str] = set()
        for target, spellings in keys.items():
            found = next((s for s in spellings if s in space), None)
            entries = space[found] if found is not None else None
            if (
                found is not None
                and isinstance(entries, list)
                and target not in out
                and all(isinstance(e, Mapping) for e in entries)
            ):
                out[target] = _space_entries(entries, names[target], output=target == "output_space")
                mapped.add(found)
        if not all("name" in e for k in keys for e in out.get(k, [])):
            report.note("some model space entries have no names (the file's records did not say them)")
        rest = {k: v for k, v in space.items() if k not in mapped}
        if rest:
            out["problem_space"] = rest  # what had no place in today's spaces, kept verbatim
        else:
            del out["problem_space"]
    objective_id = out.get("objective_id")
    if "objective" not in out and isinstance(objective_id, int):
        outputs = names["output_space"]
        out["objective"] = {
            "objective_id": objective_id,
            **({"name": outputs[objective_id]} if 0 <= objective_id < len(outputs) else {}),
        }
    if "uid" not in out:
        out["uid"] = uids(record)
    return out


def _names(records: Sequence[Mapping[str, Any]], problem: ProblemSpace | None) -> dict[str, list[str]]:
    """The space names in order: the problem's, else the first record's key order (GPTune writes that order)."""
    if problem is not None:
        return {
            "input_space": problem.input_space.names,
            "parameter_space": problem.parameter_space.names,
            "output_space": problem.objectives,
        }
    first = records[0] if records else {}
    return {
        "input_space": list(first.get("task_parameter", {})),
        "parameter_space": list(first.get("tuning_parameter", {})),
        "output_space": list(first.get("evaluation_result", {})),
    }


def normalise_history(data: Any, problem: ProblemSpace | None = None) -> tuple[dict[str, Any], SchemaReport]:
    """A GPTune history of any schema as a schema-1 JSON object, and what reading it did.

    Args:
        data: The file's JSON value.
        problem: The problem's spaces, to convert values written as strings
            by their types (default: infer them, and say so in the report).

    Raises:
        InvalidInputError: one line naming what is missing when ``data`` is no GPTune history.
    """
    schema = detect_schema(data)
    report = SchemaReport(schema)
    uids = _ContentUids()
    if schema == 1:  # today's schema: read as it is (an entry that is no record is refused when validated)
        report.evaluations, report.models = len(data["func_eval"]), len(data.get("surrogate_model") or [])
        out = dict(data)
        for key in ("func_eval", "surrogate_model"):  # a record without a uid gets its content's, quietly
            if isinstance(out.get(key), list):
                out[key] = [{**r, "uid": uids(r)} if isinstance(r, Mapping) and "uid" not in r else r for r in out[key]]
        return out, report
    types = infer_types(data, problem) if schema == 4 else {}
    if types:
        report.note(inference_note(types, problem))
    evaluations: list[dict[str, Any]] = []
    for i, record in enumerate(data["func_eval"]):
        if not isinstance(record, Mapping):
            report.skipped.append(f"func_eval[{i}]: a {type(record).__name__}, not a record object")
            continue
        evaluations.append(_evaluation(record, problem, types, report, uids))
    names = _names(evaluations, problem)
    models: list[dict[str, Any]] = []
    for key in ("surrogate_model", "model_data"):
        for i, record in enumerate(data.get(key) or []):
            if not isinstance(record, Mapping):
                report.skipped.append(f"{key}[{i}]: a {type(record).__name__}, not a model object")
                continue
            models.append(_model(record, names, report, uids) if key == "model_data" else dict(record))
    report.evaluations, report.models = len(evaluations), len(models)
    header = {
        k: v
        for k, v in data.items()
        if k not in ("name", "tuning_problem_name", "func_eval", "surrogate_model", "model_data")
    }
    name = data.get("name") if schema >= 3 and "name" in data else data.get("tuning_problem_name")
    out = {
        "tuning_problem_name": name,
        "tuning_problem_category": header.pop("tuning_problem_category", None),
        **header,
        "surrogate_model": models,
        "func_eval": evaluations,
    }
    return out, report
