"""``Engine.admit``: a face's check of a finished evaluation before it stores it; nothing changes."""

from __future__ import annotations

import pytest

from raytuner.engines import MLA
from raytuner.errors import InvalidInputError
from raytuner.models.executors import InlineExecutor
from raytuner.problem.records import FunctionEvaluation
from raytuner.problem.space import ProblemSpace
from raytuner.test_problems import DEMO_PROBLEM

PROBLEM = ProblemSpace.parse(DEMO_PROBLEM)


def _engine() -> MLA:
    return MLA(PROBLEM, [{"t": 1.0}], seed=0, n_initial=2, executor=InlineExecutor())


def test_admit_checks_a_record_and_changes_nothing() -> None:
    engine = _engine()
    s = engine.ask()
    record = FunctionEvaluation.create(s.task, s.config, {"y": 0.5}, uid=s.uid)
    assert engine.admit(record) is record
    assert engine.best() is None and engine.tell(record) is record and engine.best() is not None


def test_a_suggestion_given_to_admit_is_refused_in_one_line_naming_tell() -> None:
    # 0.1's admit took a suggestion and its outputs; 0.2's takes the finished record alone
    engine = _engine()
    with pytest.raises(InvalidInputError) as caught:
        engine.admit(engine.ask())  # type: ignore[arg-type]
    assert caught.value.field == "record" and "tell" in str(caught.value) and "\n" not in str(caught.value)
