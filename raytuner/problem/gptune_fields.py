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
- GPTune's GPTuneBand (``GPTune_MB``) puts the fidelity first among the task
  parameters, as the real ``budget`` (``b_min`` .. ``b_max``), and its band
  driver finds every record by ``task_parameter["budget"]`` beside the task's
  own values. So a record with a fidelity is written with it as
  ``task_parameter["budget"]`` too (:func:`file_record`), marked
  ``raytuner.budget_task: true``, and read back without it (:func:`read_record`):
  raytuner's fidelity stays ``raytuner.fidelity``, where files written before
  this rule keep it alone and still read. A problem with its own task parameter
  ``budget`` keeps its value there, and the fidelity only under ``raytuner``.
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
    >>> banded = file_record({"task_parameter": {"t": 1.0}, "raytuner": {"fidelity": 4.0}})
    >>> banded["task_parameter"], read_record(banded)["task_parameter"]
    ({'t': 1.0, 'budget': 4.0}, {'t': 1.0})
    >>> with_transformers([{"name": "x", "type": "real"}, {"name": "c", "type": "categorical"}])
    [{'name': 'x', 'type': 'real', 'transformer': 'normalize'}, {'name': 'c', 'type': 'categorical', 'transformer': 'onehot'}]
    >>> with_transformers([{"name": "y", "type": "real"}], output=True)
    [{'name': 'y', 'type': 'real', 'transformer': 'identity'}]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "BUDGET",
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
#: The task parameter GPTune's GPTuneBand keeps an evaluation's fidelity in.
BUDGET = "budget"
#: The provenance key that says :func:`file_record` wrote the fidelity as the task's :data:`BUDGET`.
_BUDGET_TASK = "budget_task"
_TASK = "task_parameter"
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
    under ``raytuner``, so GPTune's load check passes over it instead of its reader exiting on its null outputs;
    a record with a fidelity has it as the task's :data:`BUDGET` too, where GPTune's GPTuneBand keeps it.

    Args:
        record: the record as :meth:`~raytuner.problem.records.FunctionEvaluation.to_dict` gives it.

    >>> file_record({"machine_configuration": {}, "raytuner": {"status": "ok"}})
    {'machine_configuration': {}, 'raytuner': {'status': 'ok'}}
    >>> file_record({"task_parameter": {"budget": 2}, "raytuner": {"fidelity": 4.0}})["task_parameter"]
    {'budget': 2}
    """
    out = dict(record)
    provenance = record.get(PROVENANCE)
    if not isinstance(provenance, Mapping):
        return out
    task = record.get(_TASK)
    if provenance.get("fidelity") is not None and isinstance(task, Mapping) and BUDGET not in task:
        out[_TASK] = {**task, BUDGET: provenance["fidelity"]}
        provenance = {**provenance, _BUDGET_TASK: True}
    if _not_ok(record) and MACHINE in record:
        del out[MACHINE]
        provenance = {**provenance, MACHINE: record[MACHINE]}
    out[PROVENANCE] = dict(provenance)
    return out


def read_record(record: Any) -> Any:
    """A stored ``func_eval`` record as :func:`file_record` had it: its machine back at the top level, and
    without the :data:`BUDGET` it added to the task.

    Anything else (a record without either, not a mapping) is returned as it is.

    Args:
        record: the stored record.

    >>> read_record({"raytuner": {"status": "failed"}})
    {'raytuner': {'status': 'failed'}}
    """
    if not isinstance(record, Mapping):
        return record
    provenance = record.get(PROVENANCE)
    if not isinstance(provenance, Mapping):
        return record
    moved = MACHINE not in record and MACHINE in provenance
    budget = provenance.get(_BUDGET_TASK) is True and isinstance(record.get(_TASK), Mapping)
    if not moved and not budget:
        return record
    out = dict(record)
    if moved:
        out[MACHINE] = provenance[MACHINE]
    if budget:
        out[_TASK] = {k: v for k, v in record[_TASK].items() if k != BUDGET}
    out[PROVENANCE] = {k: v for k, v in provenance.items() if not (k == _BUDGET_TASK or (moved and k == MACHINE))}
    return out
