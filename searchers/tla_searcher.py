"""TransferLearningSearcher and TLA2Searcher: transfer learning from source tasks as Ray Tune searchers.

:class:`TLA2Searcher` tunes a new target task with GPTune's TLA2
(:class:`raytuner.engines.transfer.TLA2`): its first samples around TLA1's
prediction, its model the source tasks' LCM extended by the new task.

The searcher tunes one **target** task with
:class:`raytuner.engines.transfer.TransferLearning`: the source
evaluations (other tasks, machines or software versions, read from a
:class:`~raytuner.engines.transfer.SourceData`, a list of
:class:`~raytuner.problem.records.FunctionEvaluation` or any
:class:`~raytuner.problem.records.EvaluationSource` such as
:class:`raytuner.store.StoreSource`) shape every suggestion, from the first
one on. Each record's ``modeling`` field names the algorithm that proposed
it (``"weighted_sum_equal"`` while the target has no data; for an ensemble,
the pool member it drew).

Trial configs are **flat**, as for every raytuner searcher: the target's task
parameters and the tuning parameters side by side (``{"t": 1.0, "x": 0.42}``).
Every result is persisted to the history store before the next suggestion; a
trial that errors or reports no metric becomes a failed evaluation. With
``max_concurrent_trials`` set, the trials in flight are pending points of the
engine. Only the target's evaluations go to ``problem_name``; the source is
read, never written.

Example:
    >>> import random, tempfile
    >>> from ray import tune
    >>> from raytuner.problem.records import FunctionEvaluation
    >>> from raytuner.problem.space import ProblemSpace
    >>> from raytuner.test_problems import DEMO_PROBLEM, demo
    >>> rng = random.Random(0)
    >>> source = [FunctionEvaluation.create({"t": 0.8}, {"x": x}, {"y": demo(x, 0.8)})
    ...           for x in (rng.random() for _ in range(40))]
    >>> searcher = TransferLearningSearcher(ProblemSpace.parse(DEMO_PROBLEM), {"t": 1.0}, source,
    ...                        store=tempfile.mkdtemp(), problem_name="demo-target", seed=0)
    >>> searcher.engine.algorithm, searcher.metric, searcher.mode
    ('ensemble', 'y', 'min')
    >>> def trainable(config):
    ...     tune.report({"y": demo(config["x"], config["t"])})
    >>> tune.run(trainable, search_alg=searcher, num_samples=10, max_concurrent_trials=2)  # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Generic, TypeVar

from raytuner.searchers.engine_searcher import EngineSearcher, registered_engine

from raytuner.engines.transfer import TLA2, SourceData, TransferLearning
from raytuner.models.executors import Executor
from raytuner.problem.records import EvaluationSource, FunctionEvaluation
from raytuner.problem.space import ProblemSpace
from raytuner.store import HistoryStore

__all__ = ["TransferLearningSearcher", "TLA2Searcher"]


SourceT = TypeVar("SourceT")


class _TargetTaskSearcher(EngineSearcher, Generic[SourceT]):
    """A searcher of one target task that the engine named :attr:`engine_name` tunes from ``source``."""

    #: The registered engine (:data:`raytuner.engines.ENGINES`) given the target task and the source.
    engine_name: ClassVar[str]
    task_argument = "target_task"

    def __init__(
        self,
        problem: ProblemSpace,
        target_task: Mapping[str, Any],
        source: SourceT,
        store: HistoryStore | str | os.PathLike[str],
        problem_name: str,
        metric: str | None = None,
        mode: str | None = None,
        seed: int | None = None,
        *,
        engine_options: Mapping[str, Any] | None = None,
        executor: Executor | None = None,
        **session_options: Any,
    ) -> None:
        engine = registered_engine(
            self.engine_name, problem, [target_task], seed, metric, engine_options, executor=executor, source=source
        )
        super().__init__(problem, engine, store, problem_name, metric=metric, mode=mode, **session_options)


class TransferLearningSearcher(_TargetTaskSearcher[SourceData | Sequence[FunctionEvaluation] | EvaluationSource]):
    """Transfer learning to ``target_task`` from ``source``, for ``tune.run`` and ``Tuner``.

    The engine is :class:`raytuner.engines.transfer.TransferLearning`: its
    ``algorithm`` is one of :data:`raytuner.engines.transfer.ALGORITHMS`
    (default ``"ensemble"``, drawing from its ``pool``). Stored evaluations of
    the target task under ``problem_name`` are replayed first, so a new
    searcher continues an old run.

    Args:
        problem: The problem's spaces (source and target share them).
        target_task: The one task tuned.
        source: The source evaluations (read, never written).
        store: Where the target's evaluations go: a :class:`~raytuner.store.HistoryStore` or its location.
        problem_name: The target's problem name in the store.
        metric: The objective Ray reports (the first one when ``None``).
        mode: Ray's ``"min"``/``"max"``; it follows the objective's goal.
        seed: The engine's seed.
        engine_options: :class:`~raytuner.engines.transfer.TransferLearning`'s keyword options
            (``algorithm``, ``pool``, ``weights``, ``candidates``, ``options``, ``acquisition``,
            ``acquisition_options``, ``search_candidates``); an unknown name is refused in one line.
        executor: Runs the model fits.
        **session_options: Options of the :class:`~raytuner.session.tuning_session.TuningSession`.
    """

    engine_name = "transfer"

    @property
    def engine(self) -> TransferLearning:
        """The session's transfer-learning engine (a new one after :meth:`restore`)."""
        return self.session.engine


