"""The ask/tell interface every tuning engine implements.

An engine keeps its state in memory and rebuilds it by replaying the evaluation log:
``tell`` folds one record into its state, and ``ask`` proposes the next
evaluation. Engines know nothing of Ray, gRPC or databases; the
:class:`raytuner.session.tuning_session.TuningSession` wires one to a store.

Example:
    >>> from raytuner.problem.space import ProblemSpace
    >>> from raytuner.engines import RandomSearch
    >>> from raytuner.test_problems import DEMO_PROBLEM
    >>> problem = ProblemSpace.parse(DEMO_PROBLEM)
    >>> engine = RandomSearch(problem, tasks=[{"t": 1.0}, {"t": 2.0}], seed=0)
    >>> s = engine.ask()
    >>> s.task, 0 <= s.config["x"] <= 1
    ({'t': 1.0}, True)

Every engine checks what it is told, in one place (:meth:`Engine.tell`): a
record whose task or configuration lies outside the problem is refused with
the field and the allowed values, and nothing of it enters the engine.

    >>> engine.tell(FunctionEvaluation.create({"t": 1.0}, {"x": 7.0}, {"y": 1.0}))
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: tuning_parameter.x: 7.0 is outside [0, 1]
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from raytuner.engines.spec import EngineSpec, plain_options
from raytuner.errors import InvalidInputError, TrialConflict
from raytuner.models.executors import Executor, refuse_unguarded_script
from raytuner.problem.outcome import result_failure
from raytuner.problem.pareto import best_of
from raytuner.problem.records import (
    EvaluationSource,
    FunctionEvaluation,
    Provenance,
    SurrogateModelRecord,
    new_uid,
    task_key,
)
from raytuner.problem.space import ProblemSpace

__all__ = ["Suggestion", "Engine", "task_key", "check_record", "fitting_records", "source_records", "other_tasks"]

log = logging.getLogger(__name__)


def check_record(problem: ProblemSpace, record: FunctionEvaluation) -> None:
    """Raise :class:`InvalidInputError` unless ``record`` fits ``problem``.

    The task must lie in the input space and the configuration in the
    parameter space (bounds, integers, categories, every name and no other),
    and together they must meet every constraint: raytuner's constraints are
    hard (samplers and acquisition searches never propose a point that
    breaks one). A failed record is checked like any other: its
    configuration came from the space, and engines remember it (it is never
    suggested again), so a point outside the space must not enter them
    either.

    Args:
        problem: The problem the record must fit.
        record: The evaluation to check.

    >>> problem = ProblemSpace.parse({
    ...     "parameter_space": [{"name": "alg", "type": "categorical", "categories": ["lu", "qr"]}]})
    >>> check_record(problem, FunctionEvaluation.create({}, {"alg": "svd"}, failure="crash"))
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: tuning_parameter.alg: 'svd' is not a category (allowed: lu, qr)
    """
    problem.check(record.task_parameter, record.tuning_parameter)


def source_records(
    problem: ProblemSpace, source: Iterable[FunctionEvaluation] | EvaluationSource, what: str = "source"
) -> list[FunctionEvaluation]:
    """The records of ``source`` (a list or an :class:`~raytuner.problem.records.EvaluationSource`, read once) that fit.

    Args:
        problem: The problem the records must fit (see :func:`fitting_records`).
        source: The source records, or where to read them.
        what: What they are, for the warning about those that do not fit.
    """
    if isinstance(source, EvaluationSource):
        records = list(source.evaluations())
    elif isinstance(source, (str, bytes, Mapping)) or not isinstance(source, Iterable):
        raise InvalidInputError(
            "source",
            f"a {type(source).__name__}; give evaluation records, or an "
            "EvaluationSource such as raytuner.store.StoreSource(store, problem)",
        )
    else:
        records = list(source)
        if not all(isinstance(r, FunctionEvaluation) for r in records):
            raise InvalidInputError("source", "every item must be a FunctionEvaluation record")
    return fitting_records(problem, records, what)


def other_tasks(records: Iterable[FunctionEvaluation], tasks: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The tasks of the successful ``records`` that are not among ``tasks``, in order of first appearance.

    Args:
        records: Source evaluations.
        tasks: The tasks already known.

    >>> records = [FunctionEvaluation.create({"t": t}, {"x": 0.5}, {"y": 1.0}) for t in (2.0, 1.0, 3.0, 2.0)]
    >>> other_tasks(records, [{"t": 1.0}])
    [{'t': 2.0}, {'t': 3.0}]
    """
    seen = {task_key(t) for t in tasks}
    out: list[dict[str, Any]] = []
    for record in records:
        key = task_key(record.task_parameter)
        if record.status == "ok" and key not in seen:
            seen.add(key)
            out.append(dict(record.task_parameter))
    return out


