"""Random search: the baseline every model-based engine must beat.

Each suggestion is one uniformly drawn configuration that meets the
constraints for its task and repeats no configuration already seen for that
task. Tasks take turns (fewest evaluations first). The random stream of a
suggestion is derived from the seed, the task and the number of evaluations
of that task already told, so an engine rebuilt by replaying the log makes the
same next suggestion as one that never stopped.

Example:
    >>> from raytuner.problem.space import ProblemSpace
    >>> from raytuner.test_problems import DEMO_PROBLEM
    >>> problem = ProblemSpace.parse(DEMO_PROBLEM)
    >>> a = RandomSearch(problem, tasks=[{"t": 1.0}], seed=3).ask().config
    >>> b = RandomSearch(problem, tasks=[{"t": 1.0}], seed=3).ask().config
    >>> a == b
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from raytuner.engines.base import Engine, Suggestion, task_key
from raytuner.problem.records import FunctionEvaluation, Provenance
from raytuner.problem.sampling import ConfigurationSet, sample_configurations

__all__ = ["RandomSearch"]


class RandomSearch(Engine):
    """Uniform random search over the valid configurations of each task.

    Args:
        problem: The problem's spaces.
        tasks: The tasks to tune.
        seed: Seeds every draw.
    """

    name = "random"

    def __init__(self, problem: Any, tasks: Any, seed: int | None = None) -> None:
        super().__init__(problem, tasks, seed)
        self._seen = [ConfigurationSet() for _ in self.tasks]
        self._pending: list[int] = [0 for _ in self.tasks]

    def _next_task(self) -> int:
        counts = [len(seen) + pending for seen, pending in zip(self._seen, self._pending)]
        return int(np.argmin(counts))

    def ask(self, task: Mapping[str, Any] | None = None) -> Suggestion:
        """A fresh valid configuration for ``task`` (or for the least-evaluated task).

        Args:
            task: The task (default: the least-evaluated task).
        """
        index = self._next_task() if task is None else self.task_index(task)
        stream = np.random.SeedSequence([self.seed or 0, index, len(self._seen[index]), self._pending[index]])
        config = sample_configurations(
            self.problem, self.tasks[index], 1, seed=np.random.default_rng(stream), exclude=self._seen[index]
        )[0]
        self._pending[index] += 1
        return Suggestion(task=dict(self.tasks[index]), config=config, provenance=Provenance(engine=self.name))

    def add_pending(
        self, task: Mapping[str, Any], config: Mapping[str, Any], provenance: Provenance | None = None
    ) -> None:
        """Count a trial in flight, adopted after a restart, as pending for its task.

        Args:
            task: The task the adopted trial runs.
            config: What it runs (random draws need only the count).
            provenance: Ignored.
        """
        self._pending[self.task_index(task)] += 1

    def _fold(self, record: FunctionEvaluation) -> None:
        """Remember the evaluated configuration so it is not proposed again."""
        key = task_key(record.task_parameter)
        for i, t in enumerate(self.tasks):
            if task_key(t) == key:
                self._seen[i].append(record.tuning_parameter)
                self._pending[i] = max(0, self._pending[i] - 1)
                return