class TLA2Searcher(_TargetTaskSearcher[Sequence[FunctionEvaluation] | EvaluationSource]):
    """GPTune's TLA2 tuning ``target_task`` from the tuned ``source`` tasks, for ``tune.run`` and ``Tuner``.

    The configs are flat, as for every raytuner searcher; stored evaluations
    of the target task under ``problem_name`` are replayed first, so a new
    searcher continues an old run; the source is read, never written.

    Args:
        problem: The problem's spaces (a task space: TLA1 models the optima over it).
        target_task: The task tuned.
        source: The tuned tasks' evaluations (a list, or an EvaluationSource such as
            :class:`raytuner.store.StoreSource`; at least two tasks).
        store: Where the target task's evaluations go: a :class:`~raytuner.store.HistoryStore` or its location.
        problem_name: The target task's problem name in the store.
        metric: The objective Ray reports (the first one when ``None``).
        mode: Ray's ``"min"``/``"max"``; it follows the objective's goal.
        seed: The engine's seed.
        engine_options: :class:`~raytuner.engines.transfer.TLA2`'s keyword options (``n_initial``: the
            samples drawn around TLA1's prediction before the model guides; ``refit``: ``"weights"``
            or ``"all"``; ``options``, ``source_model`` and MLA's options); an unknown name is refused.
        executor: Runs the model fits.
        **session_options: Options of the :class:`~raytuner.session.tuning_session.TuningSession`.

    Example:
        >>> import tempfile
        >>> from raytuner.problem.records import FunctionEvaluation
        >>> from raytuner.problem.space import ProblemSpace
        >>> from raytuner.test_problems import DEMO_PROBLEM, demo
        >>> tuned = [FunctionEvaluation.create({"t": t}, {"x": x / 10}, {"y": demo(x / 10, t)})
        ...          for t in (1.0, 2.0, 3.0) for x in range(11)]
        >>> searcher = TLA2Searcher(ProblemSpace.parse(DEMO_PROBLEM), {"t": 2.5}, tuned, tempfile.mkdtemp(),
        ...                         "demo-new", seed=0, engine_options={"n_initial": 3})
        >>> searcher.engine.name, searcher.engine.tasks[-1]
        ('tla2', {'t': 2.5})
    """

    engine_name = "tla2"

    @property
    def engine(self) -> TLA2:
        """The session's TLA2 engine (a new one after :meth:`restore`)."""
        return self.session.engine