def fitting_records(
    problem: ProblemSpace, records: Iterable[FunctionEvaluation], what: str = "history"
) -> list[FunctionEvaluation]:
    """The records that fit ``problem``; the others are skipped with one warning that counts them.

    History (a store replayed on resume, transfer-learning sources, imported
    GPTune files) may hold records of another version of the problem; they
    are left out rather than refused.

    Args:
        problem: The problem the records must fit (see :func:`check_record`).
        records: The records, in log order.
        what: What the records are, for the warning (``"history"``, ``"source"``, ...).

    >>> from raytuner.test_problems import DEMO_PROBLEM
    >>> problem = ProblemSpace.parse(DEMO_PROBLEM)
    >>> records = [FunctionEvaluation.create({"t": 1.0}, {"x": x}, {"y": 1.0}) for x in (0.5, 2.0, 3.0)]
    >>> [r.tuning_parameter["x"] for r in fitting_records(problem, records)]
    [0.5]
    """
    kept: list[FunctionEvaluation] = []
    refused: list[InvalidInputError] = []
    for record in records:
        try:
            check_record(problem, record)
        except InvalidInputError as exc:
            refused.append(exc)
            continue
        kept.append(record)
    if refused:
        log.warning(
            "skipped %d of %d %s records that do not fit the problem (first: %s)",
            len(refused),
            len(refused) + len(kept),
            what,
            refused[0],
        )
    return kept


@dataclass
class Suggestion:
    """One evaluation to run: the task, the configuration, and where it came from.

    ``uid`` is the uid of the record that telling it makes, so an engine knows a suggestion told before.
    """

    task: dict[str, Any]
    config: dict[str, Any]
    provenance: Provenance = field(default_factory=Provenance)
    uid: str = field(default_factory=new_uid, compare=False, repr=False)

    @property
    def fidelity(self) -> float | None:
        """The fidelity to evaluate at (``None`` for single-fidelity engines)."""
        return self.provenance.fidelity


def _retold(earlier: FunctionEvaluation, again: FunctionEvaluation) -> FunctionEvaluation:
    """``earlier`` when ``again`` (the same suggestion told again) has its result, else :class:`TrialConflict`.

    The same result is the same status and the same outputs (a failure's message may differ), as a
    session judges a retried tell of a trial.
    """
    if again.status == earlier.status and again.evaluation_result == earlier.evaluation_result:
        return earlier
    raise TrialConflict(
        f"suggestion: suggestion {earlier.uid} was told before with another result "
        f"({earlier.status}: {earlier.evaluation_result}); tell it again only with the same result"
    )


