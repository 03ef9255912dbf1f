"""Records in GPTune's history-database format.

A :class:`FunctionEvaluation` is one ``func_eval`` entry and a
:class:`SurrogateModelRecord` one ``surrogate_model`` entry of a GPTune JSON
file (see GPTune's history database design). Fields GPTune does not know are
kept as they are, so a file read and written again keeps every record whole.
raytuner's own provenance (fidelity, bracket, rung, pass, engine, trial id,
status, failure message, cost) lives under the extra key ``"raytuner"``, which
GPTune's readers ignore.

Example:
    >>> rec = FunctionEvaluation.create({"t": 1.0}, {"x": 0.3}, {"y": 0.25},
    ...                                 provenance=Provenance(engine="random", fidelity=9))
    >>> rec.status, rec.raytuner.fidelity, rec.value("y")
    ('ok', 9.0, 0.25)
    >>> failed = FunctionEvaluation.create({"t": 1.0}, {"x": 0.9}, failure="segfault", outputs=["y"])
    >>> failed.status, failed.evaluation_result
    ('failed', {'y': None})

Every result is a record: an output that is not a finite number makes a
failed record that says why, whether it is reported now or read from a file.

    >>> FunctionEvaluation.create({"t": 1.0}, {"x": 0.5}, {"y": "fast"}).raytuner.failure_message
    "y: 'fast' is not a number"
    >>> read = FunctionEvaluation.model_validate({"evaluation_result": {"y": "oops"}})
    >>> read.status, read.raytuner.failure_message, read.evaluation_result
    ('failed', "y: 'oops' is not a number", {'y': 'oops'})
"""

from __future__ import annotations

import re
import time as _time
import unicodedata
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from raytuner.errors import InvalidInputError, shown
from raytuner.problem.environment import split_machine
from raytuner.problem.gptune_fields import file_record, read_record, with_transformers
from raytuner.problem.values import as_number, output_problem, parse_outputs

__all__ = [
    "GPTuneTime",
    "Provenance",
    "FunctionEvaluation",
    "SurrogateModelRecord",
    "HistoryDocument",
    "EVALUATION_LIST",
    "MODEL_LIST",
    "EvaluationSource",
    "Status",
    "new_uid",
    "task_key",
    "check_problem_name",
    "is_problem_name",
    "suggest_problem_name",
    "PROBLEM_NAME_RULE",
    "as_number",
    "output_problem",
    "parse_outputs",
]

Status = Literal["ok", "failed", "pending"]


PROBLEM_NAME_RULE = "1-128 characters of letters, digits, '.', '_' or '-', starting with a letter or digit"
_PROBLEM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def check_problem_name(name: Any, field: str = "tuning_problem_name") -> str:
    """Return ``name`` if it is a valid problem name, else raise naming ``field``.

    Problem names become file names and database keys, hence the rule.

    Args:
        name: the value to check.
        field: the field named in the error (default ``"tuning_problem_name"``).

    >>> check_problem_name("GPTune-Demo")
    'GPTune-Demo'
    """
    if not is_problem_name(name):
        raise InvalidInputError(field, f"invalid problem name {shown(name)}", allowed=[PROBLEM_NAME_RULE])
    return name


def is_problem_name(name: Any) -> bool:
    """Whether ``name`` is a valid problem name (:data:`PROBLEM_NAME_RULE`).

    Args:
        name: the value to check.

    >>> is_problem_name("GPTune-Demo"), is_problem_name("GPTune-Demo (1)")
    (True, False)
    """
    return isinstance(name, str) and _PROBLEM_NAME.fullmatch(name) is not None


def suggest_problem_name(text: str, taken: Sequence[str] = ()) -> str:
    """A valid problem name close to ``text`` and not in ``taken``, to suggest when ``text`` is none.

    Accents are dropped, every run of other characters becomes one ``-``, the
    name is cut to 120 characters (room for a suffix), and ``-2``, ``-3``... end it while it is taken.

    Args:
        text: a name that :func:`check_problem_name` refuses (a file's name without ``.json``).
        taken: the names already in use.

    >>> suggest_problem_name("GPTune-Demo (1)"), suggest_problem_name("résumé-тест", taken=["resume"])
    ('GPTune-Demo-1', 'resume-2')
    """
    plain = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", plain).lstrip("._-")[:120].rstrip("-") or "problem"
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}-{n}"
    return name


