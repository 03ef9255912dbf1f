"""Records as the crowd repository stores them: one MongoDB document per record, built without the database.

A document holds the GPTune record (machine and package names made
canonical), its owner and access fields, the lower-cased canonical machine,
a sortable version key per package (:mod:`raytuner.crowd.versions`) and the
record as compact JSON text, made once, which is what a query answers with.
:class:`~raytuner.crowd.repository.CrowdRepository` writes and reads them.

Example:
    >>> from raytuner.problem.records import FunctionEvaluation
    >>> record = FunctionEvaluation.create({"t": 1.0}, {"x": 0.5}, {"y": 2.0},
    ...                                    machine_configuration={"machine_name": "cori.nersc.gov"},
    ...                                    software_configuration={"gcc": {"version_split": [8, 3]}})
    >>> base = {"problem": "demo", "owner": "alice", "access": "public"}
    >>> doc = evaluation_document(base, record.to_dict(), {"cori.nersc.gov": "Cori"}, {}, "records[0]")
    >>> doc["record"]["machine_configuration"]["machine_name"], doc["machine"], doc["software"][0]["name"]
    ('Cori', 'cori', 'gcc')
    >>> doc["_id"] == "demo:" + record.uid, json_text({"a": [1, 2]})
    (True, '{"a":[1,2]}')
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

from raytuner.crowd.catalog import match_key
from raytuner.crowd.names import check_field_name
from raytuner.crowd.query import ProblemSpaceQuery
from raytuner.crowd.versions import version_key
from raytuner.errors import InvalidInputError, validate
from raytuner.problem.records import FunctionEvaluation, SurrogateModelRecord

__all__ = [
    "TASK_INDEX",
    "record_document",
    "evaluation_document",
    "json_text",
    "task_hint",
    "iterate_records",
    "record_dict",
    "software_version_key",
]

#: The name of the wildcard index on ``record.task_parameter``.
TASK_INDEX = "task_parameter_wildcard"

RecordT = TypeVar("RecordT", FunctionEvaluation, SurrogateModelRecord)


def record_document(base: dict[str, Any], record: dict[str, Any], field: str) -> dict[str, Any]:
    """The document of ``record``: ``base`` (problem, owner, access fields), the uid as ``_id`` and the time.

    Args:
        base: the fields every document of the upload carries; ``problem`` is one of them.
        record: the GPTune record as a dict.
        field: the record's name in errors (``records[3]``).

    Raises:
        InvalidInputError: a key of ``record`` cannot be a MongoDB field name.
    """
    for key in record:
        check_field_name(key, f"{field}.<key>")
    uid = record["uid"]
    return {
        "_id": f"{base['problem']}:{uid}",
        "uid": uid,
        **base,
        "record": record,
        "uploaded": _dt.datetime.now(_dt.UTC),
    }


def evaluation_document(
    base: dict[str, Any], record: dict[str, Any], machines: Mapping[str, str], packages: Mapping[str, str], field: str
) -> dict[str, Any]:
    """The document of a function evaluation: :func:`record_document` plus the canonical machine and packages.

    The record's machine and package names are replaced by their canonical
    names (in place).

    Args:
        base: the fields every document of the upload carries.
        record: the GPTune function evaluation as a dict; changed in place.
        machines: the machine catalog, :func:`~raytuner.crowd.catalog.match_key` of a name -> canonical name.
        packages: the software catalog, likewise.
        field: the record's name in errors.

    Raises:
        InvalidInputError: a name cannot be a MongoDB field name, or two names are the same package.
    """
    for part in ("task_parameter", "tuning_parameter", "evaluation_result", "machine_configuration"):
        for key in record[part]:
            check_field_name(key, f"{field}.{part}.<name>")
    doc = record_document(base, record, field)
    machine_conf = record["machine_configuration"]
    name = machine_conf.get("machine_name")
    if isinstance(name, str) and name.strip():
        canonical = machines.get(match_key(name), name.strip())
        machine_conf["machine_name"] = canonical
        doc["machine"] = match_key(canonical)
    else:
        doc["machine"] = None
    software: dict[str, Any] = {}
    entries = []
    for package, entry in record["software_configuration"].items():
        check_field_name(package, f"{field}.software_configuration.<name>")
        canonical = packages.get(match_key(package), package.strip())
        if canonical in software:
            raise InvalidInputError(
                f"{field}.software_configuration.{package}", f"names the same package as {canonical!r}"
            )
        software[canonical] = entry
        entries.append({"name": match_key(canonical), "vkey": software_version_key(entry)})
    record["software_configuration"] = software
    doc["software"] = entries
    return doc


def json_text(record: Mapping[str, Any]) -> str:
    """Compact JSON text of a stored record.

    Args:
        record: the record as stored.
    """
    return json.dumps(record, separators=(",", ":"), default=str)


def task_hint(problem_space: Any) -> str | None:
    """The task-parameter index when the query narrows a task parameter (the selective part of a crowd query).

    MongoDB's planner otherwise races the candidate indexes on each new query
    shape, which is slow on large collections.

    Args:
        problem_space: the query's ``problem_space`` (see :mod:`raytuner.crowd.query`).

    Example:
        >>> task_hint({"input_space": [{"name": "t", "lower_bound": 1}]}), task_hint(None)
        ('task_parameter_wildcard', None)
    """
    conditions = ProblemSpaceQuery.parse(problem_space).conditions
    narrowed = any(
        c.space == "input_space"
        and (c.lower_bound is not None or c.upper_bound is not None or c.categories is not None)
        for c in conditions
    )
    return TASK_INDEX if narrowed else None


def iterate_records(records: Any, model: type[BaseModel]) -> Iterable[Any]:
    """``records`` as an iterable: one record (a ``model`` or a mapping) becomes a list of one.

    Args:
        records: one record or an iterable of records.
        model: the record class.

    Raises:
        InvalidInputError: ``records`` is neither a record nor an iterable of them.
    """
    if isinstance(records, (model, Mapping)):
        return [records]
    if isinstance(records, (str, bytes)) or not isinstance(records, Iterable):
        raise InvalidInputError("records", f"must be a record or a list of records, not {type(records).__name__}")
    return records


def record_dict(model: type[RecordT], record: Any, field: str) -> dict[str, Any]:
    """``record`` (a ``model`` or a GPTune dictionary, validated) as a dict.

    Args:
        model: the record class.
        record: the record.
        field: its name in errors.

    Raises:
        InvalidInputError: ``record`` is not a valid record.
    """
    if isinstance(record, model):
        return record.to_dict()
    if not isinstance(record, Mapping):
        raise InvalidInputError(
            field, f"must be a {model.__name__} or a GPTune record dictionary, not {type(record).__name__}"
        )
    return validate(model, record, field).to_dict()


def software_version_key(entry: Any) -> str | None:
    """The sortable key of a GPTune software entry (``version_split``, ``version_str`` or a string); None if none.

    Args:
        entry: the software configuration's entry for one package.

    Example:
        >>> software_version_key({"version_str": "8.3"}) == software_version_key([8, 3, 0])
        True
        >>> software_version_key({"version_str": "dev"}) is None
        True
    """
    if isinstance(entry, Mapping):
        version = entry.get("version_split") or entry.get("version_str")
    else:
        version = entry
    try:
        return version_key(version) if version is not None else None
    except InvalidInputError:
        return None
