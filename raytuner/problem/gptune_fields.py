"""What GPTune's reader reads: the fields raytuner writes so that GPTune's own code loads its files.

GPTune (``GPTune/database.py``) reads a history file this way, and the rules
below follow from it:

- ``HistoryDB.load_history_func_eval`` first passes over every record that
  ``check_load_deps`` rejects (one without a top-level
  ``machine_configuration`` among them), then calls ``exit()`` when a record it
  kept has a null output. So a record that is not ``ok`` (failed or pending)
  is written with its ``machine_configuration`` under its ``raytuner`` key
  (:func:`file_record`): GPTune passes over it, raytuner reads it back whole
  (:func:`read_record`), outputs still null and the failure message kept.
  Files written before this rule (a failed record with a top-level machine)
  still read. Limit: with GPTune's ``no_load_check: "yes"`` GPTune skips the
  machine check and still exits on such a record; export without failures
  (``raytuner history export --ok-only``) for such a user.
- ``check_surrogate_model_exact_match`` reads ``transformer`` of every space
  entry of a stored model: task and tuning parameters get ``normalize``
  (real, integer) or ``onehot`` (categorical), as GPTune's example drivers
  declare them, and outputs ``identity``, what a driver declaring an output
  without ``transform=`` gets (:func:`with_transformers`).

Example:
    >>> failed = {"machine_configuration": {"machine_name": "vm"}, "evaluation_result": {"y": None},
    ...           "raytuner": {"status": "failed", "failure_message": "segfault"}}
    >>> written = file_record(failed)
    >>> "machine_configuration" in written, written["raytuner"]["machine_configuration"]
    (False, {'machine_name': 'vm'})
    >>> read_record(written) == failed
    True
    >>> with_transformers([{"name": "x", "type": "real"}, {"name": "c", "type": "categorical"}])
    [{'name': 'x', 'type': 'real', 'transformer': 'normalize'}, {'name': 'c', 'type': 'categorical', 'transformer': 'onehot'}]
    >>> with_transformers([{"name": "y", "type": "real"}], output=True)
    [{'name': 'y', 'type': 'real', 'transformer': 'identity'}]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "MACHINE",
    "PROVENANCE",
    "OUTPUT_TRANSFORMER",
    "PARAMETER_TRANSFORMERS",
    "parameter_transformer",
    "with_transformers",
    "file_record",
    "read_record",
]

#: The record field GPTune's load check reads first.
MACHINE = "machine_configuration"
#: raytuner's own key on a record, which GPTune's readers ignore.
PROVENANCE = "raytuner"
#: The transformer of an output: what GPTune's drivers get when they declare an output without ``transform=``.
OUTPUT_TRANSFORMER = "identity"
#: The transformer of a task or tuning parameter by its type, as GPTune's example drivers declare it.
PARAMETER_TRANSFORMERS: dict[str, str] = {
    "real": "normalize",
    "int": "normalize",
    "integer": "normalize",
    "categorical": "onehot",
}


def parameter_transformer(kind: str) -> str:
    """The transformer GPTune's drivers declare for a parameter of type ``kind`` (``normalize`` if unknown).

    Args:
        kind: the space entry's ``type`` (``real``, ``int``/``integer`` or ``categorical``).

    >>> parameter_transformer("categorical"), parameter_transformer("int")
    ('onehot', 'normalize')
    """
    return PARAMETER_TRANSFORMERS.get(kind, "normalize")


def with_transformers(entries: Sequence[Mapping[str, Any]], output: bool = False) -> list[dict[str, Any]]:
    """Copies of a model's space ``entries``, each with a ``transformer`` (an entry's own one is kept).

    Args:
        entries: the space entries (``name``, ``type``, bounds or categories).
        output: whether they are output entries (``identity``) rather than parameters.

    >>> with_transformers([{"name": "n", "type": "int", "transformer": "identity"}])
    [{'name': 'n', 'type': 'int', 'transformer': 'identity'}]
    """
    return [
        {
            **entry,
            "transformer": entry.get("transformer")
            or (OUTPUT_TRANSFORMER if output else parameter_transformer(str(entry.get("type", "real")))),
        }
        for entry in entries
    ]


def _not_ok(record: Mapping[str, Any]) -> bool:
    provenance = record.get(PROVENANCE)
    return isinstance(provenance, Mapping) and provenance.get("status", "ok") != "ok"


def file_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """A ``func_eval`` record's dict as a GPTune file holds it: a record that is not ``ok`` keeps its machine
    under ``raytuner``, so GPTune's load check passes over it instead of its reader exiting on its null outputs.

    Args:
        record: the record as :meth:`~raytuner.problem.records.FunctionEvaluation.to_dict` gives it.

    >>> file_record({"machine_configuration": {}, "raytuner": {"status": "ok"}})
    {'machine_configuration': {}, 'raytuner': {'status': 'ok'}}
    """
    if not _not_ok(record) or MACHINE not in record:
        return dict(record)
    out = {k: v for k, v in record.items() if k != MACHINE}
    out[PROVENANCE] = {**record[PROVENANCE], MACHINE: record[MACHINE]}
    return out


def read_record(record: Any) -> Any:
    """A stored ``func_eval`` record with a machine that :func:`file_record` moved put back at the top level.

    Anything else (a record without one, not a mapping) is returned as it is.

    Args:
        record: the stored record.

    >>> read_record({"raytuner": {"status": "failed"}})
    {'raytuner': {'status': 'failed'}}
    """
    if not isinstance(record, Mapping) or MACHINE in record:
        return record
    provenance = record.get(PROVENANCE)
    if not isinstance(provenance, Mapping) or MACHINE not in provenance:
        return record
    out = dict(record)
    out[MACHINE] = provenance[MACHINE]
    out[PROVENANCE] = {k: v for k, v in provenance.items() if k != MACHINE}
    return out
