"""The ask/tell interface every tuning strategy implements.

A strategy is an in-memory engine rebuilt by replaying the evaluation log:
``tell`` folds one record into its state, and ``ask`` proposes the next
evaluation. Strategies know nothing of Ray, gRPC or databases; the
:class:`raytuner.session.TuningSession` wires one to a store.

Example:
    >>> from raytuner.space import ProblemSpace
    >>> from raytuner.strategies import RandomSearch
    >>> problem = ProblemSpace.parse({
    ...     "input_space": [{"name": "t", "type": "real", "lower_bound": 0, "upper_bound": 10}],
    ...     "parameter_space": [{"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1}]})
    >>> engine = RandomSearch(problem, tasks=[{"t": 1.0}, {"t": 2.0}], seed=0)
    >>> s = engine.ask()
    >>> s.task, 0 <= s.config["x"] <= 1
    ({'t': 1.0}, True)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from raytuner.errors import InvalidInputError
from raytuner.records import FunctionEvaluation, Provenance, SurrogateModelRecord, task_key
from raytuner.space import ProblemSpace

__all__ = ["Suggestion", "Strategy", "task_key"]


@dataclass
class Suggestion:
    """One evaluation to run: the task, the configuration, and where it came from."""

    task: dict[str, Any]
    config: dict[str, Any]
    provenance: Provenance = field(default_factory=Provenance)

    @property
    def fidelity(self) -> float | None:
        """The fidelity to evaluate at (``None`` for single-fidelity strategies)."""
        return self.provenance.fidelity


class Strategy(ABC):
    """An ask/tell tuning engine over a fixed list of tasks.

    Subclasses set :attr:`name` (recorded in every record's provenance and in
    GPTune's ``modeling`` field) and implement :meth:`ask` and :meth:`tell`.
    """

    name: str = "strategy"

    def __init__(self, problem: ProblemSpace, tasks: Sequence[Mapping[str, Any]], seed: int | None = None) -> None:
        if not tasks:
            raise InvalidInputError("tasks", "at least one task is needed")
        self.problem = problem
        self.tasks = [problem.input_space.check(t, f"tasks[{i}]") for i, t in enumerate(tasks)]
        self.seed = seed

    def task_index(self, task: Mapping[str, Any]) -> int:
        """Position of ``task`` in :attr:`tasks`."""
        key = task_key(task)
        for i, t in enumerate(self.tasks):
            if task_key(t) == key:
                return i
        raise InvalidInputError("task", f"{dict(task)} is not one of the strategy's tasks", allowed=self.tasks)

    @abstractmethod
    def ask(self, task: Mapping[str, Any] | None = None) -> Suggestion:
        """Propose the next evaluation, for ``task`` when given."""

    @abstractmethod
    def tell(self, record: FunctionEvaluation) -> None:
        """Fold one finished (or failed) evaluation into the state."""

    def add_pending(self, task: Mapping[str, Any], config: Mapping[str, Any],
                    provenance: Provenance | None = None) -> None:
        """Treat ``config`` as asked and not yet told (a trial adopted after a restore).

        ``provenance`` is what the strategy wrote when it asked (its bracket
        and rung, for a multi-fidelity engine).
        """

    def take_models(self) -> list[SurrogateModelRecord]:
        """Surrogate-model records made since the last call (the session stores them)."""
        return []

    def restore_models(self, models: Sequence[SurrogateModelRecord]) -> None:
        """Take back stored surrogate models (a model-based engine warm-starts from the last one)."""

    def replay(self, records: Iterable[FunctionEvaluation]) -> int:
        """Rebuild the state from a log; returns how many records were folded in."""
        n = 0
        for record in records:
            self.tell(record)
            n += 1
        return n
