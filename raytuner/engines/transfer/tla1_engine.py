"""The engine ``tla1``: GPTune's TLA1 as an engine, so every face can predict a new task's optimum.

It suggests one configuration for its task, TLA1's prediction from the tuned
source tasks (:class:`~raytuner.engines.transfer.TLA1`), and is then
finished: the prediction needs no evaluation (paper 003, section 5.1). A
prediction that breaks one of the problem's constraints (TLA1 models each
parameter alone) is replaced by the nearest of many valid points. The user
may run the prediction and tell the result, which is kept like any
evaluation; a session (a service session of engine ``tla1``, with
``options.source_problem``) waits for that tell before it says it is finished,
and an engine told any evaluation of its task has nothing more to suggest.

Example:
    >>> from raytuner.problem.space import ProblemSpace
    >>> from raytuner.test_problems import DEMO_PROBLEM
    >>> from raytuner.problem.records import FunctionEvaluation
    >>> tuned = [FunctionEvaluation.create({"t": t}, {"x": x / 10}, {"y": (x / 10 - 0.1 * t) ** 2})
    ...          for t in (1.0, 2.0, 3.0, 4.0) for x in range(11)]
    >>> engine = TLA1Engine(ProblemSpace.parse(DEMO_PROBLEM), [{"t": 2.5}], 0, tuned)
    >>> suggestion = engine.ask()
    >>> suggestion.provenance.proposer, bool(abs(suggestion.config["x"] - 0.25) < 0.06)
    ('tla1', True)
    >>> engine.ask()
    Traceback (most recent call last):
    ...
    raytuner.errors.TuningFinished: TLA1 predicted the optimum of {'t': 2.5}; nothing more to suggest
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from raytuner.engines.base import Engine, Suggestion, source_records
from raytuner.engines.transfer.tla import TLA1, OptimumPrediction
from raytuner.errors import InvalidInputError, TuningFinished
from raytuner.models import LCMOptions
from raytuner.models.executors import Executor
from raytuner.problem.records import EvaluationSource, FunctionEvaluation, Provenance
from raytuner.problem.sampling import sample_configurations
from raytuner.problem.space import ProblemSpace

__all__ = ["TLA1Engine", "NEAREST_OF"]

log = logging.getLogger(__name__)

#: How many valid points a prediction that breaks a constraint is replaced by the nearest of.
NEAREST_OF = 2048


class TLA1Engine(Engine):
    """TLA1's prediction for one new task, as an engine (see the module docstring).

    Args:
        problem: The problem's spaces (it needs a task space).
        tasks: The one new task.
        seed: Seeds TLA1's fits and the sample a prediction that breaks a constraint gives way to.
        source: The tuned tasks' evaluations (a list, or an :class:`~raytuner.problem.records.EvaluationSource`).
        objective: The objective whose optima are modelled (default: the first).
        lcm: Configure TLA1's GPs.
        executor: Runs their multi-start fits (default: inline).
    """

    name = "tla1"

    def __init__(
        self,
        problem: ProblemSpace,
        tasks: Sequence[Mapping[str, Any]],
        seed: int | None,
        source: Sequence[FunctionEvaluation] | EvaluationSource,
        *,
        objective: str | None = None,
        lcm: LCMOptions | None = None,
        executor: Executor | None = None,
    ) -> None:
        super().__init__(problem, tasks, seed)
        if len(self.tasks) != 1:
            raise InvalidInputError("tasks", f"TLA1 predicts for one new task, not {len(self.tasks)}")
        self.source = source
        self.executor = executor
        self.tla1 = TLA1(
            problem,
            source_records(problem, source, "TLA1 source"),
            objective=objective,
            lcm=lcm,
            seed=seed,
            executor=executor,
        )
        self._keep_options(objective=objective, lcm=lcm)
        #: The prediction (its configuration and its uncertainty per parameter).
        self.prediction: OptimumPrediction = self.tla1.predict(self.tasks[0])
        self.config = dict(self.prediction.config)
        if not problem.is_valid(self.tasks[0], self.config):
            # TLA1 models each parameter alone, so its optimum may break a constraint: of many valid
            # points, the one nearest it on the unit cube stands in
            rng = np.random.default_rng(np.random.SeedSequence([seed or 0, 104723]))
            valid = sample_configurations(problem, self.tasks[0], NEAREST_OF, seed=rng)
            gaps = np.linalg.norm(problem.parameter_space.encode(valid) - self.prediction.unit_mean, axis=1)
            self.config = valid[int(np.argmin(gaps))]
            log.warning(
                "TLA1's prediction %s breaks a constraint of task %s; suggesting %s, the valid point nearest it of %d",
                self.prediction.config,
                self.tasks[0],
                self.config,
                len(valid),
            )
        self._handed_out = False

    def ask(self, task: Mapping[str, Any] | None = None) -> Suggestion:
        """The predicted optimum, once; then :class:`~raytuner.errors.TuningFinished`.

        Args:
            task: The new task (default: it).
        """
        if task is not None:
            self.task_index(task)
        if self._handed_out:
            raise TuningFinished(f"TLA1 predicted the optimum of {self.tasks[0]}; nothing more to suggest")
        self._handed_out = True
        return Suggestion(
            task=dict(self.tasks[0]), config=dict(self.config), provenance=Provenance(engine=self.name, proposer="tla1")
        )

    def add_pending(
        self, task: Mapping[str, Any], config: Mapping[str, Any], provenance: Provenance | None = None
    ) -> None:
        """The prediction is out (a trial adopted after a restore).

        Args:
            task: The new task.
            config: The configuration handed out.
            provenance: Unused.
        """
        self._handed_out = True

    def _fold(self, record: FunctionEvaluation) -> None:
        self._handed_out = True  # the prediction was run (or something else was): nothing more to say
