"""Short tuning sessions on GPTune's demo function, for the tests that read back what a session stored.

Example:
    >>> from raytuner.engines import MLA
    >>> from raytuner.models.executors import InlineExecutor
    >>> from raytuner.store import JsonStore
    >>> from raytuner.problem.space import ProblemSpace
    >>> from raytuner.test_problems import DEMO_PROBLEM
    >>> import tempfile
    >>> problem = ProblemSpace.parse(DEMO_PROBLEM)
    >>> engine = MLA(problem, [{"t": 1.0}], seed=0, n_initial=2, executor=InlineExecutor())
    >>> with tempfile.TemporaryDirectory() as folder, JsonStore(folder) as store:
    ...     len(tune_demo(problem, engine, store, "demo", 3).evaluations("demo"))
    3
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from raytuner.engines import Engine, GPTuneBand
from raytuner.problem.space import ProblemSpace
from raytuner.session.tuning_session import Trial, TuningSession
from raytuner.store import JsonStore
from raytuner.test_problems import demo_fidelity

B_MAX = 4.0


def demo_value(trial: Trial) -> dict[str, float]:
    """The demo function at the trial's task, configuration and fidelity (``b_max`` :data:`B_MAX`; none: exact).

    Args:
        trial: A trial of GPTune's demo problem.
    """
    return {"y": demo_fidelity(trial.config["x"], trial.task["t"], b=trial.fidelity or B_MAX, b_max=B_MAX)}


def tune_demo(
    problem: ProblemSpace,
    engine: Engine,
    store: JsonStore,
    name: str,
    evaluations: int | None = None,
    value: Callable[[Trial], Mapping[str, float]] = demo_value,
) -> JsonStore:
    """Tell ``engine`` ``value`` of each trial until ``evaluations`` are told (``None``: a GPTuneBand is
    finished), in a session on ``store``, and compact the problem's file; the store.

    Args:
        problem: The engine's problem.
        engine: The engine.
        store: The store the session writes.
        name: The problem's name in the store.
        evaluations: How many evaluations to tell (``None``: until ``engine``, a GPTuneBand, is finished).
        value: The outputs of a trial (default: :func:`demo_value`).
    """
    session = TuningSession(problem, engine, store, name)
    told = 0
    while not engine.finished if isinstance(engine, GPTuneBand) and evaluations is None else told < (evaluations or 0):
        trial = session.ask()
        session.tell(trial, dict(value(trial)))
        told += 1
    store.compact(name)
    return store
