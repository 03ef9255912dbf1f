"""LCMSearcher: GPTune's multitask BO (MLA) as a Ray Tune searcher.

Trial configs are **flat**: task parameters and tuning parameters side by
side (``{"t": 1.5, "x": 0.42}``), as for every raytuner searcher; the
trainable reads the task from the same dict. Every result is persisted to the
history store before the next suggestion; a trial that errors or reports no
metric becomes a failed evaluation. With ``max_concurrent_trials`` set, the
suggestions asked while trials run form a batch: each sees the others as
pending fantasies (``batch``). Multi-start model fits of more than
``INLINE_RECORDS`` records run on zero-CPU Ray actors, so they never wait for
CPUs that trials hold; smaller ones run inline in the driver.

Example:
    >>> import tempfile
    >>> from ray import tune
    >>> from raytuner.problem.space import ProblemSpace
    >>> from raytuner.test_problems import DEMO_PROBLEM, demo
    >>> searcher = LCMSearcher(ProblemSpace.parse(DEMO_PROBLEM), [{"t": 1.0}, {"t": 2.0}], tempfile.mkdtemp(),
    ...                        "demo", seed=0, engine_options={"n_initial": 4})
    >>> searcher.engine.n_initial, searcher.metric, searcher.mode
    (4, 'y', 'min')
    >>> def trainable(config):
    ...     tune.report({"y": demo(config["x"], config["t"])})
    >>> tune.run(trainable, search_alg=searcher, num_samples=12, max_concurrent_trials=2)  # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from raytuner.searchers.engine_searcher import EngineSearcher, registered_engine

from raytuner.engines.mla import MLA
from raytuner.models.executors import Executor
from raytuner.problem.space import ProblemSpace
from raytuner.store import HistoryStore

__all__ = ["LCMSearcher"]


class LCMSearcher(EngineSearcher):
    """Multitask BO with an LCM over ``tasks`` (one task: single-task BO), for ``tune.run`` and ``Tuner``.

    The engine is :class:`raytuner.engines.MLA`: ``n_initial`` LHS configurations
    per task come first (with ``source``, the first is where the source tasks
    agree), then model-guided suggestions. Stored evaluations of the same problem
    and tasks are replayed first, so a new searcher continues an old run. A
    problem with several objectives or an output constraint is tuned by
    :class:`~raytuner.engines.multiobjective.MultiObjectiveMLA` (``metric`` and
    ``mode`` are then lists, as Ray Tune's ``OptunaSearch`` takes them), and
    ``session.pareto_front(task)`` gives each task's front.

    Args:
        problem: The problem's spaces.
        tasks: The tasks, tuned together (one task: single-task BO).
        store: A :class:`~raytuner.store.HistoryStore`, a directory or a ``mongodb://`` URI.
        problem_name: The problem's name in the store.
        metric: The objective Ray reports, or a list of them (default: the first objective; every
            optimised output of a multi-objective problem).
        mode: Ray's ``"min"``/``"max"`` (a list for several metrics), which must agree with the goals.
        seed: The engine's seed.
        engine_options: :class:`~raytuner.engines.MLA`'s keyword options (``n_initial``, ``design``,
            ``lcm``, ``acquisition``, ``acquisition_options``, ``batch``, ``search_candidates``, ``sharing``);
            an unknown name is refused in one line that lists them.
        executor: Runs the multi-start fits (default: zero-CPU Ray actors past
            :data:`~raytuner.models.executors.INLINE_RECORDS` records, inline below).
        source: Evaluations the engine learns from besides its own, as extra tasks of its LCM (the
            crowd's records: :func:`raytuner.client.crowd_sources.crowd_source`); default ``None``: none.
        **session_options: Options of the :class:`~raytuner.session.tuning_session.TuningSession`.
    """

    multiobjective = True

    def __init__(
        self,
        problem: ProblemSpace,
        tasks: Sequence[Mapping[str, Any]],
        store: HistoryStore | str | os.PathLike[str],
        problem_name: str,
        metric: str | list[str] | None = None,
        mode: str | list[str] | None = None,
        seed: int | None = None,
        *,
        engine_options: Mapping[str, Any] | None = None,
        executor: Executor | None = None,
        source: Any = None,
        **session_options: Any,
    ) -> None:
        engine = registered_engine(
            "mla", problem, tasks, seed, metric, engine_options, executor=executor, source=source
        )
        super().__init__(problem, engine, store, problem_name, metric=metric, mode=mode, **session_options)

    @property
    def engine(self) -> MLA:
        """The session's MLA engine (a new one after :meth:`restore`)."""
        return self.session.engine
