"""DiscreteBOSearcher: Bayesian optimisation of discrete, restricted spaces (GPU kernels) for Ray Tune.

The searcher runs :class:`raytuner.engines.discrete.DiscreteBO`: every
suggestion is the best acquisition value among the valid configurations not
yet tried. A trial that raises (the kernel failed to compile, launch or
verify) or reports no metric is stored as a failed evaluation and never
suggested again. Every result is persisted to the history store before the
next suggestion.

Build it from a :class:`~raytuner.problem.space.ProblemSpace`, or from Ray-style
choices plus Kernel-Tuner-style restriction expressions with
:meth:`DiscreteBOSearcher.from_choices`.

Example:
    >>> import tempfile
    >>> from ray import tune
    >>> searcher = DiscreteBOSearcher.from_choices(
    ...     {"block_size_x": tune.choice([32, 64, 128, 256]), "tile": [1, 2, 4, 8]},
    ...     restrictions=["block_size_x * tile <= 512"], metric="time", mode="min",
    ...     store=tempfile.mkdtemp(), problem_name="kernel", seed=0, engine_options={"n_initial": 4})
    >>> len(searcher.engine.candidates()), searcher.metric, searcher.mode
    (13, 'time', 'min')
    >>> def trainable(config):
    ...     tune.report({"time": config["block_size_x"] / 64 + 1 / config["tile"]})
    >>> tune.run(trainable, search_alg=searcher, num_samples=12)  # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from raytuner.searchers.engine_searcher import EngineSearcher, registered_engine
from raytuner.searchers.param_space import space_from_ray

from raytuner.engines.discrete import DiscreteBO
from raytuner.errors import InvalidInputError
from raytuner.problem.space import ProblemSpace
from raytuner.store import HistoryStore

__all__ = ["DiscreteBOSearcher"]


class DiscreteBOSearcher(EngineSearcher):
    """Discrete BO (:class:`~raytuner.engines.discrete.DiscreteBO`) for ``tune.run`` and ``Tuner``.

    Stored evaluations of the same problem are replayed first, so a new
    searcher continues an old run.

    Args:
        problem: The problem's spaces (categorical or integer parameters, constraints).
        tasks: The tasks (``None``: the one task of a problem without task parameters).
        store: A history store or where one is (a directory, a ``mongodb://`` URI).
        problem_name: Under which name the store keeps the evaluations.
        metric: Which objective Ray reports (a list: several tuned at once, with a Pareto score); by default
            every optimised output of a problem with several, else the one.
        mode: ``"min"`` or ``"max"`` as Ray says it (a list for several metrics); must match the goals.
        seed: The engine's random seed.
        engine_options: :class:`~raytuner.engines.discrete.DiscreteBO`'s keyword options (``method``,
            ``n_initial``, ``kernel``, ``lengthscale``, ``exploration``, ``acquisitions``,
            ``candidates``, ...); an unknown name is refused in one line that lists them.
        **session_options: Options of the :class:`~raytuner.session.tuning_session.TuningSession`.
    """

    multiobjective = True

    def __init__(
        self,
        problem: ProblemSpace,
        tasks: Sequence[Mapping[str, Any]] | None,
        store: HistoryStore | str | os.PathLike[str],
        problem_name: str,
        metric: str | list[str] | None = None,
        mode: str | list[str] | None = None,
        seed: int | None = None,
        *,
        engine_options: Mapping[str, Any] | None = None,
        **session_options: Any,
    ) -> None:
        if isinstance(tasks, (str, os.PathLike, HistoryStore)):
            raise InvalidInputError(
                "tasks",
                f"got a store ({tasks!r}): DiscreteBOSearcher takes (problem, tasks, store, problem_name, ...)"
                " as every searcher does; pass tasks=None for a problem without task parameters",
            )
        if tasks is None:
            if problem.input_space.dimension:
                raise InvalidInputError("tasks", "the problem has task parameters: list the tasks to tune")
            tasks = [{}]
        engine = registered_engine("discrete", problem, tasks, seed, metric, engine_options)
        super().__init__(problem, engine, store, problem_name, metric=metric, mode=mode, **session_options)

    @classmethod
    def from_choices(
        cls,
        choices: Mapping[str, Any],
        *,
        restrictions: Sequence[str] | Mapping[str, str] = (),
        metric: str = "time",
        mode: str = "min",
        **arguments: Any,
    ) -> DiscreteBOSearcher:
        """A searcher over ``choices`` (name -> list of values or ``tune.choice``) under ``restrictions``.

        ``restrictions`` are expressions over the parameter names that a valid
        configuration meets (``"block_size_x * block_size_y <= 1024"``);
        ``arguments`` go to the constructor (``store`` and ``problem_name`` are
        required).

        Args:
            choices: Parameter name -> list of values or ``tune.choice``.
            restrictions: Expressions a valid configuration meets (a mapping names them).
            metric: The objective's name.
            mode: ``"min"`` or ``"max"``.
            **arguments: The constructor's other arguments.
        """
        for name, spec in choices.items():
            if isinstance(spec, (str, bytes)) or not list(getattr(spec, "categories", spec)):
                raise InvalidInputError(
                    f"choices.{name}",
                    "must be a non-empty list of values or a tune.choice",
                    allowed=["list of values", "tune.choice([...])"],
                )
        named = (
            dict(restrictions)
            if isinstance(restrictions, Mapping)
            else {f"restriction_{i}": r for i, r in enumerate(restrictions)}
        )
        space = space_from_ray(choices, metric, mode, constraints=named, lists_as_choices=True)
        return cls._build(space, arguments)

    @property
    def engine(self) -> DiscreteBO:
        """The session's discrete BO engine (a new one after :meth:`restore`)."""
        return self.session.engine
