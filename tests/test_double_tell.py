"""Every engine refuses a suggestion told twice with another result (issue 53, item 8).

``Engine.tell(suggestion, outputs)`` gives the record the suggestion's uid, so the engine knows a suggestion
told before: told again with another result (other outputs, or a failure instead of outputs) it raises one
:class:`~raytuner.errors.TrialConflict` line naming the suggestion and the first record, and the engine's state
is unchanged; told again with the same result it is a retry, answered with the first record and folded in once
(as :class:`~raytuner.session.tuning_session.TuningSession` answers a retried tell of a trial). Every engine of the registry
is tried: RandomSearch, MLA, multi-objective MLA, DiscreteBO, TLA1, TLA2, TransferLearning and GPTuneBand.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from test_engine_checks import ENGINES, FAST, PROBLEM, TASK, runtime, source_records, state

from raytuner.engines import Engine
from raytuner.engines.multiobjective import MultiObjectiveMLA
from raytuner.engines.transfer import TLA1Engine
from raytuner.errors import TrialConflict
from raytuner.models.executors import InlineExecutor
from raytuner.problem.records import FunctionEvaluation
from raytuner.problem.space import ProblemSpace

TWO_OUTPUTS = ProblemSpace.parse({**PROBLEM.model_dump(), "output_space": [{"name": "runtime"}, {"name": "memory"}]})

#: Every engine kind, built fresh: those of test_engine_checks, TLA1 and multi-objective MLA.
BUILDERS: dict[str, Callable[[], Engine]] = {
    **ENGINES,
    "tla1": lambda: TLA1Engine(PROBLEM, [TASK], 0, source_records(), lcm=FAST, executor=InlineExecutor()),
    "multiobjective": lambda: MultiObjectiveMLA(
        TWO_OUTPUTS, [TASK], seed=0, n_initial=3, lcm=FAST, executor=InlineExecutor()
    ),
}


def outputs(engine: Engine, config: dict, shift: float = 0.0) -> dict[str, float]:
    value = runtime(TASK, config) + shift
    return {name: value for name in engine.problem.objectives}


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_a_second_tell_with_another_result_is_refused_in_one_line(kind: str) -> None:
    engine = BUILDERS[kind]()
    suggestion = engine.ask()
    record = engine.tell(suggestion, outputs(engine, suggestion.config))
    assert record.uid == suggestion.uid
    before = state(engine)

    for other, failure in ((outputs(engine, suggestion.config, 1.0), None), (None, "out of memory")):
        with pytest.raises(TrialConflict) as info:
            engine.tell(suggestion, other, failure=failure)
        message = str(info.value)
        assert "\n" not in message
        assert message.startswith(f"suggestion: suggestion {suggestion.uid} was told before with another result")
        assert record.uid in message
        assert state(engine) == before  # nothing folded in, nothing changed


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_the_same_result_again_is_a_retry_answered_with_the_first_record(kind: str) -> None:
    engine = BUILDERS[kind]()
    suggestion = engine.ask()
    first = engine.tell(suggestion, outputs(engine, suggestion.config))
    before = state(engine)
    assert engine.tell(suggestion, outputs(engine, suggestion.config)) is first
    assert state(engine) == before

    engine = BUILDERS[kind]()  # a fresh one: TLA1 makes one suggestion only
    failed = engine.ask()
    record = engine.tell(failed, None, failure="out of memory")
    assert engine.tell(failed, None, failure="killed by the scheduler") is record  # failed both times: the same
    with pytest.raises(TrialConflict):
        engine.tell(failed, outputs(engine, failed.config))


def test_a_record_told_twice_is_still_refused_as_bad_input() -> None:
    """A stored record (a FunctionEvaluation, not a suggestion) told twice keeps its InvalidInputError."""
    engine = BUILDERS["random"]()
    suggestion = engine.ask()
    record = FunctionEvaluation.create(suggestion.task, suggestion.config, outputs(engine, suggestion.config))
    engine.tell(record)
    with pytest.raises(ValueError, match=f"^uid: record {record.uid} was told to this engine already$"):
        engine.tell(record)