class Engine(ABC):
    """An ask/tell tuning engine over a fixed list of tasks.

    Subclasses set :attr:`name` (the name the registry builds them by, recorded
    in every record's provenance and in GPTune's ``modeling`` field), keep their options with :meth:`_keep_options` and
    implement :meth:`ask` and :meth:`_fold`; :meth:`tell` checks a record and
    then folds it, so every engine refuses the same bad input with the same
    message.

    Args:
        problem: The problem's spaces.
        tasks: The tasks to tune (at least one), each checked against the input space.
        seed: Seeds every random stream of the engine.
    """

    #: The name :func:`raytuner.engines.build_engine` builds this engine by (its :attr:`spec`'s name).
    name: str = "engine"
    #: Runs the engine's model fits (``None``: the engine has none, or picks the default).
    executor: Executor | None = None
    #: The source data the engine transfers from (``None``: it transfers from nothing).
    source: Any = None

    def __init__(self, problem: ProblemSpace, tasks: Sequence[Mapping[str, Any]], seed: int | None = None) -> None:
        refuse_unguarded_script()  # a worker re-running a script that tunes at its top level stops here
        if not tasks:
            raise InvalidInputError("tasks", "at least one task is needed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
            raise InvalidInputError("seed", f"{seed!r} is not a seed: a whole number >= 0, or none")
        self.problem = problem
        self.tasks = [problem.input_space.check(t, f"tasks[{i}]") for i, t in enumerate(tasks)]
        self.seed = seed
        self._spec_options: dict[str, Any] = {}
        self._new_models: list[SurrogateModelRecord] = []  # fitted, not yet taken by the session
        self._told_uids: set[str] = set()  # every record told or replayed
        self._told_suggestions: dict[str, FunctionEvaluation] = {}  # by uid: the records told as suggestions
        self._evaluations: list[FunctionEvaluation] = []  # every record told or replayed, oldest first

    def _keep_options(self, **options: Any) -> None:
        """Remember the options the engine was built with, as plain data (its :attr:`spec`).

        Args:
            **options: Every keyword option of the constructor but the executor and the source.
        """
        self._spec_options = {**self._spec_options, **plain_options(options)}

    @property
    def spec(self) -> EngineSpec:
        """The registered name and the options this engine was built with (executor and source aside).

        ``build_engine(engine.spec, engine.problem, engine.spec_tasks, engine.seed, executor=...,
        source=...)`` builds a fresh engine that makes the same suggestions
        (:func:`raytuner.engines.fresh_engine` does exactly that).
        """
        return EngineSpec(self.name, dict(self._spec_options))

    @property
    def spec_tasks(self) -> list[dict[str, Any]]:
        """The tasks :func:`raytuner.engines.build_engine` takes to build this engine again (its :attr:`tasks`)."""
        return [dict(t) for t in self.tasks]

    def task_index(self, task: Mapping[str, Any]) -> int:
        """Position of ``task`` in :attr:`tasks`.

        Args:
            task: One of the engine's tasks.
        """
        key = task_key(task)
        for i, t in enumerate(self.tasks):
            if task_key(t) == key:
                return i
        raise InvalidInputError("task", f"{dict(task)} is not one of the engine's tasks", allowed=self.tasks)

    @abstractmethod
    def ask(self, task: Mapping[str, Any] | None = None) -> Suggestion:
        """Propose the next evaluation, for ``task`` when given.

        Args:
            task: Restrict the suggestion to this task (default: the engine's choice).
        """

    def tell(
        self,
        told: FunctionEvaluation | Suggestion,
        outputs: Mapping[str, Any] | None = None,
        *,
        failure: str | None = None,
        additional_output: Mapping[str, Any] | None = None,
    ) -> FunctionEvaluation:
        """Fold one finished (or failed) evaluation into the state; returns the record folded in.

        Tell either the suggestion with what the evaluation reported
        (``engine.tell(suggestion, {"y": 0.3})``; a failure is
        ``engine.tell(suggestion, None, failure="out of memory")``, and
        outputs of ``None``, NaN or text make a failed record with the
        reason), or a finished :class:`FunctionEvaluation` (a stored record).
        Nothing is dropped without a word: a record that belongs to no task
        of the engine, that was told already, or that the engine cannot
        place (see :meth:`_admit`) is refused. A suggestion told again with the
        same result (the same outputs, or a failure both times) is a retry,
        answered with the first record and folded in once; with another result
        it is refused with :class:`~raytuner.errors.TrialConflict`.

        Args:
            told: A suggestion this engine made, or a finished evaluation; its task and
                configuration must fit the problem (see :func:`check_record`).
            outputs: With a suggestion: output names to reported values (``None``: nothing reported).
            failure: With a suggestion: why the evaluation failed (its outputs are then ignored).
            additional_output: With a suggestion: extra values kept with the record (not modelled).

        Raises:
            InvalidInputError: The record lies outside the problem, belongs to no task of the
                engine, was told before, or cannot be placed; the error names the field and the
                allowed values, and the engine's state is unchanged.
            TrialConflict: The suggestion was told before with another result (state unchanged).

        >>> from raytuner.test_problems import DEMO_PROBLEM
        >>> from raytuner.engines import RandomSearch
        >>> engine = RandomSearch(ProblemSpace.parse(DEMO_PROBLEM), tasks=[{"t": 1.0}], seed=0)
        >>> engine.tell(engine.ask(), {"y": None}).raytuner.failure_message
        'y: no value'
        """
        if isinstance(told, Suggestion):
            record = FunctionEvaluation.create(
                told.task,
                told.config,
                outputs,
                failure=failure or result_failure(self.problem, outputs),
                provenance=told.provenance,
                outputs=self.problem.objectives,
                additional_output=additional_output,
                uid=told.uid,
            )
            earlier = self._told_suggestions.get(told.uid)
            if earlier is not None:  # the same suggestion and result again: a retry, answered with the first record
                return _retold(earlier, record)
        elif not isinstance(told, FunctionEvaluation):
            raise InvalidInputError("told", f"{type(told).__name__} is neither a Suggestion nor a FunctionEvaluation")
        elif outputs is not None or failure is not None or additional_output is not None:
            raise InvalidInputError(
                "outputs",
                "a FunctionEvaluation carries its own outputs: give outputs, "
                "failure and additional_output only with a Suggestion",
            )
        else:
            record = told
        record = self.admit(record)
        self._fold(record)
        self._told_uids.add(record.uid)
        self._evaluations.append(record)
        if isinstance(told, Suggestion):
            self._told_suggestions[record.uid] = record
        return record

    def admit(self, record: FunctionEvaluation) -> FunctionEvaluation:
        """The record :meth:`tell` would fold in for ``record``, checked, and nothing changed (a face checks
        before it stores).

        Args:
            record: A finished evaluation.

        Raises:
            InvalidInputError: As for :meth:`tell`, or ``record`` is no :class:`FunctionEvaluation` (a
                suggestion's result is told with :meth:`tell`, which builds its record).
        """
        if not isinstance(record, FunctionEvaluation):
            raise InvalidInputError(
                "record",
                f"admit takes a finished FunctionEvaluation, not a {type(record).__name__}: "
                "tell a suggestion and its outputs with tell, or build the record with FunctionEvaluation.create",
            )
        check_record(self.problem, record)
        self.task_index(record.task_parameter)
        if record.uid in self._told_uids:
            raise InvalidInputError("uid", f"record {record.uid} was told to this engine already")
        return self._admit(record)

    def _admit(self, record: FunctionEvaluation) -> FunctionEvaluation:
        """The record to fold for a checked ``record`` of one of the engine's tasks (it as it is, by default).

        An engine that places evaluations in a plan (GPTuneBand) matches a
        record that lacks its place to a suggestion in flight, or refuses it.

        Args:
            record: The checked record.
        """
        return record

    @abstractmethod
    def _fold(self, record: FunctionEvaluation) -> None:
        """Fold one checked evaluation into the state (each engine's own part of :meth:`tell`)."""

    def add_pending(  # noqa: B027 (an optional hook: nothing by default)
        self,
        task: Mapping[str, Any],
        config: Mapping[str, Any],
        provenance: Provenance | None = None,
    ) -> None:
        """Treat ``config`` as asked and not yet told (a trial adopted after a restore).

        ``provenance`` is what the engine wrote when it asked (its bracket
        and rung, for a multi-fidelity engine).

        Args:
            task: The trial's task.
            config: Its configuration.
            provenance: What the engine wrote when it asked.
        """

    def take_models(self) -> list[SurrogateModelRecord]:
        """Surrogate-model records made since the last call (the session stores them)."""
        models, self._new_models = self._new_models, []
        return models

    def restore_models(self, models: Sequence[SurrogateModelRecord], fixed: bool = False) -> None:  # noqa: B027 (an optional hook: nothing by default)
        """Take back stored surrogate models (a model-based engine warm-starts from the last one).

        Args:
            models: The stored surrogate-model records, oldest first.
            fixed: Use the last matching model as it is, never re-fitting its hyperparameters
                (GPTune's ``load_surrogate_model``); an engine without a model ignores it.
        """

    def replay(self, records: Iterable[FunctionEvaluation]) -> int:
        """Rebuild the state from a log; returns how many records were folded in.

        Records that do not fit the problem are skipped with one warning that
        counts them (see :func:`fitting_records`), not refused.

        Args:
            records: The log, oldest first.
        """
        kept = fitting_records(self.problem, records, f"{self.name} replay")
        for record in kept:
            self._fold(record)
            self._told_uids.add(record.uid)
            self._evaluations.append(record)
        return len(kept)

    def best(self, task: Mapping[str, Any] | None = None, objective: str | None = None) -> FunctionEvaluation | None:
        """The best evaluation told of ``task``, or ``None`` while none counts (see :func:`raytuner.problem.pareto.best_of`).

        Every engine and :meth:`raytuner.session.tuning_session.TuningSession.best` answer the same way: the
        evaluation (a :class:`FunctionEvaluation`) that succeeded, meets every output constraint and
        is best in ``objective``. GPTuneBand counts only evaluations at ``b_max``.

        Args:
            task: One of the engine's tasks (default: its first).
            objective: The objective's name (default: the one the engine tunes, else the problem's first).

        >>> from raytuner.test_problems import DEMO_PROBLEM
        >>> from raytuner.engines import RandomSearch
        >>> engine = RandomSearch(ProblemSpace.parse(DEMO_PROBLEM), tasks=[{"t": 1.0}], seed=0)
        >>> for y in (3.0, 1.0, 2.0):
        ...     _ = engine.tell(engine.ask(), {"y": y})
        >>> engine.best().evaluation_result, engine.best_per_task()[0].evaluation_result
        ({'y': 1.0}, {'y': 1.0})
        """
        return best_of(self.problem, self._evaluations, self._best_task(task), self._best_objective(objective))

    def best_per_task(self, objective: str | None = None) -> list[FunctionEvaluation | None]:
        """:meth:`best` of each of the engine's own tasks, in their order.

        Args:
            objective: The objective's name (default: the problem's first).
        """
        return [self.best(task, objective) for task in self.spec_tasks]

    def _best_objective(self, objective: str | None) -> str | None:
        """``objective``, or by default the one the engine tunes (its ``objective``, where it has one)."""
        return objective if objective is not None else getattr(getattr(self, "objective", None), "name", None)

    def _best_task(self, task: Mapping[str, Any] | None) -> Mapping[str, Any]:
        """``task`` checked to be one of the engine's own tasks (default: the first)."""
        if task is None:
            return self.spec_tasks[0]
        self.task_index(task)  # refuses a task the engine does not tune, naming its tasks
        return task