def new_uid() -> str:
    """A fresh record uid (a UUID1 string, as GPTune writes)."""
    return str(uuid.uuid1())


def task_key(task: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """A hashable key for a task's parameter values.

    Args:
        task: task parameters.

    >>> task_key({"t": 1.0, "n": 2})
    (('n', 2), ('t', 1.0))
    """
    return tuple(sorted(task.items()))


class GPTuneTime(BaseModel):
    """A creation time as Python's ``time.struct_time`` fields (GPTune's ``time``).

    >>> GPTuneTime.now().tm_year >= 2024
    True
    """

    model_config = ConfigDict(extra="allow")

    tm_year: int
    tm_mon: int
    tm_mday: int
    tm_hour: int
    tm_min: int
    tm_sec: int
    tm_wday: int
    tm_yday: int
    tm_isdst: int

    @classmethod
    def now(cls) -> GPTuneTime:
        """The local time now."""
        t = _time.localtime()
        return cls(**{name: getattr(t, name) for name in cls.model_fields})


class Provenance(BaseModel):
    """Where an evaluation came from: raytuner's extra key on a record.

    ``cost`` is the normalised cost of the evaluation (fidelity / maximum
    fidelity for multi-fidelity engines, 1.0 otherwise). ``proposer`` says
    how the engine chose the point (stored as ``source`` before, which still
    loads): ``"initial"`` (its initial design),
    ``"source_start"`` (the design's first point, where the source tasks agree),
    ``"model"`` (surrogate search), ``"plain_model"`` (GPTuneBand's surrogate
    search without its source records, in turn with the one with them),
    ``"random"`` (no model available), ``"given"`` (a user's configuration,
    Ray's ``points_to_evaluate``: :meth:`TuningSession.give`) or ``"promotion"`` (successive halving
    moved it up a rung). ``bracket``,
    ``rung`` and ``pass`` place a GPTuneBand evaluation in its plan;
    ``parent`` is the uid of the lower-rung evaluation a promotion continues.
    With output constraints, MLA, GPTuneBand and DiscreteBO add ``confident: true`` (an extra key)
    to a model suggestion whose chance of meeting every constraint was at least 0.9 when chosen
    (:mod:`raytuner.engines.breaches`), and ``own_model: true`` to a model suggestion that its task's own
    model chose, not the model shared with the other tasks (:mod:`raytuner.engines.sharing`).
    ``machine``: the machine beyond GPTune's ``machine_configuration`` (host, CPU model, Slurm).
    ``elapsed`` (seconds) or ``started`` (an ISO 8601 time), extra keys a run may tell (``tell``'s
    ``provenance``): how long the evaluation ran, a bar on the dashboard's timeline
    (:func:`raytuner.view.figures.duration`).
    ``origin_session_id`` (an extra key): the ``session_id`` a record uploaded to the tuning service
    (``UploadEvaluations``) named, for a session not of the uploader: only a session's own tells carry
    ``session_id`` there.
    """

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    status: Status = "ok"
    failure_message: str | None = None
    fidelity: float | None = None
    cost: float | None = None
    bracket: int | None = None
    rung: int | None = None
    pass_: int | None = Field(default=None, alias="pass")
    engine: str | None = Field(default=None, validation_alias=AliasChoices("engine", "strategy"))  # was "strategy"
    proposer: str | None = Field(default=None, validation_alias=AliasChoices("proposer", "source"))  # was "source"
    parent: str | None = None
    trial_id: str | None = None
    session_id: str | None = None
    machine: dict[str, Any] | None = None


class FunctionEvaluation(BaseModel):
    """One function evaluation (a ``func_eval`` record).

    Build new ones with :meth:`create`; read stored ones with
    ``FunctionEvaluation.model_validate(dict)``.
    """

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    task_parameter: dict[str, Any] = Field(default_factory=dict)
    tuning_parameter: dict[str, Any] = Field(default_factory=dict)
    constants: dict[str, Any] = Field(default_factory=dict)
    machine_configuration: dict[str, Any] = Field(default_factory=dict)
    software_configuration: dict[str, Any] = Field(default_factory=dict)
    evaluation_result: dict[str, Any] = Field(default_factory=dict)
    evaluation_detail: dict[str, Any] = Field(default_factory=dict)
    additional_output: dict[str, Any] = Field(default_factory=dict)
    source: str = "measure"
    modeling: str | None = None
    time: GPTuneTime = Field(default_factory=GPTuneTime.now)
    uid: str = Field(default_factory=new_uid, min_length=1)
    raytuner: Provenance | None = None

    @classmethod
    def create(
        cls,
        task: Mapping[str, Any],
        config: Mapping[str, Any],
        result: Mapping[str, Any] | None = None,
        *,
        failure: str | None = None,
        provenance: Provenance | None = None,
        machine_configuration: Mapping[str, Any] | None = None,
        software_configuration: Mapping[str, Any] | None = None,
        additional_output: Mapping[str, Any] | None = None,
        constants: Mapping[str, Any] | None = None,
        modeling: str | None = None,
        uid: str | None = None,
        outputs: Sequence[str] = (),
    ) -> FunctionEvaluation:
        """A new record; a failure message, or an output that is not a finite number, makes it a failed one.

        A failed evaluation keeps no output values: each output is null, as
        GPTune writes a failed run (``{"y": null}``), and
        ``raytuner.failure_message`` says why (for a bad output, the reason
        :func:`parse_outputs` gives). ``machine_configuration`` keeps GPTune's
        shape (``machine_name`` and processor entries); its other keys go to
        ``raytuner.machine``. Never raises for what a trial reported.

        Args:
            task: The task parameters.
            config: The tuning parameters.
            result: Output names to reported values (any type: checked here).
            failure: Why the evaluation failed (its outputs are then ignored).
            provenance: raytuner's provenance (engine, fidelity, bracket, ...).
            machine_configuration: Where it ran.
            software_configuration: With what software.
            additional_output: Extra values kept with the record.
            constants: GPTune's constants.
            modeling: GPTune's ``modeling`` field (default: the engine).
            uid: The record's uid (default: a fresh one).
            outputs: The problem's output names, null in a failed record (default: the keys ``result`` has).
        """
        prov = (provenance or Provenance()).model_copy()
        values: dict[str, float] = {}
        if failure is None:
            values, failure = parse_outputs(result)
        nulls: dict[str, Any] = {}
        if failure is not None:
            prov.status = "failed"
            prov.failure_message = failure
            values = {}
            nulls = {str(n): None for n in (list(outputs) or (list(result) if isinstance(result, Mapping) else []))}
        machine, details = split_machine(machine_configuration or {})
        if details:
            prov.machine = {**(prov.machine or {}), **details}
        detail = {k: {"evaluations": v, "objective_scheme": "average"} for k, v in values.items()}
        return cls(
            task_parameter=dict(task),
            tuning_parameter=dict(config),
            constants=dict(constants or {}),
            machine_configuration=machine,
            software_configuration=dict(software_configuration or {}),
            evaluation_result=values or nulls,
            evaluation_detail=detail,
            additional_output=dict(additional_output or {}),
            modeling=modeling or prov.engine,
            raytuner=prov,
            **({"uid": uid} if uid else {}),
        )

    def __repr__(self) -> str:
        """What a user reads: task, configuration, outputs (or the failure), fidelity and a short uid.

        >>> FunctionEvaluation.create({"t": 1.0}, {"x": 0.25}, {"y": 0.5}, uid="4f2c9a1e-77")
        FunctionEvaluation(task={'t': 1.0}, config={'x': 0.25}, outputs={'y': 0.5}, uid='4f2c9a1e')
        """
        p = self.raytuner
        parts = [f"task={self.task_parameter!r}", f"config={self.tuning_parameter!r}"]
        parts.append(
            f"failed={p.failure_message!r}"
            if p is not None and self.status == "failed"
            else f"outputs={self.evaluation_result!r}"
        )
        if p is not None and self.status == "pending":
            parts.append("status='pending'")
        for name in ("fidelity", "pass_", "bracket", "rung"):
            value = getattr(p, name, None) if p is not None else None
            if value is not None:
                parts.append(f"{name.rstrip('_')}={value:g}")
        parts.append(f"uid={self.uid[:8]!r}")
        return f"FunctionEvaluation({', '.join(parts)})"

    __str__ = __repr__

    @model_validator(mode="before")
    @classmethod
    def _machine_at_top(cls, data: Any) -> Any:
        """A failed record as a GPTune file holds it (machine under ``raytuner``) reads with its machine back."""
        return read_record(data)

    @model_validator(mode="after")
    def _outputs_are_numbers(self) -> FunctionEvaluation:
        """A record read as ``ok`` whose outputs are not all finite numbers is a failed one (data kept as read)."""
        if self.status == "ok" and self.evaluation_result:
            _, reason = parse_outputs(self.evaluation_result)
            if reason is not None:
                base = self.raytuner or Provenance()
                self.raytuner = base.model_copy(update={"status": "failed", "failure_message": reason})
        return self

    @property
    def status(self) -> Status:
        """``ok``, ``failed`` or ``pending``; GPTune's own records are ``ok``."""
        return self.raytuner.status if self.raytuner else "ok"

    def value(self, objective: str) -> float | None:
        """The output named ``objective``, or ``None`` when failed or absent.

        Args:
            objective: the output's name.
        """
        if self.status != "ok":
            return None
        return as_number(self.evaluation_result.get(objective))

    def known_value(self, objective: str) -> float:
        """The output named ``objective`` of a record already found to hold it (:meth:`value` is not ``None``).

        Args:
            objective: the output's name.

        Raises:
            ValueError: the record holds no such value after all.
        """
        value = self.value(objective)
        if value is None:
            raise ValueError(f"evaluation {self.uid} holds no value of {objective!r}")
        return value

    def to_dict(self) -> dict[str, Any]:
        """The record as GPTune writes it (plus the ``raytuner`` key when set)."""
        data = self.model_dump(by_alias=True, exclude={"raytuner"})
        if self.raytuner is not None:
            data["raytuner"] = self.raytuner.model_dump(by_alias=True, exclude_none=True)
        return data

    def to_file(self) -> dict[str, Any]:
        """The record as a GPTune file holds it: :meth:`to_dict`, with a failed record's machine under ``raytuner``.

        GPTune's reader passes over a record without a top-level
        ``machine_configuration`` and exits on a null output it loads
        (:mod:`raytuner.problem.gptune_fields`); reading the record back puts its
        machine back.

        Examples:
            >>> failed = FunctionEvaluation.create({"t": 1.0}, {"x": 0.9}, failure="segfault", outputs=["y"],
            ...                                    machine_configuration={"machine_name": "vm"})
            >>> written = failed.to_file()
            >>> "machine_configuration" in written, written["raytuner"]["machine_configuration"]
            (False, {'machine_name': 'vm'})
            >>> FunctionEvaluation.model_validate(written) == failed
            True
        """
        return file_record(self.to_dict())


class SurrogateModelRecord(BaseModel):
    """A trained surrogate's meta-data (a ``surrogate_model`` record).

    GPTune's documentation names the evaluation uids ``func_eval``, its code
    writes ``function_evaluations``: both are read, the latter is written.
    """

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    hyperparameters: Any = None
    modeling_options: dict[str, Any] = Field(default_factory=dict)
    model_stats: dict[str, Any] = Field(default_factory=dict)
    task_parameters: list[list[Any]] = Field(default_factory=list)
    function_evaluations: list[str] = Field(
        default_factory=list, validation_alias=AliasChoices("function_evaluations", "func_eval")
    )
    input_space: list[dict[str, Any]] = Field(default_factory=list)
    parameter_space: list[dict[str, Any]] = Field(default_factory=list)
    output_space: list[dict[str, Any]] = Field(default_factory=list)
    modeler: str = "unknown"
    objective: dict[str, Any] | None = None
    time: GPTuneTime = Field(default_factory=GPTuneTime.now)
    uid: str = Field(default_factory=new_uid, min_length=1)
    #: raytuner's own description of a model it made (see :mod:`raytuner.models.persistence`).
    raytuner: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The record as GPTune writes it (plus the ``raytuner`` key when set)."""
        return self.model_dump(by_alias=True, exclude={"raytuner"} if self.raytuner is None else set())

    def to_file(self) -> dict[str, Any]:
        """The record as a GPTune file holds it: :meth:`to_dict`, every space entry with a ``transformer``.

        GPTune's exact model match reads the ``transformer`` of every entry;
        an entry without one (a model stored before raytuner wrote them) gets
        the one GPTune's drivers declare (:func:`~raytuner.problem.gptune_fields.with_transformers`).

        Examples:
            >>> SurrogateModelRecord(output_space=[{"name": "y", "type": "real"}]).to_file()["output_space"]
            [{'name': 'y', 'type': 'real', 'transformer': 'identity'}]
        """
        data = self.to_dict()
        for key in ("input_space", "parameter_space", "output_space"):
            data[key] = with_transformers(data[key], output=key == "output_space")
        return data

    def __repr__(self) -> str:
        """What a user reads: the modeler, objective, tasks, evaluations, log-likelihood and a short uid.

        >>> SurrogateModelRecord(modeler="Model_LCM", uid="9d1e2f3a-01")
        SurrogateModelRecord(modeler='Model_LCM', tasks=0, evaluations=0, uid='9d1e2f3a')
        """
        parts = [f"modeler={self.modeler!r}"]
        if self.objective and self.objective.get("name"):
            parts.append(f"objective={self.objective['name']!r}")
        parts += [f"tasks={len(self.task_parameters)}", f"evaluations={len(self.function_evaluations)}"]
        likelihood = self.model_stats.get("log_likelihood")
        if isinstance(likelihood, (int, float)):
            parts.append(f"log_likelihood={likelihood:.4g}")
        return f"SurrogateModelRecord({', '.join(parts)}, uid={self.uid[:8]!r})"

    __str__ = __repr__


class HistoryDocument(BaseModel):
    """A whole GPTune history file: one tuning problem's records.

    >>> doc = HistoryDocument(tuning_problem_name="demo")
    >>> sorted(doc.to_dict())
    ['func_eval', 'surrogate_model', 'tuning_problem_category', 'tuning_problem_name']
    """

    model_config = ConfigDict(extra="allow")

    tuning_problem_name: str = Field(min_length=1)
    tuning_problem_category: str | None = None
    surrogate_model: list[SurrogateModelRecord] = Field(default_factory=list)
    func_eval: list[FunctionEvaluation] = Field(default_factory=list)
    #: What reading the file did (its schema, counts, skipped entries, notes); ``None`` when not read from a file.
    read_report: Any = Field(default=None, exclude=True)

    def to_dict(self) -> dict[str, Any]:
        """The file's JSON object, in GPTune's key order, each record as a GPTune file holds it (``to_file``)."""
        extra = {k: v for k, v in (self.model_extra or {}).items()}
        return {
            "tuning_problem_name": self.tuning_problem_name,
            "tuning_problem_category": self.tuning_problem_category,
            **extra,
            "surrogate_model": [m.to_file() for m in self.surrogate_model],
            "func_eval": [e.to_file() for e in self.func_eval],
        }


#: JSON lists of records, parsed and validated in one pass (pydantic-core) rather than loaded then validated.
EVALUATION_LIST: TypeAdapter[list[FunctionEvaluation]] = TypeAdapter(list[FunctionEvaluation])
MODEL_LIST: TypeAdapter[list[SurrogateModelRecord]] = TypeAdapter(list[SurrogateModelRecord])


@runtime_checkable
class EvaluationSource(Protocol):
    """Where transfer learning reads source evaluations from.

    Implementations: :class:`raytuner.store.StoreSource` (a history store,
    JSON or MongoDB, queried by problem name, task ranges, machine and
    software configuration); the crowd repository's client is the other.

    >>> class Fixed:
    ...     def evaluations(self):
    ...         return [FunctionEvaluation.create({"t": 0.8}, {"x": 0.5}, {"y": 1.0})]
    >>> isinstance(Fixed(), EvaluationSource), len(Fixed().evaluations())
    (True, 1)
    """

    def evaluations(self) -> list[FunctionEvaluation]:
        """The source evaluations (failed ones included; users skip them)."""
        ...  # pragma: no cover - protocol
