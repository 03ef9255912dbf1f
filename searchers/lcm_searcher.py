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
    >>> searcher = LCMSearcher(ProblemSpace.parse(DEMO_PROBLEM), tasks=[{"t": 1.0}, {"t": 2.0}],
    ...                        store=tempfile.mkdtemp(), problem_name="demo", seed=0, n_initial=4)
    >>> def trainable(config):
    ...     tune.report({"y": demo(config["x"], config["t"])})
    >>> tune.run(trainable, search_alg=searcher, num_samples=12, max_concurrent_trials=2)  # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from raytuner.searchers.engine_searcher import EngineSearcher

from raytuner.engines.mla import BatchMode, Design
from raytuner.engines.multiobjective import mla_engine
from raytuner.models import LCMOptions
from raytuner.models.executors import Executor
from raytuner.problem.space import ProblemSpace
from raytuner.store import HistoryStore

__all__ = ["LCMSearcher"]


class LCMSearcher(EngineSearcher):
    """Multitask BO with an LCM over ``tasks`` (one task: single-task BO), for ``tune.run`` and ``Tuner``.

    ``n_initial`` LHS configurations per task come first (with ``source``, the
    first is where the source tasks agree: :class:`raytuner.engines.MLA`), then model-guided
    suggestions; ``design``, ``options``, ``acquisition``, ``acquisition_options``,
    ``batch`` and ``executor`` are those of :class:`raytuner.engines.MLA`.
    Stored evaluations of the same problem and tasks are replayed first, so a
    new searcher continues an old run. A problem with several objectives or
    an output constraint is tuned by
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
        n_initial: LHS configurations per task before the model guides.
        design: ``"per_task"`` (each task draws its own initial design) or ``"shared"`` (one for all).
        options: The LCM's fitting options.
        acquisition: The acquisition function.
        acquisition_options: Its options.
        batch: How the suggestions asked while trials run see each other (pending fantasies).
        executor: Runs the multi-start fits.
        source: Evaluations the engine learns from besides its own, as extra tasks of its LCM (the
            crowd's records: :func:`raytuner.client.crowd_sources.crowd_source`); default ``None``: none.
        **session_options: Options of the :class:`~raytuner.session.tuning_session.TuningSession`.
    """

    several_objectives = True

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
        n_initial: int = 10,
        design: Design = "per_task",
        options: LCMOptions | None = None,
        acquisition: str = "ei",
        acquisition_options: Mapping[str, float] | None = None,
        batch: BatchMode = "kriging_believer",
        executor: Executor | None = None,
        source: Any = None,
        **session_options: Any,
    ) -> None:
        engine = mla_engine(
            problem,
            tasks,
            seed=seed,
            n_initial=n_initial,
            design=design,
            options=options,
            acquisition=acquisition,
            acquisition_options=acquisition_options,
            batch=batch,
            executor=executor,
            objective=metric if isinstance(metric, str) else None,
            source=source,
        )
        super().__init__(problem, engine, store, problem_name, metric=metric, mode=mode, **session_options)
