"""The ask/tell loop the benchmarks drive an engine with, task by task to a fixed number of evaluations.

Example:
    >>> from raytuner.problem.space import ProblemSpace
    >>> from raytuner.engines import RandomSearch
    >>> from raytuner.test_problems import DEMO_PROBLEM, demo
    >>> engine = RandomSearch(ProblemSpace.parse(DEMO_PROBLEM), [{"t": 1.0}, {"t": 2.0}], seed=0)
    >>> drive_tasks(engine, 3, lambda task, config: demo(config["x"], task["t"]), "y").shape
    (2, 3)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from raytuner.engines import Engine
from raytuner.problem.records import FunctionEvaluation

__all__ = ["drive_tasks"]

log = logging.getLogger(__name__)


def drive_tasks(
    engine: Engine, evaluations: int, objective: Callable[[Mapping[str, Any], Mapping[str, Any]], float], output: str
) -> np.ndarray:
    """Ask/tell ``engine`` until each of its tasks has ``evaluations`` values; (tasks, evaluations).

    The engine balances the tasks; where it proposes a task that has its
    values already, the first task short of them is asked for instead.

    Args:
        engine: the engine to drive.
        evaluations: how many values each task gets.
        objective: ``(task, config) -> value``.
        output: the output's name in the records told.
    """
    history: list[list[float]] = [[] for _ in engine.tasks]
    while needy := [i for i, h in enumerate(history) if len(h) < evaluations]:
        suggestion = engine.ask()
        index = engine.task_index(suggestion.task)
        if len(history[index]) >= evaluations:
            log.warning(
                "%s proposed task %s, which has its %d evaluations; asking for task %s instead",
                engine.name,
                suggestion.task,
                evaluations,
                engine.tasks[needy[0]],
            )
            index = needy[0]
            suggestion = engine.ask(engine.tasks[index])
        value = objective(suggestion.task, suggestion.config)
        engine.tell(
            FunctionEvaluation.create(
                suggestion.task, suggestion.config, {output: value}, provenance=suggestion.provenance
            )
        )
        history[index].append(value)
    return np.array(history, dtype=float)
